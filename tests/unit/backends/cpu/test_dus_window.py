"""A native loop's dynamic_update_slice of its own state runs as a window kernel written in
place (dus_window.py): the same values as the interpreter, the caller's arrays untouched,
and only where nothing else reads the old value."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

IN_PLACE = "updated in place"

#: lax.scan's shape: ys[i] = c * x_i, c += x_i (JAX's lowering, calls inlined).
SCAN = """
func.func @main(%xs: tensor<{n}x{w}xf32>, %ys0: tensor<{n}x{w}xf32>) -> tensor<{n}x{w}xf32> {{
  %c0 = stablehlo.constant dense<0.0> : tensor<{w}xf32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:4 = stablehlo.while(%x = %xs, %i = %i0, %c = %c0, %ys = %ys0)
      : tensor<{n}x{w}xf32>, tensor<i32>, tensor<{w}xf32>, tensor<{n}x{w}xf32>
    cond {{
      %lim = stablehlo.constant dense<{steps}> : tensor<i32>
      %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %z = stablehlo.constant dense<0> : tensor<i32>
      %row = stablehlo.dynamic_slice %x, %i, %z, sizes = [1, {w}]
          : (tensor<{n}x{w}xf32>, tensor<i32>, tensor<i32>) -> tensor<1x{w}xf32>
      %v = stablehlo.reshape %row : (tensor<1x{w}xf32>) -> tensor<{w}xf32>
      %c1 = stablehlo.add %c, %v : tensor<{w}xf32>
      %y = stablehlo.multiply %c, %v : tensor<{w}xf32>
      %yb = stablehlo.broadcast_in_dim %y, dims = [1] : (tensor<{w}xf32>) -> tensor<1x{w}xf32>
      %at = {start}
      %ys1 = stablehlo.dynamic_update_slice %ys, %yb, %at, %z
          : (tensor<{n}x{w}xf32>, tensor<1x{w}xf32>, tensor<i32>, tensor<i32>)
          -> tensor<{n}x{w}xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return {ret} : tensor<{n}x{w}xf32>, tensor<i32>, tensor<{w}xf32>,
          tensor<{n}x{w}xf32>
    }}
  return %r#3 : tensor<{n}x{w}xf32>
}}
"""
FORWARD = "stablehlo.add %i, %z : tensor<i32>"


def _scan(n: int, w: int, steps: int, start: str = FORWARD,
          ret: str = "%x, %i1, %c1, %ys1") -> str:
    return SCAN.format(n=n, w=w, steps=steps, start=start, ret=ret)


def _reverse(n: int, w: int) -> str:
    """reverse=True's start n - 1 - i, computed inside the window kernel."""
    text = _scan(n, w, n, "stablehlo.subtract %last, %i : tensor<i32>")
    return text.replace("      %at =", f"      %last = stablehlo.constant dense<{n - 1}> "
                                      ": tensor<i32>\n      %at =")


def _run(text: str, *args: np.ndarray) -> tuple[np.ndarray, str]:
    prog = xlapy.compile(text, "cpu")
    want = np.asarray(xlapy.compile(text, "interpreter")(*args))
    got = np.asarray(prog(*args))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(prog(*args)), want)  # tables reused
    return got, prog._exe.explain()  # type: ignore[attr-defined]


def _operands(n: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n * 31 + w)
    return (rng.standard_normal((n, w)).astype(np.float32),
            rng.standard_normal((n, w)).astype(np.float32))


@pytest.mark.parametrize(("n", "w"), [(200, 128), (37, 5), (3, 1000), (64, 1)])
def test_scan_outputs_are_written_in_place(n: int, w: int) -> None:
    xs, ys0 = _operands(n, w)
    keep = ys0.copy()
    _, report = _run(_scan(n, w, n), xs, ys0)
    assert IN_PLACE in report
    np.testing.assert_array_equal(ys0, keep)  # the caller's initial state is not written


def test_fewer_steps_than_rows_keep_the_initial_rows() -> None:
    xs, ys0 = _operands(50, 16)
    got, report = _run(_scan(50, 16, 20), xs, ys0)
    assert IN_PLACE in report
    np.testing.assert_array_equal(got[20:], ys0[20:])


def test_a_computed_start_and_clamping() -> None:
    """reverse=True's n - 1 - i; past the end (more steps than rows) the start clamps, as
    the interpreter's does."""
    xs, ys0 = _operands(40, 8)
    _, report = _run(_reverse(40, 8), xs, ys0)
    assert IN_PLACE in report
    over = _scan(40, 8, 55)  # i runs to 54: starts 40..54 clamp to 39 (x's slice too)
    _, report = _run(over, xs, ys0)
    assert IN_PLACE in report


def test_a_state_element_nobody_reads_after_the_loop_is_still_copied_first() -> None:
    """ys unread after the loop (only c is returned): a passed-through element nobody reads
    is bound in place (native_loop's `unread`), but one written in place must be a copy."""
    xs, ys0 = _operands(30, 8)
    keep = ys0.copy()
    text = _scan(30, 8, 30).replace("return %r#3 : tensor<30x8xf32>",
                                    "return %r#2 : tensor<8xf32>").replace(
        "-> tensor<30x8xf32> {\n  %c0", "-> tensor<8xf32> {\n  %c0")
    _, report = _run(text, xs, ys0)
    assert IN_PLACE in report
    np.testing.assert_array_equal(ys0, keep)


def test_not_in_place_when_the_body_reads_the_old_state() -> None:
    """ys is also read (ys + 0 passed on as x): the old value must survive the update."""
    xs, ys0 = _operands(30, 8)
    text = _scan(30, 8, 30).replace("%row = stablehlo.dynamic_slice %x,",
                                    "%row = stablehlo.dynamic_slice %ys,")
    _, report = _run(text, xs, ys0)
    assert "native while loop" in report and IN_PLACE not in report


def test_not_in_place_when_the_update_goes_to_another_element() -> None:
    """The updated ys is returned as element 0 (x) and x as element 3: no in-place write."""
    xs, _ = _operands(30, 8)
    text = _scan(30, 8, 30, ret="%ys1, %i1, %c1, %x")
    _, report = _run(text, xs, xs.copy())
    assert IN_PLACE not in report


def test_two_dimensional_windows() -> None:
    """A [2, 3] window into a [6, 9] state at (i mod 5, 2 i mod 7), clamped."""
    text = """
func.func @main(%s0: tensor<6x9xf64>, %u: tensor<2x3xf64>) -> tensor<6x9xf64> {
  %i0 = stablehlo.constant dense<0> : tensor<i64>
  %r:2 = stablehlo.while(%i = %i0, %s = %s0) : tensor<i64>, tensor<6x9xf64>
    cond {
      %lim = stablehlo.constant dense<12> : tensor<i64>
      %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %five = stablehlo.constant dense<5> : tensor<i64>
      %seven = stablehlo.constant dense<7> : tensor<i64>
      %two = stablehlo.constant dense<2> : tensor<i64>
      %a = stablehlo.remainder %i, %five : tensor<i64>
      %i2 = stablehlo.multiply %i, %two : tensor<i64>
      %b = stablehlo.remainder %i2, %seven : tensor<i64>
      %f = stablehlo.convert %i : (tensor<i64>) -> tensor<f64>
      %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f64>) -> tensor<2x3xf64>
      %v = stablehlo.add %u, %fb : tensor<2x3xf64>
      %s1 = stablehlo.dynamic_update_slice %s, %v, %a, %b
          : (tensor<6x9xf64>, tensor<2x3xf64>, tensor<i64>, tensor<i64>) -> tensor<6x9xf64>
      %one = stablehlo.constant dense<1> : tensor<i64>
      %i1 = stablehlo.add %i, %one : tensor<i64>
      stablehlo.return %i1, %s1 : tensor<i64>, tensor<6x9xf64>
    }
  return %r#1 : tensor<6x9xf64>
}
"""
    rng = np.random.default_rng(5)
    s0, u = rng.standard_normal((6, 9)), rng.standard_normal((2, 3))
    keep = s0.copy()
    _, report = _run(text, s0, u)
    assert IN_PLACE in report
    np.testing.assert_array_equal(s0, keep)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_big_windows_split_over_threads(threads: int) -> None:
    """A window of many rows (the kernel's outer loop) may be split: the same values."""
    n, w = 4096, 256
    text = """
func.func @main(%s0: tensor<4x4096x256xf32>, %u: tensor<1x4096x256xf32>)
    -> tensor<4x4096x256xf32> {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %i0, %s = %s0) : tensor<i32>, tensor<4x4096x256xf32>
    cond {
      %lim = stablehlo.constant dense<4> : tensor<i32>
      %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %e = stablehlo.exponential %u : tensor<1x4096x256xf32>
      %s1 = stablehlo.dynamic_update_slice %s, %e, %i, %z, %z
          : (tensor<4x4096x256xf32>, tensor<1x4096x256xf32>, tensor<i32>, tensor<i32>,
             tensor<i32>) -> tensor<4x4096x256xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %s1 : tensor<i32>, tensor<4x4096x256xf32>
    }
  return %r#1 : tensor<4x4096x256xf32>
}
"""
    rng = np.random.default_rng(8)
    s0 = np.zeros((4, n, w), np.float32)
    u = rng.standard_normal((1, n, w)).astype(np.float32)
    prog = xlapy.compile(text, "cpu", options={"num_threads": threads})
    assert IN_PLACE in prog._exe.explain()  # type: ignore[attr-defined]
    got = np.asarray(prog(s0, u))
    want = np.asarray(xlapy.compile(text, "cpu", options={"num_threads": 1})(s0, u))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_max_ulp(got[2], np.exp(u[0].astype(np.float64)).astype(np.float32),
                                    maxulp=1)


def _residuals(k: int, n: int, w: int) -> str:
    """A scan body saving k residuals a step (an LSTM gradient's forward pass): ys_j[i] =
    max(c * (j + 1), x), c += x; each ys_j a state element of its own."""
    ty = f"tensor<{n}x8x{w}xf32>"
    names = ", ".join(f"%y{j} = %ys" for j in range(k))
    saves, rets = [], []
    for j in range(k):
        saves.append(f"""
      %m{j} = stablehlo.constant dense<{j + 1}.0> : tensor<8x{w}xf32>
      %t{j} = stablehlo.multiply %c, %m{j} : tensor<8x{w}xf32>
      %h{j} = stablehlo.maximum %t{j}, %x : tensor<8x{w}xf32>
      %b{j} = stablehlo.reshape %h{j} : (tensor<8x{w}xf32>) -> tensor<1x8x{w}xf32>
      %u{j} = stablehlo.dynamic_update_slice %y{j}, %b{j}, %i, %z, %z
          : ({ty}, tensor<1x8x{w}xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> {ty}""")
        rets.append(f"%u{j}")
    return f"""
func.func @main(%x: tensor<8x{w}xf32>, %ys: {ty}) -> {ty} {{
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:{k + 2} = stablehlo.while(%i = %i0, %c = %x, {names})
      : tensor<i32>, tensor<8x{w}xf32>, {", ".join([ty] * k)}
    cond {{
      %lim = stablehlo.constant dense<{n}> : tensor<i32>
      %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %z = stablehlo.constant dense<0> : tensor<i32>{"".join(saves)}
      %c1 = stablehlo.add %c, %x : tensor<8x{w}xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %c1, {", ".join(rets)} : tensor<i32>, tensor<8x{w}xf32>,
          {", ".join([ty] * k)}
    }}
  return %r#{k + 1} : {ty}
}}
"""


def test_many_residuals_of_a_step_are_all_windows() -> None:
    """Twelve saved residuals a step: as kernels of one row-parallel region they were no
    windows, so each step copied all twelve stacked buffers (lax.scan's gradient of an LSTM:
    3.3 ms, XLA 1.5); now none joins a region and every one is updated in place."""
    k, n, w = 12, 50, 256
    rng = np.random.default_rng(9)
    x = (0.01 * rng.standard_normal((8, w))).astype(np.float32)
    ys = rng.standard_normal((n, 8, w)).astype(np.float32)
    _, report = _run(_residuals(k, n, w), x, ys)
    assert f"{k} state elements {IN_PLACE}" in report
    assert "row-parallel" not in report


def _ring(n: int, w: int, steps: int, shift: int = 1) -> str:
    """A fori_loop writing row (i + shift) % n from row i of the same state (a ring buffer,
    a time-stepping loop): the update reads the state it updates."""
    jax = pytest.importorskip("jax")
    lax = jax.lax

    def f(c: object) -> object:
        return lax.fori_loop(0, steps, lambda i, c: lax.dynamic_update_slice(
            c, lax.dynamic_slice(c, (i % n, 0), (1, w)) * 0.5 + 1.0,
            ((i + shift) % n, 0)), c)

    return jax.jit(f).lower(np.zeros((n, w), np.float32)).as_text()


@pytest.mark.parametrize(("n", "w", "shift"), [(300, 64, 1), (7, 5, 3), (2, 8, 1),
                                               (16, 33, 0)])
def test_a_window_whose_update_reads_its_own_state(n: int, w: int, shift: int) -> None:
    """The update is computed whole before it is written (dus_window.reading): the same bits
    as the interpreter, also where the row read is the row written (shift 0); each step
    had copied all of the state (2000 x 256: 52 ms, now 0.2; XLA 0.5-0.8)."""
    c0 = np.random.default_rng(n + w).standard_normal((n, w)).astype(np.float32)
    keep = c0.copy()
    _, report = _run(_ring(n, w, 2 * n + 3, shift), c0)
    assert IN_PLACE in report
    np.testing.assert_array_equal(c0, keep)


def test_an_overlapping_two_dimensional_window_read_from_its_state() -> None:
    """A reversed [3, 4] block of the state written one row and one column on (the read
    and the written windows overlap), clamped at the edges."""
    jax = pytest.importorskip("jax")
    lax = jax.lax

    def f(s: object) -> object:
        def step(i: object, s: object) -> object:
            blk = lax.dynamic_slice(s, (i % 6, (2 * i) % 9), (3, 4))
            return lax.dynamic_update_slice(s, blk[::-1, ::-1] * 2.0 - s[0, 0],
                                            (i % 6 + 1, (2 * i) % 9 + 1))
        return lax.fori_loop(0, 17, step, s)

    s0 = np.random.default_rng(2).standard_normal((8, 11))
    text = jax.jit(f).lower(s0.astype(np.float32)).as_text()
    _, report = _run(text, s0.astype(np.float32))
    assert IN_PLACE in report


@pytest.mark.parametrize("threads", [1, 2])
def test_a_buffered_window_runs_on_one_thread_and_bigger_ones_copy(threads: int) -> None:
    """A buffered window is never split (a share's writes would race another's reads), at
    BUFFER_BYTES it is one; past that the whole-array kernel runs (the same bits)."""
    from xlapy.backends.cpu import dus_window

    opts = {"num_threads": threads, "split_cost": 1, "nested_split_cost": 1}
    for w, in_place in ((dus_window.BUFFER_BYTES // 4, True),
                        (dus_window.BUFFER_BYTES // 4 + 16, False)):
        text = _ring(4, w, 9)
        c0 = np.random.default_rng(w).standard_normal((4, w)).astype(np.float32)
        prog = xlapy.compile(text, "cpu", options=opts)
        assert (IN_PLACE in prog._exe.explain()) == in_place  # type: ignore[attr-defined]
        want = np.asarray(xlapy.compile(text, "interpreter")(c0))
        np.testing.assert_array_equal(np.asarray(prog(c0)), want)


def test_not_in_place_when_a_reader_of_the_update_also_feeds_another_result() -> None:
    """c[i] feeds the update and the loop's other carry: fused into that carry's kernel
    too, it would read the written row; so the whole-array kernel runs."""
    jax = pytest.importorskip("jax")
    lax = jax.lax

    def f(c: object, acc: object) -> object:
        def step(i: object, st: object) -> object:
            c, acc = st
            row = lax.dynamic_slice(c, (i % 5, 0), (1, 8))
            return lax.dynamic_update_slice(c, row + 1.0, ((i + 1) % 5, 0)), acc + row[0]
        return lax.fori_loop(0, 12, step, (c, acc))

    c0 = np.random.default_rng(4).standard_normal((5, 8)).astype(np.float32)
    acc = np.zeros(8, np.float32)
    text = jax.jit(f).lower(c0, acc).as_text()
    prog = xlapy.compile(text, "cpu")
    assert IN_PLACE not in prog._exe.explain()  # type: ignore[attr-defined]
    want = xlapy.compile(text, "interpreter")(c0, acc)
    for g, wv in zip(prog(c0, acc), want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(wv))


def _column_loop(how: str, rows: int, cols: int, width: int = 1) -> str:
    """A fori_loop setting (or adding to) column i of k from v's (kv-cache writes:
    `k.at[:, i].set(v[:, i] * 2)`), a scatter LoopScatterWindows makes a
    dynamic_update_slice of select(in_bounds, new, dynamic_slice(k at the same starts));
    wider windows as dynamic_update_slice of an expression of dynamic_slice(k) there."""
    jax = pytest.importorskip("jax")
    lax, jnp = jax.lax, jax.numpy

    def step(i: object, k: object, v: object) -> object:
        new = lax.dynamic_slice_in_dim(v, i, width, 1) * 2.0
        if width == 1:
            at = k.at[:, i]  # type: ignore[index]
            return at.set(new[:, 0]) if how == "set" else at.add(new[:, 0])
        old = lax.dynamic_slice_in_dim(k, i, width, 1)  # (a window's own old values)
        return lax.dynamic_update_slice_in_dim(
            k, new - old * 0.5 if how == "set" else jnp.maximum(old, new), i, 1)

    def f(k: object, v: object) -> object:
        return lax.fori_loop(0, cols + 3, lambda i, k: step(i, k, v), k)  # (3 clamped)

    z = np.zeros((rows, cols), np.float32)
    return jax.jit(f).lower(z, z).as_text()


@pytest.mark.parametrize(("how", "rows", "cols", "width"), [
    ("set", 64, 40, 1), ("add", 64, 40, 1), ("set", 5, 300, 1), ("add", 33, 70, 3),
    ("set", 20, 48, 16)])
def test_a_window_reading_its_state_only_where_it_writes_needs_no_buffer(
        how: str, rows: int, cols: int, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scatter's old value is read at the window's own starts (dus_window.pointwise):
    each element is written as it is computed, no stack buffer and no second pass; a
    column's loops are not vectorized (LLVM's vectors across rows were gathers and
    scatters). kv-cache 64 x 2560: 481 -> 250 us (XLA 301). The interpreter's bits."""
    from xlapy.backends.cpu import dus_window

    buffered: list[bool] = []
    novec: list[int] = []
    real_init, real_novec = dus_window.WindowEmitter.__init__, dus_window.no_vectorize

    def init(self: object, *a: object, **kw: object) -> None:
        buffered.append(bool(kw.get("buffered", False)))
        real_init(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(dus_window.WindowEmitter, "__init__", init)
    monkeypatch.setattr(dus_window, "no_vectorize", lambda fn: (novec.append(1),
                                                                 real_novec(fn))[1])
    rng = np.random.default_rng(rows * cols + width)
    k0, v = (rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(2))
    keep = k0.copy()
    _, report = _run(_column_loop(how, rows, cols, width), k0, v)
    assert IN_PLACE in report
    assert buffered == [False]
    assert bool(novec) == (width < 16)
    np.testing.assert_array_equal(k0, keep)


def test_a_window_reading_its_state_at_other_starts_keeps_its_buffer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Read at another start (the ring buffer's row i written to row i + 1), the update
    is computed whole first (the pointwise test says no)."""
    from xlapy.backends.cpu import dus_window

    seen: list[bool] = []
    real = dus_window.pointwise
    monkeypatch.setattr(dus_window, "pointwise", lambda d, s: (seen.append(real(d, s)),
                                                               seen[-1])[1])
    c0 = np.random.default_rng(5).standard_normal((7, 5)).astype(np.float32)
    _, report = _run(_ring(7, 5, 17, 1), c0)
    assert IN_PLACE in report and seen == [False]
