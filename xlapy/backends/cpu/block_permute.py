"""Kernels that are one transpose of a buffer within small trailing blocks ([.., 16, 2] ->
[.., 2, 16], [.., 3, 4] -> [.., 4, 3], [.., 2, 3, 4] -> [.., 4, 2, 3]): groups of whole blocks
move as a few vectors through one constant shuffle.

Such a transpose went through tile_emit's 8 x 8 register transposes over matrices 2 wide, or
a scalar loop nest: 65536 [16, 2] f32 matrices took 0.77 ms (XLA 0.42), 262144 [3, 4] 0.87
(0.71). Here G blocks of S elements (G * S the least multiple of a vector's lanes, at most
MAX_GROUP_BYTES) load as one vector of G * S integers of the element's size, a shufflevector
with the permutation's constant mask reorders them, and one store writes them: the bits move
untouched (NaN payloads too). The blocks past the last whole group copy element by element.
The kernel keeps the kernel interface (its outer dimension the first, split over threads as
any kernel's), so regions, sequences and loop bodies run it as any other.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import target, transpose_lib
from xlapy.backends.cpu.kernels import Kernel, KernelEmitter
from xlapy.backends.cpu.llvm_util import KERNEL_TYPE, for_range, i64
from xlapy.ir import Instruction

#: The largest group of blocks (bytes) moved as one shuffle (four 64-byte vectors).
MAX_GROUP_BYTES = 256
#: Element sizes moved (as integers of this many bytes).
ELEMENT_BYTES = (1, 2, 4, 8)


def plan(root: Instruction, leaves: dict[int, int]) -> tuple[int, int, list[int]] | None:
    """(nb: leading dimensions kept, G: blocks a group, the group's source offsets in output
    order) when kernel `root` is a transpose of one leaf that permutes only its dimensions
    from nb on, whose group fits MAX_GROUP_BYTES; else None. A block whose two sides are
    both 8 or more is transpose_lib's (register transposes of 8 x 8)."""
    if root.opcode != "transpose" or id(root.operands[0]) not in leaves or \
            not root.shape.is_array or not target.current().is_x86:
        return None
    e = root.shape.dtype.itemsize
    perm = list(root.attrs.permutation)
    r = len(perm)
    nb = 0
    while nb < r and perm[nb] == nb:
        nb += 1
    if e not in ELEMENT_BYTES or nb == 0 or nb >= r - 1:
        return None
    src_dims = root.operands[0].shape.dimensions[nb:]
    if 0 in root.shape.dimensions or min(src_dims[-1], root.shape.dimensions[-1]) >= 8:
        return None
    s = math.prod(src_dims)
    lanes = target.current().vector_bits // (8 * e)
    group = math.lcm(s, lanes)
    if group * e > MAX_GROUP_BYTES:
        return None
    order = np.arange(s).reshape(src_dims).transpose([p - nb for p in perm[nb:]]).reshape(-1)
    g = group // s
    return nb, g, [k * s + int(o) for k in range(g) for o in order]


def emitter(mod: ir.Module, name: str, instr: Instruction, leaves: dict[int, int], slot: int,
            rows: list[Instruction], stream: bool, extra: list[tuple[Instruction, int]],
            routines: bool) -> tuple[Any, str]:
    """The emitter of fused kernel `instr` and its explain label: a transpose of a buffer
    calls transpose_lib's routine or permutes blocks here; any other kernel is generated."""
    if not extra and transpose_lib.takes(instr, leaves, routines):
        return transpose_lib.TransposeEmitter(mod, name, instr, leaves, slot), \
            " (transpose routine)"
    if not extra and not rows and plan(instr, leaves) is not None:
        return BlockPermuteEmitter(mod, name, instr, leaves, slot), " (block permute)"
    return KernelEmitter(mod, name, instr, leaves, slot, rows, stream, extra), ""


class BlockPermuteEmitter:
    """A kernel `name` (KERNEL_TYPE) for `root` over [begin, end) of its outer dimension
    (`plan` must hold)."""

    def __init__(self, mod: ir.Module, name: str, root: Instruction,
                 leaves: dict[int, int], out_slot: int) -> None:
        self.mod, self.name, self.root, self.out_slot = mod, name, root, out_slot
        self.in_slot = leaves[id(root.operands[0])]
        self.found = plan(root, leaves)

    def build(self) -> Kernel:
        assert self.found is not None
        nb, g, mask = self.found
        root = self.root
        dims = root.shape.dimensions
        e = root.shape.dtype.itemsize
        s = len(mask) // g
        it = ir.IntType(8 * e)
        vt = ir.VectorType(it, len(mask))
        fn = ir.Function(self.mod, KERNEL_TYPE, name=self.name)
        fn.args[0].add_attribute("noalias")
        table, begin, end = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        src, dst = (b.bitcast(b.load(b.gep(table, [i64(slot)])), it.as_pointer())
                    for slot in (self.in_slot, self.out_slot))
        per = math.prod(dims[1:nb])  # blocks per index of the outer dimension
        first, stop = b.mul(begin, i64(per)), b.mul(end, i64(per))
        groups = b.sdiv(b.sub(stop, first), i64(g))
        shuffle = ir.Constant(ir.VectorType(ir.IntType(32), len(mask)), mask)
        with for_range(b, i64(0), groups, name="grp") as k:
            at = b.mul(b.add(first, b.mul(k, i64(g))), i64(s))
            v = b.load(b.bitcast(b.gep(src, [at]), vt.as_pointer()))
            v.align = e
            w = b.shuffle_vector(v, ir.Constant(vt, None), shuffle)
            b.store(w, b.bitcast(b.gep(dst, [at]), vt.as_pointer())).align = e
        with for_range(b, b.add(first, b.mul(groups, i64(g))), stop, name="blk") as blk:
            at = b.mul(blk, i64(s))
            for o in range(s):  # (the blocks past the last whole group)
                x = b.load(b.gep(src, [b.add(at, i64(mask[o]))]))
                b.store(x, b.gep(dst, [b.add(at, i64(o))]))
        b.ret_void()
        return Kernel(self.name, root, [self.in_slot], self.out_slot, dims[0],
                      root.shape.num_elements, True, explicit=True)


__all__ = ["BlockPermuteEmitter", "emitter", "plan", "MAX_GROUP_BYTES", "ELEMENT_BYTES"]
