"""ragged_emit.py: chlo.ragged_dot as one LLVM loop nest (what xlapy aot puts in objects),
run here through the JIT's engine and compared with the interpreter: batching, a ragged
dimension between other free dimensions, negative and oversized group sizes (later groups
override, rows past the sizes stay zero), integers wrapping as int64 sums do, complex,
unsigned group sizes."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import ragged_emit
from xlapy.backends.cpu.llvm_util import Engine
from xlapy.stablehlo import parse_module


def _t(dims: tuple[int, ...], ty: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in dims)}{ty}>"


def _program(lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...], ty: str,
             gty: str, dn: str) -> str:
    tl, tr, to = _t(lhs, ty), _t(rhs, ty), _t(out, ty)
    tg = _t((rhs[int(dn.split("rhs_group_dimensions = [")[1][0])],), gty)
    return (f"func.func @main(%l: {tl}, %r: {tr}, %g: {tg}) -> {to} {{\n"
            f'  %0 = "chlo.ragged_dot"(%l, %r, %g) {{ragged_dot_dimension_numbers = '
            f"#chlo.ragged_dot<{dn}>}} : ({tl}, {tr}, {tg}) -> {to}\n"
            f"  return %0 : {to}\n}}\n")


_PLAIN = ("lhs_batching_dimensions = [], rhs_batching_dimensions = [], "
          "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1], "
          "lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]")
_BATCH = ("lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
          "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2], "
          "lhs_ragged_dimensions = [1], rhs_group_dimensions = [1]")
_MIDDLE = ("lhs_batching_dimensions = [], rhs_batching_dimensions = [], "
           "lhs_contracting_dimensions = [3], rhs_contracting_dimensions = [0], "
           "lhs_ragged_dimensions = [1], rhs_group_dimensions = [1]")

CASES = [
    # (lhs, rhs, out, type, group type, dims, group sizes)
    ((11, 5), (3, 5, 7), (11, 7), "f32", "i64", _PLAIN, [4, 4, 3]),
    ((11, 5), (3, 5, 7), (11, 7), "f64", "i32", _PLAIN, [2, 0, 5]),  # rows 7.. stay zero
    ((2, 6, 3), (2, 3, 3, 4), (2, 6, 4), "f32", "i64", _BATCH, [3, -2, 5]),  # overlap
    ((6, 4), (3, 4, 2), (6, 2), "i32", "i32", _PLAIN, [1, 9, -4]),  # clipped, wraps
    ((2, 5, 3, 2), (2, 2, 3), (2, 5, 3, 3), "complex<f32>", "ui32", _MIDDLE, [2, 4]),
    ((6, 4), (2, 4, 3), (6, 3), "bf16", "i16", _PLAIN, [3, 3]),
    # rows of sums on the stack (n * 8 <= ROW_BYTES) and one element at a time (wider)
    ((9, 33), (3, 33, 70), (9, 70), "f32", "i64", _PLAIN, [2, 5, 2]),
    ((5, 3), (2, 3, 4500), (5, 4500), "f32", "i32", _PLAIN, [2, 3]),
    ((2, 5, 3, 2), (2, 2, 9), (2, 5, 3, 9), "f64", "i32", _MIDDLE, [1, 3]),
]


def _value(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "i":
        return rng.integers(-2**30, 2**30, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _run_native(text: str, args: list[np.ndarray], out: np.ndarray) -> None:
    module = parse_module(text, "<ragged>")
    instr = next(i for i in module.entry.instructions if i.opcode == "chlo.ragged_dot")
    mod = ir.Module(name="ragged_test")
    fn = ragged_emit.emit(mod, "ragged_dot", instr)
    fn.linkage = "external"
    eng = Engine(mod, exports=["ragged_dot"])
    call = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)(eng.address("ragged_dot"))
    call(*(a.ctypes.data for a in args), out.ctypes.data)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}-{c[1]}")
def test_ragged_loop_matches_the_interpreter(case: tuple) -> None:
    lhs, rhs, out, ty, gty, dn, sizes = case
    text = _program(lhs, rhs, out, ty, gty, dn)
    rng = np.random.default_rng(7)
    ref_fn = xlapy.compile(text, backend="interpreter")
    args = [_value(rng, lhs, _dtype(ty)), _value(rng, rhs, _dtype(ty)),
            np.asarray(sizes, _dtype(gty))]
    if ty == "i32":
        args[:2] = [(a % 1000).astype(np.int32) for a in args[:2]]
        args[0][0, 0] = 2**30  # a product past 2^31 wraps in the result, as int64 sums do
    want = np.asarray(ref_fn(*args))
    got = np.full(want.shape, 77, want.dtype)
    _run_native(text, args, got)
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128),
                                   rtol=4 * float(np.finfo(np.float32).eps), atol=1e-30)


def _dtype(ty: str) -> np.dtype:
    import ml_dtypes

    return np.dtype({"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
                     "i16": np.int16, "ui32": np.uint32, "complex<f32>": np.complex64,
                     "bf16": ml_dtypes.bfloat16}[ty])
