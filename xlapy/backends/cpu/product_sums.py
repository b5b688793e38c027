"""Sums of broadcast products as dots: reduce(broadcast(a) * broadcast(b), 0, add) -> a dot.

Pairwise scores written with broadcasting, `(a[:, None, :] * b[None, :, :]).sum(-1)` (a
Gram matrix, a kernel matrix's inner products, einsum spelled out by hand), lower to a
reduce of the product of two broadcasts: one fused kernel, a horizontal sum per output
element, where the same work is a GEMM. 1024 x 1024 outputs of 64-long products took 3.0 ms
(XLA, which hands the pattern to its YNNPACK fusion: 0.60), 2048 x 2048 x 128 28 ms (4.1).

Each dimension of the product is classified by which broadcast carries it (a dimension an
operand holds at size 1 and the broadcast expands is one it does not carry): carried by
both and summed -> contracting, by both and kept -> batch, by one only and kept -> that
side's free dimension. A dimension summed but carried by one side only, or kept and carried
by neither, leaves the reduce as it is (it would sum or repeat an operand first), as does a
product with no free dimension on one side (a dot of vectors: small_dots.py makes it a
reduce again), a short sum over the last dimensions (MIN_DEPTH: short_reduce's element-wise
fold is faster; a short dot into many outputs becomes that fold too, short_reduce.THIN) or
a small one (MIN_MACS), and one whose init is not +0. f32 and f64 only: bf16/f16 products
round in the narrow type. The sum order becomes the dot's, and each product is fused into
its sum (the backend's choice for a dot, as for any reduce of floats: not the
interpreter's order either).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_planned
from xlapy.types import ElementType

#: Shortest sum over trailing dimensions rewritten (a sum over others has no fold: from 2;
#: (a[:, :, None] * b[None]).sum(1) over 4 took 1.15 ms, XLA 0.54). 2048 x 2048 outputs,
#: sums of K (Xeon, 2 threads, ms as a reduce -> as a dot; XLA): K = 4 0.57 -> 0.78 (0.77:
#: short_reduce's fold wins), 5 0.85 -> 0.82 (0.58), 7 1.54 -> 0.86 (0.62), 8 1.29 -> 0.85,
#: 12 36 -> 0.95 (4.3), 16 8.4 -> 1.06 (0.85), 32 10.3 -> 1.43 (1.22); 512 x 512 outputs,
#: K = 5 0.067 -> 0.042 (0.092).
MIN_DEPTH = 5
#: Fewest multiply-adds rewritten (below, one fused kernel costs less than a GEMM call).
MIN_MACS = 1 << 16

FLOATS = (ElementType.F32, ElementType.F64)


def _carried(b: Instruction) -> dict[int, int] | None:
    """product dimension -> operand dimension for the dimensions broadcast `b` carries
    (its operand's size-1 dimensions expanded are not carried), or None if `b` is no
    broadcast_in_dim."""
    if b.opcode != "broadcast_in_dim":
        return None
    src, out = b.operands[0].shape.dimensions, b.shape.dimensions
    return {d: i for i, d in enumerate(b.attrs.broadcast_dimensions)
            if src[i] == out[d]}


@dataclass(frozen=True)
class Plan:
    """A reduce's product dimensions by role, and each side's carried dimensions (product
    dimension -> its operand's dimension, `_carried`)."""

    batch: list[int]
    lhs_free: list[int]
    rhs_free: list[int]
    contract: list[int]
    sides: tuple[dict[int, int], dict[int, int]]


def plan(r: Instruction) -> Plan | None:
    """How this pass rewrites the reduce r, or None to leave it."""
    if r.opcode != "reduce" or reducer_op(r) != "add" or r.shape.element_type not in FLOATS:
        return None
    x, init = r.operands
    if x.opcode != "multiply" or init.opcode != "constant":
        return None
    zero = init.attrs.literal.to_numpy()
    if zero.item() != 0 or np.signbit(zero):  # (+0: a dot's sum starts there; -0 stays)
        return None
    lhs, rhs = (_carried(o) for o in x.operands)
    if lhs is None or rhs is None:
        return None
    summed = set(r.attrs.dimensions)
    batch, lf, rf, contract = [], [], [], []
    for d in range(x.shape.rank):
        both = d in lhs and d in rhs
        if d in summed:
            if not both:
                return None
            contract.append(d)
        elif both:
            batch.append(d)
        elif d in lhs or d in rhs:
            (lf if d in lhs else rf).append(d)
        elif x.shape.dimensions[d] != 1:
            return None
    dims = x.shape.dimensions
    depth = math.prod(dims[d] for d in contract)
    trailing = contract == list(range(x.shape.rank - len(contract), x.shape.rank))
    if not (lf and rf and contract) or depth < (MIN_DEPTH if trailing else 2) or \
            math.prod(dims) < MIN_MACS:
        return None
    return Plan(batch, lf, rf, contract, (lhs, rhs))


def _operand(e: Emitter, b: Instruction, carried: dict[int, int]
             ) -> tuple[Instruction, dict[int, int]]:
    """The broadcast's operand without the size-1 dimensions it expands, and the product
    dimension -> that operand's dimension."""
    src = b.operands[0]
    keep = sorted(carried.values())
    at = {d: keep.index(i) for d, i in carried.items()}
    if len(keep) == src.shape.rank:
        return src, at
    return e.op("reshape", src, shape=tuple(src.shape.dimensions[i] for i in keep)), at


def rewrite(comp: Computation, r: Instruction, p: Plan) -> Instruction:
    """The reduce `r` as dot_general(lhs, rhs), transposed to the reduce's order."""
    e = Emitter(comp)
    x = r.operands[0]
    (lhs, lm), (rhs, rm) = (_operand(e, b, m) for b, m in zip(x.operands, p.sides))
    dot = e.op("dot_general", lhs, rhs,
               lhs_batching_dimensions=tuple(lm[d] for d in p.batch),
               rhs_batching_dimensions=tuple(rm[d] for d in p.batch),
               lhs_contracting_dimensions=tuple(lm[d] for d in p.contract),
               rhs_contracting_dimensions=tuple(rm[d] for d in p.contract))
    # the dot's order: batch, then each side's free dimensions in its operand's order
    order = [*p.batch, *sorted(p.lhs_free, key=lambda d: lm[d]),
             *sorted(p.rhs_free, key=lambda d: rm[d])]
    want = sorted(order)  # (the reduce's order, less size-1 dimensions neither carries)
    out = dot
    if order != want:
        out = e.transpose(dot, permutation=tuple(order.index(d) for d in want))
    if out.shape.dimensions != r.shape.dimensions:
        out = e.op("reshape", out, shape=tuple(r.shape.dimensions))
    return out


class ProductSumsAsDots(ComputationPass):
    """Rewrites sums of broadcast products as dots (module docstring)."""

    name = "product-sums-as-dots"

    def run_on_computation(self, comp: Computation) -> bool:
        return replace_planned(comp, plan, lambda r, p: rewrite(comp, r, p))


__all__ = ["MIN_DEPTH", "MIN_MACS", "Plan", "ProductSumsAsDots", "plan", "rewrite"]
