"""The epilogue functions of a convolution's nest (conv_finish_text.py, else
conv_kernel._finish_fn; generated at -O0): a leaf buffer's pointer is loaded once per
function (in its entry block, not per stored vector), a pooled row's pixels past the last
whole window are not visited (no test per vector), and the pooling's first/last conditions
select through vector masks (a scalar-condition select of vectors is a branch and spills at
-O0): less code to compile, the same bits."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, conv_general, conv_kernel
from xlapy.backends.cpu.conv_kernel import Split

POOLED = """
func.func @main(%x: tensor<1x6xWx8xf32>, %w: tensor<3x3x8x32xf32>,
                %b: tensor<32xf32>) -> tensor<1x3xPWx32xf32> {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x6xWx8xf32>, tensor<3x3x8x32xf32>) -> tensor<1x6xWx32xf32>
  %b1 = stablehlo.broadcast_in_dim %b, dims = [3] : (tensor<32xf32>) -> tensor<1x6xWx32xf32>
  %a = stablehlo.add %c, %b1 : tensor<1x6xWx32xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %p = "stablehlo.reduce_window"(%a, %zero) <{window_dimensions = array<i64: 1, 2, 2, 1>,
      window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<1x6xWx32xf32>, tensor<f32>) -> tensor<1x3xPWx32xf32>
  return %p : tensor<1x3xPWx32xf32>
}
"""


def _text(width: int) -> str:
    return POOLED.replace("xWx", f"x{width}x").replace("PW", str(width // 2))


def spy_builds(monkeypatch: pytest.MonkeyPatch, *modules: Any) -> list[Split]:
    """The Splits the direct convolution (conv_general, or each of `modules`: their `build`)
    builds from now on (the memory cache cleared, so every compile builds)."""
    splits: list[Split] = []

    def spy(real: Any) -> Any:
        def build(name: str, split: Split, threads: int = 1) -> Any:
            splits.append(split)
            return real(name, split, threads)
        return build

    for mod in modules or (conv_general,):
        monkeypatch.setattr(mod, "build", spy(mod.build))
    cache.clear_memory()
    return splits


def _compile(width: int, monkeypatch: pytest.MonkeyPatch, as_text: bool = True
             ) -> tuple[Any, list[Split]]:
    splits = spy_builds(monkeypatch)
    if not as_text:
        monkeypatch.setattr(conv_kernel, "finish_text", lambda *a: None)
    return xlapy.compile(_text(width), backend="cpu"), splits


def _finish_functions(split: Split) -> list[str]:
    """The finish functions of the cold module's text (written as text by
    conv_finish_text.py, or through llvmlite where it declines)."""
    return re.findall(r'^define [^\n]*@"[^"]*\.finish"\(.*?^\}$', split.cold_text(),
                      re.M | re.S)


@pytest.mark.parametrize("as_text", [True, False])
@pytest.mark.parametrize("width", [9, 12])
def test_pooled_epilogue(width: int, as_text: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    prog, splits = _compile(width, monkeypatch, as_text)
    assert len(splits) == 1 and not prog._exe.fallbacks()
    # which path wrote it: conv_finish_text, or llvmlite (conv_kernel._finish_fn)
    assert any(f.name.endswith(".finish") for f in splits[0].cold.functions) != as_text
    (finish,) = _finish_functions(splits[0])
    # the bias pointer: one load from the table, in the entry block
    entry = re.split(r"\neq[0-9]*\.body:", finish)[0]
    table_loads = re.findall(r"load i8\*, i8\*\*", finish)
    assert len(table_loads) == 1 and re.search(r"load i8\*, i8\*\*", entry)
    # branches: the loop's guard and back edge only (the pixel count stops at the last
    # whole window; no test per vector), and one window column per pixel
    assert finish.count("br i1") == 2
    assert finish.count("udiv") == 1
    assert not re.search(r"select\s+i1 [^,]+, <", finish)  # vectors select by masks
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((1, 6, width, 8), (3, 3, 8, 32), (32,))]
    want = np.asarray(xlapy.compile(_text(width), backend="interpreter")(*args))
    np.testing.assert_allclose(np.asarray(prog(*args)), want, rtol=1e-5, atol=1e-5)
