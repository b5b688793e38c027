"""branch_loop.py: a case/if branch of several small steps runs as one trip of a native
while loop, with the bits of the branch's own executable, and only where its loop is
native and it pays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from tests.threads import on_threads
from xlapy.backends.cpu import branch_loop

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


#: Compile options of the tests of branch trips: the entry's own trip off (an entry of a
#: kernel and a case weighs 1 + BRANCH_THUNKS, so it would run as one trip itself).
BRANCHES_ONLY = {"entry_trip": False}


def _text(fn: Any, *args: Any) -> str:
    return jax.jit(fn).lower(*args).as_text()


def _solve_branch(a: Any, b: Any, n: Any) -> Any:
    """A branch of LAPACK calls, a fori_loop and kernels (expm's shape), the other a few
    kernels; `n` picks."""
    def heavy(ab: Any) -> Any:
        a, b = ab
        x = jnp.linalg.solve(a, b)
        x = jax.lax.fori_loop(0, 3, lambda i, y: y @ a * 0.5 + b, x)
        return x, jnp.tanh(x).sum()

    def light(ab: Any) -> Any:
        a, b = ab
        return a + b, (a * b).sum()

    return jax.lax.cond(n > 0, heavy, light, (a, b))


def _args(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((8, 8)) + 8 * np.eye(8)).astype(np.float32)
    return a, rng.standard_normal((8, 8)).astype(np.float32)


def _no_trips(monkeypatch: pytest.MonkeyPatch, text: str) -> Any:
    """The program with every branch its own executable (the reference)."""
    with monkeypatch.context() as m:
        m.setattr(branch_loop, "MIN_THUNKS", 1 << 30)
        prog = xlapy.compile(text, backend="cpu")
    assert branch_loop.LABEL not in _hows(prog)
    return prog


def _hows(prog: Any) -> str:
    return "\n".join(how for _, _, how in prog._exe.report)


def _same(got: Any, want: Any) -> None:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        assert g.tobytes() == w.tobytes()


def test_a_heavy_branch_runs_as_a_trip_with_the_branch_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _args(0)
    text = _text(_solve_branch, a, b, np.int32(1))
    prog = xlapy.compile(text, backend="cpu", options=BRANCHES_ONLY)
    assert f"1 {branch_loop.LABEL}" in _hows(prog)  # the light branch keeps its executable
    once = [s for _, s in prog._exe.subexecs if s.comp.name.endswith(".once")]
    assert len(once) == 1 and once[0].native_loops
    ref = _no_trips(monkeypatch, text)
    for seed in range(3):
        a, b = _args(seed)
        for n in (np.int32(1), np.int32(0)):
            got = prog(a, b, n)
            _same(got, ref(a, b, n))
            want = jax.jit(_solve_branch)(a, b, n)
            np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=2e-4,
                                       atol=2e-4)
    first = prog(a, b, np.int32(1))
    prog(*_args(7), np.int32(1))
    _same(first, ref(a, b, np.int32(1)))  # each call's results are arrays of its own


def test_switch_branches_with_passed_through_operands_and_several_results(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def f(x: Any, y: Any, k: Any) -> Any:
        def b0(xy: Any) -> Any:  # an operand returned as it came, one computed
            x, y = xy
            z = jnp.sin(x @ y) @ y
            z = jnp.exp(-z * z) @ x
            return x, jnp.cos(z) @ y + x.sum()

        def b1(xy: Any) -> Any:  # the operands swapped
            x, y = xy
            return y, x

        def b2(xy: Any) -> Any:
            x, y = xy
            q, r = jnp.linalg.qr(x @ y + 3 * jnp.eye(6, dtype=x.dtype))
            return q @ r, jnp.abs(r) @ jnp.tanh(y @ q)

        return jax.lax.switch(k, [b0, b1, b2], (x, y))

    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((6, 6)).astype(np.float32) for _ in range(2))
    text = _text(f, x, y, np.int32(0))
    prog = xlapy.compile(text, backend="cpu", options=BRANCHES_ONLY)
    assert f"2 {branch_loop.LABEL}s" in _hows(prog)
    ref = _no_trips(monkeypatch, text)
    for k in (0, 1, 2, 5, -1):  # (out of range: the last branch, as XLA's case)
        _same(prog(x, y, np.int32(k)), ref(x, y, np.int32(k)))


def test_f64_branch_and_threads_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with jax.enable_x64(True):
        a, b = (v.astype(np.float64) for v in _args(1))
        text = _text(_solve_branch, a, b, np.int32(1))
    prog = xlapy.compile(text, backend="cpu", options=BRANCHES_ONLY)
    assert branch_loop.LABEL in _hows(prog)
    ref = _no_trips(monkeypatch, text)

    def work(seed: int) -> None:
        for k in range(30):
            a, b = (v.astype(np.float64) for v in _args(seed * 100 + k))
            n = np.int32(k % 2)
            _same(prog(a, b, n), ref(a, b, n))

    on_threads(work, range(3))


def test_a_branch_holding_a_cond_is_a_trip_big_ones_keep_their_executables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A branch holding a cond runs it as a chain of once-loops (branch_loop._chain; it
    kept its executable before), the bits of its thunks for both inner outcomes; the
    one-kernel branch and a branch over MAX_BYTES keep their executables."""
    def nested(x: Any, n: Any) -> Any:
        def inner(x: Any) -> Any:
            y = jnp.sin(x) @ x
            y = jax.lax.cond(y.sum() > 0, lambda y: jax.lax.fori_loop(
                0, 3, lambda i, z: jnp.cos(z) @ z, y), jnp.tanh, y) @ x
            return jnp.exp(y) @ x + 1

        return jax.lax.cond(n > 0, inner, lambda x: x * 2, x)

    x = np.eye(4, dtype=np.float32) * 0.5
    text = _text(nested, x, np.int32(1))
    prog = xlapy.compile(text, backend="cpu", options=BRANCHES_ONLY)
    assert f"1 {branch_loop.LABEL})" in _hows(prog)
    ref = _no_trips(monkeypatch, text)
    for v in (x, -x - 1, x * 0):
        for n in (0, 1):
            _same(prog(v, np.int32(n)), ref(v, np.int32(n)))
    np.testing.assert_allclose(prog(x, np.int32(1)), jax.jit(nested)(x, np.int32(1)),
                               rtol=1e-5, atol=1e-6)
    big = np.zeros((512, 512), np.float32)  # 1 MB: over MAX_BYTES with the rest
    prog = xlapy.compile(_text(lambda a, n: _solve_branch(a, a, n), big, np.int32(1)),
                         backend="cpu")
    assert branch_loop.LABEL not in _hows(prog)


def test_a_runtime_custom_call_target_runs_through_the_branch_executable() -> None:
    from xlapy.interpreter.evaluator import RuntimeState

    a, b = _args(2)
    text = _text(_solve_branch, a, b, np.int32(1))
    prog = xlapy.compile(text, backend="cpu", options=BRANCHES_ONLY)
    assert branch_loop.LABEL in _hows(prog)
    target = next(t for _, s in prog._exe.subexecs if isinstance(s, branch_loop.Trip)
                  for t in s.targets if "getrf" in t)
    seen: list[int] = []

    def getrf(operands: Any, shape: Any, attrs: Any) -> Any:
        seen.append(1)
        raise ValueError("the registered getrf ran")

    rt = RuntimeState(custom_calls={target: getrf})
    with pytest.raises(Exception, match="the registered getrf ran"):
        prog._exe.run([a, b, np.array(1, np.int32)], rt)
    assert seen
    _same(prog(a, b, np.int32(1)), prog._exe.run([a, b, np.array(1, np.int32)]))


BRANCHES = """
HloModule branches

%neg (p: f32[200000]) -> f32[200000] {
  %p = f32[200000] parameter(0)
  ROOT %n = f32[200000] negate(%p)
}

%absf (a: f32[200000]) -> f32[200000] {
  %a = f32[200000] parameter(0)
  ROOT %m = f32[200000] abs(%a)
}

%same (q: f32[200000]) -> f32[200000] {
  ROOT %q = f32[200000] parameter(0)
}

ENTRY %main (x: f32[200000], b: pred[], k: s32[]) -> (f32[200000], f32[200000]) {
  %x = f32[200000] parameter(0)
  %b = pred[] parameter(1)
  %k = s32[] parameter(2)
  %e = f32[200000] exponential(%x)
  %s = f32[200000] sine(%e)
  %t = f32[200000] multiply(%s, %e)
  %c1 = f32[200000] conditional(%b, %t, %t), true_computation=%neg, false_computation=%absf
  %c2 = f32[200000] conditional(%k, %t, %s, %e), branch_computations={%neg, %same, %neg}
  ROOT %r = (f32[200000], f32[200000]) tuple(%c1, %c2)
}
"""


def test_branch_thunks_pick_clamp_and_copy_passed_values_off_the_arena() -> None:
    """if and case without the interpreter's op context (branch_thunk): the pred and the
    index pick (an index outside [0, n) runs the last branch); a branch returning its
    operand (an arena temporary here) returns a copy that later calls leave alone."""
    prog = xlapy.compile(BRANCHES, backend="cpu")
    assert sum("branch_thunk" in th.__qualname__ for th in prog._exe.thunks) == 2
    interp = xlapy.compile(BRANCHES, backend="interpreter")
    x = np.linspace(-1, 1, 200000, dtype=np.float32)  # (big: conditional_to_select leaves it)
    firsts = []
    for b, k in [(True, 0), (False, 1), (True, 2), (False, 7), (True, -3)]:
        got = prog(x + 0.01 * k, np.bool_(b), np.int32(k))
        for g, w in zip(got, interp(x + 0.01 * k, np.bool_(b), np.int32(k))):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        firsts.append((got, tuple(np.array(g) for g in got)))
    for got, copy in firsts:  # no result is a view of memory a later call reused
        _same(got, copy)


def test_a_trip_is_no_loop_for_the_iteration_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """XLAPY_MAX_WHILE_ITERATIONS counts the program's loops: a branch of LAPACK calls and
    kernels, run as one trip, runs under a limit of 0."""
    def f(a: Any, b: Any, n: Any) -> Any:
        def chol(ab: Any) -> Any:
            a, b = ab
            c = jax.scipy.linalg.cho_factor(a @ a.T + 8 * jnp.eye(8, dtype=a.dtype))
            return jnp.tanh(jax.scipy.linalg.cho_solve(c, b)) @ a

        return jax.lax.cond(n > 0, chol, lambda ab: ab[0] * ab[1], (a, b))

    a, b = _args(4)
    text = _text(f, a, b, np.int32(1))
    prog = xlapy.compile(text, backend="cpu", options=BRANCHES_ONLY)
    assert branch_loop.LABEL in _hows(prog) and "while" not in text
    want = prog(a, b, np.int32(1))
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "0")
    _same(prog(a, b, np.int32(1)), want)


def _solve_loop(a: Any, b: Any) -> Any:
    """A small program of LAPACK calls, the pivots' loop and a fori_loop of trsm steps."""
    return jax.lax.fori_loop(0, 6, lambda i, c: c * 0.5 + jnp.linalg.solve(a, b + c), b * 0)


ENTRY = "runs as one native loop trip"


def test_a_small_entry_runs_as_one_trip_with_its_thunks_bits() -> None:
    """The whole entry computation as one trip (branch_loop.entry_trip): the bits of its
    thunks, fresh results every call, arguments checked as before; over MAX_BYTES, or with
    the option off, the thunks run it."""
    a, b = _args(5)
    b = b[:, 0]
    text = _text(_solve_loop, a, b)
    prog = xlapy.compile(text, backend="cpu")
    assert isinstance(prog._exe.trip, branch_loop.Trip) and ENTRY in prog._exe.explain()
    ref = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    assert ref._exe.trip is None and ENTRY not in ref._exe.explain()
    firsts = []
    for seed in range(3):
        a, b = _args(seed)
        got = prog(a, b[:, 0])
        _same(got, ref(a, b[:, 0]))
        np.testing.assert_allclose(got, jax.jit(_solve_loop)(a, b[:, 0]), rtol=2e-5,
                                   atol=1e-6)
        firsts.append((got, np.array(got)))
    for got, copy in firsts:  # no result is memory a later call wrote
        _same(got, copy)
    with pytest.raises(xlapy.XlapyError, match=r"8,8|8, 8"):
        prog(a[:4], b[:, 0])
    _same(prog(a.astype(np.float64), b[:, 0]), ref(a, b[:, 0]))  # (same kind: converted)
    big = np.eye(512, dtype=np.float32)  # 1 MB: over MAX_BYTES with the rest
    prog = xlapy.compile(_text(_solve_loop, big, big[0]), backend="cpu")
    assert prog._exe.trip is None
    # 64 KB and its vectors: a trip (at a 64 KB bound it was not: a 128 x 128 solve's
    # Python, ~200 us, outweighed its LAPACK)
    mid = np.eye(128, dtype=np.float32) * 2
    text = _text(_solve_loop, mid, mid[0])
    prog = xlapy.compile(text, backend="cpu")
    assert isinstance(prog._exe.trip, branch_loop.Trip)
    ref = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    _same(prog(mid, mid[1]), ref(mid, mid[1]))


def _xent(lg: Any, y: Any) -> Any:
    """Cross entropy with integer labels: kernels only."""
    lp = jax.nn.log_softmax(lg)
    return -jnp.mean(jnp.take_along_axis(lp, y[:, None], 1))


def test_an_entry_of_kernels_one_of_them_split_keeps_its_thunks() -> None:
    """A small entry of kernels only, one as big as options.split_cost (cross entropy over
    [8192, 10]), runs as its thunks (`kernel_bound`): the trip ran it slower, at twice the
    compile. The same program over 256 rows, and an entry with LAPACK steps beside a big
    kernel, stay trips."""
    rng = np.random.default_rng(0)
    lg = rng.standard_normal((8192, 10)).astype(np.float32)
    y = rng.integers(0, 10, 8192).astype(np.int32)
    prog = xlapy.compile(_text(_xent, lg, y), backend="cpu")
    exe = prog._exe
    assert branch_loop.kernel_bound(exe) and exe.trip is None and ENTRY not in exe.explain()
    assert any(s is not None and s.cost >= exe.options.split_cost for s in exe.kernel_specs)
    np.testing.assert_allclose(prog(lg, y), jax.jit(_xent)(lg, y), rtol=1e-5)
    small = xlapy.compile(_text(_xent, lg[:256], y[:256]), backend="cpu")
    assert not branch_loop.kernel_bound(small._exe)
    a = np.eye(256, dtype=np.float32) * 2 + 0.01
    b = rng.standard_normal((256, 16)).astype(np.float32)
    lapack = xlapy.compile(_text(lambda a, b: jax.scipy.linalg.cho_solve(
        (jnp.linalg.cholesky(a @ a.T + a), True), b), a, b), backend="cpu")
    assert not branch_loop.kernel_bound(lapack._exe)
    assert isinstance(lapack._exe.trip, branch_loop.Trip)


def test_an_entry_trip_honours_runtime_targets_and_the_iteration_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A RuntimeState registering one of its custom-call targets runs the thunks (which look
    it up); XLAPY_MAX_WHILE_ITERATIONS still counts the program's own loops inside the trip
    (the trip's loop is uncounted: its inner loops ran to the end under any limit)."""
    from xlapy.interpreter.evaluator import RuntimeState

    a, b = _args(6)
    b = b[:, 0]
    prog = xlapy.compile(_text(_solve_loop, a, b), backend="cpu")
    trip = prog._exe.trip
    assert trip is not None
    target = next(t for t in trip.targets if "getrf" in t)

    def getrf(operands: Any, shape: Any, attrs: Any) -> Any:
        raise ValueError("the registered getrf ran")

    with pytest.raises(Exception, match="the registered getrf ran"):
        prog._exe.run([a, b], RuntimeState(custom_calls={target: getrf}))
    want = prog(a, b)
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "5")
    with pytest.raises(xlapy.XlapyError, match="XLAPY_MAX_WHILE_ITERATIONS=5"):
        prog(a, b)
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "8")
    _same(prog(a, b), want)


def test_an_entry_trip_compiles_its_thunks_only_for_a_run_that_needs_them() -> None:
    """With the trip built, the entry's own kernels are emitted but not compiled
    (branch_loop.defer_thunks: they were a second compile of the trip's; betainc's compile
    835 -> 576 ms): trip runs leave them so; a runtime registering one of
    its custom-call targets, or a look at the thunks, compiles and binds them, and they
    compute the trip's bits. An entry without a trip compiles them at once."""
    from xlapy.interpreter.evaluator import RuntimeState

    a, b = _args(7)
    b = b[:, 0]
    prog = xlapy.compile(_text(_solve_loop, a, b), backend="cpu")
    exe = prog._exe
    assert exe.trip is not None and exe._pending is not None
    assert exe.__dict__["_engines"] == [] and exe.__dict__["_kernel_addrs"] == []
    want = prog(a, b)
    assert exe._pending is not None  # (the trip ran it)
    target = next(t for t in exe.trip.targets if "getrf" in t)

    def getrf(operands: Any, shape: Any, attrs: Any) -> Any:
        raise ValueError("the registered getrf ran")

    with pytest.raises(Exception, match="the registered getrf ran"):
        exe.run([a, b], RuntimeState(custom_calls={target: getrf}))
    assert exe._pending is None and exe.engines and all(exe.kernel_addrs)
    trip, exe.trip = exe.trip, None
    try:
        _same(prog(a, b), want)  # the thunks, bound late
    finally:
        exe.trip = trip
    lazy = xlapy.compile(_text(_solve_loop, a, b), backend="cpu")._exe
    assert lazy._pending is not None and lazy.thunks and lazy._pending is None
    lazy = xlapy.compile(_text(_solve_loop, a, b), backend="cpu")._exe
    n = len(lazy.objects)
    assert lazy.all_objects() and len(lazy.objects) > n and lazy._pending is None
    plain = xlapy.compile(_text(_solve_loop, a, b), backend="cpu",
                          options={"entry_trip": False})._exe
    assert plain.trip is None and plain._pending is None and plain.__dict__["_engines"]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_region_gemm_whose_product_is_a_branch_result(threads: int) -> None:
    """expm's Pade branch at 64 x 64: u = a @ (a2 * 3 + 2 I) is a result of the trip's body
    and a member of a row-parallel region; the loop gave such a product no buffer (only a
    GEMM step's output got one) and the GEMM stored through a null pointer (a segfault)."""
    n = 64
    eye = jnp.eye(n, dtype=jnp.float32)

    def pade3(a: Any) -> Any:
        a2 = a @ a
        return a @ (a2 * 3.0 + eye * 2.0), a2 * 5.0 + eye * 4.0

    def fn(a: Any, k: Any) -> Any:
        return jax.lax.cond(k > 0, pade3, lambda a: (a, a), a)

    a = (np.random.default_rng(3).standard_normal((n, n)) * 0.1).astype(np.float32)
    text = _text(fn, a, np.int32(1))
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads,
                                                       "entry_trip": False})
    assert "row-parallel" in prog._exe.explain() and branch_loop.LABEL in prog._exe.explain()
    want = fn(a, np.int32(1))
    for k in (1, 0, 1):
        got = prog(a, np.int32(k))
        for g, w in zip(got, fn(a, np.int32(k)) if k != 1 else want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_expm_of_a_64_by_64_matrix() -> None:
    a = (np.random.default_rng(4).standard_normal((64, 64)) * 0.1).astype(np.float32)
    prog = xlapy.compile(_text(jax.scipy.linalg.expm, a), backend="cpu")
    np.testing.assert_allclose(prog(a), jax.scipy.linalg.expm(a), rtol=2e-5, atol=2e-5)


def _cond_tuple(p: Any, x: Any) -> Any:
    """A convert, then a case whose branches are two kernels each (lax.cond's shape)."""
    return jax.lax.cond(p[0] > 0, lambda x: (x * 2, jnp.sum(x)),
                        lambda x: (x - 1, jnp.max(x)), x)


def test_an_entry_of_a_convert_and_a_cond_runs_as_a_trip() -> None:
    """A case/if thunk weighs BRANCH_THUNKS (its branch executable's thunks follow it): the
    entry of two thunks, a convert and a case of two kernels a branch, is a trip (23.5 ->
    10.5 us a call; XLA 22), with its thunks' bits on either branch."""
    x = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    text = _text(_cond_tuple, np.ones(1, np.float32), x)
    prog = xlapy.compile(text, backend="cpu")
    assert isinstance(prog._exe.trip, branch_loop.Trip) and ENTRY in prog._exe.explain()
    ref = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    for p in (1.0, -1.0):
        got = prog(np.array([p], np.float32), x)
        for g, r, j in zip(got, ref(np.array([p], np.float32), x),
                           jax.jit(_cond_tuple)(np.array([p], np.float32), x)):
            _same(g, r)
            np.testing.assert_allclose(np.asarray(g), np.asarray(j), rtol=1e-6)


def test_an_entry_of_a_big_lapack_batch_keeps_its_thunks() -> None:
    """A batch whose LAPACK work its thunk splits over the threads (lapack.splits, SPLIT_WORK)
    is no trip, whose steps run on one thread (Zen 4, 2 threads: jnp.linalg.solve of 32 64 x
    64 matrices 1.20 -> 0.93 of XLA's time); a smaller one, or one thread, keeps the trip."""
    rng = np.random.default_rng(1)

    def solve(n: int, batch: int, threads: int) -> Any:
        a = (rng.standard_normal((batch, n, n)) + 8 * np.eye(n)).astype(np.float32)
        b = rng.standard_normal((batch, n, 2)).astype(np.float32)
        text = jax.jit(jnp.linalg.solve).lower(a, b).as_text()
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
        ref = xlapy.compile(text, backend="interpreter")
        _same(prog(a, b), ref(a, b))
        return prog._exe.trip

    assert solve(64, 32, 2) is None
    assert isinstance(solve(64, 8, 2), branch_loop.Trip)
    assert isinstance(solve(64, 32, 1), branch_loop.Trip)


def _momentum(*a: Any) -> list[Any]:
    """SGD with momentum over parameters, gradients and velocities (a third of `a` each),
    the new parameters, velocities and squared gradients."""
    n = len(a) // 3
    out: list[Any] = []
    for p, g, v in zip(a[:n], a[n:2 * n], a[2 * n:]):
        v = 0.9 * v + g
        out += [p - 1e-2 * v, v, g * g]
    return out


def test_an_entry_trip_over_kept_bytes_binds_the_callers_arrays() -> None:
    """A trip whose state is over loop_bind.KEPT_BYTES binds the caller's arrays in place,
    an array seen on the last call at the address taken then (an Adam step over 40 small
    parameters spent 0.5 us a pointer, 0.57 ms a call against XLA's 0.38, now 0.35): one
    changed in place since is read afresh, a new one at its own address, a dead one is not
    kept alive; the results are fresh buffers the loop owns (no zeros copied in)."""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(12)]
    text = _text(_momentum, *args)
    prog = xlapy.compile(text, backend="cpu")
    trip = prog._exe.trip
    assert isinstance(trip, branch_loop.Trip)
    assert set(range(trip.first, trip.first + 12)) <= trip.nw.owned
    ref = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    first = prog(*args)
    kept = [np.array(r) for r in first]
    _same(first, ref(*args))
    args[0] += 1  # (in place: the same object, other values)
    _same(prog(*args), ref(*args))
    fresh = [a.copy() for a in args]
    fresh[3] = fresh[3] * 2
    _same(prog(*fresh), ref(*fresh))
    _same(tuple(first), tuple(kept))  # (later calls wrote none of the first's results)
    import gc
    import weakref

    once = [a.copy() for a in args]  # (to the trip alone: `ref` keeps its last arguments)
    prog(*once)
    gone = weakref.ref(once[3])
    del once
    gc.collect()
    assert gone() is None
