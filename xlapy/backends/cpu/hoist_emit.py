"""Loop-invariant values of a kernel computed once before the loop that does not change them.

Explicit-lane kernels go through the light LLVM pipeline (no LICM, lanes.py), and the
backend's MachineLICM leaves floating-point arithmetic where it is, so a value that depends
only on the outer indices was recomputed per element: layernorm's rsqrt(var + eps) was a
scalar sqrt and divide per vector of its last loop, the mean a multiply and a broadcast per
vector of the two after the first. A mixin of KernelEmitter: around each innermost column
loop (a row reduction's, the root's innermost dimension) the emitter opens a *phase* with
the index values fixed outside that loop; `gen` of a value whose indices are all among them
(or constants) is emitted at the end of a block that runs once before the loop (its own
chain of blocks, so code that branches - index ops - can be hoisted too), and remembered
for the rest of the phase. The bits are the same: the same instructions run, fewer times.

Phases nest: the root's nest opens one around each outer loop too (below its rows'
reductions), and a reduce over several dimensions around each outer reduced loop; a value of
fewer indices goes out to the outermost phase that fixes them (`_open`: a nearest resize's row
index was computed per pixel of a 3-channel image, the sum of a log_softmax's output a log per
vector). Only through `nested` phases, whose loops run right inside the phase outside them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu.lanes import Lane, index_key
from xlapy.backends.cpu.llvm_util import broadcast, i64


@dataclass
class _Phase:
    """One loop's hoisting: the block hoisted code is appended to (unterminated until the
    phase closes), the index keys fixed in the loop, and what was hoisted."""

    tail: ir.Block
    fixed: frozenset[object]
    nested: bool = False  # its loop runs right inside the phase outside: hoist on out to it
    memo: dict[Any, ir.Value] = field(default_factory=dict)
    ids: set[int] = field(default_factory=set)  # id() of every hoisted value


class HoistEmitter:
    """Hoisting for KernelEmitter (which defines `b`, `fn`, `width`, `_gen` and `offset_sum`)."""

    b: ir.IRBuilder
    fn: ir.Function
    width: int
    _phases: list[_Phase | None]  # None: a barrier (code that runs conditionally)
    _into: list[_Phase]  # the phases whose hoisted code is being emitted (at_phase)
    _offsets: dict[Any, ir.Value]  # fixed_offset's sums, by (the phase's fixed keys, key)
    offset_sum: Callable[[Sequence[tuple[Any, int]], ir.Value], ir.Value]  # KernelEmitter's

    @contextlib.contextmanager
    def _phase(self, fixed: Sequence[Any], nested: bool = False) -> Iterator[None]:
        """Code emitted inside runs in a loop over indices other than `fixed`: a value
        generated at fixed indices only is computed once, before it. `nested`: the loop
        runs inside the enclosing phase's with nothing computed between (loops of a nest),
        so a value of fewer indices may go on out to that phase."""
        b = self.b
        head = self.fn.append_basic_block("hoist")
        cont = self.fn.append_basic_block("hoist.end")
        b.branch(head)
        b.position_at_end(cont)
        keys = frozenset(index_key(v) for v in fixed if not isinstance(v, ir.Constant))
        phase = _Phase(head, keys, nested)
        self._phases.append(phase)
        try:
            yield
        finally:
            self._phases.pop()
            after = b.block
            b.position_at_end(phase.tail)
            b.branch(cont)
            b.position_at_end(after)

    @contextlib.contextmanager
    def _no_hoist(self) -> Iterator[None]:
        """Code emitted inside runs conditionally (a side of an index op's branch): nothing
        is hoisted from it, since a load there may be valid only under its condition."""
        self._phases.append(None)
        try:
            yield
        finally:
            self._phases.pop()

    def _open(self) -> list[_Phase]:
        """The phases code emitted now may hoist to, outermost first: the innermost one and,
        while a phase is `nested`, the one outside it (loops nest, so each fixes the
        indices of the ones outside it). Not past a barrier, nor out of a phase not nested:
        a row reduction's loop runs inside the row loop of a phase opened before that row's
        reductions, so a value of the row at constant indices (a row of one) exists only
        inside it."""
        out: list[_Phase] = []
        for phase in reversed(self._phases):
            if phase is None:
                break
            out.append(phase)
            if not phase.nested:
                break
        return out[::-1]

    def _invariant(self, idx: Sequence[Any]) -> _Phase | None:
        """The outermost open phase whose loop `idx` is fixed in (constants and fixed
        indices): a value of the outer indices only is computed before the outer loop."""
        if any(isinstance(v, Lane) for v in idx):
            return None
        keys = [index_key(v) for v in idx if not isinstance(v, ir.Constant)]
        opened: list[_Phase] = []  # (an index hoisted before an outer loop: fixed inside)
        for phase in self._open():
            opened.append(phase)
            if all(k in phase.fixed or any(k in p.ids for p in opened) for k in keys):
                return phase
        return None

    def _hoisted(self, phase: _Phase, key: Any, instr: Any, idx: Sequence[Any]) -> ir.Value:
        """gen(instr, idx) emitted at the end of the phase's block chain (memoized there)."""
        return self.at_phase(phase, key, lambda: self._gen(instr, idx))  # type: ignore

    def at_phase(self, phase: _Phase, key: Any, make: Callable[[], ir.Value]) -> ir.Value:
        """make() emitted once at the end of the phase's block chain, before its loop (the
        value memoized under `key` for the rest of the phase)."""
        v = phase.memo.get(key)
        if v is not None:
            return v
        b = self.b
        self._into.append(phase)
        try:
            if b.block is phase.tail:  # an operand of a value being hoisted: already there
                v = make()
                phase.tail = b.block  # (hoisted code may branch: index ops)
            else:
                after = b.block
                b.position_at_end(phase.tail)
                try:
                    v = make()
                finally:
                    phase.tail = b.block
                    b.position_at_end(after)
        finally:
            self._into.pop()
        phase.memo[key] = v
        phase.ids.add(id(v))
        return v

    def fixed_offset(self, terms: list[tuple[Any, int]]
                     ) -> tuple[ir.Value | None, list[tuple[Any, int]]]:
        """Split the (index, stride) terms of a linear offset into the sum of those fixed in
        the current phase's loop, computed once before it (None if there is nothing worth
        hoisting: no multiply or add), and the rest. A row kernel's loads recomputed their
        row's offset (attention's: 3 multiplies and 3 adds) per access, up to 4 accesses per
        iteration of the fast max: IR to build, print, parse and select, that MachineLICM
        then took out of the loop anyway."""
        phase = self._phases[-1] if self._phases else None
        if phase is None or self._into and self._into[-1] is not phase:
            return None, terms  # (code hoisted to an outer loop's phase: once there anyway)
        fixed = [(v, s) for v, s in terms if not isinstance(v, (Lane, ir.Constant))
                 and index_key(v) in phase.fixed]
        if len(fixed) == len(terms) or not fixed or (len(fixed) == 1 and fixed[0][1] == 1):
            return None, terms
        def make() -> ir.Value:
            return self.offset_sum(fixed, i64(0))

        key = ("offset", tuple((index_key(v), st) for v, st in fixed))
        rest = [(v, s) for v, s in terms if not any(v is f for f, _ in fixed)]
        # A later loop with the same fixed indices (a row's next pass) takes the offset
        # made before an earlier one: phases are opened in straight-line code (a row's
        # passes one after the other), so that block runs before this loop, every row.
        v = self._offsets.get((phase.fixed, key))
        if v is None:
            v = self._offsets[(phase.fixed, key)] = self.at_phase(phase, key, make)
        return v, rest

    def once(self, v: ir.Value, tag: str, make: Callable[[ir.Value], Any]) -> Any:
        """make(v), emitted in the phase scalar `v` was hoisted to (once per its loop's
        iteration: a power's log of a base uniform along a row), else here."""
        phase = self.hoisted_phase(v)
        return make(v) if phase is None else self.at_phase(phase, (tag, id(v)),
                                                           lambda: make(v))

    def hoisted_phase(self, v: ir.Value) -> _Phase | None:
        """The open phase `v` was computed in, before its loop (a hoisted scalar)."""
        return next((p for p in self._open() if id(v) in p.ids), None)

    def splat(self, v: ir.Value) -> ir.Value:
        """Scalar `v` in every lane: a value hoisted in this phase is broadcast once, in its
        hoisting block, rather than once per vector iteration."""
        phase = self.hoisted_phase(v)
        if isinstance(v.type, ir.VectorType) or isinstance(v, ir.Constant) or phase is None:
            return broadcast(self.b, v, self.width)
        w = self.width
        return self.at_phase(phase, ("splat", id(v), w), lambda: broadcast(self.b, v, w))


__all__ = ["HoistEmitter"]
