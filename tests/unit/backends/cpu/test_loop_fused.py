"""loop_fused.py: a tiny while loop runs as one function of its own, with the bits of the
generic driver's run (and the interpreter's), on any path that drives it: a top-level loop,
an entry trip's step, an inner loop of a native loop."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy import denormal
from xlapy.backends.cpu import loop_fused
from xlapy.errors import XlapyError

from .test_nested_in_place import _edit

pytestmark = pytest.mark.usefixtures("jax_x32")

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

#: Each path that runs a loop: as an entry trip's step (the default for a small program)
#: and as a top-level loop of the thunks.
PATHS = [{}, {"entry_trip": False}]


def _loops(exe: Any) -> list[Any]:
    """Every native loop of `exe` and of the computations it calls, depth first."""
    out = list(exe.native_loops.values())
    for _, sub in exe.subexecs:
        out += _loops(sub)
    return out


def _check(f: Any, args: list[Any], options: dict[str, Any], fused: int = 1) -> Any:
    """Compile f's lowering fused and with the driver: `fused` loops fused, the results
    equal bit for bit to the driver's and the interpreter's."""
    text = jax.jit(f).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu", options=options)
    driver = xlapy.compile(text, backend="cpu", options={**options, "fused_loops": False})
    assert sum(nw.fused is not None for nw in _loops(prog._exe)) == fused
    assert all(nw.fused is None for nw in _loops(driver._exe))
    with denormal.use(options.get("denormal", denormal.FTZ)):
        want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(2):  # (the second call reuses the prepared loop)
        for got, ref in [(prog(*args), want), (driver(*args), want)]:
            for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    return prog


def _histogram(x: Any) -> Any:
    return lax.fori_loop(0, x.shape[0], lambda i, h: h.at[
        jnp.clip((x[i] * 10 + 50).astype(jnp.int32), 0, 99)].add(1), jnp.zeros(100, jnp.int32))


@pytest.mark.parametrize("options", PATHS)
@pytest.mark.parametrize("n", [2, 7, 5000])
def test_a_histogram_loop_is_one_function(options: dict[str, Any], n: int) -> None:
    """A scatter window on the stack, two counters in registers; 5000 steps take several
    driver calls (slices)."""
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    prog = _check(_histogram, [x], options)
    np.testing.assert_array_equal(prog(x), jax.jit(_histogram)(x))
    assert any("fused into one function" in how for _, _, how in _report(prog._exe))


@pytest.mark.parametrize("options", PATHS)
def test_a_loop_that_never_runs_its_body(options: dict[str, Any]) -> None:
    """A condition false at once: no iteration, the state as it came (and d[10] set)."""
    def f(a: Any, n: Any) -> Any:
        return lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 2.0 + 1),
                              (jnp.int32(0), a))

    args = [np.arange(4, dtype=np.float32), np.int32(0)]
    prog = _check(f, args, options)
    for n in (0, 1, 5, -3):
        got = prog(args[0], np.int32(n))
        np.testing.assert_array_equal(got[1], jax.jit(f)(args[0], np.int32(n))[1])


def _report(exe: Any) -> list[tuple[str, str, str]]:
    out = list(exe.report)
    for _, sub in exe.subexecs:
        out += _report(sub)
    return out


@pytest.mark.parametrize("options", PATHS)
def test_state_rotations_and_several_results(options: dict[str, Any]) -> None:
    """Moves (a result that is another state element as it was, as threefry's key
    rotation), a result returned twice and a passed-through array the body only reads."""
    def f(a: Any, b: Any, x: Any) -> Any:
        def body(i: Any, s: Any) -> Any:
            p, q, r, t = s
            u = p * 0.5 + x[i % 8]
            return q, p, u, u
        return lax.fori_loop(0, 9, body, (a, b, a * 2, b * 3))

    args = [np.arange(3, dtype=np.float32), np.arange(3, dtype=np.float32) + 10,
            np.linspace(-1, 1, 8).astype(np.float32)]
    _check(f, args, options)


@pytest.mark.parametrize("options", PATHS)
def test_an_inner_loop_is_fused_inside_a_native_loop(options: dict[str, Any]) -> None:
    """An edit distance: the outer fori_loop stays on the driver, its inner one (a scalar
    dynamic_update_slice of the 33 x 33 table, too big for the stack) is fused and run by
    the outer loop's nested step."""
    rng = np.random.default_rng(1)
    args = [rng.integers(0, 4, 32).astype(np.int32), rng.integers(0, 4, 32).astype(np.int32)]
    prog = _check(_edit, args, options)
    np.testing.assert_array_equal(prog(*args), jax.jit(_edit)(*args))
    for nw in _loops(prog._exe):  # (the inner loop's own kernels were never needed)
        assert (nw.body._binding is not None) == (nw.fused is not None)


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_denormals_flush_as_the_kernels_mode(mode: str) -> None:
    """The fused function sets the compile's denormal mode once, as the driver does: a
    value halved into denormals flushes (ftz) or keeps them (ieee), the same bits."""
    def f(x: Any) -> Any:
        return lax.fori_loop(0, 140, lambda i, c: c * 0.5 + c * 1e-3, x)

    x = np.array([1.0, -3.0, 1e-30, 0.0], np.float32)
    prog = _check(f, [x], {"denormal": mode})
    got = np.asarray(prog(x))
    assert (np.abs(got[:2]) < np.finfo(np.float32).tiny).all()
    assert ((got[:2] == 0).all()) == (mode == "ftz")


def test_the_iteration_limit_stops_a_fused_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """XLAPY_MAX_WHILE_ITERATIONS: the slices stop at the limit, whose error names it."""
    x = np.ones(3000, np.float32)
    text = jax.jit(_histogram).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    assert _loops(prog._exe)[0].fused is not None
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "1000")
    with pytest.raises(XlapyError, match="1000"):
        prog(x)
    monkeypatch.delenv("XLAPY_MAX_WHILE_ITERATIONS")
    np.testing.assert_array_equal(prog(x), jax.jit(_histogram)(x))


def test_calls_from_two_threads_at_once() -> None:
    """A second thread running the loop gets tables of its own (NativeWhile.run), and so
    its own stack state: the fused function keeps nothing between calls."""
    text = jax.jit(_histogram).lower(np.ones(4000, np.float32)).as_text()
    prog = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    xs = [np.random.default_rng(s).standard_normal(4000).astype(np.float32) for s in range(4)]
    want = [np.asarray(jax.jit(_histogram)(x)) for x in xs]
    bad: list[int] = []

    def work(k: int) -> None:
        for _ in range(20):
            if not np.array_equal(prog(xs[k]), want[k]):
                bad.append(k)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_what_stays_on_the_driver() -> None:
    """A body with a GEMM step, a body past the element limit and fused_loops off keep the
    generic driver; a scan's stacked outputs past the stack limit stay in their buffer."""
    w = np.eye(64, dtype=np.float32)
    gemm = jax.jit(lambda v: lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c @ w), v))
    v = np.ones((64, 64), np.float32)
    prog = xlapy.compile(gemm.lower(v).as_text(), backend="cpu")
    assert all(nw.fused is None for nw in _loops(prog._exe))
    big = np.ones(loop_fused.MAX_ELEMENTS + 1, np.float32)
    prog = xlapy.compile(jax.jit(lambda v: lax.fori_loop(
        0, 3, lambda i, c: c * 0.5, v)).lower(big).as_text(), backend="cpu")
    assert all(nw.fused is None for nw in _loops(prog._exe))
    xs = np.arange(3000 * 4, dtype=np.float32).reshape(3000, 4) * np.float32(1e-4)
    scan = jax.jit(lambda v: lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(4), v)[1])
    assert xs.nbytes > loop_fused.MAX_BYTES
    prog = _check(lambda v: lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(4), v)[1],
                  [xs], {})
    np.testing.assert_array_equal(prog(xs), scan(xs))


@pytest.mark.parametrize("options", PATHS)
def test_a_fused_loops_condition_and_body_compile_only_when_run(options: dict[str, Any]
                                                                ) -> None:
    """The fused module is the loop's code: its condition's and body's own kernels (for
    the Python path) are printed, not compiled, through compile and calls; running the
    body as an executable, or asking for every object, compiles them then, with the bits
    of the driver's body."""
    x = np.random.default_rng(3).standard_normal(50).astype(np.float32)
    text = jax.jit(_histogram).lower(x).as_text()
    prog = _check(_histogram, [x], options)
    driver = xlapy.compile(text, backend="cpu", options={**options, "fused_loops": False})
    (nw,), (dw,) = _loops(prog._exe), _loops(driver._exe)
    assert nw.cond._binding is not None and nw.body._binding is not None
    assert dw.cond._binding is None and dw.body._binding is None
    assert nw.body.kernel_ir and nw.body.sequence is not None  # (planned, not compiled)
    assert nw.body._binding is not None
    # a state the loop may meet: step 7 of 50, some counts, x
    shapes = [q.shape for q in nw.body.comp.parameters]
    state = [x if sh.dtype == np.float32 else np.int32(7) if not sh.dimensions else
             np.arange(100, dtype=np.int32) for sh in shapes]
    got, want = nw.body.run_computation(state), dw.body.run_computation(state)
    assert nw.body._binding is None
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    names = [n for n, _ in prog._exe.all_objects()]
    assert nw.cond._binding is None and len(names) >= len(
        [n for n, _ in driver._exe.all_objects()]) - 1


def test_a_fusible_bodys_kernels_never_compile_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """early_compile leaves a small kernel of a loop part alone while loops may fuse (the
    fused module compiles its copy; fori_nested's tanh kernel was compiled twice, 21 -> 41
    ms cold); with fused_loops off it compiles early as any other."""
    from xlapy.backends.cpu import cache, early_compile, parallel_compile

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 2)
    monkeypatch.setattr(early_compile, "MIN_INSTRUCTIONS", 1)
    x = np.linspace(-2, 2, 64).astype(np.float32)
    text = jax.jit(lambda v: lax.fori_loop(0, 5, lambda i, c: jnp.tanh(c) * 0.5 + v, v)
                   ).lower(x).as_text()
    for fused in (True, False):
        cache.clear_memory()
        prog = xlapy.compile(text, backend="cpu", options={"fused_loops": fused})
        (nw,) = _loops(prog._exe)
        assert (nw.fused is not None) == fused
        assert bool(nw.body._early.jobs) != fused


def test_a_body_with_a_loop_to_vectorize_gets_o3() -> None:
    """A body whose kernel is a loop for LLVM's vectorizer (a 256-float window update, not
    written in explicit vectors) compiles through O3 as its own module would (the short
    pipeline left it scalar: ring_loop 0.14 -> 0.53 ms); a scalar body through the short
    pipeline. Same bits either way."""
    def ring(c: Any) -> Any:
        return lax.fori_loop(0, 40, lambda i, c: lax.dynamic_update_slice(
            c, lax.dynamic_slice(c, (i, 0), (1, 256)) * 0.5 + 1.0, ((i + 1) % 40, 0)), c)

    def sumsq(v: Any) -> Any:
        return lax.fori_loop(0, 9, lambda i, c: c + v[i] * v[i], jnp.float32(0))

    x = np.random.default_rng(4).standard_normal((40, 256)).astype(np.float32)
    for f, args, light in [(ring, [x], False), (sumsq, [x[0]], loop_fused.MODE)]:
        prog = _check(f, args, {})
        (nw,) = _loops(prog._exe)
        assert loop_fused.plan(nw).light == light  # type: ignore[union-attr]
