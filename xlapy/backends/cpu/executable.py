"""The cpu executable: a thunk sequence over a buffer table, and the `cpu` backend.

Planning (once per compile) partitions the entry computation:

* kernel thunks: a materialized fusible instruction (the root, a reduce, a value that a
  non-fusible op or several consumers need) with the chain of fusible producers behind it,
  JIT-compiled into one LLVM module for the whole executable;
* library thunks: dot_general through BLAS or the JIT integer GEMM (gemm_int.py), 2-D
  convolution as JIT direct loops (conv.py, else shift-GEMM), jaxlib's LAPACK custom calls,
  cholesky, triangular_solve, FFT and one-compare sorts through scipy/numpy (lapack.py);
* control-flow thunks: while/case/if/call whose called computations run as cpu executables
  (native loops, branch_loop.py); any other op runs its OpDef.evaluate (a fallback).

Per call: a ctypes table of buffer pointers (arguments, constants, an arena of temporaries
packed by live range: arena.py, recycled outputs: recycle.py), each kernel called with the
table's address (the GIL released), big kernels split over the native worker pool
(threads.py), row-parallel runs of GEMMs and kernels as one region per thread (regions.py).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from xlapy import denormal
from xlapy.backends.cpu import (
    batch_chain,
    block_permute,
    branch_loop,
    chain_runtime,
    conv_epilogue,
    dot_epilogue,
    dus_window,
    kernel_batch,
    kernel_sequence,
    kernels,
    lapack,
    library,
    loop_bind,
    loop_fused,
    loop_library,
    multi_output,
    nested_loop,
    once,
    op_emit,
    parallel,
    realign,
    recycle,
    regions,
    threads,
    thunks,
    while_driver,
)
from xlapy.backends.cpu.calls import Calls
from xlapy.backends.cpu.early_compile import EarlyCompiles
from xlapy.backends.cpu.fused_roots import FusedRoots
from xlapy.backends.cpu.fusion_plan import (
    CpuFusionPlan,
    leaf_slots,
    root_values,
    row_walk,
)
from xlapy.backends.cpu.introspect import Introspection
from xlapy.backends.cpu.kernel_compile import KernelCode, compile_for, plan_for
from xlapy.backends.cpu.llvm_util import Engine, new_module
from xlapy.backends.cpu.memory_plan import MemoryPlanning
from xlapy.backends.cpu.native_loop import NativeWhile, owned_init
from xlapy.backends.cpu.options import CpuOptions
from xlapy.backends.cpu.pipeline import META_KEY, plan_all
from xlapy.backends.cpu.threads import NativePool
from xlapy.backends.ownership import CHECK, COPY, KEEP, result_plan
from xlapy.errors import InterpreterError, XlapyError
from xlapy.interpreter.evaluator import check_value
from xlapy.ir import Computation, Instruction, Module
from xlapy.ir.location import locate_error
from xlapy.ops.base import OPS
from xlapy.phases import Phases
from xlapy.types import Shape
from xlapy.types.literal import TOKEN_VALUE

_KFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
CONTROL_FLOW = frozenset({"while", "case", "if", "call"})
#: Kernels with row reductions are built first (CpuExecutable._plan).
ROW_KERNELS_FIRST = True


def _pool() -> NativePool:
    """The native workers for one thread per core (executables use their own count)."""
    return parallel.pool(parallel.usable_cpus())


class CpuExecutable(Calls, FusedRoots, Introspection, MemoryPlanning):
    """A compiled computation: thunks over slots; `run(args)` returns interpreter values."""

    backend_name = "cpu"

    def __init__(self, comp: Computation, module: Module | None = None,
                 options: Mapping[str, Any] | CpuOptions | None = None,
                 plans: dict[str, CpuFusionPlan] | None = None) -> None:
        self.module = module
        #: The cpu-fusion pass's plans (pipeline.py) for this computation and those its control
        #: flow runs (and branch_loop's); None: no pipeline, planned by the pass's function.
        self._plans = plans if plans is not None else \
            module.meta.get(META_KEY) if module is not None else None  # type: ignore[assignment]
        self.comp = comp
        #: What the compile is decided by (options.py; a mapping is read once, here).
        self.options = CpuOptions.make(options)
        self.report: list[tuple[str, str, str]] = []
        #: Where its compile's time went (xlapy.phases; set by the backend's compile).
        self.phases: Phases | None = None
        self.subexecs: list[tuple[str, CpuExecutable]] = []
        self._later: list[Callable[[], None]] = []  # (branch_loop.later: built by finish)
        #: while name -> its native loop as a step of an outer one (nested_loop.py), or None
        self.nested: dict[str, nested_loop.Nested | None] = {}
        self.lib_steps: dict[str, loop_library.LibStep] = {}  # library thunks as loop steps
        self.native_loops: dict[str, NativeWhile] = {}  # (while name ->)
        self._lock = threading.Lock()
        self._keep: dict[int, Any] = {}  # output slot -> last array returned (recycle.py)
        self._arena: list[Any] | None = None
        #: region name -> (slot, result slot) pairs pointed at the result (inplace.into_outputs)
        self._region_alias: dict[str, list[tuple[int, int]]] = {}
        self._native: set[int] = set()  # slots library thunks write (fresh memory, no views)
        #: What it is compiled for (target.py); code for another machine is compiled to
        #: `objects` and never run.
        self.target = self.options.target
        #: Threads it splits work over (parallel.py); nested executables get the same.
        self.num_threads = self.options.num_threads
        self._pool = lambda: parallel.pool(self.num_threads)
        self._split_cost = self.options.nested_split_cost if self.options.nested \
            else self.options.split_cost
        self.runnable = self.target.runs_here
        #: The denormal mode its kernels and fallbacks run in (xlapy.denormal).
        self.denormal = self.options.denormal
        self.objects: list[tuple[str, bytes]] = []
        with self.compiling():
            self._plan()

    # ---- planning ----
    def _plan(self) -> None:
        comp, order = self.comp, self.comp.instructions
        self.slot: dict[int, int] = {}
        self.shapes: list[Shape] = []
        self.static: dict[int, Any] = {}
        self.outputs = {id(i) for i in self._root_values()}
        #: Values only a native loop's initial state reads: fresh arrays per call that the
        #: loop runs on (native_loop.owned_init), allocated as outputs are.
        self._owned = {id(i) for i in comp.instructions if owned_init(i)}
        #: Values whose buffers are fresh arrays per call: the outputs and those.
        self._fresh_values = self.outputs | self._owned
        if self._plans is None:
            self._plans = plan_all([comp], self.options)
        plan = self._plans.get(comp.name)
        if plan is None:
            raise XlapyError(f"no cpu fusion plan for computation {comp.name}")
        plan.check(comp)
        #: How this computation's kernels fuse (the cpu-fusion pass decided; fusion_plan.py).
        self.fusion = plan
        fusible = plan.fusible
        self.materialized, self.row_reduces = plan.materialized, plan.row_reduces
        #: Convolutions that compute their consumer kernel's root (conv_epilogue.py): the
        #: root shares the convolution's slot and gets no kernel. Not in nested compiles:
        #: xlapy.aot (which compiles so) reads the plan and emits plain convolution loops.
        self.epilogues = conv_epilogue.for_plan(comp, plan, self.outputs) \
            if not self.options.nested else {}
        #: Column-split GEMMs that compute their consumer kernel's root chunk by chunk
        #: (dot_epilogue.py), compiled together below; not in nested compiles either.
        self.dot_epilogues = dot_epilogue.plan(comp, plan, self.outputs) \
            if not self.options.nested and self.runnable else {}
        self._dot_epilogues_compiled: dot_epilogue.Compiled | None = \
            dot_epilogue.Compiled(list(self.dot_epilogues.values())) \
            if self.dot_epilogues else None
        self._claimed = {id(r) for e in self.epilogues.values() for r in e.parts} | \
            {id(r) for e in self.dot_epilogues.values() for r in e.parts}
        self._extra_ins: dict[int, list[int]] = {}
        mod = new_module(f"xlapy_{comp.name}")
        #: Big kernels compiling on threads while the rest is emitted (early_compile.py).
        self._early = EarlyCompiles(mod, self.options)
        self._early.on &= not branch_loop.steps_deferred(self)  # (its trip compiles them)
        self.thunks: list[Callable[..., None]] = []
        kernel_specs: list[Any] = []  # (kernels.Kernel; None while one is to be built)
        fresh: list[int] = []
        temps: list[int] = []
        # Kernels without row reductions are built after the loop: a row kernel (softmax,
        # layer norm: the big ones) then starts compiling early (early_compile.py) without
        # waiting for the small kernels before it (x86-64-v3 attention_bf16: two bf16 ->
        # f32 converts, ~0.9 ms, that a batch chain then drops). Functions keep program
        # order in the module (an emitter creates its function when made).
        pending: list[tuple[int, kernels.KernelEmitter]] = []
        #: Sibling kernels one loop computes (multi_output.py): first member -> siblings.
        self._siblings, absorbed = multi_output.plan(order, fusible, self.materialized,
                                                     self.row_reduces, self._claimed)
        for instr in order:
            iid = id(instr)
            if iid in absorbed:  # (its slot and no-op thunk were made with its first member)
                continue
            if instr.opcode == "parameter":
                self._new_slot(instr)
                continue
            if iid in self._claimed:  # computed by a convolution's epilogue
                self._alias_claimed(instr)
                continue
            if iid in fusible and iid not in self.materialized:
                continue  # generated inside its consumers
            if (value := loop_bind.static_value(instr, self._owned)) is not None:
                s = self._new_slot(instr)
                self.static[s] = value  # (a constant, or a loop's repeated initial value)
                self.report.append((instr.name, instr.opcode, "buffer"))
                continue
            if iid in fusible:
                s = self._new_slot(instr)
                extra = [(x, self._new_slot(x)) for x in self._siblings.get(iid, [])]
                leaves = multi_output.group_leaves(instr, extra, lambda m: self._leaves(m, fusible))
                name = f"k{len(kernel_specs)}"
                stream = iid in self.outputs and not self.options.nested and \
                    self.options.streams(instr.shape, [self.shapes[v] for v in leaves.values()])
                rows = self.row_reduces.get(iid, [])
                emitter, label = block_permute.emitter(mod, name, instr, leaves, s, rows,
                                                       stream, extra, self.options.routines)
                kernel_specs.append(None)
                if rows or not ROW_KERNELS_FIRST:
                    kernel_specs[-1] = spec = emitter.build()
                    self._early.offer(spec)
                else:
                    pending.append((len(kernel_specs) - 1, emitter))
                (fresh if iid in self._fresh_values else temps).append(s)
                self.report.append((instr.name, instr.opcode, f"kernel {name}{label}"))
                multi_output.add_siblings(self, name, instr, extra, fresh, temps)
                continue
            native = op_emit.plan(instr)
            if native is not None:  # reduce_window, select_and_scatter, scatter (op_emit.py)
                s = self._new_slot(instr)
                name = f"k{len(kernel_specs)}"
                spec = native(mod, name, instr,
                              [self.slot[id(o)] for o in native.operands(instr)], s).build()
                kernel_specs.append(spec)
                if isinstance(spec, op_emit.TupleKernel):  # fresh arrays, not a native loop's
                    self._native.add(s)
                    self.report.append((instr.name, instr.opcode, f"{native.label} {name}"))
                    continue
                (fresh if iid in self.outputs else temps).append(s)
                self.report.append((instr.name, instr.opcode, f"kernel {name} ({native.label})"))
                continue
            self._plan_other(instr, fresh, temps)
        for k, emitter in pending:
            kernel_specs[k] = spec = emitter.build()
            self._early.offer(spec)
        self.fresh_slots, self.temp_slots = fresh, temps
        #: The instructions that have a thunk, in program (= thunk) order.
        self._thunk_instrs = [j for i in order if id(i) in self.slot
                              and i.opcode != "parameter" and self.slot[id(i)] not in self.static
                              and id(i) not in self._claimed and id(i) not in absorbed
                              for j in [i, *self._siblings.get(id(i), ())]]
        #: The compiled kernels: explicit-vector ones and the others (engines below).
        self.engine: Engine | None = None
        self.engines: list[Engine] = []
        self.kernel_addrs: list[int] = []
        self.sequence_addr = 0  # (kernel_sequence.NAME's)
        self.window_addrs: dict[int, int] = {}  # (of `windows`, by kernel index)
        #: The kernels' module before optimization (xlapy.aot links it into one object).
        self.kernel_ir = ""
        self.kernel_specs = kernel_specs
        self.regions = self._plan_regions(kernel_specs, fusible)
        self.chains = self._plan_chains()
        #: The kernels run as one function in a native loop (kernel_sequence.py), or None.
        self.sequence: kernel_sequence.KernelSequence | None = None
        #: A loop body's window kernels (dus_window.early): kernel index -> window kernel.
        self.windows: dict[int, kernels.Kernel] = {}
        self.num_slots = len(self.shapes)
        params = comp.parameters
        #: (slot, dims, dtype, shape, name) per parameter: the per-call fast path's checks.
        self._params = [(self.slot[id(p)], tuple(p.shape.dimensions),
                         p.shape.dtype if p.shape.is_array else None, p.shape,
                         f"argument {p.parameter_number} of {comp.name}") for p in params]
        self._root_slot = self.slot[id(comp.root)] if comp.root is not None else 0
        self._realign = frozenset() if self.options.nested else realign.loop_read(comp)
        self._scratch = {}
        #: Per-call state reused under self._lock: the pointer table with constants and the
        #: arena filled in, the values list they start from, the last arguments' pointers.
        self._table: Any = None
        self._vals0: list[Any] = []
        self._last: list[tuple[Any, ...]] = [(None, 0, None, None)] * len(params)
        self._pending = lambda: self._bind_all(mod, kernel_specs)
        if not ((kernel_specs or self._later) and branch_loop.deferring(self)):
            self.finish()

    def _build_ahead(self) -> None:
        """Build the runners its first run calls (regions, chains, native loops: once.py)."""
        if self.num_threads > 1 and not self.options.nested:
            threads.build_ahead()
        if self.regions:
            regions.build_ahead()
        for widen in sorted({bool(ch.widen) for ch in self.chains}):
            once.ahead(chain_runtime.runtime, widen)

    def _result_mode(self, leaf: Instruction) -> str:
        """Whether a result leaf is fresh memory per call (ownership.py): kernel and library
        outputs are; parameters (nested: the caller checks), constants and arena temporaries
        never; the rest is checked per call (fallback views, control flow's passed values)."""
        s = self.slot[id(leaf)]
        if leaf.opcode == "constant" or s in self._temp_set:
            return COPY
        base = leaf
        while base.opcode == "get_tuple_element":  # an element of a tuple parameter (XLA's
            base = base.operands[0]                # while state) is the parameter's too
        if base.opcode == "parameter":
            return KEEP if self.options.nested else COPY
        if leaf.opcode == "get_tuple_element":  # an element of a fresh tuple (native while)
            s = self.slot[id(leaf.operands[0])]
        return KEEP if s in self._fresh_set else CHECK

    def _root_values(self) -> list[Instruction]:
        """The array instructions whose values leave the computation (through tuples)."""
        return root_values(self.comp)

    def _new_slot(self, instr: Instruction) -> int:
        self.slot[id(instr)] = len(self.shapes)
        self.shapes.append(instr.shape)
        return len(self.shapes) - 1

    def _leaves(self, root: Instruction, fusible: AbstractSet[int]) -> dict[int, int]:
        return leaf_slots(root, fusible, self.materialized, self.slot)

    def _plan_other(self, instr: Instruction, fresh: list[int], temps: list[int]) -> None:
        s = self._new_slot(instr)
        ins = [self.slot[id(o)] for o in instr.operands]
        vals_shape = instr.shape
        if instr.opcode == "tuple":
            self.thunks.append(lambda t, v, rt, pr, s=s, ins=ins:
                               v.__setitem__(s, tuple(v[i] for i in ins)))
            self.report.append((instr.name, "tuple", "aliasing"))
            return
        if instr.opcode == "optimization_barrier":  # an identity: its results alias its operands
            self.thunks.append(lambda t, v, rt, pr, s=s, ins=ins: self._set(
                t, v, s, v[ins[0]] if len(ins) == 1 else tuple(v[i] for i in ins)))
            self.report.append((instr.name, "optimization_barrier", "aliasing"))
            return
        if instr.opcode == "after_all":  # a token: ordering is the thunk order already
            self.thunks.append(lambda t, v, rt, pr, s=s: v.__setitem__(s, TOKEN_VALUE))
            self.report.append((instr.name, "after_all", "token"))
            return
        if instr.opcode == "get_tuple_element":
            idx = instr.attrs.index
            self.thunks.append(lambda t, v, rt, pr, s=s, i=ins[0], k=idx:
                               self._set(t, v, s, v[i][k]))
            self.report.append((instr.name, "get_tuple_element", "aliasing"))
            return
        epi = self.epilogues.get(id(instr))
        if epi is not None:
            self._plan_conv_epilogue(instr, epi, s, ins, temps)
            return
        depi = self.dot_epilogues.get(id(instr))
        if depi is not None:
            self._plan_dot_epilogue(instr, depi, s, ins, temps)
            return
        dot = library.dot_plan(instr, self._threads(library.dot_cost(instr))) \
            if instr.opcode == "dot_general" \
            else library.conv_plan(instr, self.num_threads) if instr.opcode == "convolution" \
            else None
        if dot is not None:
            shape, dtype = vals_shape.dimensions, vals_shape.dtype
            temp = id(instr) not in self.outputs  # written into its arena slot, no page faults
            if temp:
                temps.append(s)

            def run_dot(t: Any, v: list[Any], rt: Any, pr: Any, s: int = s,
                        a: int = ins[0], b: int = ins[1]) -> None:
                out = v[s] if temp else recycle.output(self._keep, s, shape, dtype)
                dot(v[a], v[b], out)
                if not temp:
                    self._set(t, v, s, out)

            self.thunks.append(run_dot)
            kernel_batch.gemm_member(run_dot, instr, self.slot, None if temp else s)
            loop_library.call_step(self, instr, dot, ins)  # (in a loop: loop_callback.py)
            self._native.add(s)
            self.report.append((instr.name, instr.opcode,
                                f"library {library.library_kind(instr)}"))
            return
        lib = lapack.plan(instr, self.num_threads)  # LAPACK calls, linalg ops, fft, sort
        if lib is not None:
            self.thunks.append(self._library_thunk(instr, s, ins, lib[1]))
            if (nat := loop_library.native(instr, lib, self.options.loop_part)) is not None:
                self.lib_steps[instr.name] = loop_library.LibStep(instr, nat, ins)
            self._native.add(s)  # fresh arrays (lapack.py)
            self.report.append((instr.name, instr.opcode, f"library {lib[0]}"))
            return
        op = OPS[instr.opcode]
        subs: list[Any] = []
        if instr.opcode in CONTROL_FLOW:
            opts = self.options.nested_copy(loop_part=instr.opcode == "while")
            subs, how = branch_loop.compile_branches(instr, opts, self._plans, self)
            self.subexecs.extend((instr.name, sub) for sub in subs)
            nw = loop_fused.settle(instr, subs) if instr.opcode == "while" else None
            if nw is not None:
                once.ahead(while_driver.driver_for, denormal.current())  # (its runner)
                nw.owned = frozenset(k for k, o in enumerate(instr.operands)
                                     if id(o) in self._owned and self.slot[id(o)] in fresh)
                self.report.append((instr.name, "while", f"native while loop{nw.label}"))
                self.nested[instr.name] = nested_loop.plan(self, instr, nw, ins)
                self._native.add(s)  # its state buffers are fresh copies (native_loop._run)
                self.native_loops[instr.name] = nw
                self.thunks.append(self._native_while_thunk(nw, s, ins))
                return
        elif instr.opcode in library.LIBRARY_VIA_KERNEL:
            how = "library numpy/scipy"
        elif instr.opcode in thunks.GRID_OPS:
            how = "grid thunk"
        else:
            how = "interpreter fallback"
        self.report.append((instr.name, instr.opcode, how))
        host = thunks.host_facing(instr, subs)  # outfeed, send, custom_call, prints may keep them
        if instr.opcode in ("case", "if") and not host:  # (no interpreter context per call)
            self.thunks.append(branch_loop.branch_thunk(instr, subs, s, ins, self._set))
            return

        def run_op(t: Any, v: list[Any], rt: Any, pr: Any, instr: Instruction = instr,
                   s: int = s, ins: list[int] = ins) -> None:
            ctx = thunks.FallbackContext(instr, subs, rt, pr)
            raw = v[-1][0]  # the arena: host code never keeps a view of it
            operands = [thunks.off_arena(v[i], raw) if host else v[i] for i in ins]
            try:
                with np.errstate(all="ignore"):
                    val = thunks.off_arena(op.evaluate(operands, instr.attrs, instr.shape, ctx),
                                           raw)
            except XlapyError as e:
                raise locate_error(e, instr) from e.__cause__
            except Exception as e:  # a numpy failure inside evaluate: name the instruction
                raise locate_error(InterpreterError(
                    f"{instr.opcode} (%{instr.name}: {instr.shape}) failed: "
                    f"{type(e).__name__}: {e}"), instr) from e
            self._set(t, v, s, check_value(val, instr.shape, f"{instr.opcode} %{instr.name}",
                                           internal=True))

        self.thunks.append(run_op)

    def _alias_claimed(self, instr: Instruction) -> None:
        """A chained convolution's value (conv_chain.py) lives in the next one's ring: its
        slot, for the arena's live ranges alone, is the first convolution's operand's."""
        for e in self.epilogues.values():
            c = e.chain
            if c is not None and instr is (c.expr.root if c.expr is not None else c.conv):
                self.slot[id(instr)] = self.slot[id(c.conv.operands[0])]

    def _library_thunk(self, instr: Instruction, s: int, ins: list[int],
                       fn: Callable[..., Any]) -> Callable[..., None]:
        """A lapack.py run; a custom_call target the call's RuntimeState replaces runs the
        interpreter's custom_call instead, its result copied (the slot is fresh memory)."""
        name = instr.attrs.call_target_name if instr.opcode == "custom_call" else None

        def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
            operands = [v[i] for i in ins]
            if name is not None and name in (getattr(rt, "custom_calls", None) or {}):
                ctx = thunks.FallbackContext(instr, [], rt, pr)
                val = OPS["custom_call"].evaluate(operands, instr.attrs, instr.shape, ctx)
                val = check_value(val, instr.shape, f"custom_call %{instr.name}", internal=True)
                val = tuple(np.array(x) for x in val) if isinstance(val, tuple) else \
                    np.array(val)
            else:
                try:
                    with np.errstate(all="ignore"):
                        val = fn(*operands)
                except XlapyError as e:
                    raise locate_error(e, instr) from e.__cause__
            self._set(t, v, s, val)

        return run

    def _native_while_thunk(self, nw: NativeWhile, s: int, ins: list[int]
                            ) -> Callable[..., None]:
        def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
            if nw.tupled:
                out: Any = nw.run(v[ins[0]], rt, pr)
            else:
                res = nw.run(tuple(v[i] for i in ins), rt, pr)
                out = res[0] if len(res) == 1 else res
            self._set(t, v, s, out)

        return run

    @staticmethod
    def _set(table: Any, vals: list[Any], s: int, value: Any) -> None:
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous:
                value = np.array(value, order="C")
            table[s] = thunks.ptr(value)
        vals[s] = value

    def _plan_regions(self, specs: list[kernels.Kernel], fusible: AbstractSet[int]
                      ) -> list[regions.Region]:
        """Row-parallel runs of GEMMs and kernels (regions.py)."""
        by_root = {id(k.root): k for k in specs}
        inline = {id(r) for rs in self.row_reduces.values() for r in rs}
        members: list[regions.Member | None] = []
        for instr in self._thunk_instrs:
            spec = by_root.get(id(instr)) if id(instr) in fusible else None
            if spec is not None and not (self.options.loop_part and dus_window.candidate(
                    instr, self.comp)):  # (not a window of a loop's state: dus_window.py)
                reads: dict[int, set[tuple[str, ...]]] = {}
                row_walk(instr, fusible, self.materialized, inline, reads)
                members.append(regions.kernel_member(spec, reads, self._leaves(instr, fusible),
                                                     self.shapes))
            elif instr.opcode == "dot_general" and library.dot_plan(instr) is not None:
                members.append(regions.gemm_member(instr, self.slot))
            else:
                members.append(None)
        self.row_members = members  # (by thunk: a row-split loop's, row_loop.py)
        out = []  # 2 threads: the same regions for any thread count
        for run in regions.plan(members, 2, self.options.split_cost):
            region = regions.Region(f"region{len(out)}", run)
            out.append(region)
            names = ", ".join(f"%{m.instr.name}" for m in run)
            self.report.append((region.name, "region", f"row-parallel: {names}"))
        return out

    def _bind_all(self, mod: Any, specs: list[kernels.Kernel]) -> None:
        """The kernels' modules printed (kernel_compile.plan_for) and the arena planned, then
        compiled and every thunk bound to its code (`_bind_code`), but in a loop's condition
        or body: its loop binds them unless it runs as one fused function (loop_fused.py),
        which needs their text only (and a deferred compile's case/if executables built:
        branch_loop.later)."""
        branch_loop.build_later(self)
        code = plan_for(self, mod, specs, batch_chain.dropped(self.chains, self.regions)) \
            if specs else None
        self._arena_plan = self._plan_arena()
        self._temp_set = set(self.temp_slots)
        self._fresh_set = set(self.fresh_slots) | (self._native - self._temp_set)
        self._own = result_plan(self.comp.root, self._result_mode)
        self._binding = lambda: self._bind_code(code, specs)
        if not self.options.loop_part:
            self.bind()

    def _bind_code(self, code: KernelCode | None, specs: list[kernels.Kernel]) -> None:
        if code is not None:
            compile_for(self, code)
            self._bind_kernels(specs)
        self._bind_regions()
        self._bind_chains()
        self.thunks = kernel_batch.batch(self.thunks, self._keep, lambda: self._table)
        self._build_ahead()

    def _bind_kernels(self, specs: list[kernels.Kernel]) -> None:
        """Kernel thunks go in program order, interleaved with the others."""
        kthunks = {spec.output: self._kernel_thunk(spec, _KFN(addr))
                   for spec, addr in zip(specs, self.kernel_addrs)}
        others = iter(self.thunks)
        self.thunks = [kthunks[s] if s in kthunks else next(others)
                       for s in (self.slot[id(i)] for i in self._thunk_instrs)]

    def _bind_regions(self) -> None:
        """Each region's thunk replaces its members' (the thunks are in program order)."""
        first: dict[int, Callable[..., None]] = {}
        inside: set[int] = set()
        for region in self.regions:
            slots = [m.slot for m in region.members]
            first[slots[0]] = self._region_thunk(region)
            inside.update(slots[1:])
        self.thunks = [first.get(s, th) for s, th in zip(
            (self.slot[id(i)] for i in self._thunk_instrs), self.thunks)
            if s not in inside]

    def _region_thunk(self, region: regions.Region) -> Callable[..., None]:
        fresh = [(m.slot, tuple(m.instr.shape.dimensions), m.instr.shape.dtype)
                 for m in region.members if id(m.instr) in self._fresh_values]
        addrs = {k.name: a for k, a in zip(self.kernel_specs, self.kernel_addrs)}
        parts = self._threads(sum(m.cost for m in region.members))
        return thunks.region_thunk(region, addrs, parts, self._keep, fresh,
                                   self._pool, lambda: self._table,
                                   self._region_alias.setdefault(region.name, []))

    def _kernel_thunk(self, spec: kernels.Kernel, fn: Any) -> Callable[..., None]:
        if isinstance(spec, op_emit.TupleKernel):
            return spec.thunk(fn, spec.output, self._threads(spec.cost) if spec.splittable and
                              spec.cost >= self.options.split_cost else 1, self._pool)
        shape = spec.root.shape
        dims, dtype = tuple(shape.dimensions), shape.dtype
        is_fresh = id(spec.root) in self._fresh_values
        big = spec.cost >= self.options.split_cost and spec.outer >= 2
        cuts = parallel.partial_cuts(spec.outer, spec.cost, self.options.partial_min_rows,
                                     spec.align)
        if spec.partial and big and len(cuts) > 2:  # chunks whatever the thread count
            return thunks.partial_thunk(fn, cuts, self._threads(spec.cost), str(spec.partial),
                                        self._keep, spec.output, dims, dtype, is_fresh,
                                        self._pool)
        fresh = [(spec.output, dims, dtype)] if is_fresh else []
        fresh += multi_output.fresh(self._siblings.get(id(spec.root), ()), self.slot,
                                    self._fresh_values)
        return thunks.split_thunk(fn, spec.outer, self._threads(spec.cost) if spec.splittable
                                  and big else 1, spec.align, self._keep, fresh, self._pool)

    def _threads(self, cost: int) -> int:
        """Threads for work of `cost`: one below the split cost (higher inside control flow),
        else all. Chunks never depend on it (parallel.py), so neither do the bits."""
        return self.num_threads if cost >= self._split_cost else 1
