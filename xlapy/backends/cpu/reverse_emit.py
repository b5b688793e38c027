"""A reverse in a kernel, along its vector lanes too: the operand generated at the mirrored
lanes and the vector's lanes reversed (one permute). The lane check left a kernel with a
reverse along its lanes in scalar code: jnp.flip(x, -1) * 2 + x on 1024 x 1024 ran at 1.5x
XLA's time, a horizontal flip of 3-channel uint8 images (lanes along the pixels of a row:
minor_stack.py) at 6x."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from xlapy.backends.cpu.lanes import Lane
from xlapy.backends.cpu.llvm_util import I32, i64
from xlapy.ir import Instruction

if TYPE_CHECKING:
    from xlapy.backends.cpu.kernels import KernelEmitter


def gen(e: KernelEmitter, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
    """`instr` (a reverse) at `idx`: lanes base + off + [0, L) read the operand at
    n - 1 - (base + off) - [0, L), the block of L lanes from n - L - (base + off) reversed
    (L: the live lanes of a masked tail, else the width)."""
    b = e.b
    dims = instr.shape.dimensions
    sub: list[Any] = []
    live = 0
    for d, v in enumerate(idx):
        if d not in instr.attrs.dimensions:
            sub.append(v)
        elif isinstance(v, Lane):
            live = v.live or e.width
            sub.append(Lane(b.sub(i64(dims[d] - live - v.off), v.base), 0, v.live))
        else:
            sub.append(b.sub(i64(dims[d] - 1), v))
    out = e.gen(instr.operands[0], sub)
    if not live or not isinstance(out.type, ir.VectorType):
        return out  # (uniform along the lanes: the same value reversed)
    n = out.type.count
    mask = [live - 1 - k if k < live else k for k in range(n)]
    return b.shuffle_vector(out, ir.Constant(out.type, None),
                            ir.Constant(ir.VectorType(I32, n), mask))


__all__ = ["gen"]
