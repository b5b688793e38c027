"""The register block written as IR text (conv_block_text.py): each pixel's and vector's sum
over (tap row, kx, channel) in that order, for float and integer types, broadcast (dense)
and vector (depthwise) inputs, several blocks per call; the window is read at run time, so
one text serves nests whose windows differ."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

from xlapy.backends.cpu.conv_block_text import block_text, fmuladd
from xlapy.backends.cpu.conv_kernel import Nest
from xlapy.backends.cpu.llvm_util import F32, F64, Engine, module_text, new_module

TYPES = {"f32": (F32, np.float32), "f64": (F64, np.float64),
         "i32": (ir.IntType(32), np.int32), "i8": (ir.IntType(8), np.int8)}


def _nest(lanes: int, xvec: bool, ci: int = 5, ks: tuple[int, int] = (2, 3)) -> Nest:
    """Tap rows 2 x kx 3 (`ks`), `ci` channels a pixel (5: one a loop iteration, 6: two),
    input stride 2, window dilation 2."""
    return Nest(b=1, g=1, ci=ci if not xvec else 1, cx=ci if not xvec else 2 * lanes, gx=0,
                apad=2 * lanes, lanes=lanes, v=2, p=3, xvec=xvec, sp_out=(4, 6), ks=ks,
                strides=(1, 2), rhs_dil=(1, 2), padded=(6, 20), sp_in=(6, 20),
                pad=((0, 0), (0, 0)), rows=False)


def _compile(t: ir.Type, nest: Nest, pp: int) -> tuple[Engine, int]:
    mod = new_module("blk_test")
    if t in (F32, F64):
        vt = ir.VectorType(t, nest.lanes)
        ir.Function(mod, ir.FunctionType(vt, [vt, vt, vt]), name=fmuladd(t, nest.lanes))
    text = module_text("\n".join([str(mod), block_text("blk_test.f0", t, nest, pp)]))
    eng = Engine(text, light=True, exports=["blk_test.f0"])
    return eng, eng.address("blk_test.f0")


def _rowoff(nest: Nest, rows: list[int]) -> tuple[np.ndarray, int]:
    """(the table, the address the block takes): the window (kw, taps * kw) before the tap
    rows' offsets, as conv_rows_text.py writes it."""
    assert len(rows) == nest.taps
    table = np.array([nest.ks[-1], nest.taps * nest.ks[-1], *rows], np.int64)
    return table, table.ctypes.data + 16


def _aligned(n: int, dtype: type, fill: float = 0) -> np.ndarray:
    """n elements at a 64-byte boundary (the block stores whole vectors to the spill)."""
    size = np.dtype(dtype).itemsize
    raw = np.empty(n * size + 64, np.uint8)
    at = -raw.ctypes.data % 64
    out = raw[at:at + n * size].view(dtype)
    out[...] = fill
    return out


def _reference(x: np.ndarray, w: np.ndarray, nest: Nest, pp: int, n: int, xb: int, xv: int,
               wb: int, rowoff: list[int]) -> np.ndarray:
    """spill[block, q, j, lane], summed in the kernel's order (exact: small integers)."""
    lanes, v, kw, ci, apad = nest.lanes, nest.v, nest.ks[-1], nest.ci, nest.apad
    st, dx = nest.strides[-1] * nest.cx, nest.rhs_dil[-1] * nest.cx
    x, w = x.astype(np.int64), w.astype(np.int64)
    out = np.zeros((n, pp, v, lanes), np.int64)
    for blk in range(n):
        for q in range(pp):
            for j in range(v):
                for t, ro in enumerate(rowoff):
                    for kx in range(kw):
                        for c in range(ci):
                            xo = xb + blk * pp * st + ro + kx * dx + c + q * st
                            wo = wb + ((t * kw + kx) * ci + c) * apad + j * lanes
                            xs = x[xo + xv + j * lanes:][:lanes] if nest.xvec else x[xo]
                            out[blk, q, j] += xs * w[wo:wo + lanes]
    return out


@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("xvec,ci", [(False, 5), (False, 6), (True, 1)])
def test_block_sums(tname: str, xvec: bool, ci: int) -> None:
    t, dtype = TYPES[tname]
    lanes, pp, n = 8, 3, 2
    nest = _nest(lanes, xvec, ci)
    eng, addr = _compile(t, nest, pp)
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, 4096).astype(dtype)
    w = rng.integers(-3, 4, 4096).astype(dtype)
    xb, xv, wb = 11, 3 if xvec else 0, 40
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64)(addr)
    # the compiled text's own window, then others through the same function
    for ks, rows in (((2, 3), [7, 300]), ((1, 2), [150]), ((3, 1), [5, 90, 400])):
        other = _nest(lanes, xvec, ci, ks)
        assert block_text("blk_test.f0", t, other, pp) == block_text("blk_test.f0", t, nest, pp)
        table, rowoff = _rowoff(other, rows)
        spill = _aligned(n * pp * nest.v * lanes, dtype)
        fn(x.ctypes.data, w.ctypes.data, xb, xv, wb, rowoff, spill.ctypes.data, n)
        want = _reference(x, w, other, pp, n, xb, xv, wb, rows)
        np.testing.assert_array_equal(spill.reshape(want.shape), want.astype(dtype))
    del eng


def test_no_block_for_n_zero() -> None:
    """n = 0 blocks: the spill is not touched."""
    nest = _nest(8, False)
    eng, addr = _compile(F32, nest, 2)
    spill = _aligned(64, np.float32, 7.0)
    x = np.ones(4096, np.float32)
    table, rowoff = _rowoff(nest, [0, 0])
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64)(addr)
    fn(x.ctypes.data, x.ctypes.data, 0, 0, 0, rowoff, spill.ctypes.data, 0)
    assert (spill == 7.0).all()
    del eng
