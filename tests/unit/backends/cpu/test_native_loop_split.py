"""Native while loops with split steps (loop_split.py): a body's row-parallel region, a
gemm_small product or a big element-wise kernel shared with the worker pool from native
code, with the Python loop's bits for any thread count, also when no worker is free."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import native_loop, parallel

#: lax.scan of h = tanh(h @ W + x_t) as jax lowers it (benchmarks' scan_rnn), the rhs
#: contracting dimension {c} (0: [k, n], gemm_small; 1: [n, k], BLAS).
RNN = """
func.func @main(%h: tensor<{b}x{d}xf32>, %w: tensor<{d}x{d}xf32>, %xs: tensor<{s}x{b}x{d}xf32>)
    -> tensor<{b}x{d}xf32> {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:4 = stablehlo.while(%x = %xs, %ww = %w, %i = %c0, %hh = %h)
      : tensor<{s}x{b}x{d}xf32>, tensor<{d}x{d}xf32>, tensor<i32>, tensor<{b}x{d}xf32>
    cond {{
      %n = stablehlo.constant dense<{s}> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %z = stablehlo.constant dense<0> : tensor<i32>
      %sl = stablehlo.dynamic_slice %x, %i, %z, %z, sizes = [1, {b}, {d}]
          : (tensor<{s}x{b}x{d}xf32>, tensor<i32>, tensor<i32>, tensor<i32>)
          -> tensor<1x{b}x{d}xf32>
      %xt = stablehlo.reshape %sl : (tensor<1x{b}x{d}xf32>) -> tensor<{b}x{d}xf32>
      %m = stablehlo.dot_general %hh, %ww, contracting_dims = [1] x [{c}]
          : (tensor<{b}x{d}xf32>, tensor<{d}x{d}xf32>) -> tensor<{b}x{d}xf32>
      %a = stablehlo.add %m, %xt : tensor<{b}x{d}xf32>
      %t = stablehlo.tanh %a : tensor<{b}x{d}xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %x, %ww, %i1, %t
          : tensor<{s}x{b}x{d}xf32>, tensor<{d}x{d}xf32>, tensor<i32>, tensor<{b}x{d}xf32>
    }}
  return %r#3 : tensor<{b}x{d}xf32>
}}
"""


def _args(s: int, b: int, d: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(b * d + s)
    return (rng.standard_normal((b, d)).astype(np.float32),
            (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32),
            rng.standard_normal((s, b, d)).astype(np.float32))


def _explain(prog: object) -> str:
    return prog._exe.explain()  # type: ignore[attr-defined]


def _python_loop(text: str, monkeypatch: pytest.MonkeyPatch, threads: int) -> object:
    with monkeypatch.context() as mp:
        mp.setattr(native_loop, "plan_native_while", lambda *a: None)
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    assert "native while loop" not in _explain(prog)
    return prog


@pytest.mark.parametrize(("c", "kind"), [(0, "jit gemm"), (1, "blas")])
def test_rnn_region_splits_natively_with_the_python_loops_bits(
        c: int, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s, b, d = 9, 64, 96
    text = RNN.format(s=s, b=b, d=d, c=c)
    args = _args(s, b, d)
    outs = []
    for threads in (1, 2, 3):
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
        explain = _explain(prog)
        assert "native while loop" in explain and "row-parallel" in explain
        assert f"library {kind}" in explain
        outs.append(prog(*args))
        outs.append(prog(*args))  # prepared tables reused
    outs.append(_python_loop(text, monkeypatch, 2)(*args))  # type: ignore[operator]
    for o in outs[1:]:
        np.testing.assert_array_equal(o.view(np.uint32), outs[0].view(np.uint32))
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(outs[0], want, rtol=2e-5, atol=2e-6)


def test_split_steps_bind_to_workers_and_give_them_back(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A loop of split steps reserves the pool's workers for the call and frees them; with
    every worker taken (another caller), the driver's thread runs every chunk itself."""
    monkeypatch.setattr(native_loop, "NATIVE_SPLIT_COST", 1)
    s, b, d = 5, 32, 40
    text = RNN.format(s=s, b=b, d=d, c=0)
    args = _args(s, b, d)
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    assert "native while loop" in _explain(prog)
    pool = parallel.pool(2)
    before = list(pool.seqs)
    first = prog(*args)
    assert pool.seqs != before  # the driver posted jobs to a worker
    assert not any(pool.busy)
    taken = pool.reserve(pool.workers)
    try:
        np.testing.assert_array_equal(prog(*args), first)
    finally:
        pool.release(taken)
    assert not any(pool.busy)
    # the pool's own hand-offs still pair up with the workers' counters
    x = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    split = xlapy.compile(SINE, backend="cpu", options={"num_threads": 2, "split_cost": 1})
    whole = xlapy.compile(SINE, backend="cpu", options={"num_threads": 1})
    for _ in range(3):
        np.testing.assert_array_equal(split(x), whole(x))
    assert not any(pool.busy)


SINE = """
func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = stablehlo.sine %x : tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}"""


ELEMENTWISE = """
func.func @main(%v: tensor<256x512xf32>, %n: tensor<i32>) -> tensor<256x512xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %x = %v) : tensor<i32>, tensor<256x512xf32>
    cond {
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %s = stablehlo.sine %x : tensor<256x512xf32>
      %h = stablehlo.constant dense<0.75> : tensor<256x512xf32>
      %y = stablehlo.multiply %s, %h : tensor<256x512xf32>
      %e = stablehlo.exponential %y : tensor<256x512xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %e : tensor<i32>, tensor<256x512xf32>
    }
  return %r#1 : tensor<256x512xf32>
}
"""


def test_big_elementwise_body_kernel_runs_natively_split(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    x = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float32)
    n = np.int32(3)
    got = []
    for threads in (1, 2):
        prog = xlapy.compile(ELEMENTWISE, backend="cpu", options={"num_threads": threads})
        assert "native while loop" in _explain(prog)
        got.append(prog(x, n))
    got.append(_python_loop(ELEMENTWISE, monkeypatch, 2)(x, n))  # type: ignore[operator]
    for o in got[1:]:
        np.testing.assert_array_equal(o, got[0])
    want = xlapy.compile(ELEMENTWISE, backend="interpreter")(x, n)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


def test_pass_through_state_nobody_reads_after_is_not_copied() -> None:
    """xs and W pass through the RNN loop: bound in place unless the program returns them
    (then the result is a copy, never the argument)."""
    s, b, d = 4, 8, 16
    text = RNN.format(s=s, b=b, d=d, c=0)
    args = _args(s, b, d)
    prog = xlapy.compile(text, backend="cpu")
    (nw,) = _native_whiles(prog)
    assert nw.unread == {0, 1}
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(prog(*args), want, rtol=2e-5, atol=2e-6)
    res = f"tensor<{b}x{d}xf32>"
    both = text.replace(f"return %r#3 : {res}",
                        f"return %r#3, %r#0 : {res}, tensor<{s}x{b}x{d}xf32>").replace(
        f"-> {res} {{", f"-> ({res}, tensor<{s}x{b}x{d}xf32>) {{", 1)
    prog2 = xlapy.compile(both, backend="cpu")
    (nw2,) = _native_whiles(prog2)
    assert nw2.unread == {1}
    h, xs = prog2(*args)
    np.testing.assert_array_equal(xs, args[2])
    assert not np.shares_memory(xs, args[2])


def _native_whiles(prog: object) -> list[native_loop.NativeWhile]:
    """The NativeWhile objects of a program's thunks (closures of executable's thunk)."""
    exe = prog._exe  # type: ignore[attr-defined]
    out = []
    for th in exe.thunks:
        for cell in th.__closure__ or ():
            if isinstance(cell.cell_contents, native_loop.NativeWhile):
                out.append(cell.cell_contents)
    return out


#: A while loop stopping on max |x| (its cond's reduce split from NATIVE_SPLIT_COST) whose
#: body scales x by 0.9 (under that cost on its own).
MAXABS = """
func.func @main(%x: tensor<256x256xf32>) -> (tensor<i32>, tensor<256x256xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %s = %x) : tensor<i32>, tensor<256x256xf32>
    cond {
      %n = stablehlo.constant dense<15> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %a = stablehlo.abs %s : tensor<256x256xf32>
      %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %m = stablehlo.reduce(%a init: %ninf) applies stablehlo.maximum across dimensions = [0, 1]
          : (tensor<256x256xf32>, tensor<f32>) -> tensor<f32>
      %eps = stablehlo.constant dense<1.0e-9> : tensor<f32>
      %q = stablehlo.compare GT, %m, %eps, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %pq = stablehlo.and %p, %q : tensor<i1>
      stablehlo.return %pq : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %k = stablehlo.constant dense<0.9> : tensor<256x256xf32>
      %y = stablehlo.multiply %s, %k : tensor<256x256xf32>
      stablehlo.return %i1, %y : tensor<i32>, tensor<256x256xf32>
    }
  return %r#0, %r#1 : tensor<i32>, tensor<256x256xf32>
}
"""


def test_a_split_step_brings_the_loops_smaller_kernels_along(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the cond's max splits, the body's x * 0.9 splits too (loop_steps.split_cost):
    each thread keeps its rows; with only the max split they moved between the cores each
    trip (2.5-3x the loop's one-thread time on Zen 4). The bits are the one thread's."""
    from xlapy.backends.cpu import loop_steps

    splits: list[int] = []
    real = native_loop.NativeWhile._split

    def spy(p: object, fn: int, arg: int, cuts: list[int], most: int) -> list[int]:
        splits.append(most)
        return real(p, fn, arg, cuts, most)  # type: ignore[arg-type]
    monkeypatch.setattr(native_loop.NativeWhile, "_split", staticmethod(spy))
    x = np.random.default_rng(2).standard_normal((256, 256)).astype(np.float32)
    got = []
    for threads in (1, 2):
        prog = xlapy.compile(MAXABS, backend="cpu", options={"num_threads": threads})
        assert "native while loop" in _explain(prog)
        got.append(prog(x))
    assert splits.count(2) == 2, splits  # the max and the multiply, on two threads
    assert loop_steps.FOLLOW_SPLIT_COST < 256 * 256 < native_loop.NATIVE_SPLIT_COST
    for a, b in zip(got[0], got[1]):
        np.testing.assert_array_equal(a, b)
