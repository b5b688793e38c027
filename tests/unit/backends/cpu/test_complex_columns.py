"""Complex sums down columns (complex_reduce_emit._complex_columns): one accumulator per
output element in registers, rows added in blocks. Added into the output per element, each
row loaded, added and stored its outputs (c64[65536, 8].sum(0) 1.7x XLA's time -> 0.6x,
jnp.mean(c64[262144, 2], 0) 1.8x -> 0.7x, a sum over the middle of [64, 4096, 2] 1.6x ->
0.4x), and every element's rounding fed the next row's."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

RED = """
func.func @main(%x: tensor<{shape}x{t}>) -> tensor<{out}x{t}> {{
  %z = stablehlo.constant dense<(0.0, 0.0)> : tensor<{t}>
  %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [{dims}]
    : (tensor<{shape}x{t}>, tensor<{t}>) -> tensor<{out}x{t}>
  return %r : tensor<{out}x{t}>
}}
"""
_DT = {"complex<f32>": np.complex64, "complex<f64>": np.complex128}


def _compile(shape: tuple[int, ...], dims: tuple[int, ...], t: str,
             backend: str = "cpu") -> xlapy.CompiledProgram:
    out = [n for d, n in enumerate(shape) if d not in dims]
    return xlapy.compile(RED.format(shape="x".join(map(str, shape)), t=t,
                                    out="x".join(map(str, out)),
                                    dims=", ".join(map(str, dims))), backend=backend)


@pytest.mark.parametrize(("shape", "dims"), [((65536, 8), (0,)), ((4099, 16), (0,)),
                                             ((3, 5), (0,)), ((64, 515, 2), (1,)),
                                             ((33, 17, 4), (0, 1)), ((2, 9, 7, 3), (1, 2))])
@pytest.mark.parametrize("t", ["complex<f32>", "complex<f64>"])
def test_complex_column_sums(shape: tuple[int, ...], dims: tuple[int, ...], t: str) -> None:
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(_DT[t])
    got = np.asarray(_compile(shape, dims, t)(x))
    want = np.asarray(_compile(shape, dims, t, "interpreter")(x))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if t == "complex<f32>" else 1e-13)


def test_a_long_complex_column_sum_rounds_in_blocks() -> None:
    """262144 rows of 0.1 + 0.3j: in order each output's running sum rounded 262144 times in
    a row (5e-4 off); in blocks of rows, ~1e-6."""
    x = np.full((262144, 4), 0.1 + 0.3j, np.complex64)
    got = np.asarray(_compile(x.shape, (0,), "complex<f32>")(x))
    want = x.astype(np.complex128).sum(0)
    assert np.max(np.abs(got - want) / np.abs(want)) < 1e-5
