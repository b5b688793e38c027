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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu.nested_loop import PICKED
from xlapy.backends.cpu.pipeline import plan_all
from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.types import ElementType, Shape

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
#: How the report names what the branch ran as (after the case's own entry).
LABEL = "branch as one native loop trip"
_S32 = ElementType.S32


def _arrays(shape: Shape) -> list[Shape] | None:
    """A value's arrays (itself, or a flat tuple's elements), or None."""
    if shape.is_array:
        return [shape]
    if shape.is_tuple and all(s.is_array for s in shape.tuple_shapes):
        return list(shape.tuple_shapes)
    return None


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
    hows = [how for _, _, how in branch.report if how not in ("aliasing", "buffer")]
    # (a case / if: a chain of loops in the trip, `_chain`)
    return nbytes <= MAX_BYTES and len(hows) >= MIN_THUNKS and not any(
        how == "interpreter fallback" or how.startswith("control flow") and op not in (
            "case", "if") for _, op, how in branch.report)


def _body(branch: Computation, state: list[Shape], n: int, lead: int = 1
          ) -> Computation | None:
    """(i, [limit,] elements..., results...) -> (i + 1, [limit,] elements...,
    branch(elements...)), `lead` the words before the elements; None when a tuple parameter
    is used other than through get_tuple_element (also in a case/if inside: `_chain`)."""
    e = Emitter(Computation(f"{branch.name}.once_body"))
    ps = [e.param(s) for s in state]
    flat, k = {}, lead
    mapping: dict[int, Instruction] = {}
    for p in branch.parameters:
        if p.shape.is_tuple:
            if any(u.opcode != "get_tuple_element" for u in p.users):
                return None
            flat[id(p)] = ps[k: k + len(p.shape.tuple_shapes)]
            k += len(p.shape.tuple_shapes)
        else:
            mapping[id(p)] = ps[k]
            k += 1
    for i in branch.post_order():
        if i.opcode == "parameter":
            continue
        if i.opcode == "get_tuple_element" and id(i.operands[0]) in flat:
            mapping[id(i)] = flat[id(i.operands[0])][i.attrs.index]
            continue
        ops = [mapping[id(o)] for o in i.operands]
        if i.opcode in ("case", "if"):
            got = _chain(e, i, ops)
            if got is None or (i.shape.is_tuple and any(
                    u.opcode != "get_tuple_element" for u in i.users)):
                return None
            if i.shape.is_tuple:  # (its elements, as a tuple parameter's)
                flat[id(i)] = got
            else:
                mapping[id(i)] = got[0]
            continue
        mapping[id(i)] = e.comp.add(Instruction(i.opcode, ops, i.shape, i.attrs, i.called,
                                                i.name, i.meta))
    root = branch.root
    assert root is not None
    outs = [mapping[id(o)] for o in root.operands] if root.opcode == "tuple" and \
        root.shape.is_tuple else flat[id(root)] if id(root) in flat else [mapping[id(root)]]
    e.comp.root = e.tuple(e.add(ps[0], e.const(1, _S32)), *ps[1:lead + n], *outs)
    e.comp.multi_result = True
    return e.comp


def _picks(e: Emitter, instr: Instruction, index: Instruction, k: int) -> Instruction:
    """1 (s32) when case/if `instr` runs branch k, else 0: the index k, or for the last
    branch any index outside [0, n - 1) (the op's semantics); if: the predicate, then not."""
    n = len(instr.called)
    if instr.opcode == "if":
        pick = index if k == 0 else e.op("not", index)
    elif n == 1:
        return e.const(1, _S32)
    elif k < n - 1:
        pick = e.cmp(index, e.const(k, index.shape.element_type), "EQ")
    else:
        t = index.shape.element_type
        pick = e.op("or", e.cmp(index, e.const(0, t), "LT"),
                    e.cmp(index, e.const(n - 1, t), "GE"))
    return e.select(pick, e.const(1, _S32), e.const(0, _S32))


def _chain(e: Emitter, instr: Instruction, ops: list[Instruction]
           ) -> list[Instruction] | None:
    """case/if `instr` (operands `ops`, in `e`) inside a trip: a chain of loops that each run
    at most once, loop k branch k's body when the index picks it, its state (i, limit, the
    branch's operand elements, the results so far: zeros before loop 0), so the chain's last
    state holds the picked branch's results (returned as a list: a tuple the driver's state
    cannot be). A branch of the driver's own then, where the case was a thunk that kept its
    computation off the trip (jax.scipy.linalg.expm's entry: its norm test picks the
    branch). None: a value the chain cannot carry."""
    results = _arrays(instr.shape)
    if results is None:
        return None
    acc = [e.const(0, r.element_type, r.dimensions) for r in results]
    for k, branch in enumerate(instr.called):
        arg = ops[1 + k] if len(ops) > 1 else None
        if arg is None:
            elems = []
        elif arg.opcode == "tuple":  # (its operands: the tuple is left unused)
            elems = list(arg.operands)
        else:
            elems = [e.get_tuple_element(arg, index=j) for j in range(
                len(arg.shape.tuple_shapes))] if arg.shape.is_tuple else [arg]
        init = [e.const(0, _S32), _picks(e, instr, ops[0], k), *elems, *acc]
        state = [x.shape for x in init]
        body = _body(branch, state, len(elems), lead=2)
        if body is None:
            return None
        c = Emitter(Computation(f"{branch.name}{PICKED}"))
        ps = [c.param(s) for s in state]
        c.comp.root = c.cmp(ps[0], ps[1], "LT")
        loop = e.op("while", *init, called=[c.comp, body], name=f"{instr.name}.branch{k}")
        acc = [e.get_tuple_element(loop, index=2 + len(elems) + j) for j in range(len(acc))]
    return acc


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
    (the counter, the operands' arrays, zeros for the results) and returns the results,
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
        self.zeros = [np.zeros(r.dimensions, r.dtype) for r in results]
        self.first = 1 + sum(len(p.shape.tuple_shapes) if t else 1
                             for p, t in zip(params, self.tupled))
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
        state.extend(self.zeros)
        out = self.nw.run(tuple(state), runtime, process)[self.first:]
        return out[0] if self.single else tuple(out)


def as_trip(branch: CpuExecutable, plans: dict[str, Any], options: CpuOptions
            ) -> Trip | None:
    """`branch` as one native loop trip, or None (keep `branch`)."""
    from xlapy.backends.cpu.executable import CpuExecutable

    if not branch.runnable or not worth(branch):
        return None
    once = _once(branch.comp)
    if once is None:
        return None
    plans.update(plan_all([once], options))
    exe = CpuExecutable(once, None, options, plans)
    return Trip(exe, branch) if exe.native_loops else None


def entry_trip(exe: CpuExecutable) -> Trip | None:
    """A program's entry computation as one trip (as a branch: `as_trip`) when every array it
    computes is small (MAX_BYTES), or None. Its thunks stay for a call whose RuntimeState
    registers a custom-call target (Trip.takes) and for the report. The trip's loop is a
    second compile of the entry's instructions (jnp.linalg.solve in a fori_loop: +42-47 ms
    on 115-120 ms, XLA's own compile ~200 ms) for no Python between its steps (the same
    program's call 108 -> 30 us, XLA 41)."""
    if exe.options.nested or not exe.options.entry_trip or not all(
            _small(i.shape) for i in exe.comp.instructions):
        return None
    return as_trip(exe, dict(exe._plans or {}), exe.options)


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


def compile_branches(instr: Instruction, options: CpuOptions, plans: dict[str, Any]
                     ) -> tuple[list[Any], str]:
    """The executables of a control-flow instruction's computations (a case/if branch as a
    trip where that pays) and what the report says of them."""
    from xlapy.backends.cpu.executable import CpuExecutable

    subs = [CpuExecutable(c, None, options, plans) for c in instr.called]
    if instr.opcode not in ("case", "if"):
        return subs, "control flow (cpu sub-executables)"
    trips = [as_trip(s, plans, options) for s in subs]
    n = sum(t is not None for t in trips)
    how = "control flow (cpu sub-executables)"
    if n:
        how = f"control flow (cpu sub-executables; {n} {LABEL}{'s' if n > 1 else ''})"
    return [t or s for t, s in zip(trips, subs)], how


__all__ = ["LABEL", "MAX_BYTES", "MIN_THUNKS", "Trip", "as_trip", "branch_thunk",
           "compile_branches", "entry_trip", "worth"]
