# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Sibling kernels in one loop (multi_output.py): an Adam step's three results were three
kernels each reading the gradient and moments again (1M f32: 0.80 ms, one loop 0.71). The
interpreter's bits, results and temporaries, 1 and 2 threads, in a native loop's body and
in xlapy.aot objects; a sibling reading an earlier member at its own index reads the value
just computed; what may not move stays apart."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy

ADAM = """
func.func @main(%p: tensor<512x1024xf32>, %g: tensor<512x1024xf32>, %m: tensor<512x1024xf32>, %v: tensor<512x1024xf32>) -> (tensor<512x1024xf32>, tensor<512x1024xf32>, tensor<512x1024xf32>) {
  %b1 = stablehlo.constant dense<0.9> : tensor<512x1024xf32>
  %c1 = stablehlo.constant dense<0.1> : tensor<512x1024xf32>
  %b2 = stablehlo.constant dense<0.999> : tensor<512x1024xf32>
  %c2 = stablehlo.constant dense<0.001> : tensor<512x1024xf32>
  %lr = stablehlo.constant dense<0.001> : tensor<512x1024xf32>
  %eps = stablehlo.constant dense<1.0e-8> : tensor<512x1024xf32>
  %m1 = stablehlo.multiply %b1, %m : tensor<512x1024xf32>
  %m2 = stablehlo.multiply %c1, %g : tensor<512x1024xf32>
  %mn = stablehlo.add %m1, %m2 : tensor<512x1024xf32>
  %v1 = stablehlo.multiply %b2, %v : tensor<512x1024xf32>
  %gg = stablehlo.multiply %g, %g : tensor<512x1024xf32>
  %v2 = stablehlo.multiply %c2, %gg : tensor<512x1024xf32>
  %vn = stablehlo.add %v1, %v2 : tensor<512x1024xf32>
  %s = stablehlo.sqrt %vn : tensor<512x1024xf32>
  %d = stablehlo.add %s, %eps : tensor<512x1024xf32>
  %u = stablehlo.divide %mn, %d : tensor<512x1024xf32>
  %w = stablehlo.multiply %lr, %u : tensor<512x1024xf32>
  %pn = stablehlo.subtract %p, %w : tensor<512x1024xf32>
  return %pn, %mn, %vn : tensor<512x1024xf32>, tensor<512x1024xf32>, tensor<512x1024xf32>
}
"""

#: Two siblings that are temporaries (read by a dot and a reduce), a bf16 one and one that
#: reads the other at a transposed index (not a sibling: it would recompute it).
TEMPS = """
func.func @main(%x: tensor<256x256xf32>, %y: tensor<256x256xf32>) -> (tensor<256x256xf32>, tensor<256xf32>, tensor<256x256xbf16>, tensor<256x256xf32>) {
  %two = stablehlo.constant dense<2.0> : tensor<256x256xf32>
  %a = stablehlo.multiply %x, %two : tensor<256x256xf32>
  %b = stablehlo.add %x, %y : tensor<256x256xf32>
  %e = stablehlo.multiply %b, %b : tensor<256x256xf32>
  %h = stablehlo.convert %e : (tensor<256x256xf32>) -> tensor<256x256xbf16>
  %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %q = stablehlo.add %t, %y : tensor<256x256xf32>
  %dot = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%b init: %z) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  %o = stablehlo.add %dot, %q : tensor<256x256xf32>
  return %o, %r, %h, %q : tensor<256x256xf32>, tensor<256xf32>, tensor<256x256xbf16>, tensor<256x256xf32>
}
"""


def _run(text: str, args: list[np.ndarray], threads: int) -> tuple[list[np.ndarray], list[np.ndarray], str]:
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads, "split_cost": 1})
    got, want = cpu(*args), xlapy.compile(text, backend="interpreter")(*args)
    many = isinstance(got, (tuple, list))
    return ([np.asarray(r) for r in (got if many else [got])],
            [np.asarray(r) for r in (want if many else [want])], cpu._exe.explain())


@pytest.mark.parametrize("threads", [1, 2])
def test_adam_step_is_one_loop_with_the_interpreters_bits(threads: int) -> None:
    rng = np.random.default_rng(threads)
    args = [rng.standard_normal((512, 1024)).astype(np.float32) for _ in range(4)]
    args[3] = np.abs(args[3])
    got, want, explain = _run(ADAM, args, threads)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    kernels = [line for line in explain.splitlines() if " kernel k" in line]
    assert len({line.split(" kernel ")[1].split()[0] for line in kernels}) == 1, explain
    assert explain.count("(with %") == 2, explain
    assert len(xlapy.compile(ADAM, backend="cpu")._exe.kernels()) == 1  # (one per kernel)


@pytest.mark.parametrize("threads", [1, 2])
def test_temporaries_and_other_types_join_a_transposed_read_does_not(threads: int) -> None:
    rng = np.random.default_rng(5)
    args = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2)]
    got, want, explain = _run(TEMPS, args, threads)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-3)  # (a BLAS dot)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-4)  # (sums reassociate)
    assert got[2].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got[2].view(np.uint16), want[2].view(np.uint16))
    np.testing.assert_array_equal(got[3], want[3])
    assert "(with %" in explain
    line = next(x for x in explain.splitlines() if x.split()[0] == "q")
    assert "with" not in line, explain  # (q reads a transposed: it stays its own kernel)


def test_siblings_in_a_native_loop_body() -> None:
    """A loop body's siblings (searchsorted's two selects: jnp.histogram 1.6x -> 0.86):
    the sibling is no native step, its result swaps buffers as its first member's."""
    text = """
func.func @main(%x: tensor<128x128xf32>) -> tensor<128x128xf32> {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %i0, %a = %x, %b = %x) : tensor<i32>, tensor<128x128xf32>, tensor<128x128xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.constant dense<0.5> : tensor<128x128xf32>
      %a2 = stablehlo.multiply %a, %h : tensor<128x128xf32>
      %b2 = stablehlo.add %a, %b : tensor<128x128xf32>
      stablehlo.return %j, %a2, %b2 : tensor<i32>, tensor<128x128xf32>, tensor<128x128xf32>
    }
  %o = stablehlo.add %r#1, %r#2 : tensor<128x128xf32>
  return %o : tensor<128x128xf32>
}
"""
    x = np.random.default_rng(2).standard_normal((128, 128)).astype(np.float32)
    for threads in (1, 2):
        got, want, explain = _run(text, [x], threads)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[0].shape == (128, 128) and "in kernel k1 (with %a2)" in explain, explain
        assert "native while loop" in explain, explain


def test_dynamic_update_slices_in_a_loop_stay_apart() -> None:
    """A loop's DUS kernels update their state in place (dus_window.py replaces them by
    window kernels): grouped, a sibling's update was lost (lstm_grad's scan stacking)."""
    text = """
func.func @main(%x: tensor<1024xf32>) -> (tensor<8x1024xf32>, tensor<8x1024xf32>) {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %z = stablehlo.constant dense<0.0> : tensor<8x1024xf32>
  %r:4 = stablehlo.while(%i = %i0, %u = %z, %w = %z, %v = %x) : tensor<i32>, tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024xf32>
    cond {
      %n = stablehlo.constant dense<8> : tensor<i32>
      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.constant dense<2.0> : tensor<1024xf32>
      %v2 = stablehlo.multiply %v, %h : tensor<1024xf32>
      %row = stablehlo.reshape %v2 : (tensor<1024xf32>) -> tensor<1x1024xf32>
      %k = stablehlo.constant dense<0> : tensor<i32>
      %u2 = stablehlo.dynamic_update_slice %u, %row, %i, %k : (tensor<8x1024xf32>, tensor<1x1024xf32>, tensor<i32>, tensor<i32>) -> tensor<8x1024xf32>
      %neg = stablehlo.negate %row : tensor<1x1024xf32>
      %w2 = stablehlo.dynamic_update_slice %w, %neg, %i, %k : (tensor<8x1024xf32>, tensor<1x1024xf32>, tensor<i32>, tensor<i32>) -> tensor<8x1024xf32>
      stablehlo.return %j, %u2, %w2, %v2 : tensor<i32>, tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024xf32>
    }
  return %r#1, %r#2 : tensor<8x1024xf32>, tensor<8x1024xf32>
}
"""
    x = np.random.default_rng(3).standard_normal(1024).astype(np.float32)
    got, want, _ = _run(text, [x], 2)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
