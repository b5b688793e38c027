"""Planning helpers of the cpu executable: which row reductions a kernel computes inline,
how deep a kernel's expression may grow, and how many elements a kernel walks (its threading
cost). Split out of `executable`."""

from __future__ import annotations

import numpy as np

from xlapy.backends.cpu import kernels
from xlapy.backends.cpu.index_emit import INDEX_OPS
from xlapy.ir import Instruction

#: The longest chain of element-wise ops one kernel computes: the emitters walk a kernel's
#: expression recursively, and a chain of thousands (the interpreter runs 20,000) would
#: exceed Python's recursion limit; a value this deep into a chain gets a buffer instead.
MAX_FUSED_DEPTH = 100


def depth_cuts(order: list[Instruction], fusible: set[int],
               limit: int = MAX_FUSED_DEPTH) -> set[int]:
    """Fusible values to materialize so that no kernel's expression is deeper than `limit`
    (depth counted through fusible operands, restarting after each cut)."""
    depth: dict[int, int] = {}
    cuts: set[int] = set()
    for instr in order:
        if id(instr) not in fusible:
            continue
        d = 1 + max((depth.get(id(o), 0) for o in instr.operands), default=0)
        if d >= limit:
            cuts.add(id(instr))
            d = 0
        depth[id(instr)] = d
    return cuts


def leaf_slots(root: Instruction, fusible: set[int], materialized: set[int],
               slot: dict[int, int]) -> dict[int, int]:
    """The buffers (id -> slot) the kernel of `root` reads: the values behind it that are
    not computed inside it (shared with the gpu backend)."""
    leaves: dict[int, int] = {}
    stack = list(root.operands)
    seen: set[int] = set()
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if id(i) in fusible and id(i) not in materialized:
            stack.extend(i.operands)
        else:
            leaves[id(i)] = slot[id(i)]
    return leaves


def kernel_elements(k: kernels.Kernel) -> int:
    """Elements a kernel walks (a reduce's input, else its result)."""
    sh = k.root.operands[0].shape if k.root.opcode == "reduce" else k.root.shape
    return int(np.prod(sh.dimensions)) if sh.is_array else 1


def row_walk(root: Instruction, fusible: set[int], mat: set[int], inline: set[int],
             reads: dict[int, set[tuple[str, ...]]] | None = None
             ) -> tuple[list[Instruction], set[int]]:
    """The row reductions kernel `root` computes inline, and those reached with an index
    other than the root's outermost one (they must be materialized). Indices are symbols:
    "r" the root's dimension 0, "c" a reduction's own column loop, "?" anything else.
    `reads` collects, per leaf buffer, the symbolic indices it is read at."""
    found: dict[int, Instruction] = {}
    bad: set[int] = set()
    seen: set[tuple[int, tuple[str, ...]]] = set()

    def walk(i: Instruction, idx: tuple[str, ...]) -> None:
        key = (id(i), idx)
        if key in seen:
            return
        seen.add(key)
        if i is not root and (id(i) not in fusible or id(i) in mat):
            if reads is not None:  # a leaf buffer
                reads.setdefault(id(i), set()).add(idx)
            return
        if id(i) in inline:
            if idx != ("r",):
                bad.add(id(i))
                return
            found[id(i)] = i
            walk(i.operands[0], ("r", "c"))
            walk(i.operands[1], ())
            return
        op = i.opcode
        if op == "broadcast_in_dim":
            src = i.operands[0].shape.dimensions
            walk(i.operands[0], tuple(idx[d] if src[k] != 1 else "0" for k, d in
                                      enumerate(i.attrs.broadcast_dimensions)))
            return
        if op == "reduce" or op in ("transpose", "reshape", "slice", "reverse") \
                or op in INDEX_OPS or op == "dynamic_iota":  # (operands read elsewhere)
            for o in i.operands:
                walk(o, ("?",) * o.shape.rank)
            return
        for o in i.operands:
            walk(o, idx if o.shape.rank else ())

    rank = root.shape.rank if root.shape.is_array else 0
    start = ("r",) + ("?",) * (rank - 1) if rank and root.opcode != "reduce" else \
        ("?",) * rank
    walk(root, start)
    return list(found.values()), bad
