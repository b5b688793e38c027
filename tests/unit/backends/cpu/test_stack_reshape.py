"""stack_reshape.py: a reshape merging a stack's short last dimension moves after the
element-wise ops reading it, so the kernel is minor_stack.py's (int4 unpacking 0.57 ->
0.09 ms): the interpreter's bits; what it must leave alone stays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.pipeline import cpu_pipeline
from xlapy.backends.cpu.stack_reshape import SinkStackReshapes
from xlapy.stablehlo import parse_module

jax = pytest.importorskip("jax")
jnp = jax.numpy
W = vector_width()


def _unpack(wq: Any, s: Any) -> Any:
    lo = (wq & 15).astype(jnp.int8) - 8
    hi = (wq >> 4).astype(jnp.int8) - 8
    return jnp.stack([lo, hi], -1).reshape(wq.shape[0], -1).astype(jnp.float32) * s


def _interleave(x: Any, y: Any) -> Any:
    z = jnp.stack([x, y, x * y], -1).reshape(x.shape[0], -1)
    return jnp.where(z > 0, jnp.sqrt(z) + 1.0, z * 0.5)


def _both(fn: Any, args: list[np.ndarray]) -> Any:
    text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    np.testing.assert_array_equal(np.asarray(cpu(*args)),
                                  np.asarray(xlapy.compile(text, backend="interpreter")(*args)))
    return cpu, text


@pytest.mark.parametrize("rows", [W * 8, W * 3 + 5])
def test_int4_unpacking_runs_as_one_stack_kernel(rows: int) -> None:
    rng = np.random.default_rng(rows)
    wq = rng.integers(0, 256, (64, rows)).astype(np.uint8)
    cpu, _ = _both(_unpack, [wq, np.float32(0.02)])
    assert len(cpu._exe.kernel_specs) == 1 and cpu._exe.kernel_specs[0].explicit
    assert f"<{2 * W} x" in cpu._exe.kernel_ir  # (the two nibbles interleaved in one store)


def test_a_chain_of_ops_and_scalars_moves_whole() -> None:
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((32, 4 * W)).astype(np.float32) for _ in range(2))
    cpu, text = _both(_interleave, [x, y])
    mod = parse_module(text)
    cpu_pipeline().run(mod)
    root = mod.entry.root
    assert root.opcode == "reshape" and root.operands[0].shape.dimensions[-1] == 3


@pytest.mark.parametrize("case", ["full_operand", "wide", "also_read"])
def test_what_it_leaves(case: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    def fn(a: Any, *b: Any) -> Any:
        if case == "full_operand":  # another operand is no stack: the reshape stays before it
            return jnp.stack([a, a], -1).reshape(16, -1) + b[0]
        if case == "wide":  # rows of 9: no minor stack
            return jnp.stack([a] * 9, -1).reshape(16, -1) * 2.0
        z = jnp.stack([a, -a], -1).reshape(16, -1)  # also a result: it stays for that user
        return z, z * 3.0
    args = [x] + ([rng.standard_normal((16, 128)).astype(np.float32)]
                  if case == "full_operand" else [])
    text = jax.jit(fn).lower(*args).as_text()
    mod = parse_module(text)
    moved = SinkStackReshapes().run(mod)
    assert moved == (case == "also_read")
    cpu = xlapy.compile(text, backend="cpu")
    got, want = cpu(*args), xlapy.compile(text, backend="interpreter")(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _rope(x: Any, c: Any, s: Any) -> Any:
    """Interleaved rotary embedding (pairs of adjacent features rotated), in x's type."""
    x1, x2 = x[..., ::2].astype(jnp.float32), x[..., 1::2].astype(jnp.float32)
    return jnp.stack([x1 * c - x2 * s, x1 * s + x2 * c], -1).reshape(x.shape).astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_interleaved_rope_reads_strided_slices_as_columns(dtype: Any) -> None:
    """x[..., ::2] and x[..., 1::2] become columns of x viewed as rows of 2: with the stack
    they make one explicit kernel (bf16 rows: 4.0 -> 0.34 ms, XLA 0.89)."""
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    rng = np.random.default_rng(4)
    args = [rng.standard_normal((2, 8, 4, 2 * W)).astype(dt),
            *(rng.standard_normal((8, 1, W)).astype(np.float32) for _ in range(2))]
    cpu, _ = _both(_rope, args)
    assert len(cpu._exe.kernel_specs) == 1 and cpu._exe.kernel_specs[0].explicit


@pytest.mark.parametrize(("expr", "takes"), [
    ("x[..., ::2] * 2.0 + x[..., 1::2]", True), ("x[..., 2::3] - 1.0", True),
    ("x[..., ::16] + 1.0", False), ("x[..., 1:9:2] + 1.0", False),
    ("x[1:, ::2] + 1.0", False), ("x[..., ::5] + 1.0", False)])
def test_which_strided_slices_become_columns(expr: str, takes: bool) -> None:
    from xlapy.backends.cpu.stack_reshape import StridedSlicesAsColumns

    x = np.random.default_rng(5).standard_normal((6, 48)).astype(np.float32)
    fn = eval(f"lambda x: {expr}")  # (the slice as JAX spells it)
    text = jax.jit(fn).lower(x).as_text()
    mod = parse_module(text)
    assert StridedSlicesAsColumns().run(mod) == takes
    _both(fn, [x])
