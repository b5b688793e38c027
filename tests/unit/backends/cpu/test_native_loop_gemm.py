"""Native while loops with small 2-D dot_generals in the body (native_loop.py: GEMM steps
through regions.gemm_rows): an RNN cell runs natively, in thunk order, with the bits of the
Python loop (batch 1 too: its [1, d] @ [d, d] is a "jit gemv", which once kept the loop in
Python, and runs on gemv's loops, loop_gemv.py); BLAS runs with MXCSR FTZ/DAZ clear as on
the Python path (a denormal product survives to a bitcast); big BLAS dots are callbacks
(test_loop_callback.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import native_loop, regions, target
from xlapy.backends.cpu.loop_steps import steps


def _rnn_text(steps: int, b: int, d: int) -> str:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(h: jax.Array, w: jax.Array, xs: jax.Array) -> jax.Array:
        def cell(h: jax.Array, x: jax.Array) -> tuple[jax.Array, None]:
            return jnp.tanh(h @ w + x), None

        return lax.scan(cell, h, xs)[0]

    z = np.zeros
    return jax.jit(f).lower(z((b, d), np.float32), z((d, d), np.float32),
                            z((steps, b, d), np.float32)).as_text()


def _while_line(prog: object) -> str:
    return next(ln for ln in prog._exe.explain().splitlines()  # type: ignore[attr-defined]
                if " while " in ln)


@pytest.mark.parametrize(("b", "d"), [(2, 8), (3, 33), (5, 64), (1, 64), (1, 512)])
def test_rnn_with_a_dot_runs_natively_with_the_python_loops_bits(
        b: int, d: int, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = 17
    rng = np.random.default_rng(d)
    args = (rng.standard_normal((b, d)).astype(np.float32),
            (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32),
            rng.standard_normal((steps, b, d)).astype(np.float32))
    text = _rnn_text(steps, b, d)
    native = xlapy.compile(text, backend="cpu")
    assert "native while loop" in _while_line(native)
    got = native(*args)
    monkeypatch.setattr(native_loop, "plan_native_while", lambda *a: None)
    python = xlapy.compile(text, backend="cpu")
    assert "native while loop" not in _while_line(python)
    np.testing.assert_array_equal(got.view(np.uint32), python(*args).view(np.uint32))
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


_DENORMAL = """func.func @main(%h: tensor<2x2xf32>, %w: tensor<2x2xf32>, %one: tensor<2x2xf32>)
    -> tensor<2x2xi32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %z = stablehlo.constant dense<0> : tensor<2x2xi32>
  %r:3 = stablehlo.while(%i = %c0, %a = %h, %o = %z) : tensor<i32>, tensor<2x2xf32>,
      tensor<2x2xi32>
    cond {
      %lt = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %d = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0]
          : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %bits = stablehlo.bitcast_convert %d : (tensor<2x2xf32>) -> tensor<2x2xi32>
      %a1 = stablehlo.multiply %a, %one : tensor<2x2xf32>
      %i1 = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %i1, %a1, %bits : tensor<i32>, tensor<2x2xf32>, tensor<2x2xi32>
    }
  return %r#2 : tensor<2x2xi32>
}
"""


def test_gemm_step_keeps_denormal_products_as_the_python_path_does() -> None:
    h = np.full((2, 2), 2.0 ** -70, np.float32)  # products 2^-140: denormal, exact
    w = np.full((2, 2), 2.0 ** -70, np.float32)
    one = np.ones((2, 2), np.float32)
    prog = xlapy.compile(_DENORMAL, backend="cpu")
    assert "native while loop" in _while_line(prog)
    got = prog(h, w, one)
    want = np.full((2, 2), 2.0 ** -139, np.float32).view(np.int32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(xlapy.compile(_DENORMAL, backend="interpreter")(h, w, one),
                                  want)


def _bodies(prog: Any) -> list[Any]:
    return [s for _, s in prog._exe.subexecs if s.comp.name.startswith("while_body")]


def _power_text(steps: int, d: int, inner: bool) -> str:
    """A power iteration whose body returns a dot's own result (the Rayleigh quotient s): a
    fresh array per call on the Python path; `inner`: s also starts an inner loop (BFGS's
    line search inside its outer loop: two whiles read the product)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(x: jax.Array, w: jax.Array) -> tuple[jax.Array, ...]:
        def body(i: jax.Array, c: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            y = w @ c[0]
            s = jnp.dot(y, c[0])
            t = c[2]
            if inner:
                t = t + lax.fori_loop(0, 3, lambda j, t: t * 0.5, s) + \
                    lax.fori_loop(0, 2, lambda j, t: t * 0.25, s)
            return y / jnp.sqrt(jnp.dot(y, y)), s, t

        return lax.fori_loop(0, steps, body, (x, jnp.float32(0), jnp.float32(0)))

    z = np.zeros
    return jax.jit(f).lower(z(d, np.float32), z((d, d), np.float32)).as_text()


@pytest.mark.parametrize("inner", [False, True])
def test_a_dot_result_leaving_the_body_keeps_the_loop_native(
        inner: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """jax.scipy.optimize.minimize(method="BFGS") ran its outer loops through Python (2.5 ms
    a call, XLA 0.09): their bodies return a product (s = y . x) that the native driver only
    took in an arena temporary; it now gets a buffer of the loop's own."""
    d = 6
    rng = np.random.default_rng(1)
    w = rng.standard_normal((d, d)).astype(np.float32)
    args = (rng.standard_normal(d).astype(np.float32), (w + w.T) / 4)
    text = _power_text(9, d, inner)
    native = xlapy.compile(text, backend="cpu")
    assert "native while loop" in _while_line(native), _while_line(native)
    got = native(*args)
    # Products on BLAS (no gemm_small: x86-64-v2/v3) run as sgemm in the driver, where the
    # Python path sends a row vector to sgemv: the last bits may differ there
    jit = all(g.small is not None for b in _bodies(native) for g in steps(b)
              if isinstance(g, regions.Gemm))
    monkeypatch.setattr(native_loop, "plan_native_while", lambda *a: None)
    python = xlapy.compile(text, backend="cpu")
    for g, p in zip(got, python(*args)):
        if jit:
            np.testing.assert_array_equal(np.asarray(g).view(np.uint32),
                                          np.asarray(p).view(np.uint32))
        else:
            np.testing.assert_allclose(g, p, rtol=1e-6, atol=1e-7)
    for g, want in zip(got, xlapy.compile(text, backend="interpreter")(*args)):
        np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-6)


#: A weight gradient accumulated in a loop (an RNN's backward pass: dW += x_t^T dz_t): the
#: dot contracts its lhs' first dimension (lhs stored [k, m]).
_WGRAD = """func.func @main(%xs: tensor<6x{b}x{m}xf32>, %dz: tensor<{b}x{n}xf32>)
    -> tensor<{m}x{n}xf32> {{
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %z = stablehlo.constant dense<0.0> : tensor<{m}x{n}xf32>
  %r:2 = stablehlo.while(%i = %i0, %acc = %z) : tensor<i32>, tensor<{m}x{n}xf32>
    cond {{
      %six = stablehlo.constant dense<6> : tensor<i32>
      %p = stablehlo.compare LT, %i, %six, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %c0 = stablehlo.constant dense<0> : tensor<i32>
      %s = stablehlo.dynamic_slice %xs, %i, %c0, %c0, sizes = [1, {b}, {m}]
        : (tensor<6x{b}x{m}xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x{b}x{m}xf32>
      %x = stablehlo.reshape %s : (tensor<1x{b}x{m}xf32>) -> tensor<{b}x{m}xf32>
      %g = stablehlo.dot_general %x, %dz, contracting_dims = [0] x [0]
        : (tensor<{b}x{m}xf32>, tensor<{b}x{n}xf32>) -> tensor<{m}x{n}xf32>
      %a = stablehlo.add %acc, %g : tensor<{m}x{n}xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %j, %a : tensor<i32>, tensor<{m}x{n}xf32>
    }}
  return %r#1 : tensor<{m}x{n}xf32>
}}"""


@pytest.mark.parametrize(("b", "m", "n"), [(8, 64, 256), (3, 5, 7)])
def test_weight_gradient_dot_keeps_the_loop_native(b: int, m: int, n: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """x^T dz (lhs [k, m]) is a BLAS step with the lhs transposed: the loop stays native
    (it ran through Python per iteration: an LSTM's backward scan 7.1 -> 3.4 ms), with the
    Python loop's values (on x86-64-v2 they differ in the last bits: there the native step
    equals numpy's x.T @ dz then the add, and the Python loop's route does not)."""
    rng = np.random.default_rng(b)
    args = (rng.standard_normal((6, b, m)).astype(np.float32),
            rng.standard_normal((b, n)).astype(np.float32))
    text = _WGRAD.format(b=b, m=m, n=n)
    native = xlapy.compile(text, backend="cpu")
    assert "native while loop" in _while_line(native)
    got = native(*args)
    monkeypatch.setattr(native_loop, "plan_native_while", lambda *a: None)
    python = xlapy.compile(text, backend="cpu")
    np.testing.assert_allclose(got, python(*args), rtol=2e-6, atol=2e-6)
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def _bmm_text(shape: tuple[int, ...], m: int, k: int, n: int, dtype: Any) -> str:
    """16 steps of c = tanh(einsum("...ij,...jk->...ik", a + c[..., :1], b) + c)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
        return lax.fori_loop(0, 16, lambda i, s: jnp.tanh(
            jnp.einsum("...ij,...jk->...ik", a + s[..., :1] * 0.1, b) + s), c)

    z, f32 = np.zeros, np.float32
    text = jax.jit(f).lower(z((*shape, m, k), f32), z((*shape, k, n), f32),
                            z((*shape, m, n), f32)).as_text()
    # (f64 without turning on jax's x64 mode for the worker's other tests)
    return text.replace("f32", "f64") if dtype == np.float64 else text


@pytest.mark.parametrize(("batch", "m", "k", "n", "dtype"), [
    ((8,), 16, 16, 16, np.float32), ((2, 3), 8, 12, 16, np.float64),
    ((8,), 32, 32, 32, np.float32), ((128,), 4, 8, 4, np.float32)])
def test_batched_dot_is_a_native_batch_of_products(batch: tuple[int, ...], m: int, k: int,
                                                   n: int, dtype: Any) -> None:
    """A batched dot in a loop body is one step running gemm_small's products one at a time
    (its `batch` entry), split by products over the threads: 16 steps of 8 x [16, 16] x
    [16, 16] 0.44 ms as a reduce (small_dots.py) -> 0.066 (XLA 0.093); 8 x [32, 32] x
    [32, 32], over small_dots.MAX_MACS, ran the Python loop (1.47 ms -> 0.18)."""
    rng = np.random.default_rng(m)
    args = (rng.standard_normal((*batch, m, k)).astype(dtype),
            (rng.standard_normal((*batch, k, n)) * 0.2).astype(dtype),
            rng.standard_normal((*batch, m, n)).astype(dtype))
    text = _bmm_text(batch, m, k, n, dtype)
    got = []
    for threads in (1, 2):
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
        assert "native while loop" in _while_line(prog), _while_line(prog)
        gemms = [(g.batch, g.m, g.n, g.k) for b in _bodies(prog) for g in steps(b)
                 if isinstance(g, regions.Gemm)]
        # (without FMA, x86-64-v2, BLAS's calls as on the Python path: loop_steps.native_gemm)
        fma = target.current().has("fma")
        assert gemms == ([(int(np.prod(batch)), m, n, k)] if fma else [])
        got.append(prog(*args))
    width = np.uint64 if dtype == np.float64 else np.uint32
    np.testing.assert_array_equal(got[0].view(width), got[1].view(width))
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)


def test_tiny_batched_products_stay_a_fused_reduce() -> None:
    """Below small_dots.BATCH_MIN_MACS a call per product costs more than the reduce
    (1024 x [2, 2] x [2, 2]: 0.35 -> 0.43 ms): no GEMM step."""
    prog = xlapy.compile(_bmm_text((1024,), 2, 2, 2, np.float32), backend="cpu")
    assert "native while loop" in _while_line(prog)
    assert not [g for b in _bodies(prog) for g in steps(b) if isinstance(g, regions.Gemm)]


def _complex_loop_text(dt: type, m: int, n: int, rhs_t: bool, vec: bool) -> str:
    """A fori_loop of s <- u @ s (vec: s a vector) or s <- s @ u (u^T when rhs_t) / 4, over
    complex values."""
    import jax
    from jax import lax

    def f(s: jax.Array, u: jax.Array) -> jax.Array:
        def step(i: jax.Array, s: jax.Array) -> jax.Array:
            if vec:
                return u @ s * 0.5
            return (s @ (u.T if rhs_t else u)) * 0.25 + s
        return lax.fori_loop(0, 7, step, s)

    with jax.enable_x64(dt == np.complex128):
        return jax.jit(f).lower(np.zeros(n if vec else (m, n), dt),
                                np.zeros((n, n), dt)).as_text()


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
@pytest.mark.parametrize(("m", "n", "rhs_t", "vec"), [(1, 256, False, True), (3, 17, False, False),
                                                      (8, 64, True, False)])
def test_complex_dot_is_a_native_gemm_step(dt: type, m: int, n: int, rhs_t: bool, vec: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A complex product in a loop body is a cgemm / zgemm step of the driver (it was a
    callback into Python, ~60 us a step), near the interpreter's values."""
    text = _complex_loop_text(dt, m, n, rhs_t, vec)
    rng = np.random.default_rng(n)

    def c(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)

    args = (c(n) if vec else c(m, n), c(n, n) / np.sqrt(n))
    native = xlapy.compile(text, backend="cpu")
    assert "native while loop" in _while_line(native), _while_line(native)
    gemms = [g for b in _bodies(native) for g in steps(b) if isinstance(g, regions.Gemm)]
    assert len(gemms) == 1 and gemms[0].cplx and gemms[0].f64 == (dt == np.complex128)
    got = np.asarray(native(*args))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    tol = 1e-5 if dt == np.complex64 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    monkeypatch.setattr(native_loop, "plan_native_while", lambda *a: None)
    python = np.asarray(xlapy.compile(text, backend="cpu")(*args))
    np.testing.assert_allclose(got, python, rtol=tol, atol=tol * np.abs(want).max())
