"""fusion_spread.py (asked by fusion_plan.py's chooser): a transcendental value a kernel reads
through a broadcast SPREAD or more times per element, along a dimension outside one it varies
in, gets a buffer (rotary embeddings recomputed the cos/sin of their angle table once per
head); so do gather indices read across a window dimension and costly values several
kernels need; values the emitter
hoists (broadcast along inner dimensions only), values over inline row reductions and small
broadcasts stay fused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends import get_backend
from xlapy.backends.cpu.fusion_plan import plan_fusion
from xlapy.backends.cpu.fusion_spread import SPREAD, SPREAD_ELEMENTS
from xlapy.passes.hlo_builder import HloBuilder

pytestmark = pytest.mark.usefixtures("jax_x32")  # f32 programs from jax


def _rope(heads: int) -> HloBuilder:
    """x[b, t, h, d] * cos(a)[t, d] - y * sin(a)[t, d], the table broadcast over b and h."""
    g = HloBuilder()
    x = g.param(f"f32[2,64,{heads},32]")
    y = g.param(f"f32[2,64,{heads},32]")
    a = g.param("f32[64,32]")
    big = (2, 64, heads, 32)
    c = g.bcast(g.cosine(a), big, (1, 3))
    s = g.bcast(g.sine(a), big, (1, 3))
    g.build(g.subtract(g.multiply(x, c), g.multiply(y, s)))
    return g


def _roots(g: HloBuilder) -> list[str]:
    return sorted(r.opcode for r in plan_fusion(g.comp).kernel_roots())


def test_rope_table_gets_buffers() -> None:
    g = _rope(16)  # 32x the table's elements, 64K copies
    assert _roots(g) == ["cosine", "sine", "subtract"]
    plan = plan_fusion(g.comp)
    assert any("times per element through broadcast" in d.reason for d in plan.decisions)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32)
            for s in [(2, 64, 16, 32), (2, 64, 16, 32), (64, 32)]]
    np.testing.assert_array_equal(xlapy.compile(g.module, backend="cpu")(*args),
                                  xlapy.compile(g.module, backend="interpreter")(*args))


def test_small_spread_stays_fused() -> None:
    assert 2 * 64 * 32 < SPREAD * 64 * 32 // 2
    assert _roots(_rope(1)) == ["subtract"]  # read twice per element: recomputed


def test_broadcast_along_inner_dimensions_stays_fused() -> None:
    """exp(v)[r] broadcast to [r, c]: the emitter computes it once per row already."""
    g = HloBuilder()
    x = g.param("f32[256,1024]")
    v = g.param("f32[256]")
    g.build(g.multiply(x, g.bcast(g.exponential(v), (256, 1024), (0,))))
    assert 256 * 1024 >= SPREAD_ELEMENTS
    assert _roots(g) == ["multiply"]


def test_value_over_a_row_reduction_stays_inline() -> None:
    """rms norm: x * rsqrt(mean(x*x)) keeps its reduction inside the kernel."""
    g = HloBuilder()
    x = g.param("f32[64,1024]")
    sq = g.reduce(g.multiply(x, x), g.const(0.0), (1,), g.scalar_fn("add"))
    r = g.rsqrt(sq)
    g.build(g.multiply(x, g.bcast(r, (64, 1024), (0,))))
    plan = plan_fusion(g.comp)
    assert [r.opcode for r in plan.kernel_roots()] == ["multiply"]
    assert plan.row_reduces


@pytest.mark.parametrize("heads", [16])
def test_rope_from_jax(heads: int) -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def rope(x: object, pos: object) -> object:
        d = 16
        f = 1.0 / (10000 ** (jnp.arange(d) / d))
        a = pos[:, None] * f[None, :]
        c, s = jnp.cos(a)[None, :, None, :], jnp.sin(a)[None, :, None, :]
        x1, x2 = x[..., :d], x[..., d:]
        return jnp.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], -1)

    rng = np.random.default_rng(1)
    args = [rng.standard_normal((2, 128, heads, 32)).astype(np.float32),
            np.arange(128, dtype=np.float32)]
    text = jax.jit(rope).lower(*args).as_text()
    exe = xlapy.compile(text, backend="cpu")
    roots = [r.opcode for r in get_backend("cpu").compile(exe.module, None).fusion.kernel_roots()]
    assert roots.count("cosine") == roots.count("sine") == 1
    np.testing.assert_array_equal(exe(*args), xlapy.compile(text, backend="interpreter")(*args))


def test_a_table_read_through_a_gather_gets_a_buffer() -> None:
    """jnp.interp: the sine of 100 knots looked up at each of 64K points (knots given:
    of jnp.linspace's they fold to a constant table, constant_folding.SMALL)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.linspace(-3, 3, 1 << 16, dtype=np.float32)
    k = np.linspace(-3, 3, 100, dtype=np.float32)

    def fn(v: object, knots: object) -> object:
        return jnp.interp(v, knots, jnp.sin(knots))

    text = jax.jit(fn).lower(x, k).as_text()
    exe = xlapy.compile(text, backend="cpu")
    plan = get_backend("cpu").compile(exe.module, None).fusion
    assert "sine" in [r.opcode for r in plan.kernel_roots()]
    assert any("through gather" in d.reason for d in plan.decisions)
    np.testing.assert_array_equal(exe(x, k), xlapy.compile(text, backend="interpreter")(x, k))


def test_a_transcendental_broadcast_along_short_rows_gets_a_buffer() -> None:
    """log(v)[i, j] broadcast over [i, j, 3] (pairwise vectors): the kernel over the short
    rows would compute it once per row in scalar code; a buffer computes it in lanes. Over
    rows past SHORT_ROW it stays fused (hoisted per row)."""
    from xlapy.backends.cpu.fusion_spread import SHORT_ROW

    for c, buffered in ((3, True), (SHORT_ROW, True), (SHORT_ROW + 1, False)):
        g = HloBuilder()
        x = g.param(f"f32[64,64,{c}]")
        v = g.param("f32[64,64]")
        g.build(g.multiply(x, g.bcast(g.log(v), (64, 64, c), (0, 1))))
        assert (_roots(g) == ["log", "multiply"]) == buffered, c
        if buffered:
            assert any("rows of broadcast" in d.reason for d in plan_fusion(g.comp).decisions)


def _nbody_accel(p: object) -> object:

    d = p[:, None, :] - p[None, :, :]  # type: ignore[index]
    r2 = (d * d).sum(-1) + 1e-2
    return -(d / (r2 ** 1.5)[..., None]).sum(1)


def test_pairwise_forces_compute_the_pow_once_per_pair_in_lanes() -> None:
    """An n-body step's accelerations: r2 = sum over 3 components (folded, not a row kernel:
    its pow reaches the broadcast back, short_reduce.broadcast_back), r2 ** 1.5 one buffer
    (2.4 ms -> 0.43 for 256 bodies, XLA 0.6-0.9), the interpreter's values (the sum over
    bodies runs in vector chains: its last bits differ, as before)."""
    import jax

    p = np.random.default_rng(3).standard_normal((64, 3)).astype(np.float32)
    text = jax.jit(_nbody_accel).lower(p).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    explain = cpu._exe.explain()  # type: ignore[attr-defined]
    assert "power                    kernel" in explain and "(row)" not in explain
    np.testing.assert_allclose(np.asarray(cpu(p)),
                               np.asarray(xlapy.compile(text, backend="interpreter")(p)),
                               rtol=2e-5, atol=1e-5)


def test_a_keepdims_scale_broadcast_over_rows_gets_a_buffer() -> None:
    """max / 127 of shape [1, n] (jnp's keepdims) broadcast over [m, n]: its size-1
    dimension broadcast out counts as added, so the divide is computed n times, not m n
    (per-channel int8 quantization divided twice per element)."""
    g = HloBuilder()
    x = g.param("f32[512,256]")
    m = g.param("f32[1,256]")
    scale = g.divide(m, g.splat(127.0, m))
    g.build(g.divide(x, g.bcast(scale, (512, 256), (0, 1))))
    assert _roots(g) == ["divide", "divide"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(512, 256), (1, 256)]]
    np.testing.assert_array_equal(xlapy.compile(g.module, backend="cpu")(*args),
                                  xlapy.compile(g.module, backend="interpreter")(*args))


@pytest.mark.parametrize(("shape", "perm", "buffered"), [
    ((512, 256), (1, 0), True), ((4, 300, 128), (0, 2, 1), True),
    ((256, 512), None, False), ((32, 512), (1, 0), False)])
def test_transposed_rows_a_row_reduction_reads_get_a_buffer(
        shape: tuple[int, ...], perm: Any, buffered: bool) -> None:
    """jax.nn.softmax(x.T): the row kernel read each row down a column of x (1.40x XLA's
    time over 1024 x 1024, then 0.22x); the transpose that moves the innermost dimension
    gets a buffer the transpose routine writes (transpose_lib.read_by_rows). Rows under
    ROW_READ_MIN elements, or no transpose, keep one kernel. The interpreter's values (exp
    within its ulps, the sums reassociated)."""
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)

    def fn(v: Any) -> Any:
        return jax.nn.softmax(v if perm is None else v.transpose(perm), -1)
    text = jax.jit(fn).lower(x).as_text()
    exe = xlapy.compile(text, backend="cpu")
    plan = get_backend("cpu").compile(exe.module, None).fusion
    assert any("transposed rows" in d.reason for d in plan.decisions) == buffered
    np.testing.assert_allclose(exe(x), xlapy.compile(text, backend="interpreter")(x),
                               rtol=3e-6, atol=1e-9)


@pytest.mark.parametrize(("rows", "buffered"), [(4096, True), (16, False)])
def test_a_power_two_kernels_need_gets_a_buffer(rows: int, buffered: bool) -> None:
    """jnp.polyfit's vander(x) = x[:, None] ** e: summed squared by columns (a reduce's
    kernel) and divided by the sums' roots (another) computed its f64-evaluated powers twice
    (1.3x XLA's time); now once into a buffer. A small one is still recomputed (COSTLY_ELEMENTS:
    a kernel's launch costs more)."""
    from xlapy.backends.cpu.fusion_spread import COSTLY_ELEMENTS

    assert (rows * 6 >= COSTLY_ELEMENTS) == buffered
    g = HloBuilder()
    x = g.param(f"f32[{rows}]")
    e = g.param("f32[6]")
    v = g.power(g.bcast(x, (rows, 6), (0,)), g.bcast(e, (rows, 6), (1,)))
    s = g.sqrt(g.reduce(g.multiply(v, v), g.const(0.0), (0,), g.scalar_fn("add")))
    g.build(g.divide(v, g.bcast(s, (rows, 6), (1,))))
    assert ("power" in _roots(g)) == buffered
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.5, 2.0, rows).astype(np.float32),
            np.arange(5, -1, -1, dtype=np.float32)]
    np.testing.assert_allclose(xlapy.compile(g.module, backend="cpu")(*args),
                               xlapy.compile(g.module, backend="interpreter")(*args),
                               rtol=2e-6)


def test_gather_indices_read_across_a_window_dimension_get_a_buffer() -> None:
    """x[:, i, j] with jnp.triu_indices: the indices (computed at run time, through integer
    divisions) vary along the result's last dimension, the window (x's batch) is outside it,
    so the fused gather recomputed each index once per batch row (256 x: 5.9x XLA's time,
    now 0.56). An embedding lookup's index, fixed along its window row, stays fused."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.random.default_rng(2).standard_normal((64, 32, 32)).astype(np.float32)

    def fn(v: Any) -> Any:
        i, j = jnp.triu_indices(32, 1)
        return v[:, i, j]

    text = jax.jit(fn).lower(x).as_text()
    exe = xlapy.compile(text, backend="cpu")
    plan = get_backend("cpu").compile(exe.module, None).fusion
    assert any("indices read" in d.reason for d in plan.decisions)
    np.testing.assert_array_equal(exe(x), xlapy.compile(text, backend="interpreter")(x))
    table = np.random.default_rng(3).standard_normal((1000, 64)).astype(np.float32)
    ids = np.arange(4096, dtype=np.int32) % 1000
    text = jax.jit(lambda t, k: t[(k * 7) // 3 % 1000]).lower(table, ids).as_text()
    plan = get_backend("cpu").compile(xlapy.compile(text, backend="cpu").module, None).fusion
    assert not any("indices read" in d.reason for d in plan.decisions)


@pytest.mark.parametrize("axis", [0, 1])
def test_a_transcendental_a_separate_reduction_reads_gets_a_buffer(axis: int) -> None:
    """softmax(x, axis=0): exp(x - max) read by the column sum's kernel and the divide's is
    written once (it was computed in both: one thread 1.24 -> 0.85-0.94 ms); along rows the
    sum is computed inside the divide's kernel and exp stays fused there."""
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(2).standard_normal((512, 256)).astype(np.float32)
    text = jax.jit(lambda x: jax.nn.softmax(x, axis)).lower(x).as_text()
    exe = xlapy.compile(text, backend="cpu")
    fusion = get_backend("cpu").compile(exe.module, None).fusion
    roots = [r.opcode for r in fusion.kernel_roots()]
    assert ("exponential" in roots) == (axis == 0)
    assert any("a buffer written once" in d.reason for d in fusion.decisions) == (axis == 0)
    np.testing.assert_allclose(exe(x), xlapy.compile(text, backend="interpreter")(x),
                               rtol=2e-6, atol=1e-7)
