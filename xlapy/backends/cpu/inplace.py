"""Kernels written over a dying operand: a temporary whose last reader is an element-wise
kernel of its own shape gives that kernel's result its memory.

The MLP's bias + relu kernel read the GEMM's 256x4096 result and wrote another 4 MB; the
softmax of attention read 8 MB of scores and wrote 8 MB of probabilities. Written in place,
the result takes the operand's arena bytes (peak memory: MLP 18 -> 10 MB, attention 18 ->
10 MB) and the kernel writes lines it has just read (still in cache).

Safe when the kernel reads the operand only (a) at the element it is about to write, or (b)
along the row it writes, inside a row reduction that the kernel finishes before it stores any
element of that row (kernels.py: row reductions are computed per row first). The symbols of
`fusion_plan.row_walk` say where each leaf is read; they are exact only through element-wise
ops of the result's shape, broadcast_in_dim, reshape and inline row reductions (a leaf under
a transpose, slice, pad, gather, ... is read "anywhere"; one under a rank-changing bitcast
may be misplaced: `inexact_leaves`), so only leaves reached through those are written over.
Nothing may read the operand after the kernel, nothing but native code (kernels, BLAS: no
views) may read it at all, and inside a row-parallel region no member may read it whole
(another thread could still be reading rows this one has overwritten). A native loop's
state elements follow the same rules (loop_inplace.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from xlapy.ir import Instruction
from xlapy.passes.fusion_decision import is_elementwise
from xlapy.types import Shape

#: Ops through which row_walk's read symbols are exact (besides element-wise ones).
_EXACT = frozenset({"broadcast_in_dim", "reshape", "constant", "iota"})


def exact_walk(root: Instruction, fusible: AbstractSet[int], mat: AbstractSet[int],
               inline: AbstractSet[int]) -> bool:
    """Whether every op the kernel of `root` computes (root and the fusible values behind it
    that have no buffer) keeps row_walk's symbols exact: element-wise ops whose array
    operands have the result's shape (or are scalars), the _EXACT shape ops, and the row
    reductions it computes inline."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if id(i) not in inline and i.opcode not in _EXACT:
            if not is_elementwise(i):
                return False
            dims = tuple(i.shape.dimensions)
            if any(o.shape.rank and tuple(o.shape.dimensions) != dims for o in i.operands):
                return False
        stack.extend(o for o in i.operands if id(o) in fusible and id(o) not in mat)
    return True


#: Ops whose operands row_walk reads at "?" (anywhere): leaves under them fail
#: same_index_reads whatever lies between.
_ANYWHERE = frozenset({"reduce", "transpose", "slice", "reverse", "dynamic_iota",
                       "concatenate", "pad", "dynamic_slice", "dynamic_update_slice", "gather"})


def inexact_leaves(root: Instruction, fusible: AbstractSet[int], mat: AbstractSet[int],
                   inline: AbstractSet[int]) -> set[int]:
    """The leaves (ids) of the kernel of `root` whose row_walk symbols may be wrong: those
    reached through an op exact_walk refuses that row_walk does not read anywhere ("?")
    (a rank-changing bitcast_convert passes the root's symbols to an operand of another
    shape). The rest keep exact symbols, so a kernel that also slices or gathers another
    operand (`c + dynamic_slice(x, i)`) may still be written over the operand it reads in
    place."""
    out: set[int] = set()
    seen: set[tuple[int, bool]] = set()
    stack = [(root, False)]
    while stack:
        i, bad = stack.pop()
        if (id(i), bad) in seen:
            continue
        seen.add((id(i), bad))
        if i is not root and (id(i) not in fusible or id(i) in mat):
            if bad:
                out.add(id(i))
            continue
        if not bad and id(i) not in inline and i.opcode not in _EXACT | _ANYWHERE:
            dims = tuple(i.shape.dimensions)
            bad = not is_elementwise(i) or any(
                o.shape.rank and tuple(o.shape.dimensions) != dims for o in i.operands)
        stack.extend((o, bad) for o in i.operands)
    return out


def same_index_reads(root: Shape, leaf: Shape, symbols: Iterable[tuple[str, ...]]) -> bool:
    """Whether a leaf of the root's dims and element size, read at `symbols` (row_walk's),
    is read only at the written element or along its row (a row reduction's "c"). A
    scalar's one element is read at () (a scalar loop carry: `v = v * 0.5 + 0.5` writes
    over its state instead of swapping two buffers)."""
    if not (root.is_array and leaf.is_array
            and tuple(root.dimensions) == tuple(leaf.dimensions)
            and root.dtype.itemsize == leaf.dtype.itemsize):
        return False
    dims = root.dimensions
    ident = tuple("0" if n == 1 else "r" if d == 0 else f"r{d}" for d, n in enumerate(dims))
    row = ident[:-1] + ("c",)
    syms = set(symbols)
    return bool(syms) and syms <= {ident, row}


def choose(outs: Sequence[int], ins: Sequence[Sequence[int]],
           eligible: Mapping[int, Sequence[int]], temps: AbstractSet[int],
           fresh: AbstractSet[int], results: AbstractSet[int],
           whole_reads: Mapping[int, AbstractSet[int]]) -> dict[int, int]:
    """{kernel slot: operand slot whose memory it takes}. `outs`/`ins`: the thunks' slots in
    program order and the slots each reads; `eligible`: per kernel slot, its operands read
    only in place (exact_walk, same_index_reads); `temps`: arena slots; `fresh`: slots written
    by native code (no views); `whole_reads`: per kernel slot inside a row-parallel region,
    the slots members of that region read other than at their own rows."""
    last: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    for p, reads in enumerate(ins):
        for s in reads:
            last[s] = p
            readers.setdefault(s, []).append(outs[p])
    pos = {s: p for p, s in enumerate(outs)}
    taken: set[int] = set()
    share: dict[int, int] = {}
    for out, leaves in eligible.items():
        if out not in temps or out in results or out not in pos:
            continue
        for leaf in leaves:
            if (leaf in taken or leaf not in temps or leaf in results or leaf not in fresh
                    or last.get(leaf) != pos[out]
                    or any(r not in fresh for r in readers.get(leaf, ()))
                    or leaf in whole_reads.get(out, ())):
                continue
            share[out] = leaf
            taken.add(leaf)
            break
    return share


def into_outputs(outs: Sequence[int], ins: Sequence[Sequence[int]],
                 eligible: Mapping[int, Sequence[int]], temps: AbstractSet[int],
                 fresh: AbstractSet[int], outputs: AbstractSet[int],
                 results: AbstractSet[int], group: Mapping[int, str],
                 whole_reads: Mapping[int, AbstractSet[int]]) -> dict[int, int]:
    """{temporary: output kernel slot} where a row-parallel region's kernel computing a
    result (`outputs`: allocated by the region's thunk before it runs) may be written over a
    temporary of the same region (the MLP's last GEMM writes the result's buffer, the bias
    kernel adds in place): the conditions of `choose`, the operand in the kernel's region."""
    cand = {o: [x for x in ls if group.get(x) is not None and group.get(x) == group.get(o)]
            for o, ls in eligible.items() if o in outputs and group.get(o) is not None}
    share = choose(outs, ins, cand, temps | set(cand), fresh, results - set(cand),
                   whole_reads)
    return {leaf: out for out, leaf in share.items()}


__all__ = ["exact_walk", "inexact_leaves", "same_index_reads", "choose", "into_outputs"]
