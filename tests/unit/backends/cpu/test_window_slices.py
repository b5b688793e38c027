"""reduce_window over a narrow last dimension as a fold of strided slices (window_slices.py):
a 2 x 2 / 2 max pool of f32[32, 224, 224, 3] ran the native kernel's scalar channel loop, 7.2
ms against XLA's 3.9 (1.97 now; a 3 x 3 / 2 SAME pool 13.8 -> 4.3, XLA 4.8). The
interpreter's bits for any reducer (the same ops in its order: sums too), with padding,
window dilation, NaN and signed zeros; wide channels and windows along the last dimension
keep the native kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy

RW = """
func.func @main(%x: tensor<{shape}x{t}>, %i: tensor<{t}>) -> tensor<{out}x{t}> {{
  %r = "stablehlo.reduce_window"(%x, %i) ({{
    ^bb0(%a: tensor<{t}>, %b: tensor<{t}>):
      %s = stablehlo.{op} %a, %b : tensor<{t}>
      stablehlo.return %s : tensor<{t}>
  }}) {{window_dimensions = array<i64: {win}>, window_strides = array<i64: {st}>,
       window_dilations = array<i64: {wd}>, padding = dense<{pad}> : tensor<{r}x2xi64>}}
    : (tensor<{shape}x{t}>, tensor<{t}>) -> tensor<{out}x{t}>
  return %r : tensor<{out}x{t}>
}}
"""

_DT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "i32": np.int32}


def _program(shape: tuple[int, ...], win: tuple[int, ...], st: tuple[int, ...],
             wd: tuple[int, ...], pad: tuple[tuple[int, int], ...], t: str, op: str) -> str:
    out = [(n + lo + hi - ((w - 1) * d + 1)) // s + 1
           for n, w, s, d, (lo, hi) in zip(shape, win, st, wd, pad)]
    j = ", ".join
    return RW.format(shape="x".join(map(str, shape)), out="x".join(map(str, out)), t=t, op=op,
                     win=j(map(str, win)), st=j(map(str, st)), wd=j(map(str, wd)),
                     pad="[" + j(f"[{lo}, {hi}]" for lo, hi in pad) + "]", r=len(shape))


def _data(shape: tuple[int, ...], t: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if t == "i32":
        return rng.integers(-1000, 1000, shape).astype(np.int32), np.array(-5, np.int32)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 1, 1, 0] = np.nan
    x[1, 2:4, 2:4, 1] = -0.0
    x[1, 3, 3, 1] = 0.0
    return x.astype(_DT[t]), np.array(-np.inf if t == "f32" else 0.5, _DT[t])


CASES = [  # (window, strides, window dilations, padding)
    ((1, 2, 2, 1), (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0),) * 4),
    ((1, 3, 3, 1), (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (0, 1), (1, 1), (0, 0))),
    ((1, 2, 2, 1), (1, 1, 1, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (0, 2), (0, 0))),
    ((2, 1, 3, 1), (1, 3, 1, 1), (1, 1, 1, 1), ((0, 0),) * 4),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("t", "op"), [("f32", "maximum"), ("f32", "add"), ("bf16", "add"),
                                       ("i32", "minimum")])
def test_narrow_channel_windows_fold_as_slices(case: tuple, t: str, op: str) -> None:
    shape = (3, 17, 20, 3)
    text = _program(shape, *case, t, op)
    prog = xlapy.compile(text, backend="cpu")
    assert not any(i.opcode == "reduce_window" for i in prog._exe.comp.instructions)
    x, init = _data(shape, t, len(case[0]))
    got = np.asarray(prog(x, init))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize(("shape", "win"), [((2, 8, 8, 16), (1, 2, 2, 1)),
                                            ((2, 4, 16, 16), (1, 1, 2, 2)),
                                            ((2, 8, 8, 3), (1, 4, 4, 1))])
def test_wide_channels_and_long_windows_keep_the_native_kernel(
        shape: tuple[int, ...], win: tuple[int, ...]) -> None:
    """16 f32 channels are a vector (the native kernel's channel loop vectorizes); a window
    along the last dimension folds its columns as vectors there; 16 positions are past
    MAX_POSITIONS."""
    text = _program(shape, win, win, (1,) * 4, ((0, 0),) * 4, "f32", "maximum")
    prog = xlapy.compile(text, backend="cpu")
    assert any(i.opcode == "reduce_window" for i in prog._exe.comp.instructions)
    x, init = _data(shape, "f32", 1)
    np.testing.assert_array_equal(np.asarray(prog(x, init)),
                                  xlapy.compile(text, backend="interpreter")(x, init))
