# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Native while loops on cpu: same values as the interpreter, and planned natively only when
the condition and body are all kernels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from benchmarks.workloads.networks import fori_loop

from .util import interrupted

ROOT = Path(__file__).resolve().parents[4]

SHLO_LOOP = """
func.func @main(%x: tensor<8xf32>, %n: tensor<i32>) -> (tensor<i32>, tensor<8xf32>, tensor<i32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %v = %x, %m = %n) : tensor<i32>, tensor<8xf32>, tensor<i32>
    cond {
      %p = stablehlo.compare LT, %i, %m : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i2 = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.constant dense<0.5> : tensor<8xf32>
      %v2 = stablehlo.multiply %v, %h : tensor<8xf32>
      %v3 = stablehlo.add %v2, %v : tensor<8xf32>
      stablehlo.return %i2, %v3, %m : tensor<i32>, tensor<8xf32>, tensor<i32>
    }
  return %r#0, %r#1, %r#2 : tensor<i32>, tensor<8xf32>, tensor<i32>
}
"""


@pytest.mark.parametrize("iterations", [0, 1, 2, 7])
def test_xla_style_loop_matches_interpreter(iterations: int) -> None:
    comp = fori_loop(iterations, 33)
    x = np.random.default_rng(0).standard_normal(33).astype(np.float32)
    cpu = xlapy.compile(comp, backend="cpu")
    # No iterations: the while-loop simplifier (backend pipeline) removes the loop; one: it
    # inlines the body.
    assert ("native while loop" in cpu._exe.explain()) == (iterations > 1)
    want = xlapy.compile(comp, backend="interpreter")(x)
    got = cpu(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(cpu(x), want)  # state buffers are fresh per call


@pytest.mark.parametrize("n", [0, 3])
def test_stablehlo_style_loop_with_pass_through(n: int) -> None:
    x = np.arange(8, dtype=np.float32)
    cpu = xlapy.compile(SHLO_LOOP, backend="cpu")
    assert "native while loop" in cpu._exe.explain()
    want = xlapy.compile(SHLO_LOOP, backend="interpreter")(x, np.int32(n))
    got = cpu(x, np.int32(n))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert int(got[0]) == n


def test_loop_with_fallback_op_stays_in_python() -> None:
    # A dynamic_reshape whose size is known only at run time (always [8]: clamp(8, i, 8))
    # runs on the interpreter; it is the identity on v2.
    text = SHLO_LOOP.replace("%v3 = stablehlo.add %v2, %v : tensor<8xf32>",
                             "%k8 = stablehlo.constant dense<8> : tensor<1xi32>\n"
                             "      %ii = stablehlo.reshape %i : (tensor<i32>) -> tensor<1xi32>\n"
                             "      %sz = stablehlo.clamp %k8, %ii, %k8 : tensor<1xi32>\n"
                             "      %v3 = stablehlo.dynamic_reshape %v2, %sz : (tensor<8xf32>, "
                             "tensor<1xi32>) -> tensor<8xf32>")
    cpu = xlapy.compile(text, backend="cpu")
    assert "native while loop" not in cpu._exe.explain()
    x = np.arange(8, dtype=np.float32)
    got = cpu(x, np.int32(2))
    np.testing.assert_array_equal(got[1], x * 0.25)


SWAP_LOOP = """
func.func @main(%x: tensor<8xf32>, %n: tensor<i32>) -> (tensor<i32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:4 = stablehlo.while(%i = %c0, %v = %x, %w = %x, %k = %x) : tensor<i32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
    cond {
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i2 = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.constant dense<0.5> : tensor<8xf32>
      %v2 = stablehlo.multiply %v, %h : tensor<8xf32>
      %v3 = stablehlo.add %v2, %w : tensor<8xf32>
      stablehlo.return %i2, %v3, %v3, %h : tensor<i32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
    }
  return %r#0, %r#1, %r#2, %r#3 : tensor<i32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
"""


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_swapped_copied_and_constant_results(n: int) -> None:
    """Results that swap buffers with their state (i, and nothing else), one result feeding
    two state elements (copied), a constant result (copied), odd and even trip counts."""
    x = np.arange(8, dtype=np.float32) - 3
    _native_as_interpreter(SWAP_LOOP, x, np.int32(n))
    np.testing.assert_array_equal(x, np.arange(8, dtype=np.float32) - 3)  # input untouched


def _native_as_interpreter(text: str, *args: np.ndarray) -> None:
    """`text`'s loop runs natively on cpu, twice, with the interpreter's values."""
    cpu = xlapy.compile(text, backend="cpu")
    assert "native while loop" in cpu._exe.explain()
    want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(2):
        for g, w in zip(cpu(*args), want):
            np.testing.assert_array_equal(g, w)


# A loop that runs until i reaches n, stepping by `step` (0: forever).
STEP_LOOP = """
func.func @main(%n: tensor<i32>, %step: tensor<i32>) -> tensor<i32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %m = %n, %s = %step) : tensor<i32>, tensor<i32>, tensor<i32>
    cond {
      %p = stablehlo.compare LT, %i, %m : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %i2 = stablehlo.add %i, %s : tensor<i32>
      stablehlo.return %i2, %m, %s : tensor<i32>, tensor<i32>, tensor<i32>
    }
  return %r#0 : tensor<i32>
}
"""
# The same with a fallback op (a dynamic_reshape whose size is known only at run time, the
# identity on i) in the body: the cpu backend drives this loop from Python.
FALLBACK_STEP_LOOP = STEP_LOOP.replace(
    "%i2 = stablehlo.add %i, %s : tensor<i32>",
    "%k1 = stablehlo.constant dense<1> : tensor<1xi32>\n"
    "      %ii = stablehlo.reshape %i : (tensor<i32>) -> tensor<1xi32>\n"
    "      %sz = stablehlo.clamp %k1, %ii, %k1 : tensor<1xi32>\n"
    "      %dd = stablehlo.dynamic_reshape %ii, %sz : (tensor<1xi32>, tensor<1xi32>) -> "
    "tensor<1xi32>\n"
    "      %d = stablehlo.reshape %dd : (tensor<1xi32>) -> tensor<i32>\n"
    "      %i2 = stablehlo.add %d, %s : tensor<i32>")

LOOPS = {"native": ("cpu", STEP_LOOP), "cpu-python": ("cpu", FALLBACK_STEP_LOOP),
         "interpreter": ("interpreter", STEP_LOOP)}


@pytest.mark.parametrize("kind", list(LOOPS))
def test_iteration_limit_names_the_while(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    backend, text = LOOPS[kind]
    fn = xlapy.compile(text, backend=backend)
    if backend == "cpu":
        assert ("native while loop" in fn._exe.explain()) == (kind == "native")
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "1000")
    assert int(fn(np.int32(1000), np.int32(1))) == 1000  # exactly the limit: fine
    with pytest.raises(xlapy.errors.InterpreterError,
                       match=r"while %\S+: still running after 1000 iteration\(s\), the limit "
                             r"XLAPY_MAX_WHILE_ITERATIONS=1000"):
        fn(np.int32(5), np.int32(0))  # forever
    with pytest.raises(xlapy.errors.InterpreterError, match="after 1000 iteration"):
        fn(np.int32(1001), np.int32(1))
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "0")
    assert int(fn(np.int32(0), np.int32(1))) == 0
    with pytest.raises(xlapy.errors.InterpreterError, match="after 0 iteration"):
        fn(np.int32(1), np.int32(1))
    monkeypatch.delenv("XLAPY_MAX_WHILE_ITERATIONS")
    assert int(fn(np.int32(3000), np.int32(1))) == 3000  # unset: unlimited


# The child installs Python's Ctrl-C handler itself: a process started from a background job
# of a non-interactive shell (a CI script's `cmd &`) inherits SIGINT ignored, and Python then
# never raises KeyboardInterrupt (the test failed so, not the loop).
INTERRUPTED = f"""
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
import sys
import numpy as np
import xlapy
fn = xlapy.compile('''{STEP_LOOP}''', backend="cpu")
assert "native while loop" in fn._exe.explain()
fn(np.int32(5), np.int32(1))  # compiled and warm
print("running", flush=True)
fn(np.int32(5), np.int32(0))  # forever
"""


def test_ctrl_c_interrupts_an_infinite_native_loop() -> None:
    err = interrupted(INTERRUPTED, ROOT)
    assert "KeyboardInterrupt" in err, err


# The state rotated each iteration (a <- b, b <- c, c <- a; p <-> q) while v is computed
# from all of them and c also gets a kernel's result: jax.random's threefry loop passes its
# keys and rotation constants round the same way.
ROTATE_LOOP = """
func.func @main(%x: tensor<8xf32>, %n: tensor<i32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xi32>, tensor<4xi32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %h = stablehlo.constant dense<0.5> : tensor<8xf32>
  %b0 = stablehlo.add %x, %h : tensor<8xf32>
  %c1 = stablehlo.multiply %x, %x : tensor<8xf32>
  %p0 = stablehlo.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %q0 = stablehlo.constant dense<[5, 6, 7, 8]> : tensor<4xi32>
  %r:7 = stablehlo.while(%i = %c0, %v = %x, %a = %x, %b = %b0, %c = %c1, %p = %p0, %q = %q0) : tensor<i32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xi32>, tensor<4xi32>
    cond {
      %t = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i2 = stablehlo.add %i, %one : tensor<i32>
      %pf = stablehlo.convert %p : (tensor<4xi32>) -> tensor<4xf32>
      %pp = stablehlo.concatenate %pf, %pf, dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
      %s1 = stablehlo.multiply %a, %b : tensor<8xf32>
      %s2 = stablehlo.add %s1, %c : tensor<8xf32>
      %v2 = stablehlo.add %v, %s2 : tensor<8xf32>
      %v3 = stablehlo.add %v2, %pp : tensor<8xf32>
      %c2 = stablehlo.subtract %a, %h : tensor<8xf32>
      stablehlo.return %i2, %v3, %b, %c2, %a, %q, %p : tensor<i32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xi32>, tensor<4xi32>
    }
  return %r#1, %r#2, %r#3, %r#4, %r#5, %r#6 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xi32>, tensor<4xi32>
}
"""


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])
def test_rotated_state_runs_natively(n: int) -> None:
    """Body results that are other state elements as they were (a rotation, a swap; one
    element, c, both a kernel's result and a rotation's source) run as a native loop (the
    loop was driven from Python: threefry's 5 iterations took 0.67 ms of jax.random.normal,
    XLA's whole program 0.64), with the interpreter's values, every trip count."""
    _native_as_interpreter(ROTATE_LOOP, np.arange(8, dtype=np.float32) / 4 - 1, np.int32(n))
