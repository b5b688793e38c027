"""Ops the cpu backend runs as aliasing (no copy, no kernel): optimization_barrier is an
identity whose results are its operands (a fallback before)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

BARRIER = """
func.func @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %c = stablehlo.constant dense<2.0> : tensor<8xf32>
  %y = stablehlo.multiply %x, %c : tensor<8xf32>
  %z = stablehlo.add %x, %c : tensor<8xf32>
  %a, %b = stablehlo.optimization_barrier %y, %z : tensor<8xf32>, tensor<8xf32>
  %m = stablehlo.multiply %a, %b : tensor<8xf32>
  return %m, %a : tensor<8xf32>, tensor<8xf32>
}
"""


@pytest.mark.parametrize("expanded", [True, False])
def test_optimization_barrier_is_native_aliasing(expanded: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend pipeline removes barriers (OptimizationBarrierExpander, as XLA:CPU); one
    that reaches the executable (the expander off) is aliasing."""
    from xlapy.backends.cpu import cache
    from xlapy.passes.optimization_barrier_expander import OptimizationBarrierExpander

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")  # (compiled again, not found in a cache)
    cache.clear_memory()
    if not expanded:
        monkeypatch.setattr(OptimizationBarrierExpander, "run", lambda self, m: False)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    exe = xlapy.compile(BARRIER, backend="cpu")
    assert not exe._exe.fallbacks()
    assert ("optimization_barrier     aliasing" in exe._exe.explain()) != expanded
    m, a = exe(x)
    np.testing.assert_array_equal(m, (x * 2) * (x + 2))
    np.testing.assert_array_equal(a, x * 2)
    a[...] = 77  # the caller owns it: the next call is unaffected
    m2, a2 = exe(x)
    np.testing.assert_array_equal(a2, x * 2)
    np.testing.assert_array_equal(m2, m)


AFTER_ALL = """
func.func @main(%x: tensor<4xf32>, %t: !stablehlo.token) -> (tensor<4xf32>, !stablehlo.token) {
  %t1 = stablehlo.after_all %t, %t : !stablehlo.token
  %t2 = stablehlo.after_all : !stablehlo.token
  %t3 = stablehlo.after_all %t1, %t2 : !stablehlo.token
  %y = stablehlo.add %x, %x : tensor<4xf32>
  return %y, %t3 : tensor<4xf32>, !stablehlo.token
}
"""


def test_after_all_is_native() -> None:
    from xlapy.types.literal import TOKEN_VALUE

    exe = xlapy.compile(AFTER_ALL, backend="cpu")
    assert not exe._exe.fallbacks()
    y, tok = exe(np.ones(4, np.float32), TOKEN_VALUE)
    np.testing.assert_array_equal(y, np.full(4, 2.0))
    assert tok is TOKEN_VALUE


def test_token_argument_through_the_top_level_api_on_the_interpreter() -> None:
    """xlapy.compile(...)(x, token) turned the token into an object array (refused)."""
    from xlapy.types.literal import TOKEN_VALUE

    y, tok = xlapy.compile(AFTER_ALL)(np.ones(4, np.float32), TOKEN_VALUE)
    assert tok is TOKEN_VALUE
