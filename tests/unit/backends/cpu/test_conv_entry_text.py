"""conv_entry_text.py: the nest's entry function written as IR text sets and restores the
flush mode and empties the rings as the llvmlite-built one (conv_kernel._entry) did: same
bits in the `ftz` and `ieee` denormal modes, MXCSR as it was after the call."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_conv_finish import spy_builds
from xlapy.backends.cpu import conv_chain, conv_general, conv_kernel
from xlapy.backends.cpu.conv_entry_text import _i32
from xlapy.backends.cpu.conv_kernel import Split

# Two chained layers (the second's ring is filled by the first's rows: two rings to empty),
# bias + relu between them, a 2x2 average pooling after.
CNN = """
func.func @main(%x: tensor<2x8x8x8xf32>, %w1: tensor<3x3x8x16xf32>, %b1: tensor<16xf32>,
                %w2: tensor<3x3x16x16xf32>) -> tensor<2x4x4x16xf32> {
  %c = stablehlo.convolution(%x, %w1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<2x8x8x8xf32>, tensor<3x3x8x16xf32>) -> tensor<2x8x8x16xf32>
  %bb = stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<16xf32>) -> tensor<2x8x8x16xf32>
  %a = stablehlo.add %c, %bb : tensor<2x8x8x16xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %zb = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<f32>) -> tensor<2x8x8x16xf32>
  %r = stablehlo.maximum %a, %zb : tensor<2x8x8x16xf32>
  %c2 = stablehlo.convolution(%r, %w2) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<2x8x8x16xf32>, tensor<3x3x16x16xf32>) -> tensor<2x8x8x16xf32>
  %p = "stablehlo.reduce_window"(%c2, %z) <{window_dimensions = array<i64: 1, 2, 2, 1>,
      window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%l: tensor<f32>, %m: tensor<f32>):
      %s = stablehlo.add %l, %m : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x8x8x16xf32>, tensor<f32>) -> tensor<2x4x4x16xf32>
  return %p : tensor<2x4x4x16xf32>
}
"""


def _run(monkeypatch: pytest.MonkeyPatch, as_text: bool, mode: str,
         args: list[np.ndarray]) -> tuple[np.ndarray, list[Split]]:
    with monkeypatch.context() as m:
        splits = spy_builds(m, conv_general, conv_chain)
        if not as_text:
            m.setattr(conv_kernel, "entry_text", lambda *a: None)
        prog = xlapy.compile(CNN, backend="cpu", options={"denormal": mode, "entry_trip": False})
        assert not prog._exe.fallbacks()
        return np.asarray(prog(*args)), splits


def _args() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    tiny = np.finfo(np.float32).smallest_subnormal
    x = rng.standard_normal((2, 8, 8, 8)).astype(np.float32)
    x[1, 2:5] = tiny * 5  # denormal inputs and sums
    b = rng.standard_normal(16).astype(np.float32)
    b[:3] = [tiny, -tiny, -0.0]
    return [x, rng.standard_normal((3, 3, 8, 16)).astype(np.float32) * np.float32(0.2), b,
            rng.standard_normal((3, 3, 16, 16)).astype(np.float32) * np.float32(0.2)]


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_text_entry_gives_the_llvmlite_entrys_bits(mode: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    args = _args()
    got, splits = _run(monkeypatch, True, mode, args)
    want, old = _run(monkeypatch, False, mode, args)
    assert len(splits) == 1 and len(old) == 1
    name = splits[0].table.removesuffix(".blocks")
    if xlapy.backends.cpu.target.current().is_x86:
        assert f'define void @"{name}"(' in "".join(splits[0].cold_defs)
        assert not [f for f in splits[0].cold.functions if f.name == name]
    assert [f for f in old[0].cold.functions if f.name == name]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    ref = np.asarray(xlapy.compile(CNN, backend="interpreter",
                                   options={"denormal": mode})(*args))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_the_flush_mode_is_restored_after_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    _run(monkeypatch, True, "ftz", _args())
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    assert np.float32(tiny * np.float32(3.0)) != 0  # FTZ not left on in this thread


def test_i32_constants_are_written_signed() -> None:
    assert _i32(0x8000) == 32768
    assert _i32(~0x8040) == -32833
    assert _i32(0xFFFFFFFF) == -1
