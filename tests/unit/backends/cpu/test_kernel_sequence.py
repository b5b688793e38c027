"""kernel_sequence.py: a native loop's tiny body runs as one function of its kernels (the
driver calls it once an iteration), with the bits of the kernel-by-kernel run."""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import kernel_sequence, llvm_util
from xlapy.backends.cpu.loop_steps import steps

pytestmark = pytest.mark.usefixtures("jax_x32")  # f32 programs from jax

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax


def _rk4(y: object, sine: bool = False) -> object:
    """An RK4 pendulum on 2 floats (sin(x) as x - x^3 / 6, or the sine): six kernels a step."""
    h = 0.01

    def f(y: object) -> object:
        s = jnp.sin(y[0]) if sine else y[0] - y[0] ** 3 / 6
        return jnp.stack([y[1], -s - 0.1 * y[1]])

    def step(i: object, y: object) -> object:
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        k4 = f(y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    return lax.fori_loop(0, 300, step, y)


#: The fused loop (loop_fused.py, which inlines the same kernels) and the generic driver
#: calling the sequence function.
FUSED = [{}, {"fused_loops": False}]


def _body(prog: object) -> object:
    return [s for n, s in prog._exe.subexecs if s.comp.name.startswith("while_body")][0]


@pytest.mark.parametrize("options", FUSED)
def test_a_tiny_body_is_one_step_with_the_same_bits(monkeypatch: pytest.MonkeyPatch,
                                                    options: dict) -> None:
    y = np.array([1.0, 0.0], np.float32)
    text = jax.jit(_rk4).lower(y).as_text()
    prog = xlapy.compile(text, backend="cpu", options=options)
    body = _body(prog)
    assert body.sequence is not None and len(body.sequence.kernels) == len(body.kernel_specs) > 2
    assert steps(body) == [body.sequence]
    got = prog(y)
    np.testing.assert_array_equal(got, xlapy.compile(text, backend="interpreter")(y))
    monkeypatch.setattr(kernel_sequence, "MAX_ELEMENTS", 0)  # kernel by kernel
    again = xlapy.compile(text, backend="cpu", options=options)
    assert _body(again).sequence is None and len(steps(_body(again))) > 2
    np.testing.assert_array_equal(again(y), got)
    np.testing.assert_allclose(got, np.asarray(jax.jit(_rk4)(y)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("options", FUSED)
def test_state_arrays_swapped_every_iteration(options: dict) -> None:
    """Several state arrays whose buffers swap each iteration, odd and even trip counts."""
    for trips in (7, 8):
        def f(a: object, b: object, c: object, trips: int = trips) -> object:
            return lax.fori_loop(0, trips, lambda i, s: (s[1] * 0.5 + 1, s[2] - s[0], s[0]),
                                 (a, b, c))
        args = [np.arange(3, dtype=np.float32) + k for k in range(3)]
        text = jax.jit(f).lower(*args).as_text()
        prog = xlapy.compile(text, backend="cpu", options=options)
        assert _body(prog).sequence is not None
        for g, w in zip(prog(*args), xlapy.compile(text, backend="interpreter")(*args)):
            np.testing.assert_array_equal(g, w)


def test_big_bodies_and_top_level_computations_keep_their_kernels() -> None:
    y = np.array([1.0, 0.0], np.float32)
    text = jax.jit(lambda y: _rk4(y, sine=True)).lower(y).as_text()
    prog = xlapy.compile(text, backend="cpu")  # the sines' kernels are long code
    assert _body(prog).sequence is None
    np.testing.assert_array_equal(prog(y), xlapy.compile(text, backend="interpreter")(y))
    n = kernel_sequence.MAX_ELEMENTS
    x = np.ones(n, np.float32)
    text = jax.jit(lambda v: lax.fori_loop(0, 3, lambda i, w: jnp.sin(w) * 2, v)).lower(
        x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert _body(prog).sequence is None
    np.testing.assert_array_equal(prog(x), xlapy.compile(text, backend="interpreter")(x))
    top = xlapy.compile(jax.jit(lambda v: (jnp.sin(v) + 1, v * 2)).lower(
        x[:4]).as_text(), backend="cpu")
    assert top._exe.sequence is None


@pytest.mark.parametrize("options", FUSED)
def test_an_in_place_update_runs_in_the_sequence(options: dict) -> None:
    """A body whose cache update runs in place (dus_window.py) calls the window kernel from
    its sequence, not the whole-array kernel (which the Python path keeps): one function a
    step where a tiny scan with stacked outputs had run its steps one call each (carry
    scan of 100000 steps of 16 floats: 35 -> 17 ns a step)."""
    def f(cache: object, v: object) -> object:
        return lax.fori_loop(0, 4, lambda i, s: (lax.dynamic_update_slice(
            s[0], s[1][None], (i, 0)), s[1] + 1.0), (cache, v))[0]

    args = [np.zeros((4, 3), np.float32), np.ones(3, np.float32)]
    text = jax.jit(f).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu", options=options)
    assert any("updated in place" in how or "fused" in how for _, _, how in prog._exe.report)
    body = _body(prog)
    assert body.sequence is not None and body.windows
    assert set(body.windows) <= set(body.sequence.kernels)
    want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(3):  # (the state buffers are the loop's own each call)
        np.testing.assert_array_equal(prog(*args), want)


@pytest.mark.parametrize("options", FUSED)
def test_a_window_counts_its_update_not_its_state(options: dict) -> None:
    """A scan stacking 5000 steps of 4 floats: the window writes 4 elements a step, so the
    body (its whole-array kernel 20000 elements) is still a sequence (scan of 5000 steps:
    33 -> 15 ns a step, XLA ~13-16)."""
    xs = np.arange(5000 * 4, dtype=np.float32).reshape(5000, 4) * np.float32(1e-4)
    text = jax.jit(lambda v: lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(4), v)[1]
                   ).lower(xs).as_text()
    prog = xlapy.compile(text, backend="cpu", options=options)
    body = _body(prog)
    assert body.windows and body.sequence is not None
    assert kernel_sequence.MAX_ELEMENTS < 5000 * 4
    np.testing.assert_array_equal(prog(xs), xlapy.compile(text, backend="interpreter")(xs))


def test_inlined_functions_keep_the_function_attributes() -> None:
    """module_text adds the attribute group (denormal mode, vector width) to a definition
    that carries llvmlite attributes such as alwaysinline too."""
    mod = llvm_util.new_module("t")
    fn = ir.Function(mod, llvm_util.KERNEL_TYPE, name="k0")
    fn.attributes.add("alwaysinline")
    ir.IRBuilder(fn.append_basic_block("entry")).ret_void()
    text = llvm_util.module_text(mod)
    assert "alwaysinline #7001" in text and "denormal-fp-math" in text


@pytest.mark.parametrize("steps", [5, 6])
def test_a_scans_stacked_outputs_start_in_the_loops_own_buffer(steps: int) -> None:
    """lax.scan's ys start as zeros only the loop reads: a fresh array per call that the
    native loop runs on (native_loop.owned_init), no arena copy; results held across calls
    stay as they were."""
    def f(h: object, xs: object) -> object:
        return lax.scan(lambda c, x: (c * 0.5 + x, c * 2.0), h, xs)[1]

    rng = np.random.default_rng(3)
    args = [rng.standard_normal((4, 64)).astype(np.float32),  # (ys over 4 KB: not a
            rng.standard_normal((steps, 4, 64)).astype(np.float32)]  # static_value)
    text = jax.jit(f).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu")
    (nw,) = prog._exe.native_loops.values()
    assert nw.owned  # ys's zeros
    ref = xlapy.compile(text, backend="interpreter")
    first = prog(*args)
    want = ref(*args)
    np.testing.assert_array_equal(first, want)
    other = [a + 1 for a in args]
    second = prog(*other)
    np.testing.assert_array_equal(first, want)  # the held result is untouched
    np.testing.assert_array_equal(second, ref(*other))
    del first, second
    np.testing.assert_array_equal(prog(*args), want)  # a recycled buffer gives the same
