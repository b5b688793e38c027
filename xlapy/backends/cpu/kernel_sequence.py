"""A tiny loop body's kernels as one function: the native while driver (native_loop.py)
calls it once per iteration instead of each kernel through its step table.

A JAX loop body on a few floats (an RK4 step on 2 of them: six kernels) spent its time on
calls, not arithmetic: each step cost the driver's table loads and an indirect call, and the
kernel its prologue, ~5-6 ns a kernel. When every thunk of a control-flow computation is a
plain kernel over few elements, the executable adds `seq(table, 0, 0)` to its kernels'
module, calling them in thunk order on the same table with their own outer extents; the
kernels are marked alwaysinline, so LLVM merges them into one straight function (the bits
are the same: the same instructions on the same buffers, in the same order). The kernels
stay as they were for the Python path and every other caller.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from llvmlite import ir

from xlapy.backends.cpu import kernels
from xlapy.backends.cpu.fusion_plan import kernel_elements
from xlapy.backends.cpu.llvm_util import KERNEL_TYPE, i64
from xlapy.backends.cpu.op_emit import TupleKernel

#: Most elements all of the sequence's kernels walk together: above this a kernel call's
#: few nanoseconds are lost in its work, and inlining only grows the compile.
MAX_ELEMENTS = 1 << 12
#: The function's name in the kernels' module.
NAME = "seq"


@dataclass(frozen=True)
class KernelSequence:
    """The sequence function of one executable: its address and the kernels (indices into
    the executable's kernel_specs) it runs, in order."""

    address: int
    kernels: tuple[int, ...]


def emit(mod: ir.Module, specs: Sequence[kernels.Kernel], steps: Sequence[object],
         early: Collection[str]) -> tuple[int, ...] | None:
    """Add NAME to `mod` when the executable's native steps (native_loop._steps) are all
    plain kernels of `specs`, at least two, walking at most MAX_ELEMENTS together, none
    compiled on its own (`early`: early_compile's); the kernels it calls, else None."""
    order = [s for s in steps if isinstance(s, int) and not isinstance(s, bool)]
    if len(order) < 2 or len(order) != len(steps) or len(set(order)) != len(order):
        return None
    run = [specs[j] for j in order]
    if any(isinstance(k, TupleKernel) or k.name in early for k in run) or \
            sum(kernel_elements(k) for k in run) > MAX_ELEMENTS:
        return None
    fn = ir.Function(mod, KERNEL_TYPE, name=NAME)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for k in run:
        callee = mod.globals[k.name]
        callee.attributes.add("alwaysinline")
        b.call(callee, [fn.args[0], i64(0), i64(k.outer)])
    b.ret_void()
    return tuple(order)


__all__ = ["MAX_ELEMENTS", "NAME", "KernelSequence", "emit"]
