"""Products with one term per element run as one native pass (outer_product.py): numpy's
`x * y + 0` bit for bit (IEEE denormals, -0 to +0, NaN and inf), for any row length (vector
tails), batch and thread count; a program's batched outer product takes this path."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import outer_product


def _operands(nb: int, m: int, n: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(nb * 31 + m + n)
    x = rng.standard_normal((nb, m, 1)).astype(dtype)
    y = rng.standard_normal((nb, 1, n)).astype(dtype)
    tiny = 1e-39 if dtype == np.float32 else 1e-310
    x.flat[:6] = [-0.0, 0.0, np.nan, np.inf, tiny, -2.0]
    y.flat[:4] = [-0.0, 1e-30 if dtype == np.float32 else 1e-300, 3.0, tiny]
    return x, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("nb", "m", "n"), [(1, 7, 5), (3, 16, 37), (256, 128, 64), (5, 1, 33)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_one_pass_is_numpys_multiply_plus_zero(dtype: type, nb: int, m: int, n: int,
                                              threads: int) -> None:
    x, y = _operands(nb, m, n, dtype)
    want = x * y
    np.add(want, 0, out=want)
    got = np.full((nb, m, n), 7, dtype)
    assert outer_product.outer(x, y, got, threads)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_other_types_are_left_to_the_caller() -> None:
    x, y = np.ones((2, 3, 1), np.int32), np.ones((2, 1, 4), np.int32)
    out = np.zeros((2, 3, 4), np.int32)
    assert not outer_product.outer(x, y, out, 2)
    assert not out.any()


def test_per_example_outer_products_take_the_native_pass(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A product over a contracting dimension of extent 1 stays a dot (a library thunk): the
    native pass, IEEE like BLAS."""
    calls = []
    real = outer_product.outer
    monkeypatch.setattr(outer_product, "outer",
                        lambda *a: calls.append(a[2].shape) or real(*a))
    text = """
func.func @main(%g: tensor<256x128x1xf32>, %x: tensor<256x1x64xf32>) -> tensor<256x128x64xf32> {
  %d = stablehlo.dot_general %g, %x, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<256x128x1xf32>, tensor<256x1x64xf32>) -> tensor<256x128x64xf32>
  return %d : tensor<256x128x64xf32>
}
"""
    g, x = _operands(256, 128, 64, np.float32)
    got = np.asarray(xlapy.compile(text, "cpu")(g, x))
    assert calls == [(256, 128, 64)]
    want = np.asarray(xlapy.compile(text, "interpreter")(g, x))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


_MOE = """
func.func @main(%x: tensor<64x40xf32>, %g: tensor<64x8xf32>) -> tensor<8x64x40xf32> {
  %d = stablehlo.dot_general %x, %g, batching_dims = [0] x [0], contracting_dims = [] x []
      : (tensor<64x40xf32>, tensor<64x8xf32>) -> tensor<64x40x8xf32>
  %t = stablehlo.transpose %d, dims = [2, 0, 1] : (tensor<64x40x8xf32>) -> tensor<8x64x40xf32>
  return %t : tensor<8x64x40xf32>
}
"""


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_a_product_with_no_contraction_is_one_kernel_with_its_transpose(mode: str) -> None:
    """jnp.einsum("te,td->etd") (a mixture-of-experts dispatch): the dot and the transpose
    after it are one element-wise kernel (algebraic_rules.dot_outer; as a library dot and
    a transpose kernel, 1.4x XLA's time), the interpreter's bits in either denormal mode."""
    x, g = _operands(64, 40, 8, np.float32)
    x, g = x.reshape(64, 40), g.reshape(64, 8)
    exe = xlapy.compile(_MOE, "cpu", options={"denormal": mode})
    report = exe._exe.report
    assert [r[1] for r in report] == ["add"] and report[0][2].startswith("kernel"), report
    got = np.asarray(exe(x, g))
    want = np.asarray(xlapy.compile(_MOE, "interpreter", options={"denormal": mode})(x, g))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    tiny = (got != 0) & (np.abs(got) < np.finfo(np.float32).tiny)
    assert tiny.any() == (mode == "ieee")  # 1e-39 * 3.0 is a denormal product
