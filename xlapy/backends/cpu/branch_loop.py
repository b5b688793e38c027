"""A case/if branch of several small steps run as one trip of a native while loop.

A branch runs as a cpu executable whose thunks Python calls one by one: ~3-10 us each, so a
branch of a dozen small ones (jax.scipy.linalg.expm's: a getrf, two trsms, two native loops,
a few kernels on 16 x 16 matrices) costs ~200 us where XLA spends ~50; a 128 x 128
jnp.linalg.solve or cho_solve as a program of its own, ~200 us of Python on ~150 of work.
The native while driver already runs kernels, GEMMs, LAPACK steps and inner loops with no
Python between them (native_loop.py), so the branch is compiled a second time as the body of
a loop that runs once:

    once(params...) = results of while (i = 0, elements of params..., zeros of results...)
        cond: i < 1
        body: (i + 1, elements of params..., branch(params...))

and that computation replaces the branch when its loop is native. The trip costs one native
loop call (~10-15 us of Python): the driver copies a state of up to loop_bind.KEPT_BYTES
into buffers of its own and binds a bigger one. MAX_BYTES bounds it (past a MB the work
dwarfs the thunks' Python). A branch whose loop would not be native (an op with no native
step) keeps its own executable; so does one of fewer than MIN_THUNKS working thunks,
whose Python costs less than the call. A program's entry computation of the same kind, every
array it computes small, runs the same way (`entry_trip`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu import branch_chain
from xlapy.backends.cpu.branch_chain import S32 as _S32
from xlapy.backends.cpu.branch_chain import arrays as _arrays
from xlapy.backends.cpu.branch_chain import body as _body
from xlapy.backends.cpu.pipeline import executed_computations, plan_all
from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.types import Shape

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.backends.cpu.options import CpuOptions

#: Bytes of parameters and results up to which a branch may run as a loop trip (and of any
#: array an entry trip computes). At 64 KB (the Kept copies' bound) a 128 x 128 f32 solve
#: was left to its thunks: 370 us, as a trip 165 (XLA 252; Zen 3); no jax_run workload and
#: five jax_probe programs changed (random_normal, cho_solve, lstm_grad, gat_softmax,
#: betainc; each the same or faster).
MAX_BYTES = 1 << 20
#: Thunks (not counting aliasing and buffers) from which the trip pays: a native loop call
#: costs about as much Python as three or four kernel thunks.
MIN_THUNKS = 4
#: What a case/if thunk counts as towards MIN_THUNKS: it runs a branch executable, whose
#: own thunks follow it. A lax.cond over 256 floats (a convert, then a case of two kernels
#: a branch: two thunks) was left to its thunks: 23.5 us a call, as a trip 10.5 (XLA 22).
BRANCH_THUNKS = 3
#: How the report names what the branch ran as (after the case's own entry).
LABEL = "branch as one native loop trip"
#: What the report says of the thunks of an entry whose work is kernels and GEMMs
#: (`kernel_bound`).
KERNEL_BOUND = ("kernel", "in kernel", "library blas", "library jit gemm", "row-parallel")


def worth(branch: CpuExecutable) -> bool:
    """Whether a compiled branch is worth trying as a trip: enough working thunks, none of
    them interpreter fallbacks or control flow the driver cannot run, and small values."""
    comp = branch.comp
    root = comp.root
    if root is None or (root.shape.is_tuple and root.opcode != "tuple"):
        return False
    shapes = [_arrays(p.shape) for p in comp.parameters] + [_arrays(root.shape)]
    if any(s is None for s in shapes):
        return False
    nbytes = sum(s.num_elements * s.dtype.itemsize for ss in shapes for s in ss or ())
    working = [(op, how) for _, op, how in branch.report if how not in ("aliasing", "buffer")]
    # (a case / if inside runs as branch_chain.chain's loops in the trip)
    weight = sum(BRANCH_THUNKS if op in ("case", "if") else 1 for op, _ in working)
    return nbytes <= MAX_BYTES and weight >= MIN_THUNKS and not any(
        how == "interpreter fallback"
        or (how.startswith("control flow") and op not in ("case", "if"))
        for op, how in working)


def _cond(name: str, state: list[Shape]) -> Computation:
    e = Emitter(Computation(f"{name}.once_cond"))
    ps = [e.param(s) for s in state]
    e.comp.root = e.cmp(ps[0], e.const(1, _S32), "LT")
    return e.comp


def _once(branch: Computation) -> Computation | None:
    """The computation running `branch` as one loop trip (module docstring), or None."""
    root = branch.root
    assert root is not None
    results = _arrays(root.shape) or []
    e = Emitter(Computation(f"{branch.name}.once"))
    elems: list[Instruction] = []
    for p in branch.parameters:
        q = e.param(p.shape, p.name)
        elems += [e.get_tuple_element(q, index=j) for j in range(len(p.shape.tuple_shapes))] \
            if p.shape.is_tuple else [q]
    init = [e.const(0, _S32), *elems, *(e.const(0, s.element_type, s.dimensions) for s in results)]
    state = [x.shape for x in init]
    body = _body(branch, state, len(elems))
    if body is None:
        return None
    loop = e.op("while", *init, called=[_cond(branch.name, state), body],
                name=f"{branch.name}.trip")
    first = 1 + len(elems)
    outs = [e.get_tuple_element(loop, index=first + j) for j in range(len(results))]
    e.comp.root = e.tuple(*outs) if root.shape.is_tuple else outs[0]
    e.comp.multi_result = branch.multi_result
    return e.comp


class Trip:
    """A branch's `once` executable run by its loop alone: a call hands the loop its state
    (the counter, the operands' arrays, fresh buffers for the results) and returns the results,
    skipping the executable's per-call work (argument checks, its get_tuple_element and
    tuple thunks, result ownership: the loop's final state is arrays of its own), ~15 us
    of expm's branch. Everything else (report, subexecs, objects) is the executable's.

    Its operands reach no host code (`host_safe`: the case thunk need not copy them off
    its arena): they are copied into the loop's buffers, and its LAPACK steps run the
    library. A call whose RuntimeState registers one of the branch's custom-call targets
    runs the branch's own executable instead (which looks them up), on copies."""

    host_safe = True

    def __init__(self, exe: CpuExecutable, branch: CpuExecutable) -> None:
        self.exe, self.branch = exe, branch
        self.targets = _targets(branch.comp)
        self.nw = next(iter(exe.native_loops.values()))
        self.nw.counted = False  # (one iteration of no loop of the program's)
        params = branch.comp.parameters
        self.tupled = [p.shape.is_tuple for p in params]
        root = branch.comp.root
        assert root is not None
        results = _arrays(root.shape) or []
        self.state0 = [np.zeros((), np.int32)]
        self.results = [(tuple(r.dimensions), r.dtype) for r in results]
        self.first = 1 + sum(len(p.shape.tuple_shapes) if t else 1
                             for p, t in zip(params, self.tupled))
        # The results' initial elements: nothing reads them (the body computes each from
        # the operands), so a call hands the loop fresh buffers it owns instead of zeros it
        # would copy (an Adam step over 40 parameters: 120 copies a call).
        self.nw.owned = self.nw.owned | frozenset(range(self.first, self.first + len(results)))
        self.single = not root.shape.is_tuple

    def __getattr__(self, name: str) -> Any:
        return getattr(self.exe, name)

    def run_computation(self, args: list[Any], runtime: Any = None, process: Any = None
                        ) -> Any:
        if not self.takes(runtime):
            return self.branch.run_computation(_copies(args), runtime, process)
        return self.call(args, runtime, process)

    run = run_computation

    def takes(self, runtime: Any) -> bool:
        """Whether the loop may run a call under `runtime`: not when it registers one of the
        branch's custom-call targets (the loop's LAPACK steps would not look it up)."""
        custom = getattr(runtime, "custom_calls", None)
        return not custom or self.targets.isdisjoint(custom)

    def call(self, args: list[Any], runtime: Any = None, process: Any = None) -> Any:
        """The branch's results from its operands `args`, by the loop."""
        state = list(self.state0)
        for a, t in zip(args, self.tupled):
            if t:
                state.extend(a)
            else:
                state.append(a)
        state.extend(np.empty(d, t) for d, t in self.results)
        out = self.nw.run(tuple(state), runtime, process)[self.first:]
        return out[0] if self.single else tuple(out)


def _plan_new(roots: list[Computation], plans: dict[str, Any], options: CpuOptions) -> None:
    """Add fusion plans for `roots` and what they run to `plans` (keyed by name), first
    renaming each new computation whose name a different one's plan holds: a rewritten body
    keeps its loop's name, and a branch's once-body is built for a trip and for a chain; a
    plan found under the wrong computation is a loud "stale plan" error. Two new ones of
    one name (the chains of two case instructions over one branch: computation_dedup.py
    shares identical branches) are told apart too; a case chain's condition keeps its
    nested_loop.PICKED suffix."""
    from xlapy.backends.cpu.nested_loop import PICKED

    taken: set[str] = set()
    for c in executed_computations(roots):
        k, name = 1, c.name
        stem, end = (name[:-len(PICKED)], PICKED) if name.endswith(PICKED) else (name, "")
        while name in taken or ((got := plans.get(name)) is not None and got.comp is not c):
            k += 1
            name = f"{stem}.{k}{end}"
        c.name = name
        taken.add(name)
    plans.update(plan_all(roots, options))


def as_trip(branch: CpuExecutable, plans: dict[str, Any], options: CpuOptions
            ) -> Trip | None:
    """`branch` as one native loop trip, or None (keep `branch`)."""
    from xlapy.backends.cpu.executable import CpuExecutable

    if not branch.runnable or not worth(branch):
        return None
    once = _once(branch.comp)
    if once is None:
        return None
    _plan_new([once], plans, options)
    exe = CpuExecutable(once, None, options, plans)
    return Trip(exe, branch) if exe.native_loops else None


#: The entry computation whose executable leaves its kernels' compile to a first run that
#: needs them (`defer_thunks`), or None.
_DEFERRED: contextvars.ContextVar[Computation | None] = contextvars.ContextVar(
    "xlapy_deferred_entry", default=None)


@contextlib.contextmanager
def defer_thunks(comp: Computation, options: CpuOptions) -> Iterator[None]:
    """Inside, the executable of `comp` (a program's entry computation that may run as a
    trip: `entry_trip`'s own checks) emits its kernels but compiles none (CpuExecutable
    `finish`, called by the backend unless the trip is built): with the trip, the thunks'
    compile was a second one of the same kernels (cold compile, Zen 4: betainc 835 -> 576
    ms, cho_solve 72 -> 44, vmap of 512 4 x 4 solves 183 -> 170; XLA 409, 104, 319).
    Its case/if executables wait too (`later`); its loops' executables are the trip's
    (`sharing`): expm of 64 x 64, 730 -> 336 ms (XLA 568-624)."""
    token = _DEFERRED.set(comp if _may_trip(comp, options) else None)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def deferring(exe: CpuExecutable) -> bool:
    """Whether `exe` leaves its kernels' compile and thunks to `finish` (`defer_thunks`)."""
    return _DEFERRED.get() is exe.comp and exe.runnable


#: Ops no `kernel_bound` entry has: a deferred entry with one runs as a trip unless it is
#: too small to pay (`worth`).
STEPS = frozenset({"while", "case", "if", "custom_call", "triangular_solve", "cholesky"})


def steps_deferred(exe: CpuExecutable) -> bool:
    """Whether `exe` defers its thunks and will most likely run as a trip: its big kernels
    then compile in the trip alone, not early as well (early_compile.py: betainc's 3,400-line
    lgamma kernel, ~220 ms of LLVM, compiled twice; cold compile 422-430 -> 349-359 ms, XLA
    409). A deferred entry of kernels alone keeps its early compiles: it is more often
    kernel-bound (no trip), and they save its compile a few ms."""
    return deferring(exe) and any(i.opcode in STEPS for i in exe.comp.instructions)


def entry_trip(exe: CpuExecutable) -> Trip | None:
    """A program's entry computation as one trip (as a branch: `as_trip`) when every array it
    computes is small (MAX_BYTES), or None. Its thunks stay for a call whose RuntimeState
    registers a custom-call target (Trip.takes) and for the report. The trip's loop is a
    second compile of the entry's instructions (jnp.linalg.solve in a fori_loop: +42-47 ms
    on 115-120 ms, XLA's own compile ~200 ms) for no Python between its steps (the same
    program's call 108 -> 30 us, XLA 41)."""
    if not _may_trip(exe.comp, exe.options) or kernel_bound(exe) or lapack_bound(exe):
        return None
    return as_trip(exe, dict(exe._plans or {}), exe.options)


def _may_trip(comp: Computation, options: CpuOptions) -> bool:
    """The checks of `entry_trip` that need no executable: a top-level compile with the
    option on, every array `comp` computes small."""
    return not options.nested and options.entry_trip and \
        all(_small(i.shape) for i in comp.instructions)


def kernel_bound(exe: CpuExecutable) -> bool:
    """Whether an entry's work is kernels and GEMMs, one of them big enough to split over
    threads (options.split_cost: tens of us): its trip would save a few us of Python per
    thunk, run that kernel on one thread (a loop's split cost is higher) and double the
    compile. Cross entropy over [8192, 10] (4 kernels): 66 -> 71 us as a trip, compile 45 ->
    96 ms (XLA 62); a Hessian of 7 kernels 16 -> 23 us. Entries with LAPACK steps or loops
    keep the trip: its native LAPACK calls skip the thunks' wrappers (cho_solve of 256 x 256:
    642 -> 516 us with a kernel of that size), and a native while loop ran faster inside
    it (betainc 12.1 -> 11.6 ms)."""
    plain = all(how.startswith(KERNEL_BOUND) for _, _, how in exe.report
                if how not in ("aliasing", "buffer"))
    return plain and any(s is not None and s.cost >= exe.options.split_cost
                         for s in exe.kernel_specs)


def lapack_bound(exe: CpuExecutable) -> bool:
    """Whether the entry holds a LAPACK batch its thunk splits over the threads (lapack.splits:
    in a trip it would run on one)."""
    from xlapy.backends.cpu import lapack

    return any(lapack.splits(i, exe.options.num_threads) for i in exe.comp.instructions)


def _small(shape: Shape) -> bool:
    if shape.is_tuple:
        return all(_small(s) for s in shape.tuple_shapes)
    return not shape.is_array or shape.num_elements * shape.dtype.itemsize <= MAX_BYTES


def _targets(comp: Computation) -> frozenset[str]:
    """The custom-call targets `comp` and the computations it calls name."""
    out: set[str] = set()
    for i in comp.instructions:
        if i.opcode == "custom_call":
            out.add(i.attrs.call_target_name)
        for c in i.called:
            out |= _targets(c)
    return frozenset(out)


def _copies(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_copies(v) for v in value)
    return np.array(value) if isinstance(value, np.ndarray) else value


def branch_thunk(instr: Instruction, subs: list[Any], s: int, ins: list[int],
                 put: Callable[[Any, list[Any], int, Any], None]) -> Callable[..., None]:
    """The thunk of a case/if whose branches hand nothing to host code: the branch the
    index picks (an index outside [0, n) the last, as the op's evaluate) runs on its
    operand, without the interpreter's op context (~10 us of expm's branch call); the
    result copied off the arena like any op's, checked and `put` into slot s."""
    from xlapy.backends.cpu.thunks import off_arena
    from xlapy.interpreter.evaluator import check_value
    from xlapy.ir.location import locate_error

    n, pred = len(subs), instr.opcode == "if"
    bare = [c.multi_result and not instr.shape.is_tuple for c in instr.called]
    what = f"{instr.opcode} %{instr.name}"

    def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
        k = (0 if bool(v[ins[0]]) else 1) if pred else int(v[ins[0]])
        k = k if 0 <= k < n else n - 1
        try:
            val = subs[k].run_computation([v[ins[1 + k]]] if len(ins) > 1 else [], rt, pr)
        except XlapyError as e:
            raise locate_error(e, instr) from e.__cause__
        val = off_arena(val[0] if bare[k] else val, v[-1][0])
        put(t, v, s, check_value(val, instr.shape, what, internal=True))

    return run


def _chained(instr: Instruction, options: CpuOptions, plans: dict[str, Any]
             ) -> list[Any] | None:
    """The executables of while `instr`'s condition and body with each case/if a chain of
    once-loops (branch_chain.unbranched), when the loop is native then; else None (the
    thunks' path keeps the case: one branch's call, not a loop per branch). A fori_loop
    whose body normalized and multiplied by an inverse every 8th step ran through Python:
    5.3 ms, XLA 0.6."""
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.backends.cpu.native_loop import plan_native_while

    alt = [branch_chain.unbranched(c) for c in instr.called]
    if all(a is None for a in alt):
        return None
    _plan_new([a for a in alt if a is not None], plans, options)
    subs = [CpuExecutable(a or c, None, options, plans) for a, c in zip(alt, instr.called)]
    return subs if plan_native_while(instr, subs[0], subs[1]) is not None else None


#: Inside `sharing`: what compile_branches made, by opcode, called computations and options.
_MADE: contextvars.ContextVar[dict[Any, Any] | None] = contextvars.ContextVar(
    "xlapy_made_branches", default=None)


@contextlib.contextmanager
def sharing() -> Iterator[None]:
    """Inside, control flow over the same computations with the same options compiles once
    (`compile_branches`): an entry trip's loop body holds the entry's own while and case
    instructions, whose computations (expm's loops, betainc's) it compiled a second time."""
    token = _MADE.set({})
    try:
        yield
    finally:
        _MADE.reset(token)


def compile_branches(instr: Instruction, options: CpuOptions, plans: dict[str, Any],
                     owner: CpuExecutable | None = None) -> tuple[list[Any], str]:
    """The executables of a control-flow instruction's computations (a case/if branch as a
    trip where that pays) and what the report says of them; inside `sharing`, those an
    earlier instruction over the same computations got; a case/if of a deferred `owner`'s,
    to be built as it finishes (`later`)."""
    if owner is not None and instr.opcode in ("case", "if") and deferring(owner):
        return later(owner, instr, options, plans)
    made = _MADE.get()
    if made is None:
        return _compile_branches(instr, options, plans)
    key = (instr.opcode, tuple(id(c) for c in instr.called), options)
    if key not in made:  # (the computations held: their ids are the key)
        made[key] = (_compile_branches(instr, options, plans), list(instr.called))
    subs, how = made[key][0]
    return list(subs), how


#: What the report says of a case/if whose executables `later` builds (until it does).
LATER = "control flow (cpu sub-executables, built when its thunks are)"


def later(owner: CpuExecutable, instr: Instruction, options: CpuOptions,
          plans: dict[str, Any]) -> tuple[list[Any], str]:
    """Executables for case/if `instr` of a deferred entry (`defer_thunks`), built only with
    its thunks (`build_later`): its trip runs the branches as chains (branch_chain.chain),
    so their compile as the thunks' trips was a second one of every branch (expm 64 x 64:
    two cases, ~150 ms each). Until then `subs` (what the thunk reads) holds None."""
    subs: list[Any] = [None] * len(instr.called)
    made = _MADE.get()

    def build() -> None:
        token = _MADE.set(made)  # (the trip's nested loops are shared still)
        try:
            got, how = compile_branches(instr, options, plans)
        finally:
            _MADE.reset(token)
        subs[:] = got
        new = iter(got)
        owner.subexecs[:] = [(n, next(new) if n == instr.name and e is None else e)
                             for n, e in owner.subexecs]
        owner.report[:] = [(n, o, how if n == instr.name and h == LATER else h)
                           for n, o, h in owner.report]

    owner._later.append(build)
    return subs, LATER


def build_later(owner: CpuExecutable) -> None:
    """Build what `later` left of `owner` (as its deferred compile finishes)."""
    while owner._later:
        owner._later[0]()
        owner._later.pop(0)


def _compile_branches(instr: Instruction, options: CpuOptions, plans: dict[str, Any]
                      ) -> tuple[list[Any], str]:
    from xlapy.backends.cpu.executable import CpuExecutable

    if instr.opcode == "while" and (subs := _chained(instr, options, plans)) is not None:
        return subs, "control flow (cpu sub-executables)"  # (a native loop: not reported)
    subs = [CpuExecutable(c, None, options, plans) for c in instr.called]
    if instr.opcode not in ("case", "if"):
        return subs, "control flow (cpu sub-executables)"
    trips = [as_trip(s, plans, options) for s in subs]
    n = sum(t is not None for t in trips)
    how = "control flow (cpu sub-executables)"
    if n:
        how = f"control flow (cpu sub-executables; {n} {LABEL}{'s' if n > 1 else ''})"
    return [t or s for t, s in zip(trips, subs)], how


__all__ = ["KERNEL_BOUND", "LABEL", "MAX_BYTES", "MIN_THUNKS", "STEPS", "Trip", "as_trip",
           "branch_thunk", "build_later", "compile_branches", "entry_trip", "kernel_bound", "later",
           "sharing", "steps_deferred", "worth"]
