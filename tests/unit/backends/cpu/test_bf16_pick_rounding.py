"""bf16 roundings of values that pick among loaded bf16s (a max / min / select / abs of
them: bf16_exact.is_bf16(signaling=True)) only quiet a NaN: the bits of the same kernels
with the whole rounding, signaling NaNs of both signs included, in both denormal modes;
quiet NaNs and the interpreter's bits elsewhere."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import bf16_convert, bf16_exact, cache
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F32
from xlapy.types import ElementType as ET

_T = "tensor<64x256xbf16>"
_R = "tensor<64xbf16>"
_PROGRAM = f"""
func.func public @main(%a: {_T}, %b: {_T}) -> ({_T}, {_T}, {_T}, {_T}, {_R}) {{
  %mx = stablehlo.maximum %a, %b : {_T}
  %zero = stablehlo.constant dense<0.0> : tensor<bf16>
  %zb = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<bf16>) -> {_T}
  %relu = stablehlo.maximum %b, %zb : {_T}
  %mn = stablehlo.minimum %a, %b : {_T}
  %ab = stablehlo.abs %a : {_T}
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %row = stablehlo.reduce(%mx init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : ({_T}, tensor<bf16>) -> {_R}
  return %mx, %relu, %mn, %ab, %row : {_T}, {_T}, {_T}, {_T}, {_R}
}}
"""


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    xs = []
    for k in range(2):
        x = (rng.standard_normal((64, 256)) * 4).astype(ml_dtypes.bfloat16)
        u = x.view(np.uint16)
        specials = [0x7F81, 0xFF85, 0x7FC1, 0xFFFF, 0x7FC0, 0x7F80, 0xFF80, 0x0001, 0x8003,
                    0x0000, 0x8000, 0x7F7F]
        for r in range(48):
            cols = rng.choice(256, 10, replace=False)
            u[r, cols] = rng.choice(specials, 10)
        u[60 + k, :] = 0x7F81  # a row of signaling NaNs
        u[62, 3 + k] = 0xFF81  # one in a row of numbers (the row max picks it)
        xs.append(x)
    return xs


def _compile(opts: dict[str, Any]) -> Any:
    cache.clear_memory()
    return xlapy.compile(_PROGRAM, backend="cpu", options=opts)


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_picks_of_loaded_bf16s_only_quiet_their_nans(mode: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    args = _inputs()
    opts = {"denormal": mode}
    # (the IR rounding on every target, as test_bf16_quiet_rounding.py)
    monkeypatch.setattr(bf16_convert, "usable", lambda *a, **k: False)
    fast = _compile(opts)
    got = [np.asarray(o).view(np.uint16) for o in fast(*args)]
    whole = bf16_exact.is_bf16
    with monkeypatch.context() as m:
        m.setattr(bf16_exact, "is_bf16",
                  lambda x, depth=6, signaling=False: not signaling and whole(x, depth))
        slow = _compile(opts)
        want = [np.asarray(o).view(np.uint16) for o in slow(*args)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert len(fast._exe.kernel_ir) < len(slow._exe.kernel_ir)  # (roundings were cut)
    ref = xlapy.compile(_PROGRAM, backend="interpreter", options=opts)(*args)
    for g, r in zip(got, ref):
        r = np.asarray(r).view(np.uint16)
        nan = (r & 0x7FFF) > 0x7F80
        np.testing.assert_array_equal(g[~nan], r[~nan])
        assert ((g[nan] & 0x7FFF) >= 0x7FC0).all()  # (NaN lanes: quiet NaNs)


def test_what_counts_as_a_pick_of_bf16s() -> None:
    vt = ir.VectorType(F32, 8)
    it = ir.VectorType(ir.IntType(16), 8)
    fn = ir.Function(ir.Module(), ir.FunctionType(vt, [vt, it, it]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    x, y = (ew.from_storage(b, a, ET.BF16) for a in fn.args[1:])
    mx = b.call(ir.Function(fn.module, ir.FunctionType(vt, [vt, vt]), "llvm.maximum.v8f32"),
                [x, y])
    assert not bf16_exact.is_bf16(mx)  # (a signaling NaN would pass through)
    assert bf16_exact.is_bf16(mx, signaling=True)
    assert bf16_exact.is_bf16(b.select(ir.Constant(ir.IntType(1), 1), mx, x), signaling=True)
    assert not bf16_exact.is_bf16(b.fadd(x, y), signaling=True)  # arithmetic rounds
    assert not bf16_exact.is_bf16(fn.args[0], signaling=True)  # an f32
    before = len(b.block.instructions)
    r = ew.round_to(b, mx, ET.BF16)
    assert bf16_exact.is_bf16(r)  # quieted: a bf16, and known as one
    assert len(b.block.instructions) - before == 5  # bitcast, fcmp, or, select, bitcast
