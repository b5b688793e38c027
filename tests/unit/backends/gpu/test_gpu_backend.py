"""The gpu backend without a GPU: registration, planning, the PTX of its kernel shapes
(thread indexing, warp-shuffle and shared-memory reductions, libdevice math), cuBLAS GEMM
plans, and the clear error where no CUDA driver/GPU exists."""

from __future__ import annotations

import io

import numpy as np
import pytest

import xlapy
from xlapy.backends import available_backends, get_backend
from xlapy.backends.gpu import cublas, driver, nvptx
from xlapy.cli.main import main
from xlapy.errors import Unimplemented

HAS_GPU, WHY_NOT = driver.available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="a GPU is present: the no-driver path "
                                 "is not reachable")

PROGRAM = """
func.func @main(%x: tensor<4x300xf32>, %y: tensor<4x300xf32>) -> (tensor<4x300xf32>,
    tensor<4xf32>, tensor<300xf32>, tensor<f32>, tensor<4x4xf32>) {
  %e = stablehlo.exponential %x : tensor<4x300xf32>
  %p = stablehlo.power %e, %y : tensor<4x300xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%p init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<4x300xf32>, tensor<f32>) -> tensor<4xf32>
  %c = stablehlo.reduce(%x init: %z) applies stablehlo.maximum across dimensions = [0]
    : (tensor<4x300xf32>, tensor<f32>) -> tensor<300xf32>
  %f = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0, 1]
    : (tensor<4x300xf32>, tensor<f32>) -> tensor<f32>
  %d = stablehlo.dot_general %x, %y, contracting_dims = [1] x [1]
    : (tensor<4x300xf32>, tensor<4x300xf32>) -> tensor<4x4xf32>
  return %p, %r, %c, %f, %d : tensor<4x300xf32>, tensor<4xf32>, tensor<300xf32>, tensor<f32>,
    tensor<4x4xf32>
}
"""


@pytest.fixture(scope="module")
def compiled() -> xlapy.CompiledProgram:
    return xlapy.compile(PROGRAM, backend="gpu")


def _how(exe: object) -> dict[str, str]:
    return {name: how for name, _, how in exe.report}  # type: ignore[attr-defined]


def test_registered() -> None:
    assert "gpu" in available_backends()
    assert get_backend("gpu").name == "gpu"
    assert xlapy.Client("gpu").backend_name == "gpu"


def test_plan(compiled: xlapy.CompiledProgram) -> None:
    how = _how(compiled._exe)
    assert how["p"].endswith("(elements)")  # exp fused into the power kernel
    assert "e" not in how
    assert how["r"].endswith("(block)")  # row reduction: a block per row
    assert how["c"].endswith("(elements)")  # column reduction: a thread per column
    assert how["f"].endswith("(block)")  # full reduction: one block
    assert how["d"] == "library cublas"
    assert compiled._exe.host_ops() == []


@pytest.mark.parametrize("arch", nvptx.ARCHS)
def test_ptx(compiled: xlapy.CompiledProgram, arch: str) -> None:
    ptx = compiled._exe.ptx(arch)
    assert f".target {arch}" in ptx
    assert ptx.count(".entry ") == 4
    for needle in ("%ctaid.x", "%tid.x", "%ntid.x", "%nctaid.x",  # thread indexing
                   "shfl.sync.bfly.b32", "bar.sync", ".shared",  # block reductions
                   "ex2.approx"):  # libdevice's expf/powf, linked and inlined
        assert needle in ptx, needle
    assert "__nv_" not in ptx and ".extern" not in ptx
    if nvptx.ptxas_path() is None:
        pytest.skip(f"ptxas not found (optional tool): {nvptx.MISSING}")
    nvptx.ptxas(ptx, arch)


def test_f64_and_integer_reductions_shuffle_in_halves() -> None:
    text = """
    func.func @main(%x: tensor<2x128xf64>, %i: tensor<128xi64>) -> (tensor<2xf64>, tensor<i64>) {
      %z = stablehlo.constant dense<0.0> : tensor<f64>
      %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1]
        : (tensor<2x128xf64>, tensor<f64>) -> tensor<2xf64>
      %zi = stablehlo.constant dense<7> : tensor<i64>
      %m = stablehlo.reduce(%i init: %zi) applies stablehlo.minimum across dimensions = [0]
        : (tensor<128xi64>, tensor<i64>) -> tensor<i64>
      return %r, %m : tensor<2xf64>, tensor<i64>
    }"""
    exe = xlapy.compile(text, backend="gpu")._exe
    ptx = exe.ptx("sm_90")
    assert ptx.count("shfl.sync.bfly.b32") >= 20  # 5 steps x 2 halves x 2 folds per kernel
    if nvptx.ptxas_path() is not None:
        nvptx.ptxas(ptx, "sm_90")


def test_host_fallback_is_listed() -> None:
    text = """
    func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
      %s = "stablehlo.sort"(%x) ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %c = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
      }) {dimension = 0 : i64, is_stable = true} : (tensor<8xf32>) -> tensor<8xf32>
      return %s : tensor<8xf32>
    }"""
    exe = xlapy.compile(text, backend="gpu")._exe
    assert [op for _, op in exe.host_ops()] == ["sort"]
    assert "host fallback" in exe.explain()


@pytest.mark.parametrize(("lhs", "rhs", "lc", "rc", "want"), [
    # (m, n, k, trans_x (rhs), trans_y (lhs), ldx, ldy)
    ((4, 3), (3, 5), 1, 0, (4, 5, 3, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, 5, 3)),
    ((3, 4), (3, 5), 0, 0, (4, 5, 3, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T, 5, 4)),
    ((4, 3), (5, 3), 1, 1, (4, 5, 3, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, 3, 3)),
    ((3,), (3, 5), 0, 0, (1, 5, 3, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, 5, 3)),
    ((4, 3), (3,), 1, 0, (4, 1, 3, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, 1, 3)),
])
def test_cublas_plan(lhs: tuple[int, ...], rhs: tuple[int, ...], lc: int, rc: int,
                     want: tuple[int, ...]) -> None:
    def t(s: tuple[int, ...]) -> str:
        return f"tensor<{'x'.join(map(str, s))}xf32>"

    out = [d for i, d in enumerate(lhs) if i != lc] + [d for i, d in enumerate(rhs) if i != rc]
    text = f"""
    func.func @main(%a: {t(lhs)}, %b: {t(rhs)}) -> {t(tuple(out))} {{
      %d = stablehlo.dot_general %a, %b, contracting_dims = [{lc}] x [{rc}]
        : ({t(lhs)}, {t(rhs)}) -> {t(tuple(out))}
      return %d : {t(tuple(out))}
    }}""".replace("tensor<xf32>", "tensor<f32>")
    exe = xlapy.compile(text, backend="gpu")._exe
    (step,) = [s for s in exe.steps if s.kind == "cublas"]
    g = step.gemm
    assert (g.m, g.n, g.k, g.trans_x, g.trans_y, g.ldx, g.ldy) == want
    assert g.batch == 1


def test_integer_dot_runs_on_host() -> None:
    text = """
    func.func @main(%a: tensor<2x3xi32>, %b: tensor<3x2xi32>) -> tensor<2x2xi32> {
      %d = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
        : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
      return %d : tensor<2x2xi32>
    }"""
    assert [op for _, op in xlapy.compile(text, backend="gpu")._exe.host_ops()] == \
        ["dot_general"]


@no_gpu_only
def test_running_without_a_gpu_says_so(compiled: xlapy.CompiledProgram) -> None:
    x = np.ones((4, 300), np.float32)
    with pytest.raises(Unimplemented, match="NVIDIA GPU and its driver"):
        compiled(x, x)
    client = xlapy.Client("gpu")
    with pytest.raises(Unimplemented, match="NVIDIA GPU and its driver"):
        client.execute_and_transfer(client.compile(compiled._exe.module), [x, x])


@no_gpu_only
def test_cli_run_without_a_gpu_says_so(tmp_path: object) -> None:
    path = tmp_path / "p.mlir"  # type: ignore[operator]
    path.write_text("func.func @main() -> tensor<2xf32> {\n"
                    "  %c = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n"
                    "  %e = stablehlo.exponential %c : tensor<2xf32>\n"
                    "  return %e : tensor<2xf32>\n}\n")
    out = io.StringIO()
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        rc = main(["run", "--backend", "gpu", str(path)], out)
    assert rc != 0
    text = out.getvalue() + err.getvalue()
    assert "NVIDIA GPU and its driver" in text and "Traceback" not in text


def test_values_read_several_times_in_one_kernel_fuse() -> None:
    """x^3 + x and tanh of it read x and each other several times, all in one kernel: one
    kernel, no buffer in between (the GELU chain); a value two kernels need and that is
    dear to recompute gets a buffer."""
    text = """
    func.func @main(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<f32>) {
      %x2 = stablehlo.multiply %x, %x : tensor<64xf32>
      %x3 = stablehlo.multiply %x2, %x : tensor<64xf32>
      %s = stablehlo.add %x3, %x : tensor<64xf32>
      %t = stablehlo.tanh %s : tensor<64xf32>
      %u = stablehlo.multiply %t, %s : tensor<64xf32>
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %r = stablehlo.reduce(%u init: %z) applies stablehlo.add across dimensions = [0]
        : (tensor<64xf32>, tensor<f32>) -> tensor<f32>
      return %u, %r : tensor<64xf32>, tensor<f32>
    }"""
    exe = xlapy.compile(text, backend="gpu")._exe
    assert [k.root.name for k in exe.kernel_specs] == ["u", "r"]
    assert _how(exe)["r"].endswith("(block)")
