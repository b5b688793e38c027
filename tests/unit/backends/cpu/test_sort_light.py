"""sort_emit.py compiles its merge sort through the light pipeline (the comparator inlined by
the always-inliner): jnp.sort's cold compile was O3's ~35 ms against XLA's ~25. The result
stays the interpreter's (jax's comparator: NaN, -0.0 canonicalized) and np.sort's."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import sort_emit
from xlapy.stablehlo import parse_module

#: jnp.sort's comparator (NaN and -0.0 canonicalized, then a FLOAT LT).
JNP_SORT = """
func.func @main(%x: tensor<5000xf32>) -> tensor<5000xf32> {
  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %n = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %1 = stablehlo.compare EQ, %a, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %1, %z, %a : tensor<i1>, tensor<f32>
    %3 = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %4 = stablehlo.select %3, %n, %2 : tensor<i1>, tensor<f32>
    %5 = stablehlo.compare EQ, %b, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %6 = stablehlo.select %5, %z, %b : tensor<i1>, tensor<f32>
    %7 = stablehlo.compare NE, %b, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %8 = stablehlo.select %7, %n, %6 : tensor<i1>, tensor<f32>
    %9 = stablehlo.compare LT, %4, %8, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %9 : tensor<i1>
  }) : (tensor<5000xf32>) -> tensor<5000xf32>
  return %0 : tensor<5000xf32>
}
"""


def test_jit_merge_sort_is_light_and_exact() -> None:
    mod = parse_module(JNP_SORT)
    sort = next(i for i in mod.entry.instructions if i.opcode == "sort")
    run = sort_emit.plan(sort)
    assert run is not None and run.engine.pipeline == "light"  # type: ignore[attr-defined]
    rng = np.random.default_rng(4)
    x = rng.integers(-50, 50, 5000).astype(np.float32)
    x[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 2.5]
    x = rng.permutation(x)
    got = xlapy.compile(JNP_SORT, backend="cpu")(x)
    want = xlapy.compile(JNP_SORT, backend="interpreter")(x)
    assert got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(got, np.sort(x))


@pytest.mark.parametrize("shape,axis", [((16,), 0), ((3, 5, 7), 1), ((4, 6), 0), ((2, 0, 3), 2),
                                        ((1,), 0)])
def test_jit_sort_of_keys_and_values_on_any_axis(shape: tuple[int, ...], axis: int) -> None:
    """The flat take after the permutation (not take_along_axis) and no moveaxis along the
    last axis: values follow their keys on every axis, ties stable."""
    import jax

    rng = np.random.default_rng(5)
    keys = np.round(rng.standard_normal(shape) * 2).astype(np.float32)
    vals = rng.standard_normal(shape).astype(np.float32)
    fn = lambda k, v: jax.lax.sort((k, v), dimension=axis, num_keys=1)  # noqa: E731
    text = jax.jit(fn).lower(keys, vals).as_text()
    got = xlapy.compile(text, backend="cpu")(keys, vals)
    for g, w in zip(got, fn(keys, vals)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
