"""Row-split native while loops (row_loop.py): an RNN-like loop runs as independent loops
over row shares with the Python loop's bits for any thread and share count; loops whose
body or condition reads the carried rows across rows are not split."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_native_loop_split import RNN, _args, _native_whiles
from xlapy.backends.cpu import native_loop, row_loop


def _compile(text: str, threads: int) -> object:
    return xlapy.compile(text, backend="cpu", options={"num_threads": threads})


@pytest.mark.parametrize(("b", "d"), [(64, 96), (100, 64), (128, 48)])
def test_rnn_runs_row_split_with_the_python_loops_bits(b: int, d: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    s = 7
    text = RNN.format(s=s, b=b, d=d, c=0)
    args = _args(s, b, d)
    monkeypatch.setattr(row_loop, "MIN_COST", 1)
    outs = []
    for threads in (2, 3):
        prog = _compile(text, threads)
        (nw,) = _native_whiles(prog)
        assert nw.row_plan is not None and nw.row_plan.carried == {3}
        assert nw.row_threads == threads
        n = len(row_loop.shares(b, threads, 1)) - 1
        assert f"native while loop (row-split: {n} row shares on {threads} threads)" in \
            prog._exe.explain()  # type: ignore[attr-defined]
        outs += [prog(*args), prog(*args)]  # the prepared shares are reused
    # one share per loop, several on one thread (a thread off its core holds up one)
    (nw,) = _native_whiles(prog)
    for cuts in ([0, b], [0, 1, b], [0, 8, 16, b - 3, b]):
        preps = [nw._prepare((lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
        state = (args[2], args[1], np.int32(0), args[0])
        outs.append(row_loop.run(nw, nw.row_plan, preps, 2, state)[3])
    with monkeypatch.context() as mp:
        mp.setattr(native_loop, "plan_native_while", lambda *a: None)
        outs.append(_compile(text, 2)(*args))  # the Python loop
    outs.append(_compile(text, 1)(*args))  # native, not split
    for o in outs[1:]:
        np.testing.assert_array_equal(o.view(np.uint32), outs[0].view(np.uint32))
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(outs[0], want, rtol=2e-5, atol=2e-6)


def test_shares_cover_the_rows_at_the_alignment() -> None:
    assert row_loop.shares(64, 2, 1) == [0, 16, 32, 48, 64]
    assert row_loop.shares(20, 2, 1) == [0, 10, 20]
    assert row_loop.shares(64, 2, 16) == [0, 16, 32, 48, 64]
    assert row_loop.shares(100, 3, 8) == [0, 16, 32, 48, 64, 80, 100]


#: An RNN whose body mixes rows: h' = tanh(reverse(h) @ W + x) (row r reads row b-1-r).
MIXED = RNN.replace("%m = stablehlo.dot_general %hh, %ww",
                    "%rv = stablehlo.reverse %hh, dims = [0] : tensor<{b}x{d}xf32>\n"
                    "      %m = stablehlo.dot_general %rv, %ww")

#: The condition reads the carried rows: stop when h[0, 0] > 10 or after {s} steps.
COND_READS = RNN.replace(
    "%p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>",
    "%lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
    "      %e = stablehlo.slice %hh [0:1, 0:1] : (tensor<{b}x{d}xf32>) -> tensor<1x1xf32>\n"
    "      %e0 = stablehlo.reshape %e : (tensor<1x1xf32>) -> tensor<f32>\n"
    "      %ten = stablehlo.constant dense<10.0> : tensor<f32>\n"
    "      %ok = stablehlo.compare LT, %e0, %ten : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
    "      %p = stablehlo.and %lt, %ok : tensor<i1>")


@pytest.mark.parametrize("template", [MIXED, COND_READS], ids=["body-mixes-rows", "cond-reads"])
def test_loops_reading_across_rows_are_not_row_split(template: str) -> None:
    s, b, d = 5, 64, 96
    text = template.format(s=s, b=b, d=d, c=0)
    prog = _compile(text, 2)
    (nw,) = _native_whiles(prog)
    assert nw.row_plan is None
    args = _args(s, b, d)
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(prog(*args), want, rtol=2e-5, atol=2e-6)


def test_concurrent_calls_of_a_row_split_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Python threads run the same row-split loop at once: the second prepares its own
    shares (the first holds the loop's), both get the one-thread bits."""
    import threading

    monkeypatch.setattr(row_loop, "MIN_COST", 1)
    s, b, d = 6, 64, 64
    text = RNN.format(s=s, b=b, d=d, c=0)
    prog = _compile(text, 2)
    (nw,) = _native_whiles(prog)
    assert nw.row_threads == 2
    want = _compile(text, 1)(*_args(s, b, d))
    got: list[np.ndarray] = []

    def worker() -> None:
        for _ in range(20):
            got.append(prog(*_args(s, b, d)))  # type: ignore[operator]

    ths = [threading.Thread(target=worker) for _ in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert len(got) == 40
    for g in got:
        np.testing.assert_array_equal(g.view(np.uint32), want.view(np.uint32))


def test_many_small_buffers_run_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Adam update of 40 small parameters runs as one row-splittable loop trip whose 281
    state buffers each share binds from Python (row_loop.BIND_COST): split, a call took
    0.67 ms against 0.30 on one thread (XLA 0.34)."""
    jax = pytest.importorskip("jax")
    from benchmarks.jax_probe import adam_step as adam

    n = 40
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((37, 19)).astype(np.float32) for _ in range(4 * n)]
    args[3 * n:] = [np.abs(x) for x in args[3 * n:]]
    chosen: list[int] = []
    real = row_loop.threads_for
    monkeypatch.setattr(row_loop, "threads_for", lambda nw, rp: chosen.append(
        real(nw, rp)) or chosen[-1])
    prog = _compile(jax.jit(adam).lower(*args).as_text(), 2)
    got = prog(*args)
    assert chosen and set(chosen) == {1}
    want = jax.jit(adam)(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6, atol=1e-6)


def _vector_loop(body: str, n: int, trips: int, dtype: str = "complex<f32>") -> str:
    """fori_loop(0, trips, z <- body(z, w)) over two vectors of n elements."""
    t = f"tensor<{n}x{dtype}>"
    return f"""func.func @main(%z: {t}, %w: {t}) -> {t} {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %zz = %z, %ww = %w) : tensor<i32>, {t}, {t}
  cond {{
    %n = stablehlo.constant dense<{trips}> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }} do {{
    %one = stablehlo.constant dense<1> : tensor<i32>
    %i1 = stablehlo.add %i, %one : tensor<i32>
    {body}
    stablehlo.return %i1, %next, %ww : tensor<i32>, {t}, {t}
  }}
  return %r#1 : {t}
}}"""


@pytest.mark.parametrize("n", [65536, 65539])
def test_a_vector_loop_runs_row_split_with_one_threads_bits(n: int) -> None:
    """z <- z w over a c64 vector, 100 trips: the kernel alone splits the loop into row
    shares (regions.kernel_member takes a vector's elements as rows; 4.3 -> 2.1 ms on 2
    threads, each share's rows in its core's L2), with the one-thread loop's bits; not split
    before."""
    t = f"tensor<{n}xcomplex<f32>>"
    text = _vector_loop(f"%next = stablehlo.multiply %zz, %ww : {t}", n, 100)
    rng = np.random.default_rng(0)
    z, w = ((rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
            for _ in range(2))
    w /= np.abs(w)
    prog = _compile(text, 2)
    (nw,) = _native_whiles(prog)
    assert nw.row_plan is not None and nw.row_plan.kernels and nw.row_threads == 2
    assert "row-split" in prog._exe.explain()  # type: ignore[attr-defined]
    got = [prog(z, w), prog(z, w), _compile(text, 1)(z, w)]
    for g in got[1:]:
        np.testing.assert_array_equal(g.view(np.uint32), got[0].view(np.uint32))
    want = xlapy.compile(text, backend="interpreter")(z, w)
    np.testing.assert_array_equal(got[0].view(np.uint32), want.view(np.uint32))


def test_small_or_crossing_vector_loops_stay_on_one_thread() -> None:
    """x <- 0.99 x + y over 16K f32, 100 trips (0.19 ms on one thread) ran 0.24 ms split:
    too little work for a split call's ~70 us; z <- reverse(z) w reads the carried vector
    across its rows: never split."""
    t = "tensor<16384xf32>"
    small = _vector_loop(f"""%k = stablehlo.constant dense<0.99> : {t}
    %m = stablehlo.multiply %zz, %k : {t}
    %next = stablehlo.add %m, %ww : {t}""", 16384, 100, "f32")
    c = "tensor<65536xcomplex<f32>>"
    crossing = _vector_loop(f"""%v = stablehlo.reverse %zz, dims = [0] : {c}
    %next = stablehlo.multiply %v, %ww : {c}""", 65536, 100)
    for text in (small, crossing):
        (nw,) = _native_whiles(_compile(text, 2))
        assert nw.row_threads == 1, text
