"""Direct convolution (conv.py) against the interpreter: layouts, paddings, row widths that
are not whole vectors, several row chunks, output features not a multiple of the register
block, f64, 1x1 windows, and a size big enough to split over threads."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import conv
from xlapy.stablehlo import parse_module

CONV = """
func.func @main(%x: tensor<{xs}x{t}>, %w: tensor<{ws}x{t}>) -> tensor<{os}x{t}> {{
  %y = stablehlo.convolution(%x, %w) dim_numbers = {dn},
      window = {{stride = {stride}, pad = {pad}, rhs_dilate = [1, 1]}}
      {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
      : (tensor<{xs}x{t}>, tensor<{ws}x{t}>) -> tensor<{os}x{t}>
  return %y : tensor<{os}x{t}>
}}
"""

CASES = [  # n, c, h, w, o, kh, kw, pad, layout, type
    (2, 3, 7, 6, 4, 3, 2, [[1, 1], [1, 1]], "nchw", "f32"),
    (1, 5, 9, 70, 7, 3, 3, [[0, 2], [1, 0]], "nchw", "f32"),   # 2 row chunks, o = 7
    (2, 4, 6, 37, 6, 5, 5, [[2, 2], [2, 2]], "nhwc", "f64"),
    (3, 2, 5, 16, 5, 1, 1, [[0, 0], [0, 0]], "nchw", "f32"),   # 1x1, exact vector rows
    (4, 8, 32, 48, 10, 3, 3, [[1, 1], [1, 1]], "nhwc", "f32"),  # threads split the rows
]


def _text(n: int, c: int, h: int, w: int, o: int, kh: int, kw: int, pad: list[list[int]],
          layout: str, t: str, sh: int = 1) -> tuple[str, list[int], list[int]]:
    oh, ow = (h + sum(pad[0]) - kh) // sh + 1, w + sum(pad[1]) - kw + 1
    s = "x".join
    if layout == "nchw":
        xs, ws, os_ = [n, c, h, w], [o, c, kh, kw], [n, o, oh, ow]
        dn = "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"
    else:
        xs, ws, os_ = [n, h, w, c], [kh, kw, c, o], [n, oh, ow, o]
        dn = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
    text = CONV.format(xs=s(map(str, xs)), ws=s(map(str, ws)), os=s(map(str, os_)), dn=dn,
                       pad=pad, t=t, stride=[sh, 1])
    return text, xs, ws


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])) + c[8])
def test_direct_conv_matches_interpreter(case: tuple) -> None:  # type: ignore[type-arg]
    text, xs, ws = _text(*case)
    instr = parse_module(text).entry_computation().root
    assert conv.direct_plan(instr) is not None
    dtype = np.float64 if case[-1] == "f64" else np.float32
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(dtype)
    k = rng.standard_normal(ws).astype(dtype)
    cpu = xlapy.compile(text, backend="cpu")
    want = xlapy.compile(text, backend="interpreter")(x, k)
    got = cpu(x, k)
    # Each element sums c kh kw products (in whatever order the kernel's registers and the
    # interpreter's GEMM take): bounded relative to their sum of |products|, the same
    # convolution of |x| and |k| in float64.
    c, kh, kw = case[1], case[5], case[6]
    abs_conv = xlapy.compile(text.replace("xf32>", "xf64>"), backend="interpreter")
    assert_dot_close(got, x, k, dtype, ref=want, k=c * kh * kw, product=abs_conv)
    np.testing.assert_array_equal(cpu(x, k), got)  # deterministic across thread splits


def test_direct_conv_declines_strides() -> None:
    text = _text(1, 2, 6, 6, 3, 3, 3, [[1, 1], [1, 1]], "nchw", "f32", sh=2)[0]
    assert conv.direct_plan(parse_module(text).entry_computation().root) is None
