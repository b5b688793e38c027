"""Issue 20: what XLA's optimized HLO carries besides the computation. Annotations are read
and kept (printed back), an attribute nobody knows never breaks parsing (it is kept and
listed), typed-FFI custom calls' dictionaries reach the LAPACK targets, kCustom fusions print
back as kCustom, and a JAX host callback is refused naming its target."""

# ruff: noqa: E501  (HLO text lines as XLA prints them)
from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.errors import XlapyError
from xlapy.hlo_text import parse_hlo_module, print_hlo_module

ANNOTATED = """HloModule annotated, is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}, allow_spmd_sharding_propagation_to_output={true}, frobnicate_module={1,2}

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p), metadata={op_name="jit(f)/neg" source_file="f.py" source_line=3}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), sharding={replicated}, frontend_attributes={_xla_stream="1"}
  %f = f32[4]{0} fusion(%x), kind=kCustom, calls=%fused, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":["2"]}, statistics_viz={stat_index_to_visualize=-1}
  ROOT %e = f32[4]{0} exponential(%f), control-predecessors={%x}, frobnicate_level=3, schedule=SCHEDULE_LATEST
}
"""


def test_annotations_are_kept_and_unknown_ones_never_break_parsing() -> None:
    module = parse_hlo_module(ANNOTATED)
    assert module.meta["unknown_hlo_attrs"] == ["exponential frobnicate_level"]
    assert module.meta["hlo_attrs"]["is_scheduled"] == "true"
    text = print_hlo_module(module)
    for kept in ("is_scheduled=true", "frobnicate_module={1,2}", "kind=kCustom",
                 '"outer_dimension_partitions":["2"]', "frobnicate_level=3",
                 "sharding={replicated}", "statistics_viz=", 'source_file="f.py"',
                 "frontend_attributes={_xla_stream=\"1\"}", "schedule=SCHEDULE_LATEST"):
        assert kept in text, kept
    again = parse_hlo_module(text)
    assert print_hlo_module(again) == text
    x = np.array([0.0, 1.0, -1.0, 2.0], np.float32)
    for backend in ("interpreter", "cpu"):
        np.testing.assert_allclose(xlapy.compile(ANNOTATED, backend=backend)(x), np.exp(-x),
                                   rtol=1e-6)


POTRF = """HloModule chol
ENTRY %main (a: f32[3,3]) -> f32[3,3] {
  %a = f32[3,3]{1,0} parameter(0)
  %t = f32[3,3]{0,1} copy(%a)
  %c = (f32[3,3]{0,1}, s32[]) custom-call(%t), custom_call_target="lapack_spotrf_ffi", operand_layout_constraints={f32[3,3]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 85 : ui8}
  ROOT %g = f32[3,3]{0,1} get-tuple-element(%c), index=0
}
"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_typed_ffi_backend_config_reaches_lapack(backend: str) -> None:
    """`backend_config={uplo = 85 : ui8}` ('U'): the upper Cholesky factor (it was read as a
    string and the default 'L' used)."""
    a = np.array([[4, 2, 0.4], [2, 5, 1], [0.4, 1, 3]], np.float32)
    u = xlapy.compile(POTRF, backend=backend)(a)
    np.testing.assert_allclose(np.triu(u), np.linalg.cholesky(a).T, rtol=1e-5)
    assert "uplo = 85 : ui8" in print_hlo_module(parse_hlo_module(POTRF))


@pytest.mark.parametrize("target", ["xla_python_cpu_callback", "xla_ffi_python_cpu_callback"])
def test_host_callback_is_refused_naming_it(target: str) -> None:
    text = f"""HloModule cb
ENTRY %main (x: f32[3]) -> f32[3] {{
  %x = f32[3]{{0}} parameter(0)
  ROOT %c = f32[3]{{0}} custom-call(%x), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI, backend_config={{index = 0 : ui64}}
}}
"""
    with pytest.raises(XlapyError, match=target):
        xlapy.compile(text, backend="cpu")(np.ones(3, np.float32))


TOPK = """HloModule topk
%gt (a: f32[], b: f32[], i: s32[], j: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %i = s32[] parameter(2)
  %j = s32[] parameter(3)
  %zero = s32[] constant(0)
  %max = s32[] constant(2147483647)
  %ba = s32[] bitcast(%a)
  %bb = s32[] bitcast(%b)
  %xa = s32[] xor(%max, %ba)
  %na = pred[] compare(%ba, %zero), direction=LT
  %xb = s32[] xor(%max, %bb)
  %nb = pred[] compare(%bb, %zero), direction=LT
  %ka = s32[] select(%na, %xa, %ba)
  %kb = s32[] select(%nb, %xb, %bb)
  ROOT %c = pred[] compare(%ka, %kb), direction=GT
}
ENTRY %main (x: f32[3,8]) -> (f32[3,3], s32[3,3]) {
  %x = f32[3,8]{1,0} parameter(0)
  ROOT %t = (f32[3,3]{1,0}, s32[3,3]{1,0}) custom-call(%x), custom_call_target="TopK", called_computations={%gt}
}
"""


def _total_order_top3(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bits = x.view(np.int32).astype(np.int64)
    key = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    idx = np.argsort(-key, axis=-1, kind="stable")[:, :3]
    return np.take_along_axis(x, idx, -1), idx.astype(np.int32)


@pytest.mark.parametrize("comparator", ["total_order_gt", "other"])
def test_top_k_custom_call(comparator: str) -> None:
    """XLA's TopK custom call with its own total-order comparator becomes chlo.top_k (a
    selection, not a full sort: 20x faster on 4096x1024, k=16); any other comparator keeps
    the stable sort of (x, iota) by that comparator. Both NaN- and -0-exact."""
    text = TOPK if comparator == "total_order_gt" else TOPK.replace("direction=GT", "direction=GE")
    opcodes = [i.opcode for i in parse_hlo_module(text).entry.instructions]
    assert ("chlo.top_k" in opcodes) == (comparator == "total_order_gt")
    x = np.array([[1, 3, 3, 2, -1, 0, 5, 5], [np.nan, 1, -np.nan, np.inf, 0, -0.0, 2, 2],
                  [-0.0, 0.0, -0.0, -1, -2, -3, -4, -5]], np.float32)
    x[1, 2] = -np.abs(x[1, 2])  # a NaN with the sign bit set: the least in total order
    vals, idx = xlapy.compile(text, backend="cpu")(x)
    if comparator == "total_order_gt":
        want_v, want_i = _total_order_top3(x)
        assert vals.tobytes() == want_v.tobytes()
        np.testing.assert_array_equal(idx, want_i)
    ref = xlapy.compile(text, backend="interpreter")(x)
    assert vals.tobytes() == np.asarray(ref[0]).tobytes()
    np.testing.assert_array_equal(idx, ref[1])
