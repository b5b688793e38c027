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

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from llvmlite import ir

from xlapy.backends.cpu import kernels
from xlapy.backends.cpu.fp_env import driven
from xlapy.backends.cpu.fusion_plan import kernel_elements
from xlapy.backends.cpu.llvm_util import KERNEL_TYPE, i64
from xlapy.backends.cpu.op_emit import TupleKernel

#: Most elements all of the sequence's kernels walk together: above this a kernel call's
#: few nanoseconds are lost in its work, and inlining only grows the compile.
MAX_ELEMENTS = 1 << 12
#: Most LLVM instructions of the kernels together, and of any one: their inlined copies are
#: compiled a second time (the kernels stay for the Python path), and a body of
#: transcendentals (fori_nested's tanh and sin on 64 floats, one kernel of 240) doubled its
#: code generation, 16 -> 30 ms of a 46 ms cold compile, to save one call of ~5 ns next to
#: its ~100 ns of work. A multiply-add on a few floats is ~50, an RK4 stage's 60-160.
MAX_INSTRUCTIONS = 600
MAX_KERNEL_INSTRUCTIONS = 180  # (< early_compile.MIN_INSTRUCTIONS: none compiles early)
#: The function's name in the kernels' module.
NAME = "seq"


@dataclass(frozen=True)
class KernelSequence:
    """The sequence function of one executable: the kernels (indices into the executable's
    kernel_specs) it runs, in order (its address: the executable's `sequence_addr`)."""

    kernels: tuple[int, ...]


def walked(specs: Sequence[kernels.Kernel], order: Sequence[int],
           windows: Collection[int]) -> int:
    """The elements kernels `order` of `specs` walk together; one in `windows` (a loop
    body's in-place update, dus_window.py) walks its update's only."""
    return sum(math.prod(specs[j].root.operands[1].shape.dimensions) if j in windows
               else kernel_elements(specs[j]) for j in order)


def emit(mod: ir.Module, specs: Sequence[kernels.Kernel], steps: Sequence[object],
         early: Collection[str], windows: Mapping[int, kernels.Kernel]
         ) -> tuple[int, ...] | None:
    """Add NAME to `mod` when the executable's native steps (loop_steps.steps) are all
    plain kernels of `specs`, at least two, walking at most MAX_ELEMENTS together in at
    most MAX_INSTRUCTIONS (MAX_KERNEL_INSTRUCTIONS each), none compiled on its own
    (`early`: early_compile's); the kernels it calls (by index: `windows` replaces the
    whole-array kernels of a loop's in-place updates, dus_window.py), else None."""
    order = [s for s in steps if isinstance(s, int)]
    if len(order) < 2 or len(order) != len(steps):
        return None
    run = [windows.get(j, specs[j]) for j in order]
    if any(isinstance(k, TupleKernel) or k.name in early for k in run) or \
            walked(specs, order, windows) > MAX_ELEMENTS:
        return None
    sizes = [sum(len(bb.instructions) for bb in mod.globals[k.name].blocks) for k in run]
    if sum(sizes) > MAX_INSTRUCTIONS or max(sizes) > MAX_KERNEL_INSTRUCTIONS:
        return None
    fn = ir.Function(mod, KERNEL_TYPE, name=NAME)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for k in run:
        callee = mod.globals[k.name]
        callee.attributes.add("alwaysinline")
        b.call(callee, [fn.args[0], i64(0), i64(driven(k.outer, k.env_arg))])  # (FTZ set)
    b.ret_void()
    return tuple(order)


__all__ = ["MAX_ELEMENTS", "MAX_INSTRUCTIONS", "MAX_KERNEL_INSTRUCTIONS", "NAME",
           "KernelSequence", "emit", "walked"]
