"""exp's argument known to be <= 0 (or NaN): softmax's x - max(x) along its own rows.

exp clamps its argument at both ends before the range reduction, and an AVX2/SSE f32 exp
tests every vector for a lane past 88.3 (2^n beyond the one-multiply scale: math_poly's
_exp_scale). For x - m, where m is the maximum of x over the rows x's element belongs to
(JAX's softmax: m = max(-inf, reduce_max(x)) broadcast back over the reduced dimensions),
every lane is <= 0 or NaN: flush(x) <= flush(m) (flushing is monotone, m is flushed), so
the rounded difference is <= 0, and an inf or NaN x or m gives -inf or NaN. The upper clamp
then changes no lane and no lane is big: emitting neither gives the same bits, with one
vector instruction fewer per vector (AVX-512; the compare, mask test and branch of the big
test, and its slow block, with AVX2/SSE).

`difference` emits that x - m without flushing x first (the multiply by 1.0 of flush_ftz)
where exp is its one user: for a denormal x, exp(x - m) = exp(flush(x) - m) bit for bit.
If |m| >= 2^-100, x is under half an ulp of m, so both differences round to -m; else both
are under 2^-99 in magnitude (FTZ flushing a denormal difference to zero), and exp of
either is 1.0. An inf or NaN m gives the same inf or NaN either way. Under FTZ the
difference is still <= 0: a positive denormal x - 0 is flushed to +0. Softmax's exp pass
on AVX-512 is one vmulps of 15 vector ops a vector lighter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import flush_ftz
from xlapy.backends.cpu.lanes import trimmed
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Instruction

#: Steps between the row maximum and the subtraction that keep "m[i] >= x[i]".
_MOVES = ("broadcast_in_dim", "reshape")


def _row_max_of(v: Instruction, x: Instruction, depth: int = 8) -> bool:
    """v (of x's leading dimensions, maybe with trailing 1s) is at every index at least the
    elements of x whose leading indices those are: a max-reduce of x over its trailing
    dimensions, moved by prefix broadcasts and trailing-1 reshapes, maxed with anything."""
    if depth <= 0:
        return False
    op = v.opcode
    if op == "maximum":
        return any(_row_max_of(o, x, depth - 1) for o in v.operands)
    if op == "reduce":
        if reducer_op(v) != "maximum" or v.operands[0] is not x:
            return False
        rank, dims = x.shape.rank, tuple(sorted(v.attrs.dimensions))
        k = rank - len(dims)
        return dims == tuple(range(k, rank)) and \
            tuple(v.shape.dimensions) == tuple(x.shape.dimensions[:k])
    if op not in _MOVES or len(v.operands) != 1:
        return False
    src = v.operands[0]
    if op == "broadcast_in_dim":
        bd = tuple(v.attrs.broadcast_dimensions)
        if bd != tuple(range(src.shape.rank)):
            return False
    elif trimmed(v.shape.dimensions) != trimmed(src.shape.dimensions):
        return False
    return _row_max_of(src, x, depth - 1)


def at_most_zero(arg: Instruction) -> bool:
    """`arg` is x - m with m >= x elementwise as above (or NaN): exp needs no upper clamp
    and has no big lanes."""
    if arg.opcode != "subtract" or len(arg.operands) != 2:
        return False
    x, m = arg.operands
    if tuple(m.shape.dimensions) != tuple(x.shape.dimensions) or x.shape.rank == 0:
        return False
    if m.opcode != "broadcast_in_dim":  # the row value comes back over the row
        return False
    rank = x.shape.rank
    bd = tuple(m.attrs.broadcast_dimensions)
    src = m.operands[0]
    if bd != tuple(range(src.shape.rank)) or src.shape.rank > rank:
        return False
    # m[i] = src[i[:k]] (dims beyond src's rank, or of extent 1 in src, broadcast)
    return _row_max_of(src, x)


def difference(k: Any, sub: Instruction, idx: Sequence[Any]) -> ir.Value:
    """exp's argument `sub` (at_most_zero) at idx in kernel emitter k: x - m with x as
    loaded, where exp is the subtraction's one user and x's flush is the one multiply (see
    the module's docstring); else k.gen(sub, idx)."""
    if len(sub.users) != 1 or id(sub) in k.leaves or id(sub) in k.row_cache:
        return k.gen(sub, idx)
    x, m = k._unify([k.gen(o, idx) for o in sub.operands])
    if not flush_ftz.applies("subtract", x) or ew.is_flushed(x):
        return k.gen(sub, idx)
    return k.b.fsub(x, flush_ftz.operand(k.b, m, "subtract", ew.flush))


__all__ = ["at_most_zero", "difference"]
