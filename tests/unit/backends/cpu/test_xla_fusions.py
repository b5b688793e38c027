"""Issue 20: XLA's optimized HLO on the cpu backend. Its `fusion` instructions (kLoop,
kInput, kOutput, kCustom `__ynn_fusion`, multi-output) are inlined before the backend plans
its own kernels (passes/inliner.py), so none runs on the interpreter; non-default layouts
(`{0,1}`) in the signature and inside are honoured (arguments and results are the logical
arrays; `bitcast` reads the layouts, `copy` between layouts is the identity); XLA's
bit-cast total-order sort comparators compile (region_emit.py)."""

# ruff: noqa: E501  (HLO text lines as XLA prints them)
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import xlapy
import xlapy.passes  # noqa: F401  (registers `fusion`: the HLO importer keeps XLA's fusions
from tests.fallbacks import fallback_ops  # as fusions; without it they are read as calls)
from xlapy.cli.main import main
from xlapy.hlo_text import parse_hlo_module

FUSIONS = """HloModule fusions, is_scheduled=true, entry_computation_layout={(f32[4,8]{1,0}, f32[8,3]{0,1})->(f32[4,3]{1,0}, f32[4,3]{0,1}, f32[4]{0})}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%loop (p0: f32[4,8]) -> f32[4,8] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %c = f32[] constant(0)
  %bc = f32[4,8]{1,0} broadcast(%c), dimensions={}
  ROOT %m = f32[4,8]{1,0} maximum(%p0, %bc)
}

%input (p0: f32[4,8]) -> f32[4] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %e = f32[4,8]{1,0} exponential(%p0)
  %z = f32[] constant(0)
  ROOT %r = f32[4]{0} reduce(%e, %z), dimensions={1}, to_apply=%add
}

%ynn (p0: f32[4,8], p1: f32[8,3]) -> f32[4,3] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,3]{0,1} parameter(1)
  ROOT %d = f32[4,3]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%output (p0: f32[4,8], p1: f32[8,3], p2: f32[4]) -> f32[4,3] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,3]{0,1} parameter(1)
  %d = f32[4,3]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %p2 = f32[4]{0} parameter(2)
  %b = f32[4,3]{1,0} broadcast(%p2), dimensions={0}
  ROOT %a = f32[4,3]{1,0} add(%d, %b)
}

%multi (p0: f32[4,3], p1: f32[4,3]) -> (f32[4,3], f32[4,3]) {
  %p0 = f32[4,3]{1,0} parameter(0)
  %p1 = f32[4,3]{1,0} parameter(1)
  %s = f32[4,3]{1,0} subtract(%p0, %p1)
  %t = f32[4,3]{0,1} copy(%s)
  %n = f32[4,3]{0,1} negate(%t)
  ROOT %r = (f32[4,3]{1,0}, f32[4,3]{0,1}) tuple(%s, %n)
}

ENTRY %main (x: f32[4,8], w: f32[8,3]) -> (f32[4,3], f32[4,3], f32[4]) {
  %x = f32[4,8]{1,0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  %w = f32[8,3]{0,1} parameter(1), metadata={op_name="w"}
  %relu = f32[4,8]{1,0} fusion(%x), kind=kLoop, calls=%loop, metadata={op_name="relu"}
  %sum = f32[4]{0} fusion(%relu), kind=kInput, calls=%input, backend_config={"outer_dimension_partitions":["2"]}
  %dot = f32[4,3]{1,0} fusion(%relu, %w), kind=kCustom, calls=%ynn, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %out = f32[4,3]{1,0} fusion(%relu, %w, %sum), kind=kOutput, calls=%output
  %mo = (f32[4,3]{1,0}, f32[4,3]{0,1}) fusion(%out, %dot), kind=kLoop, calls=%multi
  %g0 = f32[4,3]{1,0} get-tuple-element(%mo), index=0
  %g1 = f32[4,3]{0,1} get-tuple-element(%mo), index=1
  ROOT %t = (f32[4,3]{1,0}, f32[4,3]{0,1}, f32[4]{0}) tuple(%g0, %g1, %sum)
}
"""


def _fusions_expected(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    relu = np.maximum(x, 0)
    s = np.exp(relu).sum(1)
    diff = (relu @ w + s[:, None]) - relu @ w
    return diff, -diff, s


def test_every_fusion_kind_runs_natively() -> None:
    module = parse_hlo_module(FUSIONS)
    kinds = sorted(i.attrs.kind.value for i in module.entry.instructions
                   if i.opcode == "fusion")
    assert kinds == ["custom", "input", "loop", "loop", "output"]
    prog = xlapy.compile(FUSIONS, backend="cpu")
    assert fallback_ops(prog) == []
    assert "fusion" not in prog._exe.explain()
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 8), np.float32), rng.standard_normal((8, 3), np.float32)
    got = prog(x, w)
    ref = xlapy.compile(FUSIONS, backend="interpreter")(x, w)
    for a, b, e in zip(got, ref, _fusions_expected(x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4)


def test_fusions_inside_a_while_body_run_natively() -> None:
    text = """HloModule loop
%body_fusion (p: f32[3]) -> f32[3] {
  %p = f32[3]{0} parameter(0)
  %two = f32[] constant(2)
  %b = f32[3]{0} broadcast(%two), dimensions={}
  ROOT %m = f32[3]{0} multiply(%p, %b)
}
%body (s: (s32[], f32[3])) -> (s32[], f32[3]) {
  %s = (s32[], f32[3]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[3]{0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %w = f32[3]{0} fusion(%v), kind=kLoop, calls=%body_fusion
  ROOT %t = (s32[], f32[3]{0}) tuple(%j, %w)
}
%cond_fusion (p: s32[]) -> pred[] {
  %p = s32[] parameter(0)
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%p, %n), direction=LT
}
%cond (s: (s32[], f32[3])) -> pred[] {
  %s = (s32[], f32[3]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  ROOT %c = pred[] fusion(%i), kind=kLoop, calls=%cond_fusion
}
ENTRY %main (x: f32[3]) -> f32[3] {
  %x = f32[3]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[3]{0}) tuple(%zero, %x)
  %loop = (s32[], f32[3]{0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"5"}}
  ROOT %r = f32[3]{0} get-tuple-element(%loop), index=1
}
"""
    prog = xlapy.compile(text, backend="cpu")
    assert fallback_ops(prog) == []
    np.testing.assert_array_equal(prog(np.array([1, 2, 3], np.float32)),
                                  np.array([32, 64, 96], np.float32))


LAYOUTS = """HloModule layouts, entry_computation_layout={(f32[6,4]{0,1}, f32[4,6]{1,0})->(f32[4,6]{0,1}, f32[24]{0}, f32[6,4]{1,0})}

ENTRY %main (x: f32[6,4], y: f32[4,6]) -> (f32[4,6], f32[24], f32[6,4]) {
  %x = f32[6,4]{0,1} parameter(0)
  %y = f32[4,6]{1,0} parameter(1)
  %bt = f32[4,6]{1,0} bitcast(%x)
  %s = f32[4,6]{1,0} add(%bt, %y)
  %c = f32[4,6]{0,1} copy(%s)
  %n = f32[4,6]{0,1} negate(%c)
  %flat = f32[24]{0} bitcast(%x)
  %back = f32[6,4]{1,0} copy(%x)
  ROOT %t = (f32[4,6]{0,1}, f32[24]{0}, f32[6,4]{1,0}) tuple(%n, %flat, %back)
}
"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_non_default_layouts_are_honoured(backend: str) -> None:
    """Arguments and results are the logical arrays whatever the layout (converted at the
    boundary); a bitcast of a {0,1} [6,4] array is its column-major bytes: the transpose as
    [4,6], the transpose flattened as [24]."""
    prog = xlapy.compile(LAYOUTS, backend=backend)
    if backend == "cpu":
        assert fallback_ops(prog) == []
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = np.full((4, 6), 0.5, np.float32)
    n, flat, back = prog(x, y)
    np.testing.assert_array_equal(n, -(x.T + y))
    np.testing.assert_array_equal(flat, x.T.reshape(-1))
    np.testing.assert_array_equal(back, x)


SORT = """HloModule sort
%total_order (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %ba = s32[] bitcast(%a)
  %bb = s32[] bitcast(%b)
  %zero = s32[] constant(0)
  %max = s32[] constant(2147483647)
  %xa = s32[] xor(%max, %ba)
  %xb = s32[] xor(%max, %bb)
  %na = pred[] compare(%ba, %zero), direction=LT
  %nb = pred[] compare(%bb, %zero), direction=LT
  %ka = s32[] select(%na, %xa, %ba)
  %kb = s32[] select(%nb, %xb, %bb)
  ROOT %lt = pred[] compare(%ka, %kb), direction=LT
}
ENTRY %main (x: f32[3,9]) -> f32[3,9] {
  %x = f32[3,9]{1,0} parameter(0)
  ROOT %s = f32[3,9]{1,0} sort(%x), dimensions={1}, is_stable=true, to_apply=%total_order
}
"""


def test_bitcast_total_order_comparator_sorts_natively() -> None:
    """XLA's optimized HLO compares floats as integers (a total order: -NaN < -inf < ... <
    -0 < 0 < ... < NaN); the comparator's bitcast compiles inline (region_emit.py)."""
    prog = xlapy.compile(SORT, backend="cpu")
    assert fallback_ops(prog) == []
    x = np.random.default_rng(1).standard_normal((3, 9)).astype(np.float32)
    x[0, 2], x[1, 4], x[1, 5], x[2, 0] = np.nan, -0.0, 0.0, -np.inf
    got = prog(x)
    ref = xlapy.compile(SORT, backend="interpreter")(x)
    assert got.tobytes() == ref.tobytes()
    np.testing.assert_array_equal(got, np.sort(x, axis=1))


def test_cli_compile_explains_hlo_text(tmp_path: Path) -> None:
    """`xlapy compile FILE --explain` reads XLA's HLO text as well as StableHLO."""
    path = tmp_path / "fusions.hlo"
    path.write_text(FUSIONS)
    out = io.StringIO()
    assert main(["compile", str(path), "--explain"], out) == 0
    text = out.getvalue()
    assert "0 instruction(s) on interpreter fallback" in text
    assert "fusion" not in text.split("-- ")[0]


PASSTHROUGH = """HloModule scan
%body (s: (s32[], f32[4], f32[64,4])) -> (s32[], f32[4], f32[64,4]) {
  %s = (s32[], f32[4]{0}, f32[64,4]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %h = f32[4]{0} get-tuple-element(%s), index=1
  %xs = f32[64,4]{1,0} get-tuple-element(%s), index=2
  %zero = s32[] constant(0)
  %row = f32[1,4]{1,0} dynamic-slice(%xs, %i, %zero), dynamic_slice_sizes={1,4}
  %x = f32[4]{0} bitcast(%row)
  %sum = f32[4]{0} add(%h, %x)
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[4]{0}, f32[64,4]{1,0}) tuple(%j, %sum, %xs)
}
%cond (s: (s32[], f32[4], f32[64,4])) -> pred[] {
  %s = (s32[], f32[4]{0}, f32[64,4]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(64)
  ROOT %c = pred[] compare(%i, %n), direction=LT
}
ENTRY %main (h: f32[4], xs: f32[64,4]) -> f32[4] {
  %h = f32[4]{0} parameter(0)
  %xs = f32[64,4]{1,0} parameter(1)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]{0}, f32[64,4]{1,0}) tuple(%zero, %h, %xs)
  %loop = (s32[], f32[4]{0}, f32[64,4]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %r = f32[4]{0} get-tuple-element(%loop), index=1
}
"""


def test_tuple_state_passthrough_is_not_copied_per_iteration() -> None:
    """XLA's while loops carry one tuple; an element the body passes through (a scan's xs)
    is the body's parameter, left to the caller like a flat parameter: no copy per
    iteration (it was copied every step: scan_rnn from optimized HLO ran 7.6x slower)."""
    prog = xlapy.compile(PASSTHROUGH, backend="cpu")
    assert fallback_ops(prog) == []
    body = next(sub for _, sub in prog._exe.subexecs if sub.comp.name == "body")
    assert body._own is None  # every result leaf KEEP: nothing copied per call
    xs = np.arange(256, dtype=np.float32).reshape(64, 4)
    h = np.ones(4, np.float32)
    np.testing.assert_array_equal(prog(h, xs), h + xs.sum(0))
    np.testing.assert_array_equal(xs, np.arange(256, dtype=np.float32).reshape(64, 4))


SCATTER = """HloModule scatter
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[3,6,4], i: s32[5], u: f32[5,3,4]) -> f32[3,6,4] {
  %x = f32[3,6,4]{2,1,0} parameter(0)
  %i = s32[5]{0} parameter(1)
  %u = f32[5,3,4]{2,1,0} parameter(2)
  %idx = s32[5,1]{1,0} bitcast(%i)
  %ub = f32[5,3,1,4]{3,2,1,0} bitcast(%u)
  ROOT %s = f32[3,6,4]{2,1,0} scatter(%x, %idx, %ub), update_window_dims={1,2,3}, inserted_window_dims={}, scatter_dims_to_operand_dims={1}, index_vector_dim=1, to_apply=%add
}
"""


def test_scatter_updates_reshaped_to_unit_window_dims_are_not_copied() -> None:
    """XLA's canonical scatter bitcasts the updates to give every operand dim a window dim
    (a size-1 one for the scattered dim); the simplifier makes it an inserted window dim
    again, so the updates are read in place (scatter_add from optimized HLO ran 2-2.9x
    slower than from StableHLO: a copy of the updates)."""
    prog = xlapy.compile(SCATTER, backend="cpu")
    assert fallback_ops(prog) == []
    assert not [r for r in prog._exe.report if r[0] == "ub"], prog._exe.explain()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 6, 4)).astype(np.float32)
    i = np.array([0, 5, 2, 5, 9], np.int32)  # a repeat and one out of bounds (dropped)
    u = rng.standard_normal((5, 3, 4)).astype(np.float32)
    got = prog(x, i, u)
    np.testing.assert_array_equal(got, xlapy.compile(SCATTER, backend="interpreter")(x, i, u))
    want = x.copy()
    for n, k in enumerate(i):
        if k < 6:
            want[:, k, :] += u[n]
    np.testing.assert_allclose(got, want, rtol=1e-6)
