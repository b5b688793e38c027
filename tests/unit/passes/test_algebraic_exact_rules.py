"""The algebraic simplifier's exact rows over generated cases: an outer-product dot as
0 + l * r (`dot_outer`, `transpose_dot_outer`: the interpreter evaluates such a dot as those
element-wise ops, ops.linalg._outer) and integer compares decided by value ranges
(`compare_range`), bit for bit in either denormal mode."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.interpreter import Interpreter
from xlapy.passes.algebraic_simplifier import AlgebraicSimplifier
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.hlo_builder import HloBuilder, parse_shape
from xlapy.passes.pass_base import run_passes


@pytest.mark.parametrize(("lt", "rt", "out"), [("f32", "f32", None), ("bf16", "bf16", None),
                                               ("bf16", "bf16", "f32"), ("f16", "f32", None),
                                               ("s8", "s8", "s32"), ("s32", "s32", None),
                                               ("f64", "f64", None), ("f64", "f32", "f32"),
                                               ("c64", "c64", None), ("f32", "c64", "c64")])
@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_dot_outer_is_the_interpreters_dot(lt: str, rt: str, out: str | None,
                                           mode: str) -> None:
    """An outer product (batched, one free dimension each side, the rhs's before its batch
    dimension) as 0 + l * r in the dot's accumulation type: the interpreter's dot bit for
    bit in either denormal mode, -0 products +0 (the reduce's init), NaN, inf, denormal
    operands and products (flushed in ftz, as element-wise arithmetic) and wraparound kept:
    exact, so the exact simplifier (the cpu backend's) fires."""
    from xlapy import denormal
    from xlapy.ops.elementwise import make_complex
    from xlapy.types import from_hlo_name

    g = HloBuilder()
    a = g.param(f"{lt}[2,6]")
    b = g.param(f"{rt}[4,2]")
    kw = {} if out is None else {"result_element_type": from_hlo_name(out)}
    module = g.build(g.dot_general(a, b, lhs_batching_dimensions=(0,),
                                   rhs_batching_dimensions=(1,), **kw))
    specials = [-0.0, 0.0, np.nan, np.inf, -np.inf, 1e-3, -3.5, 2.0, 1e30, -1e-30, 3e-39,
                -2e-20]
    lt_, rt_ = from_hlo_name(lt), from_hlo_name(rt)
    if lt_.is_integer:
        x = np.array([[-128, 127, 3, -1, 0, 1], [5, -7, 100, 2, -2, 9]]).astype(lt_.dtype)
        y = np.array([[-128, 3], [127, -1], [0, 9], [2, -50]]).astype(rt_.dtype)
    else:
        x = np.array(specials, np.float64).reshape(2, 6).astype(lt_.dtype)
        y = np.array(specials[4:], np.float64).reshape(4, 2).astype(rt_.dtype)
        if lt_.is_complex:
            x = make_complex(x.real, x[:, ::-1].real, lt_.dtype)
        if rt_.is_complex:
            y = make_complex(y.real, y[::-1].real, rt_.dtype)
    with denormal.use(mode):
        before = np.asarray(Interpreter().run_module(module, [x, y]))
        exact = AlgebraicSimplifier(exact_only=True)
        run_passes(module, [exact])
        assert exact.fired["dot_outer"] == 1
        assert not any(i.opcode == "dot_general" for i in module.entry.instructions)
        after = np.asarray(Interpreter().run_module(module, [x, y]))
    assert after.dtype == before.dtype and after.shape == before.shape == (2, 6, 4)
    np.testing.assert_array_equal(after.view(np.uint8), before.view(np.uint8))
    if mode == "ieee" and lt == rt == "f32":  # the denormal product 3e-39 * 1e-3 is kept
        assert np.any((after != 0) & (np.abs(after) < np.finfo(np.float32).tiny))


@st.composite
def _outer_dots(draw: st.DrawFn) -> tuple[Any, ...]:
    """A dot with no contracting dimension: 0-2 batch dimensions anywhere in each operand,
    0-2 free ones each side, optionally read by a transpose (any permutation)."""
    nb, nl, nr = draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 2))
    batch = [draw(st.integers(1, 3)) for _ in range(nb)]
    lfree = [draw(st.integers(1, 3)) for _ in range(nl)]
    rfree = [draw(st.integers(1, 3)) for _ in range(nr)]
    lb = draw(st.permutations(range(nb + nl)))[:nb]
    rb = draw(st.permutations(range(nb + nr)))[:nb]
    perm = draw(st.none() | st.permutations(range(nb + nl + nr)))
    types = draw(st.sampled_from([("f32", "f32"), ("bf16", "bf16"), ("f32", "f64"),
                                  ("s32", "s32"), ("c64", "f32")]))
    return batch, lfree, rfree, tuple(lb), tuple(rb), perm, types, draw(st.integers(0, 99))


def _place(batch: list[int], free: list[int], at: tuple[int, ...]) -> list[int]:
    dims, it, b = [], iter(free), dict(zip(at, batch))
    for d in range(len(batch) + len(free)):
        dims.append(b[d] if d in b else next(it))
    return dims


@settings(max_examples=60, deadline=None)
@given(_outer_dots())
def test_dot_outer_any_layout_is_exact(case: tuple[Any, ...]) -> None:
    """The exact simplifier removes every such dot (and the transpose after it) and keeps
    the interpreter's bits, denormals and NaNs included, in both denormal modes."""
    from tests.property.support import random_array
    from xlapy import denormal
    from xlapy.types import from_hlo_name

    batch, lfree, rfree, lb, rb, perm, (lt, rt), seed = case
    ls, rs = _place(batch, lfree, lb), _place(batch, rfree, rb)
    g = HloBuilder()
    a = g.param(f"{lt}[{','.join(map(str, ls))}]")
    b = g.param(f"{rt}[{','.join(map(str, rs))}]")
    d = g.dot_general(a, b, lhs_batching_dimensions=lb, rhs_batching_dimensions=rb)
    module = g.build(d if perm is None else g.transpose(d, permutation=tuple(perm)))
    x = random_array(from_hlo_name(lt), ls, seed)
    y = random_array(from_hlo_name(rt), rs, seed + 7)
    if from_hlo_name(lt).is_float:
        x.flat[:1] = 3e-39  # a denormal operand (bf16 and f32 hold it)
    for mode in ("ftz", "ieee"):
        m = module.clone()
        with denormal.use(mode):
            before = np.asarray(Interpreter().run_module(m, [x, y]))
            simp = AlgebraicSimplifier(exact_only=True)
            while run_passes(m, [simp, DeadCodeElimination()]):
                pass
            assert not any(i.opcode == "dot_general" for i in m.entry.instructions)
            after = np.asarray(Interpreter().run_module(m, [x, y]))
        assert after.dtype == before.dtype and after.shape == before.shape
        np.testing.assert_array_equal(after.reshape(-1).view(np.uint8),
                                      before.reshape(-1).view(np.uint8))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["s8", "u8", "s32", "u32", "s64"]), st.integers(1, 300),
       st.integers(-300, 300), st.sampled_from(["LT", "LE", "GT", "GE", "EQ", "NE"]),
       st.booleans())
def test_compare_range_keeps_the_values(et: str, n: int, c: int, direction: str,
                                        iota_left: bool) -> None:
    """An iota of n compared with a splat c (either side; n past the type's range wraps, so
    the rule stays out): the interpreter's values before and after, folded or not."""
    from xlapy.types import from_hlo_name
    from xlapy.types.element_type import iinfo

    info = iinfo(from_hlo_name(et))
    c = min(max(c, info.min), info.max)
    g = HloBuilder()
    p = g.param(f"{et}[{n}]")
    iota = g.iota(shape=parse_shape(f"{et}[{n}]"), iota_dimension=0)
    const = g.splat(c, f"{et}[{n}]")
    lhs, rhs = (iota, const) if iota_left else (const, iota)
    module = g.build(g.select(g.cmp(lhs, rhs, direction), p, g.splat(7, f"{et}[{n}]")))
    x = np.arange(n).astype(from_hlo_name(et).dtype)
    before = np.asarray(Interpreter().run_module(module, [x]))
    simp = AlgebraicSimplifier(exact_only=True)
    while run_passes(module, [simp, DeadCodeElimination()]):
        pass
    np.testing.assert_array_equal(np.asarray(Interpreter().run_module(module, [x])), before)
    if n - 1 > info.max:
        assert simp.fired["compare_range"] == 0
