"""One C-callable function per computation, calling the cpu backend's kernels in order.

A computation is planned by the cpu backend as usual (CpuExecutable: which instructions
become which kernel, the kernels' LLVM module, the arena offsets of the temporaries); this
module reads that plan and emits, for each computation,

    void fn(i8** args, i8** results, i8* scratch)

with `args` / `results` the flattened leaf buffers of its parameters / root. Every buffer
location is fixed at the function's entry: parameters are `args`, constants are embedded
globals, temporaries are `scratch` + their arena offset, a root value written by native code
goes straight into its `results` buffer, and every other value (tuple-shaped results, loop
states, results of called computations) gets a region of scratch of its own after the
arena. The kernels' pointer table is filled once at entry; then each thunk instruction runs
in program order: a kernel is called over its whole outer range (one thread), dot_general /
convolution / sort call the loops of gemm.py / conv.py / sort.py, while / case / if / call
call the functions of their computations (emitted the same way, recursively; their scratch
follows the caller's). Root values not written in place are copied into `results` at the end.

What the plan runs through Python or a library with no in-object implementation raises
`Unimplemented` naming the op.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.aot import lapack, probe, threads
from xlapy.aot.conv import emit_conv
from xlapy.aot.errors import Unimplemented
from xlapy.aot.fft import emit_fft
from xlapy.aot.gemm import emit_dot
from xlapy.aot.linalg import emit_triangular_solve
from xlapy.aot.sort import emit_sort
from xlapy.backends.cpu import op_emit, ragged_emit
from xlapy.backends.cpu.llvm_util import I8, I8P, I32, I64, KERNEL_TYPE, VOID, for_range, i64
from xlapy.ir import Instruction
from xlapy.types import Shape

#: Alignment of every scratch region (the arena's, buffer_assignment.ALIGN, is 64 too).
ALIGN = 64
#: fn(args, results, scratch, probes, threads): probes is the probe results' pointer table
#: (probe.py), threads the thread count for kernels (threads.py); both passed down to every
#: called function.
FN_TYPE = ir.FunctionType(VOID, [I8P.as_pointer(), I8P.as_pointer(), I8P,
                                 I8P.as_pointer(), I32])
#: Ops whose result is a view of their operands: nothing runs.
ALIASING = frozenset({"tuple", "get_tuple_element", "optimization_barrier", "after_all"})
CONTROL_FLOW = frozenset({"while", "case", "if", "call"})
#: Ops computed by a loop nest of this package: fn(operand 0, operand 1 (else 0), out,
#: scratch).
LOOPS = {"dot_general": emit_dot, "convolution": emit_conv,
         "triangular_solve": emit_triangular_solve, "fft": emit_fft}

Loc = Any  # ir.Value (an i8* buffer), None (a token) or a tuple of Locs


def leaves(loc: Loc) -> list[Any]:
    """The buffers of a location, flattened (tokens dropped)."""
    if isinstance(loc, tuple):
        return [x for sub in loc for x in leaves(sub)]
    return [] if loc is None else [loc]


def array_leaves(shape: Shape) -> list[Shape]:
    """The array leaves of a shape in buffer order (tokens dropped)."""
    if shape.is_tuple:
        return [x for s in shape.tuple_shapes for x in array_leaves(s)]
    return [] if shape.is_token else [shape]


def nbytes(shape: Shape) -> int:
    return int(np.prod(shape.dimensions)) * shape.dtype.itemsize


def up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Program:
    """The driver module being built: functions, embedded constants, the kernel modules'
    IR texts (with their exports renamed `{prefix}{name}`) to link in."""

    name: str
    mod: ir.Module
    texts: list[tuple[str, str]] = field(default_factory=list)  # (prefix, IR text)
    counter: Iterator[int] = field(default_factory=itertools.count)
    probes: list[Instruction] = field(default_factory=list)  # probe.py
    probe_capacity: int = 1
    freestanding: bool = False  # no libc / libm / pthreads (freestanding.py)
    #: kernel function name (prefixed, as linked) -> the op it computes, for freestanding
    #: refusals
    kernel_ops: dict[str, Instruction] = field(default_factory=dict)

    def fresh(self, what: str) -> str:
        return f"{self.name}__{what}{next(self.counter)}"

    def constant(self, arr: np.ndarray) -> ir.Value:
        data = np.ascontiguousarray(arr).tobytes()
        g = ir.GlobalVariable(self.mod, ir.ArrayType(I8, max(len(data), 1)),
                              name=self.fresh("const"))
        g.linkage = "internal"
        g.global_constant = True
        g.align = ALIGN
        g.initializer = ir.Constant(ir.ArrayType(I8, max(len(data), 1)),
                                    bytearray(data or b"\0"))
        return g.bitcast(I8P)


class FunctionEmitter:
    """Emits one computation's function (see the module docstring) from its executable."""

    def __init__(self, prog: Program, exe: Any) -> None:
        self.prog, self.exe = prog, exe
        self.name = prog.fresh("comp")
        self.fn = ir.Function(prog.mod, FN_TYPE, name=self.name)
        self.fn.linkage = "internal"
        args, results, scratch, self.probes, self.threads = self.fn.args
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.args, self.results, self.scratch = args, results, scratch
        offsets, total = exe._arena_plan
        self.arena = offsets
        self.own = up(total)  # bytes of this function's own scratch (arena, then extras)
        self.sub_bytes = 0  # the most any called function / loop needs after `own`
        self.locs: dict[int, Loc] = {}
        self.kernels = {k.output: k for k in exe.kernel_specs}
        #: Slots a kernel writes besides its own (multi-output siblings: no step of theirs).
        self.siblings = {s for k in exe.kernel_specs for s in k.extra}
        self.kernel_fns: dict[str, ir.Function] = {}
        if exe.kernel_specs:
            prefix = prog.fresh("k") + "_"
            prog.texts.append((prefix, exe.kernel_ir))
            for k in exe.kernel_specs:
                self.kernel_fns[k.name] = ir.Function(prog.mod, KERNEL_TYPE,
                                                      name=prefix + k.name)
                prog.kernel_ops[prefix + k.name] = k.root

    # ---- locations ----
    def alloc(self, shape: Shape) -> Loc:
        """Fresh scratch buffers for a value of `shape` (after the arena)."""
        if shape.is_tuple:
            return tuple(self.alloc(s) for s in shape.tuple_shapes)
        if shape.is_token:
            return None
        at = self.own
        self.own += up(nbytes(shape))
        return self.b.gep(self.scratch, [i64(at)])

    def arg(self, k: int) -> ir.Value:
        return self.b.load(self.b.gep(self.args, [i64(k)]))

    def result(self, k: int) -> ir.Value:
        return self.b.load(self.b.gep(self.results, [i64(k)]))

    def _plan_locations(self) -> list[tuple[ir.Value, Instruction]]:
        """Every slot's location; returns the (result buffer, root leaf) copies left for the
        end (leaves not written in place)."""
        exe, b = self.exe, self.b
        comp = exe.comp
        n = 0
        for p in comp.parameters:
            loc, n = self._param_loc(p.shape, n)
            self.locs[exe.slot[id(p)]] = loc
        roots = exe._root_values()
        in_place: dict[int, int] = {}  # slot -> result index it is written into
        for k, leaf in enumerate(roots):
            s = exe.slot[id(leaf)]
            if s not in in_place and leaf.shape.is_array and self._writes_own(leaf):
                in_place[s] = k
        copies = []
        for k, leaf in enumerate(roots):
            s = exe.slot[id(leaf)]
            if in_place.get(s) != k and not leaf.shape.is_token:
                copies.append((self.result(k), leaf))
        for instr in comp.instructions:
            s = exe.slot.get(id(instr))
            if s is None or instr.opcode == "parameter":
                continue
            if s in exe.static:  # a constant, or a loop's repeated initial value
                self.locs[s] = self.prog.constant(exe.static[s])
            elif s in in_place:
                self.locs[s] = self.result(in_place[s])
            elif s in self.arena:
                self.locs[s] = b.gep(self.scratch, [i64(self.arena[s])])
            elif instr.opcode in ALIASING:
                self.locs[s] = self._alias(instr)
            else:
                self.locs[s] = self.alloc(instr.shape)
        table = b.alloca(I8P, max(exe.num_slots, 1), name="table")
        self.table = table
        for s, loc in self.locs.items():
            if loc is not None and not isinstance(loc, tuple):
                b.store(loc, b.gep(table, [i64(s)]))
        return copies

    def _param_loc(self, shape: Shape, n: int) -> tuple[Loc, int]:
        if shape.is_tuple:
            out = []
            for s in shape.tuple_shapes:
                loc, n = self._param_loc(s, n)
                out.append(loc)
            return tuple(out), n
        if shape.is_token:
            return None, n
        return self.arg(n), n + 1

    def _writes_own(self, instr: Instruction) -> bool:
        """Native code writes the whole value into memory it is given."""
        s = self.exe.slot[id(instr)]
        k = self.kernels.get(s)
        if k is not None or s in self.siblings:
            return not isinstance(k, op_emit.TupleKernel)
        return instr.opcode in LOOPS or instr.opcode == "chlo.ragged_dot" or \
            lapack.handles(instr)

    def _alias(self, instr: Instruction) -> Loc:
        ins = [self.locs[self.exe.slot[id(o)]] for o in instr.operands]
        op = instr.opcode
        if op == "tuple":
            return tuple(ins)
        if op == "get_tuple_element":
            return ins[0][instr.attrs.index]
        if op == "optimization_barrier":
            return ins[0] if len(ins) == 1 else tuple(ins)
        return None  # after_all: a token

    # ---- running ----
    def build(self) -> tuple[ir.Function, int]:
        """Emit the function; returns it and the scratch bytes it needs."""
        exe = self.exe
        copies = self._plan_locations()
        own = self.own
        for instr in exe._thunk_instrs:
            self._thunk(instr, own)
        for dst, leaf in copies:
            self._copy(dst, self.locs[exe.slot[id(leaf)]], nbytes(leaf.shape))
        self.b.ret_void()
        return self.fn, own + self.sub_bytes

    def _thunk(self, instr: Instruction, own: int) -> None:
        exe, b = self.exe, self.b
        s = exe.slot[id(instr)]
        op = instr.opcode
        spec = self.kernels.get(s)
        if s in self.siblings:  # (its first member's kernel computed it)
            return
        if spec is not None:
            fn = self.kernel_fns[spec.name]
            if isinstance(spec, op_emit.TupleKernel):
                outs = leaves(self.locs[s])
                cells = self._alloca(1 + len(outs))
                b.store(b.bitcast(self.table, I8P), b.gep(cells, [i64(0)]))
                for j, o in enumerate(outs):
                    b.store(o, b.gep(cells, [i64(1 + j)]))
                threads.call_kernel(self, fn, cells, spec)
            else:
                threads.call_kernel(self, fn, self.table, spec)
            return
        if op in ALIASING:
            return
        ins = [self.locs[exe.slot[id(o)]] for o in instr.operands]
        emit = LOOPS.get(op)
        if emit is not None:
            with _saved(b):
                fn, acc = emit(self.prog.mod, self.prog.fresh(op), instr)
            self.sub_bytes = max(self.sub_bytes, up(acc))
            b.call(fn, [ins[0], ins[-1], self.locs[s], b.gep(self.scratch, [i64(own)])])
            return
        if op == "chlo.ragged_dot":  # (lhs, rhs, group_sizes, out): no scratch
            if not ragged_emit.supported(instr):
                raise Unimplemented(op, f"element types {[str(o.shape) for o in instr.operands]}")
            with _saved(b):
                fn = ragged_emit.emit(self.prog.mod, self.prog.fresh("ragged"), instr)
            b.call(fn, [*ins, self.locs[s]])
            return
        if op == "sort":
            name = self.prog.fresh("sort")
            with _saved(b):
                fn, need, text = emit_sort(self.prog.mod, name, instr)
            self.prog.texts.append((f"{name}_", text))
            self.sub_bytes = max(self.sub_bytes, up(need))
            b.call(fn, [self._array(ins), self._array(leaves(self.locs[s])),
                        b.gep(self.scratch, [i64(own)])])
            return
        if lapack.handles(instr):  # LAPACK custom calls and cholesky: aot/lapack.py
            with _saved(b):
                fn, need = lapack.emit(self.prog.mod, self.prog.fresh("lapack"), instr)
            self.sub_bytes = max(self.sub_bytes, up(need))
            b.call(fn, [self._array([x for loc in ins for x in leaves(loc)]),
                        self._array(leaves(self.locs[s])), b.gep(self.scratch, [i64(own)])])
            return
        if op == probe.OPCODE:
            probe.emit_probe(self, instr, ins[0], self.locs[s])
            return
        if op in CONTROL_FLOW:
            subs = [sub for name, sub in exe.subexecs if name == instr.name]
            getattr(self, f"_{op}")(instr, ins, leaves(self.locs[s]), subs, own)
            return
        raise Unimplemented(op, _why(exe, instr))

    def _alloca(self, n: int) -> ir.Value:
        """n pointers on the stack, allocated once in the entry block (not per loop trip)."""
        b = self.b
        with b.goto_entry_block():
            b.position_at_start(self.fn.entry_basic_block)
            return b.alloca(I8P, max(n, 1))

    def _array(self, ptrs: list[ir.Value]) -> ir.Value:
        b = self.b
        arr = self._alloca(len(ptrs))
        for j, p in enumerate(ptrs):
            b.store(p, b.gep(arr, [i64(j)]))
        return arr

    def _copy(self, dst: ir.Value, src: Loc, n: int) -> None:
        if n:
            self.b.call(_memmove(self.prog.mod), [dst, src, i64(n), ir.Constant(ir.IntType(1), 0)])

    def _sub(self, sub: Any) -> tuple[ir.Function, int]:
        fn, need = FunctionEmitter(self.prog, sub).build()
        return fn, need

    def _call_sub(self, fn: ir.Function, args: list[ir.Value], results: list[ir.Value],
                  own: int) -> None:
        self.b.call(fn, [self._array(args), self._array(results),
                         self.b.gep(self.scratch, [i64(own)]), self.probes,
                         self.threads])

    def _call(self, instr: Instruction, ins: list[Loc], outs: list[ir.Value], subs: list[Any],
              own: int) -> None:
        fn, need = self._sub(subs[0])
        self.sub_bytes = max(self.sub_bytes, up(need))
        self._call_sub(fn, [x for loc in ins for x in leaves(loc)], outs, own)

    def _branches(self, instr: Instruction, ins: list[Loc], outs: list[ir.Value],
                  subs: list[Any], own: int, index: ir.Value) -> None:
        b = self.b
        extra = ins[1:]
        fns = []
        for sub in subs:
            fn, need = self._sub(sub)
            self.sub_bytes = max(self.sub_bytes, up(need))
            fns.append(fn)
        done = self.fn.append_basic_block("case.done")
        blocks = [self.fn.append_basic_block(f"case.{k}") for k in range(len(fns))]
        sw = b.switch(index, blocks[-1])
        for k, blk in enumerate(blocks[:-1]):
            sw.add_case(ir.Constant(I32, k), blk)
        for k, (fn, blk) in enumerate(zip(fns, blocks)):
            b.position_at_end(blk)
            self._call_sub(fn, leaves(extra[k]) if extra else [], outs, own)
            b.branch(done)
        b.position_at_end(done)

    def _case(self, instr: Instruction, ins: list[Loc], outs: list[ir.Value],
              subs: list[Any], own: int) -> None:
        b = self.b
        index = b.load(b.bitcast(ins[0], I32.as_pointer()))  # outside [0, N): the last
        self._branches(instr, ins, outs, subs, own, index)

    def _if(self, instr: Instruction, ins: list[Loc], outs: list[ir.Value],
            subs: list[Any], own: int) -> None:
        b = self.b
        pred = b.icmp_unsigned("!=", b.load(ins[0]), ir.Constant(I8, 0))
        index = b.select(pred, ir.Constant(I32, 0), ir.Constant(I32, 1))
        self._branches(instr, ins, outs, subs, own, index)

    def _while(self, instr: Instruction, ins: list[Loc], outs: list[ir.Value],
               subs: list[Any], own: int) -> None:
        """state := operands; while cond(state): next := body(state); swap(state, next).
        The result buffers `outs` are one state set; a second set and the predicate live
        in the scratch after the caller's (`own`), the called functions' scratch after
        them."""
        b = self.b
        shapes = array_leaves(instr.shape)
        sizes = [nbytes(s) for s in shapes]
        state_in = [x for loc in ins for x in leaves(loc)]
        at = own
        other = []
        for n in sizes:
            other.append(b.gep(self.scratch, [i64(at)]))
            at += up(n)
        pred = b.gep(self.scratch, [i64(at)])
        at += ALIGN
        cond, cneed = self._sub(subs[0])
        body, bneed = self._sub(subs[1])
        self.sub_bytes = max(self.sub_bytes, at - own + up(max(cneed, bneed)))
        for dst, src, n in zip(outs, state_in, sizes):
            self._copy(dst, src, n)
        cur, nxt = self._array(outs), self._array(other)
        sub_scratch = b.gep(self.scratch, [i64(at)])
        head = self.fn.append_basic_block("while.head")
        loop = self.fn.append_basic_block("while.body")
        done = self.fn.append_basic_block("while.done")
        b.branch(head)
        b.position_at_end(head)
        b.call(cond, [cur, self._array([pred]), sub_scratch, self.probes, self.threads])
        b.cbranch(b.icmp_unsigned("!=", b.load(pred), ir.Constant(I8, 0)), loop, done)
        b.position_at_end(loop)
        b.call(body, [cur, nxt, sub_scratch, self.probes, self.threads])
        for j in range(len(sizes)):
            pc, pn = b.gep(cur, [i64(j)]), b.gep(nxt, [i64(j)])
            x, y = b.load(pc), b.load(pn)
            b.store(y, pc)
            b.store(x, pn)
        b.branch(head)
        b.position_at_end(done)
        for j, (dst, n) in enumerate(zip(outs, sizes)):  # the final state, if in `other`
            src = b.load(b.gep(cur, [i64(j)]))
            with b.if_then(b.icmp_unsigned("!=", src, dst)):
                self._copy(dst, src, n)


class _saved:
    """Keeps the builder's position across emitting another function."""

    def __init__(self, b: ir.IRBuilder) -> None:
        self.b = b

    def __enter__(self) -> None:
        self.block = self.b.block

    def __exit__(self, *exc: object) -> None:
        self.b.position_at_end(self.block)


def _memmove(mod: ir.Module) -> ir.Function:
    name = "llvm.memmove.p0.p0.i64"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(VOID, [I8P, I8P, I64, ir.IntType(1)]), name=name)
    return fn


def _why(exe: Any, instr: Instruction) -> str:
    """How the cpu backend runs it (its explain line), i.e. why no object code exists."""
    for name, _, how in exe.report:
        if name == instr.name:
            return f"the cpu backend runs it as '{how}' (Python, a library or the interpreter)"
    return "no native kernel"


def emit_entry(prog: Program, exe: Any) -> tuple[ir.Function, int]:
    """The entry computation's function and its scratch bytes."""
    return FunctionEmitter(prog, exe).build()


__all__ = ["Program", "FunctionEmitter", "emit_entry", "array_leaves", "nbytes", "ALIGN",
           "for_range"]
