"""Native loops for ops that are not fused per output index (reduce_window, select_and_scatter,
scatter, reduce with a general region): each is one LLVM function
`void(i8** table, i64 begin, i64 end)` in the executable's module, reading its operands' slots
and writing its result slot, like a kernel (kernels.Kernel), so the executable binds, threads,
plans the arena for it and runs it inside native while loops the same way. An op with several
results is a TupleKernel: its first argument is `[table, result buffers...]`, the results
fresh arrays per call (not reported as a kernel: native while loops leave it to Python).

`plan(instr)` picks the emitter (window_emit.py, scatter_emit.py, reduce_region_emit.py) or
None: the op then keeps its interpreter fallback (listed by `explain`).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.fp_env import kernel_mxcsr, restore_mxcsr
from xlapy.backends.cpu.kernels import Kernel
from xlapy.backends.cpu.llvm_util import I8P, KERNEL_TYPE, for_range, i64
from xlapy.backends.cpu.threads import NativePool
from xlapy.backends.cpu.thunks import Thunk, ptr, split_thunk
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET


def strides(dims: Sequence[int]) -> list[int]:
    """Row-major element strides."""
    out = [1] * len(dims)
    for d in range(len(dims) - 2, -1, -1):
        out[d] = out[d + 1] * dims[d + 1]
    return out


@dataclass
class TupleKernel(Kernel):
    """A native op with several results (variadic reduce): its function's first argument is
    `[table, result 0, result 1, ...]`, the results allocated per call (`thunk`)."""

    shapes: list[Any] = field(default_factory=list)

    def thunk(self, fn: Any, slot: int, parts: int, pool: Callable[[], NativePool]) -> Thunk:
        """Allocates the results, runs fn over [0, outer) split into `parts` ranges (each
        output element is computed whole, so the split never changes bits)."""
        shapes = [(tuple(s.dimensions), s.dtype) for s in self.shapes]
        local = threading.local()  # this call's results and cells (runs may overlap)

        def cells(t: Any) -> int:
            outs = [np.empty(d, dt) for d, dt in shapes]
            local.outs = outs
            local.cells = (ctypes.c_void_p * (1 + len(outs)))(
                ctypes.addressof(t), *[ptr(o) if o.size else 0 for o in outs])
            return ctypes.addressof(local.cells)

        split = split_thunk(fn, self.outer, parts, self.align, {}, [], pool, arg=cells)

        def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
            split(t, v, rt, pr)
            v[slot] = tuple(local.outs)
            local.outs = local.cells = None

        return run


class OpEmitter:
    """One native op function: subclasses emit `body(begin, end)` and return (outer extent,
    splittable, cost in element-ops). A tuple-shaped op reads its result buffers from the
    cells of TupleKernel (`result(k)`)."""

    label = "native"
    #: Its body is written in explicit vectors: the light pipeline compiles it
    #: (kernel_compile.py).
    explicit = False
    #: Threads split its outer range at multiples of this (Kernel.align).
    align = 1

    def __init__(self, mod: ir.Module, name: str, instr: Instruction, ins: list[int],
                 out: int) -> None:
        self.instr = instr
        self.name = name
        self.ins = ins  # operand slots, in operand order
        self.out = out
        self.fn = ir.Function(mod, KERNEL_TYPE, name=name)
        self.fn.args[0].add_attribute("noalias")
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self._ptrs: dict[tuple[int, ET], ir.Value] = {}
        self.tupled = instr.shape.is_tuple
        self.table = self.fn.args[0]
        if self.tupled:
            self.table = self.b.bitcast(self.b.load(self.fn.args[0]), I8P.as_pointer())

    @staticmethod
    def operands(instr: Instruction) -> list[Instruction]:
        """The instructions whose slots `ins` are, in operand order (the operands)."""
        return list(instr.operands)

    def ptr(self, slot: int, t: ET) -> ir.Value:
        """The slot's buffer as a pointer to storage elements (loaded in the entry block)."""
        key = (slot, t)
        if key not in self._ptrs:
            b = self.b
            with b.goto_block(self.fn.entry_basic_block):
                if not self.tupled:
                    b.position_at_start(self.fn.entry_basic_block)
                raw = b.load(b.gep(self.table, [i64(slot)]))
                self._ptrs[key] = b.bitcast(raw, ew.storage_type(t).as_pointer())
        return self._ptrs[key]

    def result(self, k: int, t: ET) -> ir.Value:
        """Result k of a tuple-shaped op as a pointer to storage elements."""
        key = (-1 - k, t)
        if key not in self._ptrs:
            b = self.b
            with b.goto_block(self.fn.entry_basic_block):
                raw = b.load(b.gep(self.fn.args[0], [i64(1 + k)]))
                self._ptrs[key] = b.bitcast(raw, ew.storage_type(t).as_pointer())
        return self._ptrs[key]

    def load(self, slot: int, t: ET, at: ir.Value) -> ir.Value:
        b = self.b
        return ew.from_storage(b, b.load(b.gep(self.ptr(slot, t), [at], inbounds=True)), t)

    def store(self, slot: int, t: ET, at: ir.Value, v: ir.Value) -> None:
        b = self.b
        b.store(ew.to_storage(b, v, t), b.gep(self.ptr(slot, t), [at], inbounds=True))

    def loops(self, dims: Sequence[int], body: Callable[[list[ir.Value]], None],
              first: tuple[ir.Value, ir.Value] | None = None, name: str = "d") -> None:
        """Nested loops over `dims` (row-major), `first` bounding the outermost."""
        def rec(idx: list[ir.Value]) -> None:
            d = len(idx)
            if d == len(dims):
                body(idx)
                return
            lo, hi = first if d == 0 and first is not None else (i64(0), i64(dims[d]))
            with for_range(self.b, lo, hi, name=f"{name}{d}") as i:
                rec(idx + [i])
        rec([])

    def linear(self, idx: Sequence[ir.Value], dims: Sequence[int]) -> ir.Value:
        b = self.b
        off: ir.Value = i64(0)
        for v, s, n in zip(idx, strides(dims), dims):
            if n == 1:
                continue
            term = v if s == 1 else b.mul(v, i64(s), flags=["nsw"])
            off = term if isinstance(off, ir.Constant) and off.constant == 0 else \
                b.add(off, term, flags=["nsw"])
        return off

    def body(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool, int]:
        raise NotImplementedError

    def build(self) -> Kernel:
        b = self.b
        saved, hi, env_arg = kernel_mxcsr(b, self.fn.args[2])
        outer, split, cost = self.body(self.fn.args[1], hi)
        restore_mxcsr(b, saved)
        b.ret_void()
        if self.tupled:
            return TupleKernel(self.name, self.instr, sorted(set(self.ins)), self.out, outer,
                               cost, split, env_arg=env_arg,
                               shapes=list(self.instr.shape.tuple_shapes),
                               explicit=self.explicit, align=self.align)
        return Kernel(self.name, self.instr, sorted(set(self.ins)), self.out, outer, cost,
                      split, env_arg=env_arg, explicit=self.explicit, align=self.align)


def plan(instr: Instruction) -> type[OpEmitter] | None:
    """The emitter class that makes `instr` native, or None (interpreter fallback)."""
    from xlapy.backends.cpu import reduce_region_emit, scatter_emit, window_emit

    for mod in (window_emit, scatter_emit, reduce_region_emit):
        cls = mod.emitter(instr)
        if cls is not None:
            return cls
    return None


__all__ = ["OpEmitter", "TupleKernel", "plan", "strides"]
