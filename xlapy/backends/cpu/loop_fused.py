"""A tiny native loop as one function: its condition's and body's kernels inlined into one
loop, the small buffers they pass each other on its stack (native_loop.py runs it in place
of the generic driver, while_driver.py).

The generic driver walks a descriptor: each iteration calls the condition's kernels and the
body's through function pointers, each kernel loads its buffers' addresses from its table,
and the driver copies or swaps the results into the state through more tables. Over a body
of a few scalar ops (a histogram's `h.at[bin(x[i])].add(1)`, an edit distance's inner
fori_loop) that bookkeeping was the loop: 14-49 ns an iteration where XLA, which compiles a
small while loop into one function, took 3-9. Here one LLVM function per loop
(`xlapy_fused_loop`, in a module of its own with copies of the kernels) keeps the
descriptor's contract (d[9] iterations at most, d[10] set when the condition is false) but:

- its tables are stack arrays filled at entry, so every buffer address is a value LLVM
  knows, not a load from memory a store might change;
- the state elements the loop writes, the body's results and every temporary of the
  condition and body (each at most `MAX_SLOT_BYTES`, all together at most `MAX_BYTES`) live
  on its stack: copied in from the state buffers at entry and out at exit, so scalars stay
  in registers across iterations and the rest is memory no other pointer reaches; bigger
  ones stay where the generic driver has them;
- results are copied into the state (constant sizes: register moves), never swapped, so
  the loop's buffers never move (`NativeWhile.swapped` is empty for it).

The kernels do the same operations in the same order on the same values: the same bits.
The module is the loop's code: the condition's and body's own kernels are printed for it
and compiled only if something runs them (Calls.bind; early_compile leaves them alone), and
it goes through a short pipeline (llvm_util.INLINE_PASSES: inlining, SROA, instcombine,
GVN; the kernels were written for the code they get already). Only loops whose condition
and body are small plain kernels are fused (`plan`): those are the loops where calls and
tables weigh; a body with any other step (a GEMM, a sort, an inner loop, a row-parallel
region) keeps the driver.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import math
import re
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from xlapy.backends.cpu import (
    cache,
    kernel_sequence,
    llvm_util,
    nested_loop,
    parallel_compile,
    target,
)
from xlapy.backends.cpu.fp_env import driven, restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.fusion_plan import kernel_elements
from xlapy.backends.cpu.kernel_sequence import KernelSequence
from xlapy.backends.cpu.llvm_util import I8, I8P, I64, KERNEL_TYPE, Engine, i64, new_module
from xlapy.backends.cpu.loop_steps import steps
from xlapy.backends.cpu.op_emit import TupleKernel
from xlapy.backends.cpu.while_driver import descriptor_function

if TYPE_CHECKING:
    from xlapy.backends.cpu import kernels
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.backends.cpu.native_loop import NativeWhile
    from xlapy.ir import Instruction

#: The loop function's name.
NAME = "xlapy_fused_loop"
#: What the condition's functions are renamed with in the fused module (both executables
#: name their kernels k0, k1, ...).
COND_PREFIX = "cond."
#: Most bytes of one buffer put on the loop's stack, and of all of them together.
MAX_SLOT_BYTES = 1 << 12
MAX_BYTES = 1 << 14
#: Most elements the condition's and body's kernels walk together, and most lines of their
#: IR. The fused module is the loop's only code (the condition's and body's own kernels
#: are printed, not compiled, unless something runs them: Calls.bind), so a fused loop
#: compiles about what the driver's would; past a few thousand elements an iteration's
#: work hides the calls it saves, and results are copied where the driver swaps them.
#: Zen 4, cold compile / run: fori_nested (tanh and sin on 64 floats, 1000 steps) 21 ->
#: 28 ms (XLA 29) / 0.113 -> 0.093 ms; fori_cond (256 floats) 23 -> 21 ms / 0.034 ->
#: 0.018 ms; `c * 0.5 + x` on 1024 floats, 2000 steps 0.129 -> 0.102 ms.
MAX_ELEMENTS = 1024
MAX_LINES = 2 * kernel_sequence.MAX_INSTRUCTIONS

#: The module's pipeline (llvm_util.INLINE_PASSES), also its cache key's mode, unless a
#: kernel it inlines is a loop LLVM is to vectorize (not written in explicit vectors, over
#: `small_kernel` elements or more: a window update of 256 floats): then O3's, as that
#: kernel's own module gets (kernel_compile.py; ring_loop's scalar window loop ran 0.14 ->
#: 0.53 ms through the short pipeline).
MODE = llvm_util.INLINE

_LOOP_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)


class Fused:
    """A loop's fused function. Its module compiles on a compile thread while the compile
    goes on (`finishing` waits for it as the compile ends), or here when no thread is idle
    or the disk cache has its object."""

    def __init__(self, p: _Plan, cond_ir: str, body_ir: str) -> None:
        self._engine: Engine | None = None
        self._light = p.light
        self._job: Future[tuple[str, str, tuple[bytes, Any] | bytes]] | None = None
        t, loop_text = target.current(), _emit(p)  # (the target and denormal mode here)
        build = lambda: _build(loop_text, p, cond_ir, body_ir, t)  # noqa: E731
        if parallel_compile.threads(2) > 1:
            self._job = parallel_compile.run_on_pool(build)
        else:
            self._engine = self._engine_of(*build())
        self._call: Any = None

    def _engine_of(self, key: str, text: str, got: tuple[bytes, Any] | bytes) -> Engine:
        if isinstance(got, bytes):  # (from the disk cache; recompiled if it will not load)
            return Engine(text, obj=got, light=self._light, exports=[NAME])
        eng = Engine(compiled=got, light=self._light, exports=[NAME])
        cache.put(key, eng.object)
        return eng

    def ready(self) -> None:
        """Wait for the module's compile (once)."""
        if self._engine is None:
            assert self._job is not None
            self._engine = self._engine_of(*self._job.result())
            self._job = None

    @property
    def address(self) -> int:
        self.ready()
        assert self._engine is not None
        return self._engine.address(NAME)

    @property
    def call(self) -> Any:
        """The function as a ctypes callable: i64 f(i64 *descriptor)."""
        if self._call is None:
            self._call = _LOOP_FN(self.address)
        return self._call


#: The fused loops of the compile in progress still compiling (`finishing`).
_PENDING: contextvars.ContextVar[list[Fused] | None] = \
    contextvars.ContextVar("xlapy_fused_pending", default=None)


@contextlib.contextmanager
def finishing() -> Iterator[None]:
    """Around one compile's emission: the fused loops whose modules started compiling
    inside are waited for as it ends, so none is left compiling once the compile returns."""
    token = _PENDING.set([])
    try:
        yield
        for f in _PENDING.get() or ():
            f.ready()
    finally:
        _PENDING.reset(token)


def _bytes(shape: Any) -> int:
    return math.prod(shape.dimensions) * np.dtype(shape.dtype).itemsize


def _kernels(nw: NativeWhile, exe: CpuExecutable
             ) -> tuple[list[kernels.Kernel], int] | None:
    """The kernels `exe`'s native steps run, in order, when they are only plain kernels,
    and the elements they walk together (a window kernel: its update's)."""
    todo = steps(exe)
    if len(todo) == 1 and isinstance(todo[0], KernelSequence):
        order: list[Any] = list(todo[0].kernels)
    elif all(isinstance(s, int) for s in todo):
        order = todo
    else:
        return None
    win = nw.windows.kernels if exe is nw.body and nw.windows is not None else {}
    run = [win[j] if j in win else exe.kernel_specs[j] for j in order]
    if any(isinstance(k, TupleKernel) or k.cells or k.partial for k in run):
        return None
    return run, kernel_sequence.walked(exe.kernel_specs, order, win)


def _lines(text: str, name: str) -> int:
    """Lines of function `name`'s definition in module `text` (a size bound)."""
    m = re.search(rf'^define [^\n]*@"{re.escape(name)}"\(.*?^}}', text, re.M | re.S)
    return m.group(0).count("\n") if m else MAX_LINES + 1


@dataclass
class _Plan:
    """What the loop function is made of (`plan`)."""

    calls: list[list[tuple[str, int]]]  # per computation: (kernel, hi) in order
    written: dict[int, int]  # state elements the loop writes -> bytes
    on_stack: set[int]  # those of them on the stack
    #: per computation: slot -> ("state", element) or ("temp", bytes); the rest "real"
    slots: list[dict[int, tuple[str, int]]]
    copies: list[tuple[int, int]]  # (state element, body result slot) after each body
    moves: list[tuple[int, int]]  # (state element, state element it takes as it was)
    pred: int
    sizes: list[int]  # table sizes
    light: bool | str  # the pipeline (MODE, or False: O3 vectorized)


def plan(nw: NativeWhile) -> _Plan | None:
    """The fused loop of `nw`, or None when it is not a tiny loop of plain kernels (module
    docstring), is a branch (a case chain's loop that runs at most once: nested_loop.PICKED)
    or the options turn fusion off."""
    cond, body = nw.cond, nw.body
    if not body.options.fused_loops or nw.row_plan is not None and nw.row_threads > 1 or \
            cond.comp.name.endswith(nested_loop.PICKED):
        return None
    found = [_kernels(nw, cond), _kernels(nw, body)]
    if found[0] is None or found[1] is None or not found[1][0] or \
            found[0][1] + found[1][1] > MAX_ELEMENTS:
        return None
    runs = [found[0][0], found[1][0]]
    texts = [cond.kernel_ir if runs[0] else "", body.kernel_ir]
    if sum(_lines(t, k.name) for t, run in zip(texts, runs) for k in run) > MAX_LINES:
        return None
    ps = body.comp.parameters
    shapes = list(ps[0].shape.tuple_shapes) if nw.tupled else [q.shape for q in ps]
    written = {k for k, r in enumerate(nw.results) if r is not None}
    written |= {k for k, _ in nw.moves}
    written |= set(nw.windows.elements) if nw.windows is not None else set()
    written |= {k for s, k in nw.state_slots[1] if s in nw.in_place}
    sizes = {k: _bytes(shapes[k]) for k in written}
    budget = MAX_BYTES
    on_stack: set[int] = set()
    for k in sorted(written, key=lambda k: sizes[k]):
        if sizes[k] <= min(MAX_SLOT_BYTES, budget):
            on_stack.add(k)
            budget -= sizes[k]
    slots: list[dict[int, tuple[str, int]]] = []
    for exe, sslots in zip((cond, body), nw.state_slots):
        m: dict[int, tuple[str, int]] = {s: ("state", k) for s, k in sslots}
        for s in sorted({*exe.temp_slots, *exe.fresh_slots} - set(m) - set(exe.static)):
            n = _bytes(exe.shapes[s]) if exe.shapes[s].is_array else MAX_SLOT_BYTES + 1
            if n <= min(MAX_SLOT_BYTES, budget):
                m[s] = ("temp", max(n, 1))
                budget -= n
        slots.append(m)
    hi = [[(COND_PREFIX * (e == 0) + k.name, driven(k.outer, k.env_arg)) for k in run]
          for e, run in enumerate(runs)]
    small = body.options.small_kernel
    vectorized = any(not k.explicit and kernel_elements(k) >= small for run in runs for k in run)
    return _Plan(hi, sizes, on_stack, slots,
                 [(k, r) for k, r in enumerate(nw.results) if r is not None],
                 list(nw.moves), nw.pred_slot, [cond.num_slots, body.num_slots],
                 False if vectorized else MODE)


def _emit(p: _Plan) -> str:
    """The loop function's module (it declares the kernels the fused module links in)."""
    mod = new_module("xlapy_fused_loop")
    i64p, i8pp = I64.as_pointer(), I8P.as_pointer()
    fn, memcpy, b, field = descriptor_function(mod, NAME)
    d = fn.args[0]

    def buf(n: int) -> ir.Value:
        a = b.alloca(ir.ArrayType(I8, n))
        a.align = 64
        return b.bitcast(a, I8P)

    def copy(dst: ir.Value, src: ir.Value, n: int) -> None:
        if n:
            b.call(memcpy, [dst, src, i64(n), ir.Constant(ir.IntType(1), 0)])

    # every alloca in the entry block (SROA promotes those)
    stack = {k: buf(p.written[k]) for k in sorted(p.on_stack)}
    temps = [{s: buf(n) for s, (kind, n) in m.items() if kind == "temp"} for m in p.slots]
    moved = {k: buf(p.written[k]) for k, _ in p.moves}
    tabs = [b.alloca(ir.ArrayType(I8P, max(n, 1))) for n in p.sizes]
    real = [b.inttoptr(field(13), i8pp), b.inttoptr(field(14), i8pp)]
    statep = b.inttoptr(field(15), i64p)
    # (a move's source need not be written: not an unread element, so in its buffer)
    state = {k: b.inttoptr(b.load(b.gep(statep, [i64(k)])), I8P)
             for k in sorted({*p.written, *(j for _, j in p.moves)})}
    here = {k: stack.get(k, v) for k, v in state.items()}
    for k in sorted(p.on_stack):
        copy(stack[k], state[k], p.written[k])
    local: list[list[ir.Value]] = []
    for e, (m, n) in enumerate(zip(p.slots, p.sizes)):
        row = []
        for s in range(n):
            kind, x = m.get(s, ("real", 0))
            v = temps[e][s] if kind == "temp" else here[x] if kind == "state" and x in here \
                else b.load(b.gep(real[e], [i64(s)]))
            b.store(v, b.gep(tabs[e], [i64(0), i64(s)]))
            row.append(v)
        local.append(row)
    mxcsr = set_ftz_daz(b)
    limit = field(9)
    entry = b.block
    loop = fn.append_basic_block("loop")
    b.branch(loop)
    b.position_at_end(loop)
    it = b.phi(I64, name="iterations")
    it.add_incoming(i64(0), entry)
    kernels: dict[str, ir.Function] = {}

    def run(e: int) -> None:
        table = b.gep(tabs[e], [i64(0), i64(0)])
        for name, hi in p.calls[e]:
            f = kernels.get(name) or kernels.setdefault(name, ir.Function(mod, KERNEL_TYPE,
                                                                          name=name))
            b.call(f, [table, i64(0), ir.Constant(I64, hi)])

    run(0)
    go = b.icmp_unsigned("!=", b.load(local[0][p.pred]), ir.Constant(I8, 0))
    finished, more = fn.append_basic_block("finished"), fn.append_basic_block("more")
    cont, exit_ = fn.append_basic_block("continue"), fn.append_basic_block("exit")
    b.cbranch(go, more, finished)
    b.position_at_end(finished)
    b.store(i64(1), b.gep(d, [i64(10)]))
    b.branch(exit_)
    b.position_at_end(more)
    b.cbranch(b.icmp_signed("<", it, limit), cont, exit_)
    b.position_at_end(cont)
    run(1)
    for k, j in p.moves:  # (every moved value read before any state is written)
        copy(moved[k], here[j], p.written[k])
    for k, r in p.copies:
        copy(here[k], local[1][r], p.written[k])
    for k, _ in p.moves:
        copy(here[k], moved[k], p.written[k])
    it.add_incoming(b.add(it, i64(1)), b.block)
    b.branch(loop)
    b.position_at_end(exit_)
    for k in sorted(p.on_stack):
        copy(state[k], stack[k], p.written[k])
    restore_mxcsr(b, mxcsr)
    b.ret(it)
    return llvm_util.module_text(mod)


def _build(loop_text: str, p: _Plan, cond_ir: str, body_ir: str, t: target.CpuTarget
           ) -> tuple[str, str, tuple[bytes, Any] | bytes]:
    """(the fused module's cache key, its text, its object from the disk cache or
    (object, module) as compiled for `t`), on whichever thread calls it."""
    with target.use(t):
        text = _module(loop_text, p, cond_ir, body_ir)
        key = cache.key(text, p.light or "")
        obj = cache.get(key)
        return key, text, obj if obj is not None else \
            parallel_compile.compile_here(text, True, p.light)


def _module(loop_text: str, p: _Plan, cond_ir: str, body_ir: str) -> str:
    """The fused module's text: the loop function linked with the condition's kernels
    (renamed: COND_PREFIX) and the body's, every function but the loop internal and the
    kernels always inlined (parsed into a context of its own: any thread may build it)."""
    called = {name for run in p.calls for name, _ in run}
    llvm_util._init()
    ctx = llvm.create_context()
    try:
        main = llvm.parse_assembly(body_ir, context=ctx)
        if p.calls[0]:
            c = llvm.parse_assembly(cond_ir, context=ctx)
            for g in [*c.functions, *c.global_variables]:
                if not g.is_declaration:
                    g.name = COND_PREFIX + g.name
            main.link_in(c)
        main.link_in(llvm.parse_assembly(loop_text, context=ctx))
        for f in main.functions:
            if f.is_declaration or f.name == NAME:
                continue
            f.linkage = "internal"
            if f.name in called:
                f.add_function_attribute("alwaysinline")
        for g in main.global_variables:
            if not g.is_declaration:
                g.linkage = "internal"
        return str(main)
    finally:
        main = c = None  # (the modules before their context)


def fuse(nw: NativeWhile) -> Fused | None:
    """Compile `nw`'s fused loop (`plan`) and make the loop run it: its results are copied,
    not swapped (module docstring). None where it is not fused."""
    p = plan(nw)
    if p is None:
        return None
    fused = Fused(p, nw.cond.kernel_ir, nw.body.kernel_ir)
    pending = _PENDING.get()
    if pending is not None:
        pending.append(fused)
    else:
        fused.ready()
    nw.swapped = []
    return fused


def settle(instr: Instruction, subs: list[CpuExecutable]) -> NativeWhile | None:
    """While `instr`'s native loop over its condition and body `subs`
    (native_loop.plan_native_while), fused where it can be (`fuse`); the condition and body
    compiled and bound (Calls.bind) unless the loop is fused: then only what runs them
    compiles them."""
    from xlapy.backends.cpu.native_loop import plan_native_while  # (it imports this module)

    nw = plan_native_while(instr, subs[0], subs[1])
    if nw is not None:
        nw.fused = fuse(nw)
    if nw is None or nw.fused is None:
        for sub in subs:
            sub.bind()
    return nw


__all__ = ["Fused", "MAX_BYTES", "MAX_SLOT_BYTES", "NAME", "fuse", "plan", "settle"]
