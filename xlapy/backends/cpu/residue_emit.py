"""The innermost loop of an interleaving kernel by residues (issue 14: lax.associative_scan).

A pad with interior padding along the last dimension (jax.lax.associative_scan's
interleave of its even and odd partial sums: pad(x, interior=1) + pad(y, low=1,
interior=1)) maps output column c to operand column (c - lo) / (k + 1) when
(c - lo) % (k + 1) == 0, else to the padding value: per column an unsigned division, a
remainder and a branch, which keep LLVM's loop vectorizer off the loop (the 256 x 4096
scan's last level ran one column at a time, 0.7 ms). With the loop over c = P q + r, one
body per residue r < P (P the least common multiple of the pads' k + 1), every remainder is
a constant and every division a shift of q: the bodies read consecutive columns, the
branches that remain (the pads' edges, a concatenate's boundary) compare q with
constants, and the vectorizer runs the loop in vectors (masked loads where a branch reads
memory, the residues' stores interleaved). Kernels written in explicit lanes (lanes.py) never
reach here: such a pad branches along their lane dimension.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import for_range, i64
from xlapy.ir import Instruction

#: Residues at most: more would only unroll the loop body.
MAX_RESIDUES = 4
#: Ops through which an output column maps to one column of each operand's last dimension
#: by a shift, a stride or a reversal (so a pad below them sees the root's residues moved,
#: not scrambled), besides the element-wise ones.
_COLUMNWISE = frozenset({"pad", "slice", "concatenate", "reverse", "convert",
                         "bitcast_convert", "broadcast_in_dim", "compare", "select", "clamp"})


def residues(root: Instruction, leaves: dict[int, int]) -> int:
    """P for `root`'s kernel: the lcm of k + 1 over the pads with interior padding k > 0
    along the last dimension that the root's columns reach through column-wise ops only
    (elsewhere a column's residue says nothing of the pad's), at most MAX_RESIDUES; 1 if
    there is none or the last extent is not a multiple of P."""
    dims = root.shape.dimensions
    if not root.shape.is_array or not dims or id(root) in leaves:
        return 1
    p = 1
    seen: set[int] = set()
    stack = [root]
    while stack:
        i = stack.pop()
        if id(i) in seen or id(i) in leaves or not i.shape.is_array or not i.shape.rank:
            continue
        seen.add(id(i))
        if i.opcode in ("constant", "parameter"):
            continue
        if i.opcode not in _COLUMNWISE and i.opcode not in ew.TABLE:
            return 1  # (a column could come from anywhere below: no residue to force)
        if i.opcode == "broadcast_in_dim" and \
                tuple(i.attrs.broadcast_dimensions[-1:]) != (i.shape.rank - 1,):
            continue  # the operand does not vary along the last dimension
        if i.opcode == "pad" and i.attrs.interior_padding[-1] > 0:
            p = math.lcm(p, i.attrs.interior_padding[-1] + 1)
        stack.extend(o for o in i.operands if o.shape.is_array and
                     o.shape.rank == i.shape.rank)
    if p > MAX_RESIDUES or dims[-1] % p:
        return 1
    return p


def residue_loop(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, p: int, name: str,
                 body: Callable[[ir.Value], None]) -> None:
    """body(c) for c in [lo, hi) (multiples of p: a rank-1 kernel's range is split at
    multiples of p, Kernel.align) as a loop over q in [lo / p, hi / p), body(p q + r) per r."""
    def over_p(v: ir.Value) -> ir.Value:
        return i64(v.constant // p) if isinstance(v, ir.Constant) else \
            b.udiv(v, i64(p), flags=["exact"])

    with for_range(b, over_p(lo), over_p(hi), name=name) as q:
        base = b.mul(q, i64(p), flags=["nuw", "nsw"])
        for r in range(p):
            body(base if r == 0 else b.add(base, i64(r), flags=["nuw", "nsw"]))


__all__ = ["residues", "residue_loop", "MAX_RESIDUES"]
