"""branch_loop.later and branch_loop.sharing: a program that runs as one native loop trip
compiles each case/if branch and each inner loop once (expm 64 x 64: 730 -> 336 ms), and
the entry's own thunks, built late, still compute the trip's bits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import branch_loop

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _program(a: Any, b: Any, n: Any) -> Any:
    """A loop at the top, then a cond of LAPACK calls and a loop (expm's shape)."""
    a = jax.lax.fori_loop(0, 2, lambda i, y: y * 0.5 + a * 0.25, a)

    def heavy(ab: Any) -> Any:
        a, b = ab
        x = jnp.linalg.solve(a, b)
        return jax.lax.fori_loop(0, 3, lambda i, y: y @ a * 0.5 + b, x)

    return jax.lax.cond(n > 0, heavy, lambda ab: ab[0] + ab[1], (a, b))


def _args() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((8, 8)) + 8 * np.eye(8)).astype(np.float32)
    return a, rng.standard_normal((8, 8)).astype(np.float32)


def _compile(**options: Any) -> Any:
    a, b = _args()
    text = jax.jit(_program).lower(a, b, np.int32(1)).as_text()
    return xlapy.compile(text, backend="cpu", options=options or None)


def _executables(exe: Any) -> list[Any]:
    out, stack = [], [exe]
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(s for _, s in e.__dict__["_subexecs"] if s is not None)
    return out


def test_a_deferred_entry_builds_its_case_only_with_its_thunks() -> None:
    from xlapy.interpreter.evaluator import RuntimeState

    a, b = _args()
    prog = _compile()
    exe = prog._exe
    assert exe.trip is not None and exe._later
    assert [h for _, op, h in exe.report if op == "case"] == [branch_loop.LATER]
    assert any(s is None for _, s in exe.__dict__["_subexecs"])  # (not built)
    want = {k: _compile(entry_trip=False)(a, b, np.int32(k)) for k in (0, 1)}
    for k in (1, 0):
        np.testing.assert_array_equal(prog(a, b, np.int32(k)), want[k])
    assert exe._later  # (the trip ran both)
    target = next(t for t in exe.trip.targets if "getrf" in t)

    def getrf(operands: Any, shape: Any, attrs: Any) -> Any:
        raise ValueError("the registered getrf ran")

    rt = RuntimeState(custom_calls={target: getrf})
    np.testing.assert_array_equal(exe.run([a, b, np.int32(0)], rt), want[0])  # thunks
    assert not exe._later and all(s is not None for _, s in exe.subexecs)
    assert branch_loop.LATER not in {h for _, _, h in exe.report}
    with pytest.raises(Exception, match="the registered getrf ran"):
        exe.run([a, b, np.int32(1)], rt)
    trip, exe.trip = exe.trip, None
    try:
        for k in (1, 0):
            np.testing.assert_array_equal(prog(a, b, np.int32(k)), want[k])
    finally:
        exe.trip = trip


def test_a_look_at_a_deferred_entry_builds_its_case() -> None:
    exe = _compile()._exe
    text = exe.explain()
    assert not exe._later and branch_loop.LATER not in text and "case" in text
    assert exe.fallbacks() == []
    exe = _compile()._exe
    assert exe._later and exe.subexecs and not exe._later  # (reading them builds them)


def test_the_trip_shares_the_entrys_inner_loops() -> None:
    """The top-level fori_loop's body compiles once: the trip's loop body runs the very
    executable the entry's while thunk does."""
    exe = _compile()._exe
    loop = next(name for name, op, _ in exe.report if op == "while")
    entry = [s for n, s in exe.__dict__["_subexecs"] if n == loop]
    assert len(entry) == 2
    inside = _executables(exe.trip.exe)
    assert all(any(s is e for e in inside) for s in entry)


def test_a_deferred_entry_with_steps_compiles_no_kernel_early(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its trip compiles those kernels (betainc's lgamma kernel, ~220 ms of LLVM, was
    compiled early for the entry's thunks too); its loop body still compiles early (a body
    no loop may fuse: a fusible one's kernels never compile early, test_loop_fused)."""
    from xlapy.backends.cpu import cache, early_compile, loop_fused, parallel_compile

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 2)
    monkeypatch.setattr(early_compile, "MIN_INSTRUCTIONS", 1)
    monkeypatch.setattr(loop_fused, "MAX_ELEMENTS", 0)
    cache.clear_memory()
    exe = _compile()._exe
    assert exe.trip is not None
    assert exe.kernel_specs and not exe._early.jobs
    assert any(e._early.jobs for e in _executables(exe.trip.exe))
    a, b = _args()
    np.testing.assert_array_equal(exe.run([a, b, np.int32(1)]),
                                  _compile(entry_trip=False)(a, b, np.int32(1)))


#: An entry trip whose state is too big for the loop's own buffers (loop_bind.kept), with a
#: rank-0 result: a native reduce's argmax of two levels (total_argbest.py's form).
SCALAR_RESULT = """
func.func @main(%x0: tensor<16384xf32>) -> tensor<i32> {
  %x = stablehlo.reshape %x0 : (tensor<16384xf32>) -> tensor<32x512xf32>
  %cols = stablehlo.iota dim = 1 : tensor<32x512xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %ninf), (%cols init: %z) across dimensions = [1]
    : (tensor<32x512xf32>, tensor<32x512xi32>, tensor<f32>, tensor<i32>)
    -> (tensor<32xf32>, tensor<32xi32>)
   reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>) {
    %gt = stablehlo.compare GT, %a, %c, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %k = stablehlo.select %gt, %b, %d : tensor<i1>, tensor<i32>
    %v = stablehlo.select %gt, %a, %c : tensor<i1>, tensor<f32>
    stablehlo.return %v, %k : tensor<f32>, tensor<i32>
  }
  %w = stablehlo.constant dense<512> : tensor<32xi32>
  %rows = stablehlo.iota dim = 0 : tensor<32xi32>
  %m = stablehlo.multiply %rows, %w : tensor<32xi32>
  %g = stablehlo.add %r#1, %m : tensor<32xi32>
  %s:2 = stablehlo.reduce(%r#0 init: %ninf), (%g init: %z) across dimensions = [0]
    : (tensor<32xf32>, tensor<32xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
   reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>) {
    %gt = stablehlo.compare GT, %a, %c, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %k = stablehlo.select %gt, %b, %d : tensor<i1>, tensor<i32>
    %v = stablehlo.select %gt, %a, %c : tensor<i1>, tensor<f32>
    stablehlo.return %v, %k : tensor<f32>, tensor<i32>
  }
  return %s#1 : tensor<i32>
}
"""


def test_a_rank_0_result_of_a_trip_over_big_buffers_keeps_its_shape() -> None:
    """The loop's buffers were np.ascontiguousarray of its state, which makes a 0-d array
    1-d: the program returned shape (1,)."""
    prog = xlapy.compile(SCALAR_RESULT, backend="cpu")
    assert "native loop trip" in prog._exe.explain()
    x = np.random.default_rng(2).standard_normal(16384).astype(np.float32)
    got = prog(x)
    assert np.shape(got) == () and int(got) == int(np.argmax(x))
