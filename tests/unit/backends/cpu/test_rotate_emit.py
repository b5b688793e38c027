"""or(shift_left(x, n), shift_right_logical(x, bits - n)) emitted as one funnel shift
(rotate_emit.py): the interpreter's bits for every amount 0..bits + 2 and past it (HLO's
shifts give 0 from `bits` on), array and broadcast-scalar amounts, the shifts in either
order, 8-64 bit integers; look-alikes (another constant, another x) stay shifts."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

ROT = """
func.func @main(%x: tensor<{n}x{t}>, %y: tensor<{n}x{t}>, %s: tensor<{t}>) -> tensor<{n}x{t}> {{
  %a = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<{t}>) -> tensor<{n}x{t}>
  %k = stablehlo.constant dense<{bits}> : tensor<{t}>
  %d = stablehlo.subtract %k, %s : tensor<{t}>
  %b = stablehlo.broadcast_in_dim %d, dims = [] : (tensor<{t}>) -> tensor<{n}x{t}>
  %l = stablehlo.shift_left %x, %a : tensor<{n}x{t}>
  %r = stablehlo.shift_right_logical %{rx}, %b : tensor<{n}x{t}>
  %o = stablehlo.or {ops} : tensor<{n}x{t}>
  %z = stablehlo.add %o, %y : tensor<{n}x{t}>
  return %z : tensor<{n}x{t}>
}}
"""

ROT_ARRAY = """
func.func @main(%x: tensor<{n}x{t}>, %y: tensor<{n}x{t}>, %s: tensor<{t}>) -> tensor<{n}x{t}> {{
  %k = stablehlo.constant dense<{bits}> : tensor<{n}x{t}>
  %d = stablehlo.subtract %k, %y : tensor<{n}x{t}>
  %l = stablehlo.shift_left %x, %y : tensor<{n}x{t}>
  %r = stablehlo.shift_right_logical %x, %d : tensor<{n}x{t}>
  %o = stablehlo.or %l, %r : tensor<{n}x{t}>
  return %o : tensor<{n}x{t}>
}}
"""

_NP = {"ui8": np.uint8, "i16": np.int16, "ui32": np.uint32, "i32": np.int32, "ui64": np.uint64}


def _run(text: str, x: np.ndarray, y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, str]:
    prog = xlapy.compile(text, backend="cpu")
    got = prog(x, y, s)
    np.testing.assert_array_equal(got, xlapy.compile(text, backend="interpreter")(x, y, s))
    return got, prog._exe.kernel_ir


@pytest.mark.parametrize("t", list(_NP))
@pytest.mark.parametrize("swap", [False, True])
def test_rotate_by_a_scalar(t: str, swap: bool) -> None:
    dt = _NP[t]
    bits = np.dtype(dt).itemsize * 8
    info = np.iinfo(dt)
    rng = np.random.default_rng(bits)
    x = rng.integers(info.min, info.max, 100, dtype=dt, endpoint=True)
    y = rng.integers(info.min, info.max, 100, dtype=dt, endpoint=True)
    text = ROT.format(n=100, t=t, bits=bits, rx="x", ops="%r, %l" if swap else "%l, %r")
    for s in [*range(bits + 3), info.max, info.min]:
        _, ir_text = _run(text, x, y, np.array(s, dt))
    assert "llvm.fshl" in ir_text


@pytest.mark.parametrize("t", ["ui32", "i16"])
def test_rotate_by_an_array(t: str) -> None:
    dt = _NP[t]
    bits = np.dtype(dt).itemsize * 8
    x = np.random.default_rng(2).integers(0, 1 << (bits - 1), 3 * (bits + 3)).astype(dt)
    y = np.tile(np.arange(bits + 3), 3).astype(dt)
    _, ir_text = _run(ROT_ARRAY.format(n=x.size, t=t, bits=bits), x, y, np.array(0, dt))
    assert "llvm.fshl" in ir_text


@pytest.mark.parametrize("change", ["other x", "other width"])
def test_look_alikes_stay_shifts(change: str) -> None:
    text = ROT.format(n=64, t="ui32", bits=31 if change == "other width" else 32,
                      rx="y" if change == "other x" else "x", ops="%l, %r")
    rng = np.random.default_rng(3)
    x, y = (rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32) for _ in "xy")
    for s in (0, 5, 31, 32, 40):
        _, ir_text = _run(text, x, y, np.array(s, np.uint32))
    assert "llvm.fshl" not in ir_text
