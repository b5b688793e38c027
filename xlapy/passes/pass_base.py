"""Pass infrastructure: `Pass`, `Pipeline`, `FixedPointGroup`, per-pass timing, verify and print.

XLA's HloPassPipeline runs passes in order, optionally verifying the module after each one
(`verify=True`, on in tests) and dumping it (`print_after_all`). A `FixedPointGroup` is
HloPassFix: its passes run again until none of them changes the module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction, Module, make_instruction
from xlapy.ops.base import NO_ATTRS, OPS
from xlapy.ops.core import ConstantAttrs
from xlapy.types import ElementType, Literal, Shape


class Pass:
    """A module-to-module rewrite; `run` mutates the module and says whether it changed it."""

    name: str = "pass"

    def run(self, module: Module) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class ComputationPass(Pass):
    """A pass that rewrites each non-fusion computation on its own (callees first)."""

    #: The module `run` works on (a pass that adds computations, such as reducers, to it).
    module: Module | None = None

    def run(self, module: Module) -> bool:
        self.module = module
        changed = False
        fused = fusion_computations(module)
        for comp in module.post_order():
            if id(comp) in fused:
                continue
            if self.run_on_computation(comp):
                sort_instructions(comp)
                changed = True
        return changed

    def run_on_computation(self, comp: Computation) -> bool:
        raise NotImplementedError


@dataclass
class PassRecord:
    """One pass run: its (dotted) name, wall time and whether it changed the module."""

    name: str
    seconds: float
    changed: bool


@dataclass
class PassContext:
    """Options shared by nested pipelines: verification, printing, and the timing log."""

    verify: bool = False
    print_after_all: Callable[[str], None] | None = None
    records: list[PassRecord] = field(default_factory=list)

    def timing_report(self) -> str:
        """Total seconds and runs per pass name, slowest first."""
        totals: dict[str, list[float]] = {}
        for r in self.records:
            t = totals.setdefault(r.name, [0.0, 0, 0])
            t[0] += r.seconds
            t[1] += 1
            t[2] += r.changed
        lines = [f"{'pass':40s} {'seconds':>9s} {'runs':>5s} {'changed':>7s}"]
        for name, (secs, runs, ch) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"{name:40s} {secs:9.4f} {int(runs):5d} {int(ch):7d}")
        return "\n".join(lines)


class Pipeline(Pass):
    """Passes in order; after each: record time, verify (when asked), print (when asked)."""

    def __init__(self, name: str, passes: Sequence[Pass] = (), verify: bool = False,
                 print_after_all: Callable[[str], None] | None = None) -> None:
        self.name = name
        self.passes: list[Pass] = list(passes)
        self.context = PassContext(verify, print_after_all)

    def add(self, p: Pass) -> Pass:
        self.passes.append(p)
        return p

    def run(self, module: Module, context: PassContext | None = None,
            prefix: str = "") -> bool:
        ctx = context or self.context
        changed = False
        for p in self.passes:
            changed |= run_one(p, module, ctx, prefix + self.name + ".")
        return changed


class FixedPointGroup(Pipeline):
    """HloPassFix: rerun the group until an iteration changes nothing (or `max_iterations`)."""

    def __init__(self, name: str, passes: Sequence[Pass] = (), max_iterations: int = 25,
                 verify: bool = False) -> None:
        super().__init__(name, passes, verify)
        self.max_iterations = max_iterations
        self.iterations = 0

    def run(self, module: Module, context: PassContext | None = None,
            prefix: str = "") -> bool:
        ever = False
        self.iterations = 0
        for _ in range(self.max_iterations):
            self.iterations += 1
            if not super().run(module, context, prefix):
                break
            ever = True
        return ever


def run_one(p: Pass, module: Module, ctx: PassContext, prefix: str = "") -> bool:
    """Run one pass (nested pipelines share `ctx`), then time, verify and print it."""
    start = time.perf_counter()
    if isinstance(p, Pipeline):
        changed = p.run(module, ctx, prefix)
    else:
        changed = bool(p.run(module))
    name = prefix + p.name
    ctx.records.append(PassRecord(name, time.perf_counter() - start, changed))
    if isinstance(p, Pipeline):
        return changed
    if ctx.verify:
        from xlapy.verify import verify_module

        try:
            verify_module(module)
        except XlapyError as e:
            raise XlapyError(f"module invalid after pass {name}: {e}") from e
    if ctx.print_after_all is not None:
        ctx.print_after_all(f"// -----// IR after {name} (changed={changed}) //----- //\n"
                            + module.to_text())
    return changed


def run_passes(module: Module, passes: Iterable[Pass], verify: bool = True) -> bool:
    """Run `passes` in order with verification (what tests use)."""
    return Pipeline("passes", list(passes), verify=verify).run(module)


# ---- graph helpers shared by the passes ------------------------------------------------------
def replace_each(comp: Computation, found: list[Instruction],
                 make: Callable[[Instruction], Instruction]) -> bool:
    """Each of `found` replaced by `make(it)` in every use (the root too) and removed once
    unused; whether there was any."""
    for i in found:
        i.replace_all_uses_with(make(i))
        if i is not comp.root and not i.users:
            comp.remove(i)
    return bool(found)


def replace_planned(comp: Computation, plan: Callable[[Instruction], Any],
                    make: Callable[[Instruction, Any], Instruction]) -> bool:
    """Each instruction whose `plan(it)` is not None replaced by `make(it, that plan)`: every
    plan is taken before the first replacement (a plan reads the graph as the pass found it)."""
    plans = {id(i): p for i in comp.instructions if (p := plan(i)) is not None}
    return replace_each(comp, [i for i in comp.instructions if id(i) in plans],
                        lambda r: make(r, plans[id(r)]))


def region_callers(module: Module) -> tuple[dict[int, int], set[int]]:
    """id(computation) -> how many instructions call it, in the computations the entry
    reaches (a function already inlined may still be listed until DCE); and the ids of
    those computations."""
    count: dict[int, int] = {}
    stack = [module.entry] if module.entry is not None else list(module.computations)
    seen: set[int] = set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        for i in c.instructions:
            for callee in i.called:
                count[id(callee)] = count.get(id(callee), 0) + 1
                stack.append(callee)
    return count, seen


def sort_instructions(comp: Computation) -> None:
    """Restore the invariant that each instruction follows its operands (list order)."""
    comp.instructions = comp.post_order()


def packed_state(w: Instruction) -> bool:
    """Whether while loop `w` carries its state as one tuple (XLA's form), not as N operands
    (StableHLO's)."""
    return len(w.operands) == 1 and w.operands[0].shape.is_tuple


def fusion_computations(module: Module) -> set[int]:
    """ids of the computations that fusion instructions call (passes leave them alone)."""
    return {id(c) for comp in module.computations for i in comp.instructions
            if i.opcode == "fusion" for c in i.called}


def op_has_side_effects(instr: Instruction, _seen: set[int] | None = None) -> bool:
    """The op or anything it calls has effects beyond its result (keep it alive)."""
    op = OPS.get(instr.opcode)
    if op is None or op.side_effecting:
        return True
    if not instr.called:
        return False
    seen = _seen if _seen is not None else set()
    for c in instr.called:
        if id(c) in seen:
            continue
        seen.add(id(c))
        if any(op_has_side_effects(i, seen) for i in c.instructions):
            return True
    return False


def pure_custom_call(instr: Instruction) -> bool:
    """A custom call without `has_side_effect` (and calling nothing): XLA's passes treat it as
    pure. HloDCE removes it unused (jax.numpy.linalg.qr's unused Q, an orgqr call that kept a
    fori_loop of qr(...)[1] off the native loop driver); WhileLoopInvariantCodeMotion hoists
    it (the LU of jnp.linalg.solve(a, b + c) in a fori_loop over c)."""
    return instr.opcode == "custom_call" and not instr.called and \
        not getattr(instr.attrs, "has_side_effect", True)


def add_instr(comp: Computation, opcode: str, operands: Sequence[Instruction],
              attrs: Any = None, called: Sequence[Computation] = (), name: str = "") -> Instruction:
    """A new instruction (shape from inference) appended to `comp`; call sort_instructions."""
    return comp.add(make_instruction(opcode, operands, attrs, called, name or opcode))


def add_constant(comp: Computation, value: Any, element_type: ElementType,
                 dims: Sequence[int] = ()) -> Instruction:
    """A constant of `element_type` filled with `value` (an array of `dims` when given)."""
    shape = Shape.array(element_type, tuple(dims))
    lit = Literal.splat(value, shape) if shape.num_elements > 1 else \
        Literal.from_numpy(np.full(tuple(dims), value, dtype=element_type.dtype))
    return add_instr(comp, "constant", [], ConstantAttrs(lit))


def constant_like(comp: Computation, value: Any, like: Shape) -> Instruction:
    """`value` splatted to `like`'s shape: a scalar constant, broadcast when `like` has dims."""
    from xlapy.ops.shape import BroadcastInDimAttrs

    c = add_constant(comp, value, like.element_type)
    if like.rank == 0:
        return c
    return add_instr(comp, "broadcast_in_dim", [c], BroadcastInDimAttrs(like.dimensions, ()))


def constant_value(instr: Instruction) -> np.ndarray | None:
    """The array an instruction always produces when that is known: a constant, or a
    broadcast/reshape of one (through any number of them); None otherwise."""
    depth = 0
    while instr.opcode in ("broadcast_in_dim", "reshape") and depth < 8:
        instr = instr.operands[0]
        depth += 1
    if instr.opcode != "constant" or not instr.shape.is_array:
        return None
    return instr.attrs.literal.to_numpy()


def splat_value(instr: Instruction) -> Any:
    """The single value every element of `instr` holds when it is a known splat, else None."""
    arr = constant_value(instr)
    if arr is None or arr.size == 0:
        return None
    if not any(arr.strides):  # held as one element (Literal.is_splat)
        return arr.reshape(-1)[0]
    flat = arr.reshape(-1)
    first = flat[0]
    bits = flat.view(np.uint8).reshape(flat.size, -1)
    if not (bits == bits[0]).all():
        return None
    return first


def is_splat(instr: Instruction, value: float) -> bool:
    """Every element equals `value` bit-for-bit up to sign of zero (0 matches only +0)."""
    v = splat_value(instr)
    if v is None:
        return False
    kind = v.dtype.kind
    if kind == "b":
        return bool(v) == bool(value)
    if kind in "iu":
        return int(v) == value
    fv = complex(v) if kind == "c" else float(v)
    if fv == 0 and value == 0:
        return not np.signbit(float(np.real(fv)))
    return fv == value


def array_bytes(shape: Shape) -> int:
    """Bytes of an array shape (sub-byte types take one byte per element); tuples sum leaves."""
    if shape.is_tuple:
        return sum(array_bytes(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return 0
    return shape.num_elements * shape.dtype.itemsize


__all__ = [
    "ComputationPass", "FixedPointGroup", "NO_ATTRS", "Pass", "PassContext", "PassRecord",
    "Pipeline", "add_constant", "add_instr", "array_bytes", "constant_like", "constant_value",
    "fusion_computations", "is_splat", "op_has_side_effects", "pure_custom_call",
    "replace_each", "replace_planned", "run_one", "run_passes",
    "sort_instructions", "splat_value",
]
