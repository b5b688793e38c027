"""loop_callback.py: an FFT, a convolution or a BLAS dot no step takes in a loop body is a
callback step of the native loop (the whole loop ran through Python: 1.7 ms for 32 steps of
ifft(fft(c) * 0.99) on 1024 points, XLA 0.4), with the Python loop's bits; an error inside
the callback is raised from the call, located."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import fft_lib, native_loop, parallel
from xlapy.errors import XlapyError

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax


def _c2c(x: Any) -> Any:
    return lax.fori_loop(0, 5, lambda i, c: jnp.fft.ifft(jnp.fft.fft(c) * 0.9 + i), x)


def _real(x: Any) -> Any:
    return lax.fori_loop(0, 4, lambda i, c: jnp.fft.irfft(jnp.fft.rfft(c) * 0.8,
                                                           n=c.shape[-1]) + 1.0, x)


def _two_axes(x: Any) -> Any:
    return lax.fori_loop(0, 3, lambda i, c: jnp.real(jnp.fft.ifft2(jnp.fft.fft2(c) * 0.5))
                         .astype(c.dtype), x)


def _train(x: Any) -> Any:
    """A least-squares training loop: its weight gradient x^T g (256 x 64 x 128: over
    loop_steps.MAX_NATIVE_MACS) a BLAS dot the Python path splits over the threads."""
    def step(i: Any, w: Any) -> Any:
        g = jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - 0.5) ** 2))(w)
        return w - 0.1 * g
    return lax.fori_loop(0, 3, step, jnp.full((x.shape[1], 128), 0.01, x.dtype))


def _conv_nhwc(x: Any) -> Any:
    w = jnp.full((3, 3, x.shape[-1], x.shape[-1]), 0.05, x.dtype)
    return lax.fori_loop(0, 4, lambda i, c: jnp.tanh(lax.conv_general_dilated(
        c, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))), x)


def _conv_nchw_strided(x: Any) -> Any:
    w = jnp.full((x.shape[1], x.shape[1], 2, 2), 0.1, x.dtype)
    return lax.fori_loop(0, 3, lambda i, c: jnp.sin(jax.image.resize(lax.conv_general_dilated(
        c, w, (2, 2), "VALID"), c.shape, "nearest")), x)


_RNG = np.random.default_rng(4)
PROGRAMS = {
    "c2c_c64": (_c2c, (_RNG.standard_normal((3, 64)) + 1j).astype(np.complex64)),
    "c2c_c128": (_c2c, (_RNG.standard_normal(48) - 2j).astype(np.complex128)),
    "real_f32": (_real, _RNG.standard_normal((2, 30)).astype(np.float32)),
    "real_f64": (_real, _RNG.standard_normal(17)),
    "two_axes_f32": (_two_axes, _RNG.standard_normal((4, 8, 16)).astype(np.float32)),
    "train_f32": (_train, _RNG.standard_normal((256, 64)).astype(np.float32)),
    "conv_nhwc_f32": (_conv_nhwc, _RNG.standard_normal((2, 9, 7, 8)).astype(np.float32)),
    "conv_nchw_f64": (_conv_nchw_strided, _RNG.standard_normal((1, 4, 8, 8))),
}


def _lower(fn: Any, x: np.ndarray) -> str:
    with jax.enable_x64(x.dtype in (np.float64, np.complex128)):
        return jax.jit(fn).lower(x).as_text()


def _native(prog: Any) -> bool:
    return "native while loop" in prog._exe.explain().split("-- called by")[0]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_loop_with_a_library_call_stays_native_with_the_python_loops_bits(
        name: str, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, x = PROGRAMS[name]
    text = _lower(fn, x)
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    assert _native(cpu)
    got = [np.asarray(cpu(x)) for _ in range(2)]
    monkeypatch.setattr(native_loop, "plan_native_while", lambda *a: None)
    python = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    assert not _native(python)
    want = np.asarray(python(x))
    for g in got:
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_array_equal(g.view(np.uint8), want.view(np.uint8))


def test_an_error_in_the_callback_is_raised_from_the_call(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The driver stops after the failing iteration's body and the error surfaces, located
    at the fft; the next call runs again."""
    real, calls = fft_lib.fft, []

    def failing(instr: Any, threads: int = 1) -> Any:
        run = real(instr, threads)

        def go(x: np.ndarray) -> np.ndarray:
            calls.append(1)
            if len(calls) == 3:
                raise XlapyError("the transform failed")
            return run(x)
        return go

    monkeypatch.setattr(fft_lib, "fft", failing)
    fn, x = PROGRAMS["c2c_c64"]
    cpu = xlapy.compile(_lower(fn, x), backend="cpu")
    assert _native(cpu)
    with pytest.raises(XlapyError, match="the transform failed") as err:
        cpu(x)
    assert "fft" in str(err.value)
    assert len(calls) == 4  # (the body's ifft ran, then the driver stopped: no next step)
    want = xlapy.compile(_lower(fn, x), backend="interpreter")(x)
    np.testing.assert_allclose(np.asarray(cpu(x)), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_an_fft_in_an_inner_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside an inner loop (nested_loop.py) as well: the values of the Python loops; a
    failing transform stops the outer driver and raises from the Python path's rerun."""
    def fn(x: Any) -> Any:
        return lax.fori_loop(0, 3, lambda i, c: lax.fori_loop(
            0, i + 2, lambda j, d: jnp.fft.ifft(jnp.fft.fft(d) * 0.5) + j, c) * 0.5, x)

    x = (_RNG.standard_normal(32) + 1j).astype(np.complex64)
    text = _lower(fn, x)
    cpu = xlapy.compile(text, backend="cpu")
    assert _native(cpu) and "native while loop" in cpu._exe.explain().split(  # type: ignore
        "-- called by")[2]
    got = np.asarray(cpu(x))
    with monkeypatch.context() as m:
        m.setattr(native_loop, "plan_native_while", lambda *a: None)
        want = np.asarray(xlapy.compile(text, backend="cpu")(x))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    real, calls = fft_lib.fft, []

    def failing(instr: Any, threads: int = 1) -> Any:
        run = real(instr, threads)

        def go(v: np.ndarray) -> np.ndarray:
            calls.append(1)
            if len(calls) >= 5:
                raise XlapyError("the transform failed")
            return run(v)
        return go

    monkeypatch.setattr(fft_lib, "fft", failing)
    with pytest.raises(XlapyError, match="the transform failed"):
        xlapy.compile(text, backend="cpu")(x)


_Q, _S = "tensor<2x128x4x64xf32>", "tensor<2x4x128x128xf32>"
#: An attention score product (einsum bqhd,bkhd->bhqk: a callback step, its operands
#: gathered into GEMM order) beside element-wise kernels big enough to be split steps.
_SCORES = f"""
func.func @main(%q: {_Q}, %k: {_Q}, %acc: {_S}) -> {_S} {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:4 = stablehlo.while(%a = %q, %b = %k, %i = %c0, %s = %acc) : {_Q}, {_Q}, tensor<i32>, {_S}
    cond {{
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %d = stablehlo.dot_general %a, %b, batching_dims = [0, 2] x [0, 2],
          contracting_dims = [3] x [3] : ({_Q}, {_Q}) -> {_S}
      %e = stablehlo.add %s, %d : {_S}
      %t = stablehlo.tanh %e : {_S}
      %h = stablehlo.constant dense<0.5> : {_Q}
      %a2 = stablehlo.multiply %a, %h : {_Q}
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %a2, %b, %i1, %t : {_Q}, {_Q}, tensor<i32>, {_S}
    }}
  return %r#3 : {_S}
}}
"""


def test_a_callback_shares_its_work_with_the_loops_reserved_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop reserves its workers for its split steps; a callback step's products and
    operand copies run on them too (NativePool.lending), where they had run on the caller
    alone (an attention gradient's dots: the same time on two threads as on one), with the
    one-thread bits."""
    from xlapy.backends.cpu import threads

    rng = np.random.default_rng(5)
    args = [(rng.standard_normal(s) / 8).astype(np.float32)
            for s in ((2, 128, 4, 64), (2, 128, 4, 64), (2, 4, 128, 128))]
    two = xlapy.compile(_SCORES, backend="cpu", options={"num_threads": 2})
    assert "native while loop" in two._exe.explain()  # type: ignore[attr-defined]
    lent: list[bool] = []
    real = threads.NativePool.submit

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        h = real(self, *a, **k)
        lent.append(h.lent is not None)
        return h

    monkeypatch.setattr(threads.NativePool, "submit", spy)
    pool = parallel.pool(2)  # all workers but the one the loop reserves held here
    hold = pool.reserve(sum(not b for b in pool.busy) - 1)
    try:
        got = np.asarray(two(*args))
    finally:
        pool.release(hold)
    monkeypatch.undo()
    assert lent and all(lent), lent
    one = xlapy.compile(_SCORES, backend="cpu", options={"num_threads": 1})
    np.testing.assert_array_equal(got.view(np.uint32), np.asarray(one(*args)).view(np.uint32))
