"""hlo_builder.Emitter.regroup: an element-wise chain only its consumer reads is rebuilt on
regrouped leaves (a kernel reading a computed value through a reshape divides its index per
element: jnp.max(jnp.abs(x)) of f32[1024, 256] in rows of 4096 ran 4x slower than of x); a
value something else reads too is reshaped as it is."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import REGROUP_OPS, Emitter
from xlapy.types import ElementType

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _reshaped_values(root: Instruction) -> list[str]:
    """Opcodes of the values reshapes read, in root's graph."""
    seen: set[int] = set()
    out: list[str] = []
    todo = [root]
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v.opcode == "reshape":
            out.append(v.operands[0].opcode)
        todo.extend(v.operands)
    return out


def test_a_chain_is_rebuilt_on_reshaped_parameters() -> None:
    em = Emitter(Computation("c"))
    p, q = em.param("f32[1024,256]"), em.param("f32[1024,256]")
    two = em.splat(2.0, "f32[1024,256]")
    x = em.op("abs", em.multiply(em.add(p, q), two))
    r = em.regroup(x, (64, 4096))
    assert r.opcode == "abs" and r.shape.dimensions == (64, 4096)
    assert sorted(_reshaped_values(r)) == ["parameter", "parameter"]


def test_a_value_read_elsewhere_is_reshaped_whole() -> None:
    em = Emitter(Computation("c"))
    p = em.param("f32[1024,256]")
    x = em.op("exponential", p)
    em.op("negate", x)  # the consumer regrouping it, and another reader: x is computed
    em.op("sine", x)  # once, read through the reshape
    r = em.regroup(x, (64, 4096))
    assert r.opcode == "reshape" and r.operands[0] is x


def test_a_long_chain_stops_at_the_budget() -> None:
    em = Emitter(Computation("c"))
    x = em.param("f32[512,128]")
    for _ in range(REGROUP_OPS + 8):
        x = em.op("negate", x)
    r = em.regroup(x, (16, 4096))
    assert _reshaped_values(r) == ["negate"]  # the rest of the chain below one reshape


def test_total_minmax_rows_read_the_parameter() -> None:
    """The first level's rows of jnp.max(jnp.abs(x)): abs of the reshaped parameter."""
    from xlapy.backends.cpu.total_minmax import TotalMinMax
    from xlapy.stablehlo import parse_module

    x = jax.ShapeDtypeStruct((1024, 256), jnp.float32)
    module = parse_module(jax.jit(lambda v: jnp.max(jnp.abs(v))).lower(x).as_text())
    assert TotalMinMax().run(module)
    comp = module.entry_computation()
    (rows,) = [i for i in comp.instructions if i.opcode == "reduce" and i.shape.rank == 1]
    assert rows.operands[0].opcode == "abs"
    assert _reshaped_values(rows) == ["parameter"]


@pytest.mark.parametrize(("fn", "shape", "exact"), [
    (lambda x: jnp.max(jnp.abs(x)), (1024, 256), True),       # total_minmax's rows of 4096
    (lambda x: jnp.min(x * 2 + 1), (2048, 128), True),
    (lambda x: jnp.sum(x * x, 0), (262144, 4), False),        # narrow_columns' groups
    (lambda x: jnp.max(jnp.abs(x) * x, 0), (65536, 3), True),
])
def test_programs_keep_their_bits(fn: object, shape: tuple[int, ...], exact: bool) -> None:
    """max/min in any order give the interpreter's bits; a sum's order is the backend's."""
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    text = jax.jit(fn).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    got = np.asarray(prog(x))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    if exact:
        assert got.tobytes() == want.tobytes()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert not prog._exe.fallbacks()


def test_a_bitcast_that_joins_elements_is_reshaped_whole() -> None:
    """bitcast_convert is element-wise but u16[..., 2] -> f32 joins two elements: its
    operand is not of its shape, so the reshape stays after it."""
    em = Emitter(Computation("c"))
    p = em.param("u16[1024,256,2]")
    x = em.op("abs", em.op("bitcast_convert", p, new_element_type=ElementType.F32))
    r = em.regroup(x, (64, 4096))
    assert r.opcode == "abs"
    assert _reshaped_values(r) == ["bitcast_convert"]


def test_the_first_rows_of_a_chain_are_its_operands_first_rows() -> None:
    """narrow_columns' whole groups of a computed value (rows not a multiple of the group):
    a slice of the chain's first rows regroups the chain on sliced leaves, so the kernel
    reads each leaf's prefix as the leaf (jnp.sum(x * x, 0) of f32[300007, 3] 0.28 ->
    0.06 ms, the time of [300000, 3])."""
    em = Emitter(Computation("c"))
    p = em.param("f32[1031,3]")
    x = em.multiply(em.op("abs", p), em.splat(2.0, "f32[1031,3]"))
    head = em.op("slice", x, start_indices=(0, 0), limit_indices=(1024, 3), strides=(1, 1))
    r = em.regroup(head, (64, 48))
    assert r.opcode == "multiply" and r.shape.dimensions == (64, 48)
    assert _reshaped_values(r) == ["slice"]
    rest = em.op("slice", x, start_indices=(1, 0), limit_indices=(1025, 3), strides=(1, 1))
    assert em.regroup(rest, (64, 48)).opcode == "reshape"  # (not the first rows)


def test_odd_rows_of_a_computed_column_sum_read_undivided() -> None:
    x = np.random.default_rng(3).standard_normal((3 * 4096 + 7, 3)).astype(np.float32)
    text = jax.jit(lambda a: jnp.sum(a * a, 0)).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert " udiv " not in prog._exe.kernel_ir and " urem " not in prog._exe.kernel_ir
    np.testing.assert_allclose(prog(x), (x.astype(np.float64) ** 2).sum(0), rtol=1e-5)
