"""Row kernels prefetch the next rows of their inputs (row_prefetch.py): in the first later
pass over a row that reads an input again (softmax's exp and sum, layernorm's variance),
never for rows longer than MAX_ROW_BYTES nor for inputs that are not row-major rows (a
broadcast scale), and the bits are those of the kernel without prefetches, on any number
of threads, up to the last row (whose prefetches lie past the buffer)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache
from xlapy.backends.cpu import row_prefetch as rp


def _t(dims: tuple[int, ...]) -> str:
    return f"tensor<{'x'.join(map(str, dims))}xf32>"


def softmax_text(dims: tuple[int, ...]) -> str:
    """exp(x - max) / sum over the last dimension (JAX's lowering)."""
    lead = dims[:-1]
    keep = ", ".join(map(str, range(len(lead))))
    x, r = _t(dims), _t(lead)
    return f"""
func.func public @main(%x: {x}) -> {x} {{
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [{len(lead)}]
    : ({x}, tensor<f32>) -> {r}
  %mb = stablehlo.broadcast_in_dim %m, dims = [{keep}] : ({r}) -> {x}
  %d = stablehlo.subtract %x, %mb : {x}
  %e = stablehlo.exponential %d : {x}
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [{len(lead)}]
    : ({x}, tensor<f32>) -> {r}
  %sb = stablehlo.broadcast_in_dim %s, dims = [{keep}] : ({r}) -> {x}
  %y = stablehlo.divide %e, %sb : {x}
  return %y : {x}
}}
"""


def norm_text(rows: int, cols: int) -> str:
    """(x - mean) * rsqrt(var) * s: three passes over x, s broadcast along the rows."""
    x, r, c = _t((rows, cols)), _t((rows,)), _t((cols,))
    return f"""
func.func public @main(%x: {x}, %sc: {c}) -> {x} {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<{cols}.0> : {x}
  %s1 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1]
    : ({x}, tensor<f32>) -> {r}
  %b1 = stablehlo.broadcast_in_dim %s1, dims = [0] : ({r}) -> {x}
  %mean = stablehlo.divide %b1, %n : {x}
  %xc = stablehlo.subtract %x, %mean : {x}
  %sq = stablehlo.multiply %xc, %xc : {x}
  %s2 = stablehlo.reduce(%sq init: %z) applies stablehlo.add across dimensions = [1]
    : ({x}, tensor<f32>) -> {r}
  %b2 = stablehlo.broadcast_in_dim %s2, dims = [0] : ({r}) -> {x}
  %var = stablehlo.divide %b2, %n : {x}
  %rs = stablehlo.rsqrt %var : {x}
  %y = stablehlo.multiply %xc, %rs : {x}
  %sb = stablehlo.broadcast_in_dim %sc, dims = [1] : ({c}) -> {x}
  %out = stablehlo.multiply %y, %sb : {x}
  return %out : {x}
}}
"""


def _run(text: str, threads: int, *args: np.ndarray) -> np.ndarray:
    cache.clear_memory()
    return np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": threads})(
        *args))


def _passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(pass, slot) of every prefetch emitted from here on."""
    seen: list[tuple[int, int]] = []
    real = rp.RowPrefetchEmitter._prefetch_ahead

    def spy(self, slot, p, idx, dims, nbytes):  # type: ignore[no-untyped-def]
        before = len(self.b.block.instructions)
        real(self, slot, p, idx, dims, nbytes)
        if len(self.b.block.instructions) > before:
            seen.append((self.row_pass, slot))

    monkeypatch.setattr(rp.RowPrefetchEmitter, "_prefetch_ahead", spy)
    return seen


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dims", [(67, 1024), (3, 5, 256), (9, 2000), (3, 9000)])
def test_softmax_prefetches_in_its_second_pass_same_bits(
        dims: tuple[int, ...], threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    seen = _passes(monkeypatch)
    text = softmax_text(dims)
    x = (np.random.default_rng(1).standard_normal(dims) * 4).astype(np.float32)
    x.reshape(-1, dims[-1])[-1, :7] = [np.nan, 0, -0.0, 1e-40, np.inf, -np.inf, 88]
    got = _run(text, threads, x)
    assert seen and {pass_ for pass_, _ in seen} == {1}
    monkeypatch.setattr(rp, "MAX_ROW_BYTES", 0)
    seen.clear()
    plain = _run(text, threads, x)
    assert not seen
    np.testing.assert_array_equal(got, plain)
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    # (the row sum's rounding grows with the row: SSE sums 9000 values in 4 lanes)
    np.testing.assert_allclose(got, ref, rtol=2e-6 * max(1.0, dims[-1] / 1000), atol=1e-30)


def test_layernorm_prefetches_x_once_not_the_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    seen = _passes(monkeypatch)
    rows, cols = 40, 512
    rng = np.random.default_rng(2)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    s = rng.standard_normal(cols).astype(np.float32)
    text = norm_text(rows, cols)
    got = _run(text, 2, x, s)
    assert seen and {pass_ for pass_, _ in seen} == {1}  # the variance pass only
    assert len({slot for _, slot in seen}) == 1  # x, not s
    monkeypatch.setattr(rp, "MAX_ROW_BYTES", 0)
    np.testing.assert_array_equal(got, _run(text, 2, x, s))
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(x, s))
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6)


def test_long_rows_are_not_prefetched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    seen = _passes(monkeypatch)
    _run(softmax_text((2, rp.MAX_ROW_BYTES // 4 + 16)), 1,
         np.ones((2, rp.MAX_ROW_BYTES // 4 + 16), np.float32))
    assert not seen
