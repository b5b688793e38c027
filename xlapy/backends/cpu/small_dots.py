"""Small batched dot_generals as kernels: reduce(lhs * rhs) over the contracting dimensions.

Attention inside a JAX decoding loop contracts per head (`einsum("hd,thd->ht")`, 16K
multiply-adds): a batched dot, which only the library thunk ran (BLAS per batch from
Python), so the whole `fori_loop` around it ran through Python (a 2-layer decoder: 1.1 ms a
token against XLA's 0.63). Written as a reduce of a broadcast product, it is one fused
kernel like any other, and the loop stays native. XLA's algebraic simplifier rewrites small
dots the same way (dot strength reduction).

In the computations loops run; at the top level only batched dots of a few multiply-adds
per batch element (TOP_MACS_PER_BATCH: a BLAS call each cost more than the product; larger
ones keep the library thunk, its batch chains and the in-place kernels around them). Only
f32/f64 dots with batch dimensions or more than two dimensions (plain 2-D products and
vector-matrix ones keep the GEMM routes, which the native driver runs too: as a reduce over
a transposed [k, n] rhs they read it with a stride) and at most MAX_MACS multiply-adds;
bf16/f16 operands would round every product and partial sum in the narrow type, so they
stay dots, as do dots with a `dot_algorithm`. The sum order is the reduce's (the backend's
choice for a dot, as on its GEMM routes). Nor batched dots in the canonical [b, m, k] x
[b, k, n] form whose products are not tiny (batched_gemm): the native loop runs them as
gemm_small's products, one at a time (a reduce reads such an rhs by columns: 6.6x slower
at 8 x [16, 16] x [16, 16]).

Dots of vectors (no free dimension on either side: jnp.einsum("ij,ij->i"), "ji,ji->i",
jnp.dot of two 1-D arrays) are reduces at any size, anywhere: a stream of both operands, one
sum per batch element (as BLAS calls, one per batch element, or NumPy's matmul over strided
views, "ji,ji->i" over 512 x 8192 ran 55 ms, XLA 1.45; a 4M-element jnp.dot was one sdot on
one thread, 1.16 ms, against 0.56 as a reduce, XLA 0.79). bf16/f16 operands are widened to
f32 first, the dot's own accumulation type.
"""

from __future__ import annotations

import numpy as np

from xlapy.backends.cpu import gemm_small
from xlapy.backends.cpu.dot_shapes import lhs_transposed, plain_dot
from xlapy.backends.cpu.library import dot_cost
from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.linalg import accumulate_dtype
from xlapy.passes.algebraic_rules import swapped_dot
from xlapy.passes.hlo_builder import Emitter, scalar_reducer
from xlapy.passes.pass_base import ComputationPass, replace_each
from xlapy.passes.while_loop_unroller import inside_loops
from xlapy.types import ElementType, from_dtype

#: Most multiply-adds (batch x m x n x k) a dot rewritten this way does.
MAX_MACS = 1 << 16
#: ... and more than this many go to the GEMM routes when the dot is a 2-D product in memory
#: (a [4, 8, 32] @ [32, 32] RNN step: 11 us as a reduce reading the rhs by columns, 1.3 as
#: a GEMM step); fewer stay reduces, which fuse with their neighbours and join a tiny
#: body's kernel sequence (kernel_sequence.py).
GEMM_MIN_MACS = 1 << 12


#: Multiply-adds per product from which a batched dot in a loop body is a batch of GEMMs
#: (batched_gemm). 16 steps of tanh(einsum("bij,bjk->bik")) on Zen 3 (AVX2), as reduces ->
#: as products: 8 x [16, 16] x [16, 16] 0.437 -> 0.066 ms (XLA 0.093), 8 x [2, 64] x [64, 64]
#: 0.575 -> 0.091, 128 x [4, 8] x [8, 4] 0.159 -> 0.096, 32 x [8, 4] x [4, 8] 0.064 -> 0.056;
#: below, the call per product loses: 128 x [1, 8] x [8, 8] 0.060 -> 0.075, 1024 x [2, 2] x
#: [2, 2] 0.345 -> 0.428.
BATCH_MIN_MACS = 128


#: At the top level: batched dots of at most this many multiply-adds per batch element,
#: which the library thunk ran as one BLAS call each (jnp.einsum("nij,nj->ni") of 128K 3 x 3
#: rotations: 3.9 ms, XLA 0.56; 4 x 4 products 33 ns each).
TOP_MACS_PER_BATCH = 128


def eligible(d: Instruction, most: int = MAX_MACS) -> bool:
    if d.opcode != "dot_general" or d.attrs.algorithm is not None:
        return False
    lhs, rhs = d.operands
    et = d.shape.element_type
    if not (lhs.shape.element_type == rhs.shape.element_type == et
            and et in (ElementType.F32, ElementType.F64)):
        return False
    if plain_dot(d, vectors=True) is not None or not d.shape.is_array:
        return False
    n = dot_cost(d)
    if n > GEMM_MIN_MACS and (plain_dot(d, flat=True) is not None or
                              lhs_transposed(d) is not None):
        # laid out as a 2-D product (dot_flatten.py), or one of a transposed lhs (a weight
        # gradient x^T g: a BLAS step; as a reduce it read both operands by columns, an
        # LSTM backward step's 32 x 256 x 8 product 26 us): the GEMM routes
        return False
    return 0 < n <= most


def vector_dots(d: Instruction) -> bool:
    """A dot of float vectors, batched or not: batch and contracting dimensions only."""
    if d.opcode != "dot_general" or d.attrs.algorithm is not None or not d.shape.is_array:
        return False
    a = d.attrs
    lhs, rhs = (o.shape for o in d.operands)
    floats = (ElementType.F32, ElementType.F64, ElementType.BF16, ElementType.F16)
    return bool(a.lhs_contracting_dimensions) and \
        lhs.element_type == rhs.element_type and lhs.element_type in floats and \
        d.shape.element_type in floats and \
        lhs.rank == len(a.lhs_batching_dimensions) + len(a.lhs_contracting_dimensions) and \
        rhs.rank == len(a.rhs_batching_dimensions) + len(a.rhs_contracting_dimensions)


def batched_gemm(d: Instruction) -> bool:
    """A batched dot in a loop body that the native loop runs as gemm_small's products, one
    at a time (loop_steps.native_gemm): over GEMM_MIN_MACS and each product over
    BATCH_MIN_MACS."""
    got = gemm_small.batch_of(d)
    return got is not None and dot_cost(d) > GEMM_MIN_MACS and got[1].macs >= BATCH_MIN_MACS


def tiny_batched(d: Instruction) -> bool:
    """A top-level batched dot whose batch elements are each a few multiply-adds."""
    if d.opcode != "dot_general" or not d.attrs.lhs_batching_dimensions:
        return False
    lhs = d.operands[0].shape.dimensions
    batch = int(np.prod([lhs[i] for i in d.attrs.lhs_batching_dimensions]))
    return batch > 1 and dot_cost(d) <= TOP_MACS_PER_BATCH * batch and \
        eligible(d, most=dot_cost(d))


def rewrite(module: Module, comp: Computation, d: Instruction) -> Instruction:
    """reduce(broadcast(lhs) * broadcast(rhs)) over the contracting dimensions of `d`."""
    e = Emitter(comp)
    a = d.attrs
    lhs, rhs = d.operands
    lb, lc = list(a.lhs_batching_dimensions), list(a.lhs_contracting_dimensions)
    rb, rc = list(a.rhs_batching_dimensions), list(a.rhs_contracting_dimensions)
    lf = [i for i in range(lhs.shape.rank) if i not in lb and i not in lc]
    rf = [i for i in range(rhs.shape.rank) if i not in rb and i not in rc]
    nb, nl, nr, nc = len(lb), len(lf), len(rf), len(lc)
    dims = [*d.shape.dimensions, *(lhs.shape.dimensions[c] for c in lc)]

    def spread(x: Instruction, order: list[int], at: list[int]) -> Instruction:
        if order != list(range(len(order))):
            x = e.transpose(x, permutation=tuple(order))
        return e.bcast(x, dims, at)

    at_b, at_l = list(range(nb)), list(range(nb, nb + nl))
    at_r, at_c = list(range(nb + nl, nb + nl + nr)), list(range(nb + nl + nr, len(dims)))
    rorder = rb + rf + rc
    if rhs.shape.rank - 1 in rf:
        # the rhs's rows contiguous along a free dimension ("ht,thd->hd", a decoder's
        # attention times its value cache): contracting dimensions before the free ones, a
        # reduce over a middle dimension whose lanes run along the rows; reduced last, its
        # rows were read with a stride (64 such einsums in a loop: 6.2x XLA's time -> 0.4-0.7)
        dims = [*dims[:nb + nl], *dims[nb + nl + nr:], *dims[nb + nl:nb + nl + nr]]
        at_c, at_r = list(range(nb + nl, nb + nl + nc)), list(range(nb + nl + nc, len(dims)))
        rorder = rb + rc + rf
    et = d.shape.element_type
    acc = from_dtype(np.result_type(*(accumulate_dtype(t) for t in
                                      (lhs.shape.element_type, rhs.shape.element_type, et))))
    lhs, rhs = (o if o.shape.element_type == acc else e.convert(o, new_element_type=acc)
                for o in (lhs, rhs))
    if vector_dots(d):  # the product in the lhs's order, no transposed copy of it
        return _vector_dot(module, e, lhs, rhs, lb, lc, rb, rc, et)
    x = spread(lhs, lb + lf + lc, at_b + at_l + at_c)
    y = spread(rhs, rorder, sorted(at_b + at_r + at_c))
    if not nc:
        return e.multiply(x, y)
    add = scalar_reducer(module, "add", acc, f"small_dot_add_{acc.hlo_name}")
    out = e.reduce(e.multiply(x, y), e.const(0, acc), at_c, add)
    return out if acc == et else e.convert(out, new_element_type=et)


def _vector_dot(module: Module, e: Emitter, lhs: Instruction, rhs: Instruction,
                lb: list[int], lc: list[int], rb: list[int], rc: list[int],
                et: ElementType) -> Instruction:
    """reduce(lhs * rhs) over lhs's dimensions `lc`, rhs transposed to lhs's order (a
    column dot "ji,ji->i" stays a column reduce of the product: 27 ms as a transposed
    row reduce, 1.0 this way)."""
    to_rhs = dict(zip(lb + lc, rb + rc))
    perm = tuple(to_rhs[i] for i in range(lhs.shape.rank))
    if perm != tuple(range(rhs.shape.rank)):
        rhs = swapped_dot(e, rhs, perm) or e.transpose(rhs, permutation=perm)
    acc = lhs.shape.element_type
    add = scalar_reducer(module, "add", acc, f"small_dot_add_{acc.hlo_name}")
    out = e.reduce(e.multiply(lhs, rhs), e.const(0, acc), sorted(lc), add)
    kept = sorted(lb)  # the reduce's dimensions, in the lhs's order; the dot's: lb's
    if kept != lb:
        out = e.transpose(out, permutation=tuple(kept.index(b) for b in lb))
    return out if acc == et else e.convert(out, new_element_type=et)


class SmallDotsAsReduces(ComputationPass):
    """Rewrites small batched dots in loop bodies as fused reduces (module docstring)."""

    name = "small-dots-as-reduces"

    def run(self, module: Module) -> bool:
        self.inside = inside_loops(module)
        return super().run(module)

    def run_on_computation(self, comp: Computation) -> bool:
        module = self.module
        assert module is not None
        inside = id(comp) in self.inside
        dots = [i for i in comp.instructions if vector_dots(i) or
                (eligible(i) and not batched_gemm(i) if inside else tiny_batched(i))]
        inner = [o for d in dots for o in d.operands if o.opcode == "dot_general"]
        changed = replace_each(comp, dots, lambda d: rewrite(module, comp, d))
        for o in inner:  # a dot the rewrite read as its swapped twin (swapped_dot)
            if not o.users and o.parent is comp and o is not comp.root:
                comp.remove(o)
        return changed


__all__ = ["BATCH_MIN_MACS", "GEMM_MIN_MACS", "MAX_MACS", "TOP_MACS_PER_BATCH",
           "SmallDotsAsReduces", "batched_gemm", "eligible", "rewrite", "tiny_batched",
           "vector_dots"]
