"""Unbatched dot_generals of higher rank laid out as 2-D products.

`x[b, t, d] @ w[d, h]` (a dense layer over a sequence) contracts the lhs's last dimension
with the rhs's first: in memory that is an [M, K] x [K, N] product already, and the GEMM
routes take it as one (dot_shapes.plain_dot's `flat` case: the top-level library thunk's
JIT GEMM, the native loop's GEMM steps). Before they did, it took the library's generic
path (numpy transposes and BLAS from Python, ~20-30 us for a 1024 x 8 x 16 product), and
inside a loop body small_dots.py made it a reduce kernel (a [4, 8, 32] @ [32, 32] tanh RNN
step: 11 us an iteration against XLA's 1.3).

This pass handles the rest of such dots (the per-example products of a Hessian: the lhs
contracting a middle dimension, the rhs its last): an operand (at most MAX_TRANSPOSED
elements; an [N, K] rhs MAX_RHS_TRANSPOSED) whose contracting dimensions are not where the
product wants them is transposed first - the lhs's to its end, the rhs's to its front
(gemm_small reads [K, N]) - a copy kernel, fused with whatever computes the operand. The
result's dimensions are unchanged (the free dimensions keep their order). XLA's
DotDecomposer canonicalizes the same way. Only f32/f64 dots without batch dimensions or a
`dot_algorithm`; the products and their contraction are the same (the GEMM route's
summation order is the backend's choice), so this is a backend pass.
"""

from __future__ import annotations

import dataclasses

from xlapy.backends.cpu.library import dot_cost
from xlapy.backends.cpu.small_dots import GEMM_MIN_MACS
from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_each
from xlapy.passes.while_loop_unroller import inside_loops
from xlapy.types import ElementType

#: Most elements of an operand transposed to bring its contracting dimensions in place: an
#: lhs is the program's data, read once anyway (jax.image.resize's [128, 8, 64, 3]
#: contracting its third dimension: numpy's copy and BLAS 0.68 ms, the transpose kernel and
#: the JIT GEMM 0.28); an rhs is often a weight the GEMM reads in place as [N, K], so only a
#: small one is copied (one contracting a middle dimension the library copies anyway).
MAX_TRANSPOSED = 1 << 20
MAX_RHS_TRANSPOSED = 1 << 16


def _moved(rank: int, contract: tuple[int, ...], last: bool) -> tuple[int, ...] | None:
    """The permutation putting `contract` (in its order) at the end (`last`) or the start,
    the free dimensions in order; None when that is the identity."""
    free = [d for d in range(rank) if d not in contract]
    perm = tuple(free + list(contract)) if last else tuple(list(contract) + free)
    return None if perm == tuple(range(rank)) else perm


def _plan(d: Instruction) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None] | None:
    """(lhs permutation, rhs permutation) making `d` a flat product, at least one not None;
    None when nothing is to do or an operand to move is too big."""
    if d.opcode != "dot_general" or d.attrs.algorithm is not None or not d.shape.is_array:
        return None
    a = d.attrs
    lhs, rhs = (o.shape for o in d.operands)
    et = d.shape.element_type
    if not (lhs.element_type == rhs.element_type == et
            and et in (ElementType.F32, ElementType.F64)):
        return None
    lc, rc = tuple(a.lhs_contracting_dimensions), tuple(a.rhs_contracting_dimensions)
    if a.lhs_batching_dimensions or not lc or len(lc) >= lhs.rank or len(rc) >= rhs.rank \
            or lhs.rank <= 2 and rhs.rank <= 2:
        return None  # (2-D products and vectors are the GEMM routes' already)
    lp = _moved(lhs.rank, lc, True)
    rp = _moved(rhs.rank, rc, False)
    if lp is not None and lhs.num_elements > MAX_TRANSPOSED:
        return None
    if rp is not None and _moved(rhs.rank, rc, True) is None:  # [N, K]
        if rhs.num_elements > MAX_RHS_TRANSPOSED:
            rp = None  # as it is (BLAS reads it transposed)
    elif rp is not None and rhs.num_elements > MAX_TRANSPOSED:
        return None  # (a middle contraction: the library copies it too)
    return None if lp is None and rp is None else (lp, rp)


def flatten(comp: Computation, d: Instruction) -> Instruction:
    """`d` with its operands transposed as _plan says, contracting dimensions renumbered."""
    plan = _plan(d)
    assert plan is not None
    lp, rp = plan
    e = Emitter(comp)
    a = d.attrs
    lhs, rhs = d.operands
    lc, rc = a.lhs_contracting_dimensions, a.rhs_contracting_dimensions
    if lp is not None:
        lhs = e.op("transpose", lhs, permutation=lp)
        lc = tuple(range(lhs.shape.rank - len(lc), lhs.shape.rank))
    if rp is not None:
        rhs = e.op("transpose", rhs, permutation=rp)
        rc = tuple(range(len(rc)))
    attrs = dataclasses.replace(a, lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc)
    return comp.add(Instruction("dot_general", [lhs, rhs], d.shape, attrs, (), d.name))


class FlattenDots(ComputationPass):
    """Transposes small operands of unbatched f32/f64 dots into 2-D product layout (module
    docstring); not the dots of loop bodies small_dots.py makes reduces (GEMM_MIN_MACS)."""

    name = "flatten-dots"

    def run(self, module: Module) -> bool:
        self.inside = inside_loops(module)
        return super().run(module)

    def run_on_computation(self, comp: Computation) -> bool:
        tiny = id(comp) in self.inside
        return replace_each(comp, [i for i in comp.instructions if _plan(i) is not None and not (
            tiny and dot_cost(i) <= GEMM_MIN_MACS)], lambda d: flatten(comp, d))


__all__ = ["MAX_RHS_TRANSPOSED", "MAX_TRANSPOSED", "FlattenDots", "flatten"]
