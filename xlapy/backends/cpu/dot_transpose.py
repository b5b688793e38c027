"""transpose(dot_general(A, B)) as dot_general(B, A): the dot writes the transposed value.

A training step's weight gradients come out of JAX as `transpose(dot_general(g, x))`
(contracting the batch): the dot wrote a 16 MB [1024, 4096] result that a transpose kernel
then read and wrote again. With the operands swapped, dot_general(B, A) (B's batch and
contracting dimensions first) has the result dimensions [batch, B's free, A's free]: exactly
the transpose's when its permutation keeps the batch dimensions and swaps the two free
groups. XLA's CPU compiler rewrites the same way (its optimized HLO has `dot(x, g)`).

A transposed dot whose lhs contracts a leading dimension while its rhs contracts its last
ones (JAX's `einsum("bhqk,bkhd->bqhd", p, v)`: dot_general(v, p) -> [b, h, d, q], then a
transpose to [b, q, h, d]) swaps its operands too, the transpose absorbing the swap: the
library then reads p as the [q, k] rows it is and v as [k, d] columns, where it copied both
into GEMM layout and wrote [d, q] blocks (1.07 -> 0.54 ms for 4 x 8 heads of 128 x 128 x 32,
the transpose after it unchanged).

The values are the same products summed over the same contraction; the order in which a
GEMM adds them may differ with the operand roles (OpenBLAS picks its kernels by shape), the
same freedom the backend's own GEMM routes take (gemm_f32, gemm_small, gemm_skinny), so this
is a backend pass, not one of the bit-exact simplifier's rules. Dots with a `dot_algorithm`
(whose operand precisions may differ) and dots read by others than the transpose stay.
"""

from __future__ import annotations

import dataclasses

from xlapy.ir import Computation, Instruction
from xlapy.passes.pass_base import ComputationPass
from xlapy.types import ElementType as ET
from xlapy.types import Shape


def _operands_swapped(t: Instruction) -> tuple[Instruction, tuple[int, ...]] | None:
    """(dot_general(B, A), the permutation of it that is `t`) for transpose `t` of a
    dot_general(A, B) nothing else reads, with free dimensions on both sides; else None."""
    if t.opcode != "transpose":
        return None
    d = t.operands[0]
    if d.opcode != "dot_general" or d.attrs.algorithm is not None or len(d.users) != 1:
        return None
    a = d.attrs
    lhs, rhs = d.operands
    nb = len(a.lhs_batching_dimensions)
    nl = lhs.shape.rank - nb - len(a.lhs_contracting_dimensions)
    nr = rhs.shape.rank - nb - len(a.rhs_contracting_dimensions)
    if nl == 0 or nr == 0:
        return None
    # the swapped dot's dimension j holds the original dot's dimension back[j]
    back = (*range(nb), *range(nb + nl, nb + nl + nr), *range(nb, nb + nl))
    where = {orig: j for j, orig in enumerate(back)}
    attrs = dataclasses.replace(
        a, lhs_batching_dimensions=a.rhs_batching_dimensions,
        rhs_batching_dimensions=a.lhs_batching_dimensions,
        lhs_contracting_dimensions=a.rhs_contracting_dimensions,
        rhs_contracting_dimensions=a.lhs_contracting_dimensions,
        precision_config=tuple(reversed(a.precision_config)))
    dims = d.shape.dimensions
    shape = Shape.array(d.shape.element_type, [dims[j] for j in back])
    return (Instruction("dot_general", [rhs, lhs], shape, attrs, (), d.name),
            tuple(where[p] for p in t.attrs.permutation))


def swapped(t: Instruction) -> Instruction | None:
    """The dot_general(B, A) that computes transpose `t` of dot_general(A, B), or None."""
    found = _operands_swapped(t)
    if found is None or found[1] != tuple(range(len(found[1]))):
        return None
    return found[0]


def _trailing(rank: int, dims: tuple[int, ...]) -> bool:
    return sorted(dims) == list(range(rank - len(dims), rank))


def reordered(t: Instruction) -> Instruction | None:
    """transpose(dot_general(B, A)) for transpose `t` of dot_general(A, B) when A contracts
    other than its last dimensions and B its last ones (module docstring), else None."""
    if t.opcode != "transpose" or t.operands[0].opcode != "dot_general":
        return None
    a = t.operands[0].attrs
    lhs, rhs = t.operands[0].operands
    if _trailing(lhs.shape.rank, a.lhs_contracting_dimensions) or \
            not _trailing(rhs.shape.rank, a.rhs_contracting_dimensions):
        return None
    found = _operands_swapped(t)
    return None if found is None else _transposed(t, *found)


def _transposed(t: Instruction, new: Instruction, perm: tuple[int, ...]) -> Instruction:
    """`new` (the swapped dot) as transpose `t` reads it: itself, or permuted by `perm`."""
    if perm == tuple(range(len(perm))):
        return new
    return Instruction("transpose", [new], t.shape, dataclasses.replace(
        t.attrs, permutation=perm), (), t.name)


class FoldDotTranspose(ComputationPass):
    """Rewrites transpose(dot_general(A, B)) as dot_general(B, A), or as a transpose of it
    (module docstring)."""

    name = "fold-dot-transpose"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for t in [i for i in comp.instructions if i.opcode == "transpose"]:
            new = swapped(t) or reordered(t)
            if new is None:
                continue
            dot = t.operands[0]
            if new.opcode == "transpose":
                comp.add(new.operands[0])
            comp.add(new)
            t.replace_all_uses_with(new)  # (the root too)
            for old in (t, dot):
                if old is not comp.root and not old.users:
                    comp.remove(old)
            changed = True
        return changed  # (ComputationPass sorts a changed computation)


#: Weight elements from which FoldRhsTranspose folds: below, the copy costs little and the
#: small-GEMM paths read a transposed weight slower (128 x 256 @ (128 x 256)^T: 0.069 ->
#: 0.096 ms folded; 256 x 512 @ (512 x 512)^T, at this size: 0.64 -> 0.54).
FOLD_RHS_MIN = 1 << 18


class FoldRhsTranspose(ComputationPass):
    """Rewrites dot_general(A, transpose(W)) of a 2-D float W [n, k] as dot_general(A, W)
    contracting W's last dimension: the library reads W as B^T where it lies (BLAS's 'T',
    gemm_f32's pack_b_t, gemv's dot form, the AMX pack's gather; bf16: 1 x 4096 @ (4096 x
    4096)^T 8.5 -> 1.9 ms, logits 25 -> 11.6; f16 12.7 -> 5.3), where a transpose kernel had
    copied it every call
    first (JAX's x @ w.T; this Xeon, 2 threads, interleaved: 1 x 4096 @ (4096 x 4096)^T
    15-21 -> 1.26 ms (XLA 30), 8 x 1024 @ (4096 x 1024)^T 2.4 -> 1.05 (0.8), 256 x 1024 @
    (512 x 1024)^T 1.25 -> 1.07 (0.96), logits 256 x 768 against a tied 32000 x 768
    embedding 57 -> 46 (44)). Only with A read as it
    lies (not a transpose itself, contracting its last dimension): folding both operands of
    w.T @ x.T ran 1.05 -> 1.52 ms. The same products summed over the same contraction; the
    GEMM's order may differ with the layout, the freedom FoldDotTranspose takes too."""

    name = "fold-rhs-transpose"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for d in [i for i in comp.instructions if i.opcode == "dot_general"]:
            a = d.attrs
            lhs, t = d.operands
            if t.opcode != "transpose" or tuple(t.attrs.permutation) != (1, 0) or \
                    a.algorithm is not None or \
                    a.lhs_batching_dimensions or lhs.opcode == "transpose" or \
                    t.shape.element_type not in (ET.F32, ET.F64, ET.BF16, ET.F16) or \
                    tuple(a.lhs_contracting_dimensions) != (lhs.shape.rank - 1,) or \
                    tuple(a.rhs_contracting_dimensions) != (0,) or \
                    t.shape.num_elements < FOLD_RHS_MIN:
                continue
            new = comp.add(Instruction("dot_general", [lhs, t.operands[0]], d.shape,
                                       dataclasses.replace(a, rhs_contracting_dimensions=(1,)),
                                       (), d.name))
            d.replace_all_uses_with(new)
            for old in (d, t):
                if old is not comp.root and not old.users:
                    comp.remove(old)
            changed = True
        return changed


__all__ = ["FOLD_RHS_MIN", "FoldDotTranspose", "FoldRhsTranspose", "reordered", "swapped"]
