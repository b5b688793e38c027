"""product_sums.py: sums of broadcast products (pairwise scores spelled with broadcasting)
become dots: `(a[:, None, :] * b[None, :, :]).sum(-1)` over 1024 x 1024 x 64 took 3.0 ms
as a fused reduce, 0.57 as a GEMM (XLA 0.60-0.83); the patterns it must leave alone stay
reduces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy

jax = pytest.importorskip("jax")


def _compile(fn: Callable[..., Any], *args: np.ndarray) -> tuple[Any, str]:
    text = jax.jit(fn).lower(*args).as_text()
    return xlapy.compile(text, backend="cpu"), text


def _how(prog: Any) -> list[str]:
    return [how for _, _, how in prog._exe.report]


def _rows(*shape: int, seed: int = 0, dt: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dt)


CASES = {
    "pairs": (lambda a, b: (a[:, None, :] * b[None, :, :]).sum(-1),
              [(96, 32), (80, 32)], lambda a, b: a @ b.T),
    "batched": (lambda q, k: (q[:, :, None, :] * k[:, None, :, :]).sum(-1),
                [(3, 40, 16), (3, 48, 16)], lambda q, k: q @ k.transpose(0, 2, 1)),
    "sum_first": (lambda a, b: (a[:, :, None] * b[:, None, :]).sum(0),
                  [(64, 48), (64, 40)], lambda a, b: a.T @ b),
    "rhs_first": (lambda a, b: (a[None, :, :] * b[:, None, :]).sum(-1),
                  [(70, 16), (90, 16)], lambda a, b: b @ a.T),
    "held_ones": (lambda a, b: (a * b).sum(-1), [(60, 1, 24), (1, 70, 24)],
                  lambda a, b: a[:, 0] @ b[0].T),
    # a short sum over a dimension other than the last (no fold takes it): from 2 long
    "short_middle": (lambda a, b: (a[:, :, None] * b[None, :, :]).sum(1),
                     [(300, 4), (4, 200)], lambda a, b: a @ b),
    "keepdims": (lambda a, b: (a[:, None, :] * b[None, :, :]).sum(-1, keepdims=True),
                 [(64, 16), (80, 16)], lambda a, b: (a @ b.T)[..., None]),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_sums_of_broadcast_products_run_as_dots(name: str, dt: type) -> None:
    fn, shapes, want_fn = CASES[name]
    args = [_rows(*s, seed=k, dt=dt) for k, s in enumerate(shapes)]
    with jax.enable_x64(dt == np.float64):
        prog, _ = _compile(fn, *args)
    how = _how(prog)
    assert any("blas" in h or "gemm" in h for h in how), how
    assert not any(i.opcode == "reduce" for i in prog._exe.comp.instructions)
    got = np.asarray(prog(*args))
    want = want_fn(*(a.astype(np.float64) for a in args))
    assert got.dtype == dt and got.shape == want.shape
    eps = np.finfo(dt).eps
    np.testing.assert_allclose(got, want, rtol=0, atol=64 * eps * np.abs(want).max())


STAY = {
    # a short sum: the element-wise fold (short_reduce.py) is faster than a GEMM
    "short": (lambda a, b: (a[:, None, :] * b[None, :, :]).sum(-1), [(300, 4), (200, 4)]),
    # summed over a dimension only one side carries: that side would be summed first
    "one_side": (lambda a, b: (a[:, None, :] * b[None, :, :]).sum(0), [(100, 64), (90, 64)]),
    # no free dimension on one side: a dot of vectors (small_dots.py makes it a reduce)
    "vectors": (lambda a, b: (a * b[None, :]).sum(-1), [(300, 64), (64,)]),
}


@pytest.mark.parametrize("name", list(STAY))
def test_other_sums_stay_reduces(name: str) -> None:
    fn, shapes = STAY[name]
    args = [_rows(*s, seed=k) for k, s in enumerate(shapes)]
    prog, text = _compile(fn, *args)
    assert not any("blas" in h or "gemm" in h for h in _how(prog)), _how(prog)
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(np.asarray(prog(*args)), np.asarray(want), rtol=1e-5,
                               atol=1e-5)


def test_narrow_products_and_an_init_stay_reduces() -> None:
    """bf16 products round in bf16 (a dot would not); an init other than 0 is added once."""
    a = _rows(64, 32).astype(ml_dtypes.bfloat16)
    prog, text = _compile(lambda a, b: (a[:, None, :] * b[None, :, :]).sum(-1), a, a)
    assert not any("blas" in h or "gemm" in h for h in _how(prog))
    t = "tensor<64x64x32xf32>"
    text = f"""
func.func @main(%a: tensor<64x32xf32>, %b: tensor<64x32xf32>) -> tensor<64x64xf32> {{
  %x = stablehlo.broadcast_in_dim %a, dims = [0, 2] : (tensor<64x32xf32>) -> {t}
  %y = stablehlo.broadcast_in_dim %b, dims = [1, 2] : (tensor<64x32xf32>) -> {t}
  %p = stablehlo.multiply %x, %y : {t}
  %i = stablehlo.constant dense<1.5> : tensor<f32>
  %r = stablehlo.reduce(%p init: %i) applies stablehlo.add across dimensions = [2]
    : ({t}, tensor<f32>) -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}}
"""
    prog = xlapy.compile(text, backend="cpu")
    assert not any("blas" in h or "gemm" in h for h in _how(prog))
    x = _rows(64, 32)
    np.testing.assert_allclose(np.asarray(prog(x, x)), x @ x.T + 1.5, rtol=1e-5, atol=1e-4)
