"""library.exact_float: an integer dot_general whose sums cannot leave the f32 (f64) mantissa,
an s8 x s8 -> s32 matmul for one, runs BLAS in that float type - bit for bit the interpreter's
exact integer result, at the bound's edge too; a product that may wrap keeps the integer GEMM.
On x86 8-bit products with 32-bit sums run an int8 kernel instead, the same bits: AMX tiles
(gemm_amx.py), else AVX-512 VNNI for s8 (gemm_vnni.py), else pmaddwd (gemm_i16.py)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import gemm_amx, gemm_i16, gemm_vnni

_NP = {"i8": np.int8, "ui8": np.uint8, "ui32": np.uint32, "i16": np.int16, "i32": np.int32,
       "i64": np.int64}


def _text(lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...], lt: str, rt: str,
          ot: str, batch: bool) -> str:
    def t(dims: tuple[int, ...], ty: str) -> str:
        return f"tensor<{'x'.join(map(str, dims))}x{ty}>"

    dims = ("batching_dims = [0] x [0], contracting_dims = [2] x [1]" if batch
            else "contracting_dims = [1] x [0]")
    return (f"func.func @main(%x: {t(lhs, lt)}, %y: {t(rhs, rt)}) -> {t(out, ot)} {{\n"
            f"  %z = stablehlo.dot_general %x, %y, {dims} : ({t(lhs, lt)}, {t(rhs, rt)})"
            f" -> {t(out, ot)}\n  return %z : {t(out, ot)}\n}}\n")


def _run(text: str, x: np.ndarray, y: np.ndarray) -> str:
    cpu = xlapy.compile(text, backend="cpu")
    how = cpu._exe.explain()
    assert not cpu._exe.fallbacks(), how
    got, want = cpu(x, y), xlapy.compile(text, backend="interpreter")(x, y)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    return how


@pytest.mark.parametrize(("lt", "rt", "ot", "k", "how"), [
    ("i8", "i8", "i32", 1024, "exact in float32"),  # 128 * 128 * 1024 = 2^24: the edge
    ("i8", "i8", "i32", 1025, "exact in float64"),
    ("i8", "i16", "i64", 2, "exact in float32"),  # 128 * 32768 * 2 = 2^23
    ("i8", "i16", "i64", 64, "exact in float64"),
    ("ui8", "ui8", "ui32", 300, "int gemm"),  # unsigned results: the integer GEMM
    ("i16", "i16", "i32", 4, "int gemm"),  # 2^30 * 4 wraps in s32
    ("i8", "i8", "i8", 16, "int gemm"),  # wraps in s8
])
def test_integer_dot_routes_and_bits(lt: str, rt: str, ot: str, k: int, how: str) -> None:
    rng = np.random.default_rng(k)
    for batch in (False, True):
        lhs, rhs = ((3, 5, k), (3, k, 7)) if batch else ((5, k), (k, 7))
        out = (3, 5, 7) if batch else (5, 7)
        lo, hi = np.iinfo(_NP[lt]), np.iinfo(_NP[rt])
        x = rng.integers(lo.min, int(lo.max) + 1, lhs).astype(_NP[lt])
        y = rng.integers(hi.min, int(hi.max) + 1, rhs).astype(_NP[rt])
        x.reshape(-1)[: k] = lo.min  # one row at the extreme: the largest sum
        if batch:
            y[0, :, 0] = hi.min
        else:
            y[:, 0] = hi.min
        if lt == rt and lt in ("i8", "ui8") and ot != "i64":  # 32-bit sums: int8 kernels
            how = ("int gemm (amx)" if gemm_amx.available() else
                   "int gemm (vnni)" if lt == "i8" and gemm_vnni.available() else
                   "int gemm (pmaddwd)" if gemm_i16.available() else how)
        assert how in _run(_text(lhs, rhs, out, lt, rt, ot, batch), x, y)
