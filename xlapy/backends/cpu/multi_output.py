"""Sibling kernels computed by one loop (XLA's multi-output fusion).

An Adam step's three results (the parameters, m and v, each from the gradient) were three
element-wise kernels, each reading the gradient and the moments again: 40 MB of traffic
for 1M parameters where one loop needs 28. Kernels of the same shape that read common
buffers are computed in the first one's loop: its emitter stores each sibling's value at
the same index (kernels.KernelEmitter `extra`), what they share computed once (the memo),
a sibling that reads an earlier member at its own index reads the value just computed.

A sibling joins when every buffer it reads is ready before the first member runs (or is
a member read at the same index), so moving it there changes no value. In the schedule it
moves right after the first member, a no-op thunk in its place; the arena gives the group
one step (its outputs never share memory with what the loop reads) and none of them is
written in place. In a loop body a sibling is no native step (loop_steps.steps reads the
report's "in kernel" line as nothing to run) and its result swaps buffers as its first
member's does (native_loop's `body_out`); xlapy.aot skips it the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from xlapy.backends.cpu import inplace
from xlapy.backends.cpu.fusion_plan import leaf_slots, row_symbols, row_walk
from xlapy.backends.cpu.index_emit import INDEX_OPS, segmentable
from xlapy.backends.cpu.lanes import LaneCheck, vector_width
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Instruction

#: Members of a group at most (the first and its siblings).
MAX_GROUP = 4
#: Later kernels a first member looks at for siblings.
WINDOW = 16
#: Ops whose consumers regions and chains take (regions.py, batch_chain.py).
PRODUCTS = frozenset({"dot_general", "convolution", "dot"})
#: Elements a member computes at least (smaller kernels cost their call, not their reads).
MIN_ELEMENTS = 4096


class _Ids(dict):
    """leaf_slots' slot map for planning: every value is its own key."""

    def __missing__(self, key: int) -> int:
        return key


def _candidate(i: Instruction, row_reduces: dict, claimed: AbstractSet[int]) -> bool:
    sh = i.shape
    return (sh.is_array and sh.rank >= 1 and sh.num_elements >= MIN_ELEMENTS
            and sh.dimensions[-1] >= vector_width()  # (shorter: kernel_flat.py's, one root)
            and not sh.element_type.is_complex and i.opcode not in ("reduce", "transpose")
            and i.opcode not in INDEX_OPS  # (dus_window.py replaces a loop's DUS kernels)
            and not row_reduces.get(id(i)) and id(i) not in claimed and not segmentable(i))


def plan(order: Sequence[Instruction], fusible: AbstractSet[int], materialized: AbstractSet[int],
         row_reduces: dict, claimed: AbstractSet[int]
         ) -> tuple[dict[int, list[Instruction]], set[int]]:
    """(id(first member) -> its siblings in program order, the siblings' ids) (module
    docstring)."""
    pos = {id(i): k for k, i in enumerate(order)}
    roots = [i for i in order if id(i) in fusible and id(i) in materialized
             and i.opcode != "constant" and _candidate(i, row_reduces, claimed)]
    inline = {id(r) for rs in row_reduces.values() for r in rs}
    leaves_of: dict[int, set[int]] = {
        id(i): set(leaf_slots(i, fusible, materialized, _Ids())) for i in roots}
    # (a kernel reading a product's rows belongs to its row-parallel region or batch chain)
    products = {id(i) for i in order if i.opcode in PRODUCTS}
    roots = [i for i in roots if not leaves_of[id(i)] & products]
    # (a member that would run scalar would take its group with it)
    lanes = {id(i): LaneCheck(dict.fromkeys(leaves_of[id(i)], 0), [], reducer_op,
                              splits=True).kernel(i, []) for i in roots}
    taken: set[int] = set()
    groups: dict[int, list[Instruction]] = {}
    for k, a in enumerate(roots):
        if id(a) in taken:
            continue
        members, read = {id(a)}, set(leaves_of[id(a)])
        sibs: list[Instruction] = []
        for b in roots[k + 1:k + 1 + WINDOW]:
            if len(sibs) + 1 >= MAX_GROUP:
                break
            if id(b) in taken or tuple(b.shape.dimensions) != tuple(a.shape.dimensions) \
                    or lanes[id(b)] != lanes[id(a)]:
                continue
            mine = leaves_of[id(b)]
            if not (mine & (read | members)) or not all(
                    leaf in members or pos[leaf] < pos[id(a)] for leaf in mine):
                continue
            if mine & members and not _same_index(b, mine & members, fusible, materialized,
                                                  inline):
                continue
            sibs.append(b)
            members.add(id(b))
            read |= mine
        if sibs:
            groups[id(a)] = sibs
            taken.update(members)
    return groups, {id(x) for xs in groups.values() for x in xs}


def _same_index(b: Instruction, leaves: set[int], fusible: AbstractSet[int],
                materialized: AbstractSet[int], inline: set[int]) -> bool:
    """b reads each of `leaves` (earlier members, same shape) only at its own index."""
    if not inplace.exact_walk(b, fusible, materialized, inline):
        return False
    reads: dict[int, set[tuple[str, ...]]] = {}
    row_walk(b, set(fusible), set(materialized), inline, reads)
    own = row_symbols(b.shape.dimensions)
    return all(reads.get(leaf) == {own} for leaf in leaves)


def group_leaves(first: Instruction, extra: Sequence[tuple[Instruction, int]],
                 leaves: Callable[[Instruction], dict[int, int]]) -> dict[int, int]:
    """The buffers a group's loop reads: its members' leaves but the members themselves."""
    members = [first, *(x for x, _ in extra)]
    ids = {id(m) for m in members}
    out: dict[int, int] = {}
    for m in members:
        out.update((k, v) for k, v in leaves(m).items() if k not in ids)
    return out


def noop(t: object, v: object, rt: object, pr: object) -> None:
    """A sibling's thunk: the first member's kernel computed it."""


def add_siblings(exe: Any, name: str, first: Instruction,
                 extra: Sequence[tuple[Instruction, int]], fresh: list[int],
                 temps: list[int]) -> None:
    """The executable's record of siblings kernel `name` computes with `first`: their slots
    as results or temporaries, a no-op thunk each (right after the kernel's), the report."""
    for x, s in extra:
        (fresh if id(x) in exe._fresh_values else temps).append(s)
        exe.thunks.append(noop)
        exe.report.append((x.name, x.opcode, f"in kernel {name} (with %{first.name})"))


def fresh(siblings: Sequence[Instruction], slot: dict[int, int],
          fresh_values: AbstractSet[int]) -> list[tuple[int, tuple[int, ...], Any]]:
    """The siblings' results the kernel's thunk allocates (thunks.split_thunk's `fresh`)."""
    return [(slot[id(x)], tuple(x.shape.dimensions), x.shape.dtype) for x in siblings
            if id(x) in fresh_values]


__all__ = ["MAX_GROUP", "add_siblings", "fresh", "group_leaves", "noop", "plan"]
