"""The SPMD partitioner on hand-written GSPMD / Shardy modules: local shapes, the collectives
inserted, uneven (padded) shards, replicas x partitions, ops that run on whole operands are
listed, and unsupported cases fail loudly (never a redundant global run)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import xlapy
from xlapy.api import CompiledProgram
from xlapy.cli.main import main as cli_main
from xlapy.distributed.sharded import ShardedProgram, assemble, shard_of
from xlapy.errors import ParseError, Unimplemented
from xlapy.ir.sharding import parse_gspmd
from xlapy.passes.spmd.propagation import reshape_groups
from xlapy.types import ElementType, Shape

ROWS = '"{devices=[2,1]<=[2]}"'


def _module(body: str, args: str, result: str, parts: int = 2, replicas: int = 1,
            res_attr: str = "") -> str:
    return (f"module @m attributes {{mhlo.num_partitions = {parts} : i32, "
            f"mhlo.num_replicas = {replicas} : i32}} {{\n"
            f"  func.func public @main({args}) -> ({result}{res_attr}) {{\n{body}\n  }}\n}}")


SUM_ROWS = _module("""
    %c = stablehlo.constant dense<2.0> : tensor<f32>
    %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<SHAPExf32>
    %y = stablehlo.multiply %arg0, %b : tensor<SHAPExf32>
    %z = stablehlo.exponential %y : tensor<SHAPExf32>
    %0 = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%z init: %0) applies stablehlo.add across dimensions = [0]
         : (tensor<SHAPExf32>, tensor<f32>) -> tensor<3xf32>
    return %s : tensor<3xf32>""", f"%arg0: tensor<SHAPExf32> {{mhlo.sharding = {ROWS}}}",
                   "tensor<3xf32>")


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("rows", [4, 5])  # 5: uneven shards, padding masked in the sum
def test_rows_sum(backend: str, rows: int) -> None:
    prog = xlapy.compile(SUM_ROWS.replace("SHAPE", f"{rows}x3"), backend=backend)
    assert isinstance(prog, ShardedProgram) and prog.num_partitions == 2
    x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
    np.testing.assert_allclose(prog(x), np.exp(2 * x).sum(0), rtol=1e-6)
    assert [(op, str(s)) for op, s, _ in prog.spmd.collectives] == [("all_reduce", "f32[3]")]
    local = (rows + 1) // 2
    text = prog.partition_text(1)
    assert f"tensor<{local}x3xf32>" in text and f"tensor<{rows}x3xf32>" not in text
    if backend == "cpu":
        assert prog.fallbacks() == []


def test_uneven_contraction_and_gather() -> None:
    text = _module("""
    %e = stablehlo.exponential %arg0 : tensor<3x5xf32>
    %d = stablehlo.dot_general %e, %arg1, contracting_dims = [1] x [0]
         : (tensor<3x5xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
    return %d : tensor<3x2xf32>""", '%arg0: tensor<3x5xf32> {mhlo.sharding = '
                   '"{devices=[1,2]<=[2]}"}, %arg1: tensor<5x2xf32> {mhlo.sharding = '
                   f'{ROWS}}}', "tensor<3x2xf32>")
    prog = xlapy.compile(text, backend="cpu")
    a = np.arange(15, dtype=np.float32).reshape(3, 5) / 10
    b = np.arange(10, dtype=np.float32).reshape(5, 2)
    np.testing.assert_allclose(prog(a, b), np.exp(a) @ b, rtol=1e-5)
    assert [op for op, _, _ in prog.spmd.collectives] == ["all_reduce"]


def test_replicas_times_partitions() -> None:
    """2 replicas x 2 partitions: each replica's partitions reduce among themselves."""
    prog = xlapy.compile(SUM_ROWS.replace("SHAPE", "4x3"), backend="cpu")
    assert prog.num_partitions == 2
    text = SUM_ROWS.replace("SHAPE", "4x3").replace("mhlo.num_replicas = 1",
                                                   "mhlo.num_replicas = 2")
    prog = xlapy.compile(text, backend="cpu")
    xs = [np.full((4, 3), r, np.float32) for r in range(2)]
    s = prog.spmd.param_shardings[0]
    per = [[shard_of(xs[r], s, p)] for r in range(2) for p in range(2)]
    outs = prog.run_shards(per)
    for r in range(2):
        for p in range(2):
            np.testing.assert_allclose(outs[r * 2 + p], np.exp(2 * xs[r]).sum(0), rtol=1e-6)


def test_shard_and_assemble_round_trip() -> None:
    s = parse_gspmd("{devices=[2,2]<=[2,2]T(1,0)}")
    a = np.arange(35).reshape(5, 7)
    pieces = [shard_of(a, s, d) for d in range(4)]
    assert all(p.shape == (3, 4) for p in pieces)
    np.testing.assert_array_equal(assemble(pieces, s, Shape.array(ElementType.S64, [5, 7])), a)


@pytest.mark.parametrize("dim", [0, 1])
def test_sort_keeps_tiles_of_other_dims(dim: int) -> None:
    """Sorting along the tiled dim needs the whole rows (gathered, listed in the report);
    along the other dim each partition sorts its own rows (no collective)."""
    text = _module(f"""
    %s = "stablehlo.sort"(%arg0) <{{dimension = {dim} : i64}}> ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %lt = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    }}) : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %s : tensor<4x3xf32>""", f"%arg0: tensor<4x3xf32> {{mhlo.sharding = {ROWS}}}",
                   "tensor<4x3xf32>")
    prog = xlapy.compile(text, backend="cpu")
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(prog(x), np.sort(x, axis=dim))
    if dim == 0:
        assert any(r.startswith("sort") for r in prog.spmd.replicated)
        assert "runs on whole operands: sort" in prog.cost_report()
        with pytest.raises(Unimplemented, match=r"sort %s \(whole along dims \[0\]\) with "
                                                r"operands sharded \{devices=\[2,1\]"):
            xlapy.compile(text, backend="cpu", options={"spmd_strict": True})
    else:
        assert prog.spmd.collectives == [] and prog.spmd.replicated == []


def test_unsupported_cases_fail_loudly() -> None:
    partial_manual = """module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}]>]
        out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%a: tensor<4xf32>) {
      sdy.return %a : tensor<4xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}"""
    with pytest.raises(ParseError, match="partially manual"):  # at import, with its place
        xlapy.compile(partial_manual)
    uneven_manual = _module("""
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2]<=[2]}"}
         : (tensor<5xf32>) -> tensor<5xf32>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"}
         : (tensor<5xf32>) -> tensor<3xf32>
    %2 = stablehlo.custom_call @Sharding(%1) {mhlo.sharding = "{manual}"}
         : (tensor<3xf32>) -> tensor<3xf32>
    %3 = stablehlo.custom_call @SPMDShardToFullShape(%2) {mhlo.sharding = "{devices=[2]<=[2]}"}
         : (tensor<3xf32>) -> tensor<6xf32>
    return %3 : tensor<6xf32>""", "%arg0: tensor<5xf32>", "tensor<6xf32>")
    with pytest.raises(Unimplemented, match="uneven shards entering a manual region"):
        xlapy.compile(uneven_manual)


def test_plain_module_is_not_partitioned() -> None:
    prog = xlapy.compile("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                         "  return %a : tensor<2xf32>\n}")
    assert isinstance(prog, CompiledProgram)


def test_opt_pipeline_spmd(tmp_path: object) -> None:
    path = f"{tmp_path}/m.mlir"
    with open(path, "w") as f:
        f.write(SUM_ROWS.replace("SHAPE", "4x3"))
    out = io.StringIO()
    assert cli_main(["opt", path, "--pipeline", "spmd"], out) == 0
    text = out.getvalue()
    assert "all_reduce" in text and "f32[2,3] parameter(0)" in text


def test_reshape_groups() -> None:
    assert reshape_groups([2, 8, 12], [2, 8, 4, 3]) == [([0], [0]), ([1], [1]), ([2], [2, 3])]
    assert reshape_groups([6, 1, 4], [24]) == [([0, 1, 2], [0])]


def test_cli_run_partitions_the_program(tmp_path: object) -> None:
    """`xlapy run` of a sharded module: partitioned, one global result (not one per process
    of a redundant global run)."""
    path = f"{tmp_path}/m.mlir"
    with open(path, "w") as f:
        f.write(SUM_ROWS.replace("SHAPE", "4x3"))
    x = np.ones((4, 3), np.float32)
    np.save(f"{tmp_path}/x.npy", x)
    out = io.StringIO()
    assert cli_main(["run", path, "--input", f"{tmp_path}/x.npy", "--backend", "cpu"], out) == 0
    text = out.getvalue()
    assert text.count("tensor<3xf32>") == 1 and "29.5562" in text, text


def test_partial_sums_wanted_tiled_reduce_scatter() -> None:
    """A contraction over a tiled dim whose result is sharded (over the same partitions) on
    an output dim: one reduce_scatter instead of all_reduce + slice."""
    cols, rows = '"{devices=[1,2]<=[2]}"', ROWS
    text = _module(f"""
    %d = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
         {{mhlo.sharding = {rows}}} : (tensor<4x6xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
    return %d : tensor<4x3xf32>""", f"%arg0: tensor<4x6xf32> {{mhlo.sharding = {cols}}}, "
                   f"%arg1: tensor<6x3xf32> {{mhlo.sharding = {rows}}}", "tensor<4x3xf32>",
                   res_attr=f" {{mhlo.sharding = {rows}}}")
    prog = xlapy.compile(text, backend="cpu")
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    b = np.arange(18, dtype=np.float32).reshape(6, 3)
    np.testing.assert_allclose(prog(a, b), a @ b)
    assert [(op, str(s)) for op, s, _ in prog.spmd.collectives] == [("reduce_scatter",
                                                                    "f32[2,3]")]


def test_cost_report_counts_bytes_moved() -> None:
    prog = xlapy.compile(SUM_ROWS.replace("SHAPE", "4x3"), backend="cpu")
    assert prog.collective_bytes() == [("all_reduce", "f32[3]", 12)]  # 2 * 12 B * 1/2
    report = prog.cost_report()
    assert "per-partition memory: arguments 24" in report and "collective bytes per " \
        "partition: 12" in report


def test_gather_from_uneven_vocab_tiles() -> None:
    """A table of 5 rows in 2 tiles (3 + 2, padded): each partition gathers its rows, an
    out-of-range id clamps to the last row as the unpartitioned gather does."""
    text = _module("""
    %g = "stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<
         offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0],
         index_vector_dim = 1>, slice_sizes = array<i64: 1, 2>}>
         : (tensor<5x2xf32>, tensor<4x1xi32>) -> tensor<4x2xf32>
    return %g : tensor<4x2xf32>""", f"%arg0: tensor<5x2xf32> {{mhlo.sharding = {ROWS}}}, "
                   "%arg1: tensor<4x1xi32>", "tensor<4x2xf32>")
    prog = xlapy.compile(text, backend="cpu")
    table = np.arange(10, dtype=np.float32).reshape(5, 2)
    ids = np.array([[4], [0], [7], [2]], np.int32)
    np.testing.assert_array_equal(prog(table, ids), table[np.clip(ids[:, 0], 0, 4)])
    assert [op for op, _, _ in prog.spmd.collectives] == ["all_reduce"]


def test_bf16_partial_sums_are_accumulated_in_f32() -> None:
    """255 + 2 | + 1 in two partitions: bf16 partial sums would round 257 to 256 and give
    256; the unsharded dot (f32 accumulation, one rounding) gives 258, and so does xlapy."""
    cols = '"{devices=[1,2]<=[2]}"'
    text = _module("""
    %d = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
         : (tensor<1x4xbf16>, tensor<4x1xbf16>) -> tensor<1x1xbf16>
    return %d : tensor<1x1xbf16>""", f"%arg0: tensor<1x4xbf16> {{mhlo.sharding = {cols}}}, "
                   f"%arg1: tensor<4x1xbf16> {{mhlo.sharding = {ROWS}}}", "tensor<1x1xbf16>")
    import ml_dtypes

    prog = xlapy.compile(text, backend="cpu")
    a = np.array([[255, 2, 1, 0]], ml_dtypes.bfloat16)
    b = np.ones((4, 1), ml_dtypes.bfloat16)
    assert float(prog(a, b)[0, 0]) == 258.0
    assert [str(s) for _, s, _ in prog.spmd.collectives] == ["f32[1,1]"]
