"""dot_general as library thunks for every element type: integer/pred (the JIT integer GEMM,
bit-exact with wraparound), bf16/f16 (f32 GEMM, rounded once), complex (cgemm/zgemm), mixed
precision; batch dimensions, contracting dimensions anywhere, size 0 - against the
interpreter, and never on the interpreter fallback."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_close_to_bound, magnitude_bound
from tests.unit.backends.cpu.util import values
from xlapy.types.element_type import from_shlo_name

#: (lhs shape, rhs shape, lhs batch, rhs batch, lhs contracting, rhs contracting)
LAYOUTS = [
    ((3, 5), (5, 4), [], [], [1], [0]),             # plain
    ((5, 3), (4, 5), [], [], [0], [1]),             # both transposed
    ((2, 5, 3), (2, 4, 5), [0], [0], [1], [2]),     # batched, contracting not last
    ((3, 2, 6), (6, 7, 2), [1], [2], [2], [0]),     # batch dims not first
    ((2, 3, 4, 5), (5, 3, 4, 2), [], [], [1, 2], [1, 2]),  # two contracting dims
    ((4,), (4,), [], [], [0], [0]),                 # vector dot
    ((0, 5), (5, 3), [], [], [1], [0]),             # size 0 result
    ((3, 0), (0, 4), [], [], [1], [0]),             # size 0 contraction
    ((20, 3, 4), (20, 4, 2), [0], [0], [2], [1]),   # many batches
    ((33, 70), (70, 65), [], [], [1], [0]),         # tails of the unrolled loops
]


def _dims(s: tuple[int, ...]) -> str:
    return "x".join(map(str, s)) + "x" if s else ""


def _result_shape(layout: tuple) -> tuple[int, ...]:
    ls, rs, lb, rb, lc, rc = layout
    lf = [d for d in range(len(ls)) if d not in lb and d not in lc]
    rf = [d for d in range(len(rs)) if d not in rb and d not in rc]
    return tuple([ls[d] for d in lb] + [ls[d] for d in lf] + [rs[d] for d in rf])


def _text(layout: tuple, lt: str, rt: str, ot: str) -> str:
    ls, rs, lb, rb, lc, rc = layout
    os_ = _result_shape(layout)
    batch = f"batching_dims = {lb} x {rb}, " if lb else ""
    return f"""
func.func @main(%x: tensor<{_dims(ls)}{lt}>, %y: tensor<{_dims(rs)}{rt}>)
    -> tensor<{_dims(os_)}{ot}> {{
  %z = stablehlo.dot_general %x, %y, {batch}contracting_dims = {lc} x {rc}
      : (tensor<{_dims(ls)}{lt}>, tensor<{_dims(rs)}{rt}>) -> tensor<{_dims(os_)}{ot}>
  return %z : tensor<{_dims(os_)}{ot}>
}}
"""


def _compile(text: str, vectors: bool = False) -> tuple[object, object]:
    """`vectors`: a dot of vectors (no free dimension), a fused reduce (small_dots.py)."""
    cpu = xlapy.compile(text, backend="cpu")
    exe = cpu._exe  # type: ignore[attr-defined]
    assert not [f for f in exe.fallbacks() if f[1] == "dot_general"], exe.explain()
    assert ("dot_general" in exe.explain() and "library" in exe.explain()) or \
        (vectors and "reduce" in exe.explain())
    return cpu, xlapy.compile(text, backend="interpreter")


def _arg(t: str, shape: tuple[int, ...], rng: np.random.Generator, small: bool = False
         ) -> np.ndarray:
    et = from_shlo_name(t)
    n = int(np.prod(shape))
    v = values(et, max(n, 16), rng, small)
    return rng.permutation(v)[:n].reshape(shape)


INT_TYPES = [("i8", "i8", "i8"), ("i16", "i16", "i16"), ("i32", "i32", "i32"),
             ("i64", "i64", "i64"), ("ui8", "ui8", "ui8"), ("ui32", "ui32", "ui32"),
             ("ui64", "ui64", "ui64"), ("i8", "i8", "i32"), ("ui8", "ui8", "ui32"),
             ("i8", "i16", "i16"), ("i1", "i1", "i1"), ("ui16", "ui16", "ui16")]


@pytest.mark.parametrize("types", INT_TYPES, ids=lambda t: "x".join(t))
@pytest.mark.parametrize("layout", LAYOUTS, ids=[str(i) for i in range(len(LAYOUTS))])
def test_int_dot_bit_exact(types: tuple[str, str, str], layout: tuple) -> None:
    """Integer products wrap (values at the type's limits), bit for bit."""
    lt, rt, ot = types
    vectors = len(layout[0]) == len(layout[2]) + len(layout[4])
    cpu, ref = _compile(_text(layout, lt, rt, ot), vectors)
    rng = np.random.default_rng(3)
    for _ in range(2):
        x, y = _arg(lt, layout[0], rng), _arg(rt, layout[1], rng)
        got, want = cpu(x, y), ref(x, y)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_int8_wraps() -> None:
    """127 * 127 * 8 overflows i8 and i16 both; the result is the sum modulo 2^8."""
    layout = ((1, 8), (8, 1), [], [], [1], [0])
    cpu, ref = _compile(_text(layout, "i8", "i8", "i8"))
    x = np.full((1, 8), 127, np.int8)
    got = cpu(x, x.T.copy())
    assert got[0, 0] == np.int8(np.int64(127 * 127 * 8) % 256 - 256 * (127 * 127 * 8 % 256 > 127))
    np.testing.assert_array_equal(got, ref(x, x.T.copy()))


def test_int_explain_names_the_gemm() -> None:
    cpu, _ = _compile(_text(LAYOUTS[0], "i32", "i32", "i32"))
    assert "library int gemm" in cpu._exe.explain()  # type: ignore[attr-defined]


FLOAT_TYPES = [("bf16", "bf16", "bf16"), ("f16", "f16", "f16"), ("bf16", "bf16", "f32"),
               ("f16", "f16", "f32"), ("bf16", "f32", "f32"), ("complex<f32>", "complex<f32>",
                                                                "complex<f32>"),
               ("complex<f64>", "complex<f64>", "complex<f64>"), ("f32", "f64", "f64"),
               ("i8", "i8", "f32")]
_NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64,
       "complex<f32>": np.complex64, "complex<f64>": np.complex128, "i8": np.int8,
       "i32": np.int32}


def _float_arg(t: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if t == "i8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    x = rng.standard_normal(shape)
    if t.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(np.complex128 if t.startswith("complex") else np.float32).astype(_NP[t])


@pytest.mark.parametrize("types", FLOAT_TYPES, ids=lambda t: "x".join(t))
@pytest.mark.parametrize("layout", LAYOUTS, ids=[str(i) for i in range(len(LAYOUTS))])
def test_float_dot_matches_interpreter(types: tuple[str, str, str], layout: tuple) -> None:
    """Within the dot bound of the accumulation type, plus one rounding to the result type
    (the interpreter rounds the f32 accumulator of bf16/f16 dots the same way)."""
    lt, rt, ot = types
    vectors = len(layout[0]) == len(layout[2]) + len(layout[4])
    cpu, ref = _compile(_text(layout, lt, rt, ot), vectors)
    rng = np.random.default_rng(4)
    x, y = _float_arg(lt, layout[0], rng), _float_arg(rt, layout[1], rng)
    got, want = cpu(x, y), ref(x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    k = int(np.prod([layout[0][d] for d in layout[4]]))
    absx = np.abs(x.astype(np.complex128 if ot.startswith("complex") else np.float64))
    absy = np.abs(y.astype(np.complex128 if ot.startswith("complex") else np.float64))
    mag = np.abs(xlapy.compile(_text(layout, "f64", "f64", "f64"), backend="interpreter")(
        absx.astype(np.float64), absy.astype(np.float64)))
    out_dt = _NP[ot]
    acc = {"bf16": np.float32, "f16": np.float32, "f32": np.float64 if lt == "i8" else
           np.float32}.get(ot, out_dt)  # the interpreter's accumulation type
    bound = magnitude_bound(mag, max(k, 1), out_dt, acc_dtype=acc)
    assert_close_to_bound(got, want, bound)


#: (lhs dims, rhs dims, lhs batch, rhs batch, lhs contracting, rhs contracting, ragged, group)
RAGGED = [
    ((11, 5), (3, 5, 7), [], [], [1], [1], 0, 0),
    ((2, 11, 5), (3, 2, 5, 7), [0], [1], [2], [2], 1, 0),
    ((5, 9, 4), (4, 5, 2, 3), [], [], [0], [1], 1, 2),   # contracting first, group in the middle
    ((6, 3), (3, 2, 4), [], [], [1], [0], 0, 2),          # group dimension last
]


def _ragged_text(case: tuple, ty: str) -> str:
    ls, rs, lb, rb, lc, rc, r, g = case
    lf = [d for d in range(len(ls)) if d not in lb and d not in lc]
    rf = [d for d in range(len(rs)) if d not in rb and d not in rc and d != g]
    os_ = [ls[d] for d in lb] + [ls[d] for d in lf] + [rs[d] for d in rf]
    tl, tr, to = _dims(ls) + ty, _dims(rs) + ty, _dims(tuple(os_)) + ty
    tg = f"{rs[g]}xi64"
    return f"""
func.func @main(%x: tensor<{tl}>, %y: tensor<{tr}>, %s: tensor<{tg}>) -> tensor<{to}> {{
  %r = "chlo.ragged_dot"(%x, %y, %s) {{
    ragged_dot_dimension_numbers = #chlo.ragged_dot<
      lhs_batching_dimensions = {lb}, rhs_batching_dimensions = {rb},
      lhs_contracting_dimensions = {lc}, rhs_contracting_dimensions = {rc},
      lhs_ragged_dimensions = [{r}], rhs_group_dimensions = [{g}]>,
    precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]
  }} : (tensor<{tl}>, tensor<{tr}>, tensor<{tg}>) -> tensor<{to}>
  return %r : tensor<{to}>
}}
"""


@pytest.mark.parametrize("ty", ["f32", "f64", "i32", "i8"])
@pytest.mark.parametrize("case", RAGGED, ids=[str(i) for i in range(len(RAGGED))])
@pytest.mark.parametrize("sizes", ["fit", "short", "over", "negative"])
def test_ragged_dot(case: tuple, ty: str, sizes: str) -> None:
    """Groups that cover the rows, leave rows out (zero), run past them, or overlap through
    a negative size (the later group wins, as in the interpreter)."""
    text = _ragged_text(case, ty)
    cpu = xlapy.compile(text, backend="cpu")
    exe = cpu._exe  # type: ignore[attr-defined]
    assert not exe.fallbacks(), exe.explain()
    assert "chlo.ragged_dot" in exe.explain() and "library blas" in exe.explain()
    ls, rs, *_, r, g = case
    rows, ng = ls[r], rs[g]
    base = [rows // ng] * ng
    base[-1] += rows - sum(base)
    groups = {"fit": base, "short": [1] * ng, "over": [rows] * ng,
              "negative": [rows // 2 + 1, -1] + [2] * (ng - 2)}[sizes]
    rng = np.random.default_rng(14)
    if ty.startswith("f"):
        x = rng.standard_normal(ls).astype(_NP[ty])
        y = rng.standard_normal(rs).astype(_NP[ty])
    else:
        x = _arg(ty, ls, rng)
        y = _arg(ty, rs, rng)
    s = np.array(groups, np.int64)
    got, want = cpu(x, y, s), xlapy.compile(text, backend="interpreter")(x, y, s)
    assert got.dtype == want.dtype and got.shape == want.shape
    if ty.startswith("i"):
        np.testing.assert_array_equal(got, want)  # int64 products, wrapped once
    else:  # both in float64 (BLAS vs einsum order), rounded once to the result type
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(_NP[ty]).eps,
                                   atol=1e-6 if ty == "f32" else 1e-14)
