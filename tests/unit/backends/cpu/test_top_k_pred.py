"""chlo.top_k on pred (i1) operands (issue 15: refused as unordered; XLA and jax.lax.top_k
take them, true above false, ties by lower index), on both backends, native on cpu."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

_TEXT = """func.func @main(%x: tensor<3x7xi1>) -> (tensor<3x4xi1>, tensor<3x4xi32>) {
  %v, %i = chlo.top_k(%x, k = 4) : tensor<3x7xi1> -> (tensor<3x4xi1>, tensor<3x4xi32>)
  return %v, %i : tensor<3x4xi1>, tensor<3x4xi32>
}"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_top_k_of_pred(backend: str) -> None:
    x = np.array([[0, 1, 0, 1, 1, 0, 1], [0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 1, 1, 1, 1]], bool)
    exe = xlapy.compile(_TEXT, backend=backend)
    if backend == "cpu":
        assert not exe._exe.fallbacks()
    v, i = exe(x)
    assert np.asarray(i).tolist() == [[1, 3, 4, 6], [5, 0, 1, 2], [0, 1, 2, 3]]
    assert np.asarray(v).tolist() == [[True] * 4, [True, False, False, False], [True] * 4]
