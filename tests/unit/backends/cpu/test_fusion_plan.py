"""fusion_plan.py: a value read through index-changing ops at many places of one kernel is
generated once per path; past MAX_GENERATED (value, path) pairs the plan gives one a buffer,
so a lax.associative_scan (slices and interleaving pads, doubling the paths per level)
compiles in bounded memory with its values; a long chain over a big array that one kernel
would read at two index paths gets a buffer (generated once, not per path)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.fusion_plan import MAX_GENERATED, _generated, plan_fusion
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.types import ElementType, Shape


def _levels(n: int) -> HloBuilder:
    """x_{l+1} = concat(x_l[0::2] + x_l[1::2], x_l[1::2] - x_l[0::2]) over 2^k elements,
    n levels: every level reads the last one at two index paths."""
    g = HloBuilder()
    x = g.param(Shape.array(ElementType.F32, [64]))
    for _ in range(n):
        ev = g.slice(x, start_indices=(0,), limit_indices=(64,), strides=(2,))
        od = g.slice(x, start_indices=(1,), limit_indices=(64,), strides=(2,))
        x = g.concatenate(g.add(ev, od), g.subtract(od, ev), dimension=0)
    g.build(x)
    return g


def test_every_kernel_generates_a_bounded_expression() -> None:
    g = _levels(24)  # 2^24 paths at the bottom as one kernel
    comp = g.comp
    plan = plan_fusion(comp)
    for root in plan.kernel_roots():
        _, over = _generated(root, plan.fusible, plan.materialized)
        assert not over
    assert any("too many indices" in d.reason for d in plan.decisions)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_array_equal(xlapy.compile(g.module, backend="cpu")(x),
                                  xlapy.compile(g.module, backend="interpreter")(x))


def test_small_expressions_keep_one_kernel() -> None:
    plan = plan_fusion(_levels(4).comp)  # 2^4 paths: well under the cap
    assert len(plan.kernel_roots()) == 1
    assert MAX_GENERATED >= 256


def test_associative_scan_from_jax() -> None:
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(0).standard_normal((4, 4096)).astype(np.float32)
    text = jax.jit(lambda v: jax.lax.associative_scan(jax.numpy.add, v, axis=1)).lower(
        x).as_text()
    got = xlapy.compile(text, backend="cpu")(x)
    np.testing.assert_array_equal(got, xlapy.compile(text, backend="interpreter")(x))


def _pairs(n: int, ops: int) -> HloBuilder:
    """y = a chain of `ops` sine/multiply steps over x [n]; out = y[0::2] + y[1::2]: one
    kernel would read y at two index paths (each strided slice), so generate it twice per
    element."""
    g = HloBuilder()
    x = g.param(Shape.array(ElementType.F32, [n]))
    y = x
    for k in range(ops):
        y = g.sine(y) if k % 2 == 0 else g.multiply(y, x)
    ev = g.slice(y, start_indices=(0,), limit_indices=(n,), strides=(2,))
    od = g.slice(y, start_indices=(1,), limit_indices=(n,), strides=(2,))
    g.build(g.add(ev, od))
    return g


def _buffered(plan: object) -> list[str]:
    return [d.producer for d in plan.decisions if "index paths" in d.reason]


def test_a_long_chain_read_at_two_index_paths_gets_a_buffer() -> None:
    g = _pairs(1 << 16, 12)
    plan = plan_fusion(g.comp)
    assert len(_buffered(plan)) == 1 and len(plan.kernel_roots()) == 2
    x = np.linspace(-3, 3, 1 << 16, dtype=np.float32)
    np.testing.assert_array_equal(xlapy.compile(g.module, backend="cpu")(x),
                                  xlapy.compile(g.module, backend="interpreter")(x))


@pytest.mark.parametrize(("n", "ops"), [(1 << 10, 12), (1 << 16, 4)])
def test_small_arrays_and_short_chains_are_recomputed(n: int, ops: int) -> None:
    """Under SPREAD_ELEMENTS elements a kernel costs more than the recomputation; a chain of
    DUP_OPS ops or fewer is recomputed as one shared by several kernels is."""
    plan = plan_fusion(_pairs(n, ops).comp)
    assert not _buffered(plan) and len(plan.kernel_roots()) == 1


def test_associative_scan_levels_get_buffers() -> None:
    """lax.associative_scan's big levels, each read at two paths (the odd and even halves
    interleaved by pads), are buffers: the last kernel reads one level, not the tree
    below it (256 x 4096: 2.7 -> 1.9 ms on Zen 4)."""
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(1).standard_normal((64, 4096)).astype(np.float32)
    text = jax.jit(lambda v: jax.lax.associative_scan(jax.numpy.add, v, axis=1)).lower(
        x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert any("index paths" in d.reason for d in prog._exe.fusion.decisions)
    np.testing.assert_array_equal(prog(x), xlapy.compile(text, backend="interpreter")(x))


def _mix_rounds(n: int, rounds: int, rot: str = "constant") -> str:
    """threefry's rounds on two u32 words, both results: x0 += x1; x1 = rotl(x1, r) ^ x0.
    `rot`: the rotation as a constant, or as a scalar parameter (jax passes its table)."""
    t = f"tensor<{n}xui32>"
    lines = [f"%x0_0 = stablehlo.add %a, %b : {t}", f"%x1_0 = stablehlo.add %b, %b : {t}"]
    for r in range(rounds):
        k = (13, 15, 26, 6)[r % 4]
        amt = f"%r{r}" if rot == "param" else f"%k{r}"
        if rot == "param":
            lines.append(f"%r{r} = stablehlo.broadcast_in_dim %rot, dims = [] : "
                         f"(tensor<ui32>) -> {t}")
        else:
            lines.append(f"%k{r} = stablehlo.constant dense<{k}> : {t}")
        lines += [f"%s{r} = stablehlo.add %x0_{r}, %x1_{r} : {t}",
                  f"%l{r} = stablehlo.shift_left %x1_{r}, {amt} : {t}",
                  f"%c{r} = stablehlo.constant dense<32> : {t}",
                  f"%m{r} = stablehlo.subtract %c{r}, {amt} : {t}",
                  f"%h{r} = stablehlo.shift_right_logical %x1_{r}, %m{r} : {t}",
                  f"%o{r} = stablehlo.or %l{r}, %h{r} : {t}",
                  f"%x1_{r + 1} = stablehlo.xor %o{r}, %s{r} : {t}",
                  f"%x0_{r + 1} = stablehlo.add %s{r}, %x1_{r + 1} : {t}"]
    body = "\n  ".join(lines)
    return (f"func.func @main(%a: {t}, %b: {t}, %rot: tensor<ui32>) -> ({t}, {t}) {{\n"
            f"  {body}\n  return %x0_{rounds}, %x1_{rounds} : {t}, {t}\n}}\n")


@pytest.mark.parametrize("rot", ["constant", "param"])
def test_integer_mixing_chains_are_recomputed(rot: str) -> None:
    """Both words of threefry's rounds need the whole chain: integer bit-mixing ops are
    recomputed in each result's kernel (INT_DUP_OPS), no intermediate buffer (six kernels
    and four buffers per loop iteration had made dropout 1.7x XLA's time)."""
    text = _mix_rounds(4096, 4, rot)
    prog = xlapy.compile(text, backend="cpu")
    assert len(prog._exe.fusion.kernel_roots()) == 2
    rng = np.random.default_rng(4)
    a, b = (rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32) for _ in "ab")
    for r in (13, 0, 32, 33, 1 << 31):
        rot_v = np.array(r, np.uint32)
        got, want = prog(a, b, rot_v), xlapy.compile(text, backend="interpreter")(a, b, rot_v)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    assert len(xlapy.compile(_mix_rounds(4096, 40), backend="cpu")._exe.fusion.kernel_roots()) > 2
