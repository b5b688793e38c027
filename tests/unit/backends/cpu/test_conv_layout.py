"""conv_layout.py: the general loop nest's channels-first convolutions run channels-last
between transpose kernels (a stride-2 NCW convolution 14.7 -> 8.4 ms, 2x XLA's time ->
1.1x): the same bits as before, the interpreter's values; what it must leave alone stays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import conv_layout
from xlapy.backends.cpu.conv_layout import ChannelsLastConvolutions
from xlapy.backends.cpu.pipeline import cpu_pipeline
from xlapy.stablehlo import parse_module

jax = pytest.importorskip("jax")
lax = jax.lax
jnp = jax.numpy


def _convs(text: str) -> list[Any]:
    mod = parse_module(text)
    cpu_pipeline().run(mod)
    return [i for c in mod.computations for i in c.instructions if i.opcode == "convolution"]


def _canonical(i: Any) -> bool:
    dn = i.attrs.dimension_numbers
    s = len(dn.input_spatial_dimensions)
    order = list(range(s + 2))
    return [dn.input_batch_dimension, *dn.input_spatial_dimensions,
            dn.input_feature_dimension] == order and \
        [dn.output_batch_dimension, *dn.output_spatial_dimensions,
         dn.output_feature_dimension] == order


def _same_bits_as_before(text: str, args: list[np.ndarray],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewritten program's bits are the unrewritten one's and near the interpreter's."""
    got = np.asarray(xlapy.compile(text, backend="cpu")(*args))
    with monkeypatch.context() as m:
        m.setattr(conv_layout, "eligible", lambda i: False)
        before = np.asarray(xlapy.compile(text, backend="cpu")(*args))
    np.testing.assert_array_equal(got, before)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


CASES = {
    "ncw_stride2": (lambda x, w: lax.conv_general_dilated(x, w, (2,), "SAME"),
                    [(4, 16, 64), (8, 16, 5)]),
    "nchw_stride2": (lambda x, w: lax.conv_general_dilated(x, w, (2, 2), "SAME"),
                     [(2, 8, 17, 15), (16, 8, 3, 3)]),
    "nchw_depthwise": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                             feature_group_count=8),
                       [(2, 8, 12, 12), (8, 1, 3, 3)]),
    "nchw_dilated": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                           rhs_dilation=(2, 2)),
                     [(2, 4, 16, 16), (8, 4, 3, 3)]),
    "nhwc_in_nchw_out": (lambda x, w: lax.conv_general_dilated(
        x, w, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NCHW")),
        [(2, 12, 12, 4), (3, 3, 4, 8)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_channels_first_convolutions_run_channels_last(case: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fn, shapes = CASES[case]
    rng = np.random.default_rng(len(case))
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    text = jax.jit(fn).lower(*args).as_text()
    _same_bits_as_before(text, args, monkeypatch)
    convs = _convs(text)
    assert convs and all(_canonical(c) for c in convs)


COMPLEX = """
func.func @main(%x: tensor<2x4x16xcomplex<f32>>, %w: tensor<6x4x3xcomplex<f32>>)
    -> tensor<2x6x8xcomplex<f32>> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0],
    window = {stride = [2], pad = [[1, 1]]} {batch_group_count = 1 : i64,
    feature_group_count = 1 : i64} : (tensor<2x4x16xcomplex<f32>>,
    tensor<6x4x3xcomplex<f32>>) -> tensor<2x6x8xcomplex<f32>>
  return %0 : tensor<2x6x8xcomplex<f32>>
}"""


def test_a_complex_convolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """(JAX splits complex convolutions into real ones; StableHLO from elsewhere may not.)"""
    rng = np.random.default_rng(5)
    args = [(rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(np.complex64)
            for s in [(2, 4, 16), (6, 4, 3)]]
    _same_bits_as_before(COMPLEX, args, monkeypatch)
    assert all(_canonical(c) for c in _convs(COMPLEX))


def test_a_shared_input_is_transposed_once() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 8, 32)).astype(np.float32)
    w1, w2 = (rng.standard_normal((8, 8, 3)).astype(np.float32) for _ in range(2))
    def fn(x: Any, a: Any, b: Any) -> Any:
        return (lax.conv_general_dilated(x, a, (2,), "SAME") +
                lax.conv_general_dilated(x, b, (2,), "SAME"))
    mod = parse_module(jax.jit(fn).lower(x, w1, w2).as_text())
    assert ChannelsLastConvolutions().run(mod)
    ins = mod.entry.instructions
    assert [i.opcode for i in ins].count("transpose") == 3  # (x once, each result once)
    convs = [i for i in ins if i.opcode == "convolution"]
    assert convs[0].operands[0] is convs[1].operands[0]


@pytest.mark.parametrize("case", ["nchw_unit_stride", "nhwc", "ncw_filter"])
def test_what_it_leaves(case: str) -> None:
    """The channels-first direct kernel's convolutions (conv.py, conv_1d.py), channels-last
    ones."""
    rng = np.random.default_rng(4)
    if case == "nchw_unit_stride":
        fn, shapes = (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME"),
                      [(2, 8, 16, 16), (8, 8, 3, 3)])
    elif case == "nhwc":
        fn, shapes = (lambda x, w: lax.conv_general_dilated(
            x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
            [(2, 16, 16, 8), (3, 3, 8, 8)])
    else:
        fn, shapes = (lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME"),
                      [(2, 1, 64), (1, 1, 9)])
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    mod = parse_module(jax.jit(fn).lower(*args).as_text())
    assert not ChannelsLastConvolutions().run(mod)
