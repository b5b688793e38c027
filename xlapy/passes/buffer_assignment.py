"""Buffer assignment: liveness over the schedule, in-place reuse, aliasing, one best-fit arena.

Every value of the entry computation gets a logical buffer, except views: get_tuple_element,
tuple and reshape (a bitcast in row-major layout) alias their operand's buffer and extend its
live range. Parameters and constants live in their own allocations for the whole run; the
root is live to the end. An element-wise op or loop fusion whose operand buffer dies at it and
has its size writes in place (XLA's "can share buffer"). A donated parameter (`donated`) whose
last read is before the output is written holds the output (parameter/output aliasing). The
remaining buffers are packed into one arena, largest first, each at the best-fitting gap
among the buffers live at the same time (XLA's GlobalDecreasingSizeBestFitHeap).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.fusion_decision import is_elementwise
from xlapy.passes.pass_base import Pass, array_bytes

ALIGN = 64
VIEW_OPS = frozenset({"get_tuple_element", "tuple", "reshape", "bitcast"})


@dataclass
class Allocation:
    """Memory one or more buffers share (in-place reuse chains them)."""

    size: int
    start: int
    end: int
    names: list[str] = field(default_factory=list)
    offset: int = -1
    kind: str = "temp"  # temp | parameter | constant | output-in-parameter


@dataclass
class BufferAssignment:
    """The result: allocations, arena size and the numbers the memory report prints."""

    computation: str
    allocations: list[Allocation]
    arena_bytes: int
    peak_live_bytes: int
    unshared_bytes: int
    parameter_bytes: int
    constant_bytes: int
    output_bytes: int
    in_place: list[str]
    aliased_outputs: list[str]

    def report(self) -> str:
        temps = [a for a in self.allocations if a.kind == "temp"]
        lines = [
            f"memory report for {self.computation}",
            f"  before buffer assignment (one buffer per value): {fmt_bytes(self.unshared_bytes)}",
            f"  after buffer assignment (arena size):            {fmt_bytes(self.arena_bytes)}",
            f"  peak live bytes (lower bound):                   {fmt_bytes(self.peak_live_bytes)}",
            f"  parameters: {fmt_bytes(self.parameter_bytes)}, constants: "
            f"{fmt_bytes(self.constant_bytes)}, output: {fmt_bytes(self.output_bytes)}",
            f"  arena allocations: {len(temps)}, in-place reuses: {len(self.in_place)}, "
            f"outputs aliased to parameters: {len(self.aliased_outputs)}",
        ]
        for a in sorted(temps, key=lambda a: a.offset):
            lines.append(f"    [{a.offset:>12d}, +{a.size:<12d}) live {a.start}..{a.end}: "
                         + ", ".join(a.names))
        return "\n".join(lines)


def fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n} B ({n / scale:.2f} {unit})"
    return f"{n} B"


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _in_place_ok(instr: Instruction) -> bool:
    if instr.opcode == "fusion":
        return instr.attrs.kind.value == "loop"
    return is_elementwise(instr) or instr.opcode == "dynamic_update_slice"


def assign_buffers(comp: Computation, order: Sequence[Instruction] | None = None,
                   donated: Iterable[int] = (), in_place: bool = True) -> BufferAssignment:
    """Assign buffers of `comp` run in `order` (default: its instruction order)."""
    seq = list(order if order is not None else comp.instructions)
    pos = {id(i): n for n, i in enumerate(seq)}
    end = len(seq)
    # value id -> the allocation holding it (a list of them for a tuple-shaped value)
    owner: dict[int, Any] = {}
    allocs: list[Allocation] = []
    in_place_names: list[str] = []
    donated_set = set(donated)
    param_bytes = const_bytes = unshared = 0

    def live_until(i: Instruction) -> int:
        last = pos[id(i)]
        for u in i.users:
            if id(u) in pos:
                last = max(last, live_until(u) if u.opcode in VIEW_OPS else pos[id(u)])
        if i is comp.root:
            last = end
        return last

    for t, instr in enumerate(seq):
        size = _align(array_bytes(instr.shape))
        if instr.opcode == "parameter":
            a = Allocation(size, 0, end, [instr.name], 0, "parameter")
            a.donated = instr.parameter_number in donated_set  # type: ignore[attr-defined]
            param_bytes += size
        elif instr.opcode == "constant":
            a = Allocation(size, 0, end, [instr.name], 0, "constant")
            const_bytes += size
        elif instr.opcode == "get_tuple_element" and isinstance(owner.get(id(instr.operands[0])),
                                                                 list):
            src = owner[id(instr.operands[0])][instr.attrs.index]  # type: ignore[index]
            owner[id(instr)] = src
            if isinstance(src, Allocation):
                src.end = max(src.end, live_until(instr))
            continue
        elif instr.opcode == "tuple":
            owner[id(instr)] = [owner.get(id(o)) for o in instr.operands]  # type: ignore[assignment]
            for o in instr.operands:
                held = owner.get(id(o))
                if isinstance(held, Allocation):
                    held.end = max(held.end, live_until(instr))
            continue
        elif instr.opcode in VIEW_OPS and instr.operands:
            owner[id(instr)] = owner[id(instr.operands[0])]
            held = owner[id(instr)]
            if isinstance(held, Allocation):
                held.end = max(held.end, live_until(instr))
            continue
        elif instr.shape.is_tuple:
            # One buffer per element (a multi-output fusion, a while state, a sort).
            whole = live_until(instr) if any(u.opcode != "get_tuple_element"
                                             for u in instr.users) or instr is comp.root else t
            parts = []
            for k, es in enumerate(instr.shape.tuple_shapes):
                esize = _align(array_bytes(es))
                unshared += esize
                last = max([whole] + [live_until(u) for u in instr.users
                                      if u.opcode == "get_tuple_element" and u.attrs.index == k])
                part = Allocation(esize, t, last, [f"{instr.name}#{k}"])
                allocs.append(part)
                parts.append(part)
            owner[id(instr)] = parts  # type: ignore[assignment]
            continue
        else:
            unshared += size
            a = None
            if in_place and _in_place_ok(instr):
                for o in instr.operands:
                    prev = owner.get(id(o))
                    if (isinstance(prev, Allocation) and prev.kind == "temp"
                            and prev.size == size and prev.end == t and o is not comp.root):
                        a = prev
                        break
            if a is not None:
                a.end = live_until(instr)
                a.names.append(instr.name)
                in_place_names.append(instr.name)
                owner[id(instr)] = a
                continue
            a = Allocation(size, t, live_until(instr), [instr.name])
        owner[id(instr)] = a
        allocs.append(a)

    aliased: list[str] = []
    root = comp.root
    if root is not None and isinstance(owner.get(id(root)), Allocation):
        out = owner[id(root)]
        for p in comp.parameters:
            pa = owner.get(id(p))
            if (out.kind == "temp" and pa is not None and getattr(pa, "donated", False)
                    and pa.size == out.size and live_until(p) <= out.start):
                out.kind = "output-in-parameter"
                aliased.append(f"{root.name} -> {p.name}")
                pa.donated = False  # type: ignore[attr-defined]
                break
    output_bytes = _align(array_bytes(root.shape)) if root is not None else 0
    arena = pack([a for a in allocs if a.kind == "temp"])
    peak = _peak([a for a in allocs if a.kind == "temp"], end)
    return BufferAssignment(comp.name, allocs, arena, peak, unshared, param_bytes, const_bytes,
                            output_bytes, in_place_names, aliased)


def pack(allocs: list[Allocation]) -> int:
    """Best-fit offsets, largest first; returns the arena size (ALIGN-multiple sizes keep
    every offset aligned). The cpu backend packs its temporaries with it too."""
    placed: list[Allocation] = []
    size = 0
    for a in sorted(allocs, key=lambda a: (-a.size, a.start)):
        busy = sorted((b.offset, b.offset + b.size) for b in placed
                      if b.start <= a.end and a.start <= b.end)
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= a.size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        a.offset = best if best is not None else cursor
        placed.append(a)
        size = max(size, a.offset + a.size)
    return size


def _peak(allocs: list[Allocation], end: int) -> int:
    events: dict[int, int] = {}
    for a in allocs:
        events[a.start] = events.get(a.start, 0) + a.size
        events[a.end + 1] = events.get(a.end + 1, 0) - a.size
    live = peak = 0
    for t in sorted(events):
        live += events[t]
        peak = max(peak, live)
    return peak


class BufferAssignmentPass(Pass):
    """Analysis: stores the entry's BufferAssignment in `module.meta["buffer_assignment"]`."""

    name = "buffer-assignment"

    def __init__(self, donated: Iterable[int] = ()) -> None:
        self.donated = tuple(donated)
        self.result: BufferAssignment | None = None

    def run(self, module: Module) -> bool:
        self.result = assign_buffers(module.entry_computation(), donated=self.donated)
        module.meta["buffer_assignment"] = self.result
        return False
