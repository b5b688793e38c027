"""One-element gathers in vector lanes (gather_lanes.py): t[i] of a leaf table with every
index type, indices out of range (clamped per lane as the scalar path clamps), f32/f64/i32/
i64 tables, rows whose length is not a multiple of the lanes (masked tails), searchsorted's
loop; the interpreter's bits on 1 and 2 threads, and a masked gather in the kernel IR."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xlapy

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _both(fn, args, threads: int = 2):  # noqa: ANN001, ANN202
    text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads, "split_cost": 1})
    got = cpu(*args)
    want = xlapy.compile(text, backend="interpreter")(*args)
    assert not cpu._exe.fallbacks()
    return np.asarray(got), np.asarray(want), cpu._exe.kernel_ir


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("table_t,index_t", [
    (np.float32, np.int32), (np.float32, np.uint8), (np.float32, np.int64),
    (np.float32, np.uint32), (np.float64, np.int32), (np.int32, np.int16),
    (np.int64, np.int32)])
def test_table_lookups_in_lanes(table_t: type, index_t: type, threads: int) -> None:
    rng = np.random.default_rng(3)
    n = 200
    table = (rng.standard_normal(n) * 100).astype(table_t)
    if np.dtype(table_t).kind == "f":
        table[:3] = [np.nan, -0.0, np.inf]
    info = np.iinfo(index_t)
    idx = rng.integers(max(info.min, -50), min(info.max, n + 50), 4099).astype(index_t)
    idx[:4] = [0, n - 1, min(info.max, n), max(info.min, -1)]  # both clamps
    # jnp indexing normalizes negative indices; lax.gather clamps them as XLA does
    fn = lambda t, i: jax.lax.gather(  # noqa: E731
        t, i[:, None], jax.lax.GatherDimensionNumbers((), (0,), (0,)), (1,),
        mode=jax.lax.GatherScatterMode.CLIP) * 1
    got, want, ir = _both(fn, [table, idx], threads)
    assert got.tobytes() == want.tobytes()
    assert "llvm.masked.gather" in ir


@pytest.mark.parametrize("n", [1000, 4096])
def test_searchsorted_loop_in_lanes(n: int) -> None:
    rng = np.random.default_rng(4)
    knots = np.sort(rng.standard_normal(64)).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    x[:3] = [np.nan, knots[5], -np.inf]
    for side in ("left", "right"):
        got, want, _ = _both(lambda k, v, s=side: jnp.searchsorted(k, v, side=s), [knots, x])
        assert got.tobytes() == want.tobytes()
    fp = np.cumsum(np.abs(knots)).astype(np.float32)  # (a cumsum inside would fold in XLA's
    # order on cpu, each window whole on the interpreter: cumulative_emit.py)
    got, want, _ = _both(lambda k, v, f: jnp.interp(v, k, f), [knots, x, fp])
    np.testing.assert_array_equal(got, want)


def test_two_component_starts_stay_scalar_and_exact() -> None:
    """x[i, j] from an [N, 2] index tensor: not this path (the components are strided), the
    scalar path's bits."""
    rng = np.random.default_rng(5)
    t = rng.standard_normal((30, 40)).astype(np.float32)
    ij = np.stack([rng.integers(-5, 35, 999), rng.integers(-5, 45, 999)], 1).astype(np.int32)
    fn = lambda t, ij: jax.lax.gather(  # noqa: E731
        t, ij, jax.lax.GatherDimensionNumbers((), (0, 1), (0, 1)), (1, 1),
        mode=jax.lax.GatherScatterMode.CLIP)
    got, want, _ = _both(fn, [t, ij])
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_pairs_from_separate_arrays_gather_in_lanes(dtype: type) -> None:
    """x[i, j] (and x[i, j, k]) with each index its own array: JAX concatenates them, the
    kernel reads each component in lanes and adds the clamped starts times their strides
    (80-137 -> 43-61 us for 65536 pairs into 512 x 512); negative and huge indices."""
    rng = np.random.default_rng(6)
    t = rng.standard_normal((30, 40)).astype(dtype)
    i, j = (rng.integers(-40, 45, 1003).astype(np.int32) for _ in range(2))
    got, want, ir = _both(lambda t, i, j: t[i, j], [t, i, j])
    assert got.tobytes() == want.tobytes() and "llvm.masked.gather" in ir
    t3 = rng.standard_normal((6, 7, 33)).astype(dtype)
    k = rng.integers(-40, 40, 1003).astype(np.int32)
    dn = jax.lax.GatherDimensionNumbers((), (0, 1, 2), (0, 1, 2))
    fn = lambda t, i, j, k: jax.lax.gather(  # noqa: E731
        t, jnp.stack([i, j, k], 1), dn, (1, 1, 1), mode=jax.lax.GatherScatterMode.CLIP)
    got, want, ir = _both(fn, [t3, i, j, k])
    assert got.tobytes() == want.tobytes() and "llvm.masked.gather" in ir


def test_pure_lookups_over_short_rows_stay_scalar() -> None:
    """A lookup table over an image's 3 channels (lanes would run along a dimension of 3:
    masked 16-lane gathers, 0.71 -> 2.66 ms on Zen 4) keeps the scalar path; its bits."""
    rng = np.random.default_rng(6)
    table = rng.standard_normal(256).astype(np.float32)
    img = rng.integers(0, 256, (2, 32, 32, 3)).astype(np.uint8)
    got, want, ir = _both(lambda t, x: t[x], [table, img])
    assert got.tobytes() == want.tobytes()
    assert "llvm.masked.gather" not in ir


@pytest.mark.parametrize("cols", [512, 77])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_take_along_axis_gathers_in_lanes(dtype: type, cols: int) -> None:
    """jnp.take_along_axis's gather pairs the operand's rows with the index rows (operand
    batching dims): the row is the output's own index, uniform along the lanes, so the
    columns gather in lanes (jax_probe take_along on Zen 4: 378 -> 294 us, XLA 265); raw
    gathers clamp indices out of range, jnp's fill them; rows of a masked tail; both the
    row-batched and the column-batched layout."""
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((37, cols)) * 100).astype(dtype)
    i = rng.integers(-cols - 3, cols + 3, (37, cols)).astype(np.int32)
    got, want, ir = _both(lambda x, i: jnp.take_along_axis(x, i, -1), [x, i])
    assert got.tobytes() == want.tobytes()
    assert "llvm.masked.gather" in ir
    assert re.search(r"getelementptr inbounds \w+, \w+\* %[^,]+, <\d+ x i32> ", ir)
    dn = jax.lax.GatherDimensionNumbers((), (1,), (1,), operand_batching_dims=(0,),
                                        start_indices_batching_dims=(0,))
    fn = lambda x, i: jax.lax.gather(  # noqa: E731
        x, i[..., None], dn, (1, 1), mode=jax.lax.GatherScatterMode.CLIP) + x[:, :1] * 0
    got, want, _ = _both(fn, [x, i])
    assert got.tobytes() == want.tobytes()
    got, want, _ = _both(lambda x, i: jnp.take_along_axis(x, i, 0), [x.T.copy(), i.T.copy()])
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("limit", [None, 100])
def test_lane_pointers_by_32_bit_offsets_or_64_bit_addresses(
        monkeypatch: pytest.MonkeyPatch, limit: int | None) -> None:
    """The lanes' pointers are 32-bit element offsets off the uniform base (one vgatherdps
    for 16 lanes: take_along 1024 x 512, Zen 4, 0.29-0.30 -> 0.21-0.24 ms); an
    operand of more than I32_ELEMENTS elements takes 64-bit addresses. Same bits either way,
    rows and columns both moving the pointers (x[i, j] of index pairs)."""
    from xlapy.backends.cpu import gather_lanes

    if limit is not None:
        monkeypatch.setattr(gather_lanes, "I32_ELEMENTS", limit)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    i = rng.integers(-3, 70, 4096).astype(np.int32)
    j = rng.integers(-3, 50, 4096).astype(np.int32)
    for fn, args in ((lambda x, i, j: x[i, j], [x, i, j]),
                     (lambda x, i: jnp.take_along_axis(x, i, -1),
                      [x, rng.integers(-48, 48, (64, 48)).astype(np.int32)])):
        got, want, ir = _both(fn, args)
        assert got.tobytes() == want.tobytes()
        vector_gep = re.search(r"getelementptr inbounds \w+, \w+\* %[^,]+, <\d+ x i32> ", ir)
        assert (vector_gep is None) == (limit is not None)
        assert ("inttoptr" in ir) == (limit is not None)
