"""Where a cpu executable's values live (the planning methods of `CpuExecutable`, run once
at compile): the arena of temporaries packed by live range, element-wise kernels written over
a dying operand or into a result (inplace.py), and batch chains whose intermediates lie
mostly in their own output, a few rows per thread in the arena (batch_chain.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from xlapy.backends.cpu import (
    arena,
    batch_chain,
    dot_views,
    inplace,
    kernel_flat,
    kernels,
    op_emit,
    scatter_emit,
)
from xlapy.backends.cpu.fusion_plan import row_walk


class MemoryPlanning:
    """Mixed into CpuExecutable: reads its plan (slots, shapes, kernels, regions, thunks)."""

    slot: dict[int, int]
    shapes: dict[int, Any]
    temp_slots: list[int]
    kernel_specs: list[Any]
    kernel_addrs: list[int]
    regions: list[Any]
    chains: list[batch_chain.Chain]
    thunks: list[Callable[..., None]]
    report: list[tuple[str, str, str]]
    fusion: Any
    materialized: Any
    row_reduces: dict[Any, Any]
    outputs: Any
    out_alias: dict[int, int]
    in_place: dict[int, int]
    _thunk_instrs: list[Any]
    _extra_ins: dict[int, list[int]]
    _native: set[int]
    _region_alias: dict[str, list[tuple[int, int]]]
    _arena_plan: tuple[dict[int, int], int]
    _keep: dict[int, Any]
    _early: Any
    _chain_parts: dict[str, int]

    _root_values: Callable[[], list[Any]]
    _leaves: Callable[[Any, Any], dict[int, int]]
    _threads: Callable[[int], int]
    _pool: Callable[[], Any]

    def _plan_arena(self) -> tuple[dict[int, int], int]:
        """Offsets of the temporaries in the arena (arena.py: packed by live range)."""
        kernel_ins = self._kernel_inputs()
        instrs = self._thunk_instrs
        if self.chains:  # a chain runs in its last member's place (batch_chain.py)
            moved = {id(i): ch.instrs for ch in self.chains for i in ch.instrs}
            instrs = [j for i in instrs if id(i) not in moved or moved[id(i)][-1] is i
                      for j in (moved[id(i)] if id(i) in moved else [i])]
        outs = [self.slot[id(i)] for i in instrs]
        ins = [kernel_ins[s] if s in kernel_ins else [self.slot[id(o)] for o in i.operands]
               + self._extra_ins.get(s, []) for s, i in zip(outs, instrs)]
        group = {m.slot: r.name for r in self.regions for m in r.members}
        for k in self.kernel_specs:  # a multi-output kernel's slots: one step (multi_output.py)
            if k.extra:
                group.update((x, k.name) for x in k.outputs)
        sizes = {s: math.prod(self.shapes[s].dimensions) * self.shapes[s].dtype.itemsize
                 for s in self.temp_slots}
        for ch in self.chains:  # one step; its threads' arena scratch in the scores slot
            group.update((self.slot[id(i)], ch.name) for i in ch.instrs)
            sizes[ch.scores] = ch.scratch_bytes(self._chain_parts[ch.name])
            at = outs.index(ch.second.out)  # the view kernels' leaves are read there
            ins[at] = [*ins[at], *(leaf for _, leaf in ch.views)]
        results = [self.slot[id(i)] for i in self._root_values()]
        fresh = self._native | set(kernel_ins)
        eligible = self._in_place_operands()
        #: temporary -> the region's result kernel slot whose buffer it is (inplace.py)
        self.out_alias = inplace.into_outputs(
            outs, ins, eligible, set(sizes), fresh,
            {s for s in results if s in kernel_ins and s not in sizes}, set(results),
            {m.slot: r.name for r in self.regions for m in r.members},
            self._region_whole_reads())
        for s, o in self.out_alias.items():
            sizes.pop(s)
            self.temp_slots.remove(s)
            self._region_alias.setdefault(group[o], []).append((s, o))
        #: kernel slot -> the dying operand slot it is written over (inplace.py)
        self.in_place = inplace.choose(outs, ins, eligible, set(sizes), fresh,
                                       set(results), self._region_whole_reads())
        return arena.offsets(arena.schedule(outs, ins, group, fresh), sizes, results,
                             self.in_place)

    def _kernel_inputs(self) -> dict[int, list[int]]:
        """The slots each kernel slot's loop reads (a multi-output kernel's: every output's)."""
        return {x: k.inputs for k in self.kernel_specs for x in k.outputs}

    def _in_place_operands(self) -> dict[int, list[int]]:
        """Per element-wise kernel, the operand slots it reads only at the elements (rows)
        it writes (inplace.py)."""
        inline = {id(r) for rs in self.row_reduces.values() for r in rs}
        fusible = self.fusion.fusible
        out: dict[int, list[int]] = {}
        for spec in self.kernel_specs:
            root = spec.root
            if scatter_emit.in_place(spec, root):  # (updates applied to operand 0's copy)
                out[spec.output] = [self.slot[id(root.operands[0])]]
                continue
            if isinstance(spec, op_emit.TupleKernel) or id(root) not in fusible \
                    or spec.partial or spec.extra:
                continue
            reads: dict[int, set[tuple[str, ...]]] = {}
            row_walk(root, fusible, self.materialized, inline, reads)
            leaves = self._leaves(root, fusible)
            bad = inplace.inexact_leaves(root, fusible, self.materialized, inline)
            out[spec.output] = [s for lid, s in leaves.items() if lid not in bad and
                                inplace.same_index_reads(root.shape, self.shapes[s],
                                                         reads.get(lid, ()))]
        return out

    def _thunk_reads(self) -> list[list[int]]:
        """The slots each thunk instruction reads (a kernel: its leaves), in thunk order."""
        kernel_ins = self._kernel_inputs()
        return [kernel_ins[s] if s in kernel_ins else
                [self.slot[id(o)] for o in i.operands] + self._extra_ins.get(s, [])
                for i, s in ((i, self.slot[id(i)]) for i in self._thunk_instrs)]

    def _plan_chains(self) -> list[batch_chain.Chain]:
        """Batch chains (batch_chain.py) among the thunks outside regions; their
        intermediates leave the arena's temporaries (one batch per thread in its place)."""
        self._chain_parts: dict[str, int] = {}
        if not batch_chain.ENABLED or not any(
                i.opcode == "dot_general" for i in self._thunk_instrs):
            return []
        readers: dict[int, list[int]] = {}
        for p, reads in enumerate(self._thunk_reads()):
            for s in reads:
                readers.setdefault(s, []).append(p)
        taken = {id(m.instr) for r in self.regions for m in r.members}
        by_root = {id(k.root): k for k in self.kernel_specs
                   if not isinstance(k, op_emit.TupleKernel) and id(k.root) in self.fusion.fusible
                   and not k.extra}
        eligible = self._in_place_operands()
        results = {self.slot[id(i)] for i in self._root_values()}
        in_regions = {m.slot for r in self.regions for m in r.members}
        views = {k.output: v for k in by_root.values() if k.output not in in_regions
                 and (v := dot_views.view_of(k.root, self.fusion.fusible, self.materialized,
                                             self.slot)) is not None}
        chains = batch_chain.plan(self._thunk_instrs, self.slot, by_root,
                                  lambda k: set(eligible.get(k.output, ())), readers, results,
                                  taken, views)
        for ch in chains:
            g = ch.first
            self._chain_parts[ch.name] = self._threads(2 * g.nbatch * g.m * g.n * g.k)
            if ch.tail is not None and not self._tail_rows(ch):
                ch.tail = None
                ch.instrs.pop()
            for s in ch.inside():
                if s in self.temp_slots:
                    self.temp_slots.remove(s)
            names = ", ".join(f"%{i.name}" for i in ch.instrs)
            self.report.append((ch.name, "chain", f"batch chain: {names}"))
        return chains

    def _tail_rows(self, ch: batch_chain.Chain) -> bool:
        """The chain's tail kernel emitted again with its outer range over the chain's rows
        (KernelEmitter's `row_unit`), in its place among the kernels (the first one is not
        compiled); False where it cannot be (not element-wise at its index)."""
        spec, t = ch.tail, ch.instrs[-1]
        assert spec is not None
        leaves = self._leaves(t, self.fusion.fusible)
        if kernel_flat.flatten(t, leaves, (), force=True) is None:
            return False
        e = kernels.KernelEmitter(self._early.mod, f"{spec.name}r", t, leaves, spec.output,
                                  row_unit=ch.second.n)
        k = e.build()
        if e.flat_rows != ch.second.n or k.outer != ch.first.nbatch * ch.first.m \
                or k.inputs != spec.inputs:
            raise AssertionError(f"batch chain tail {spec.name}: not emitted flat by rows")
        self.kernel_specs[next(i for i, x in enumerate(self.kernel_specs) if x is spec)] = k
        ch.tail = k
        return True

    def _bind_chains(self) -> None:
        """Each chain's thunk replaces its members', in its last member's place (the thunks
        are in program order, region members but the first already dropped)."""
        if not self.chains:
            return
        inside = {m.slot for r in self.regions for m in r.members[1:]}
        slots = [s for s in (self.slot[id(i)] for i in self._thunk_instrs) if s not in inside]
        first: dict[int, Callable[..., None]] = {}
        drop: set[int] = set()
        addrs = {k.output: a for k, a in zip(self.kernel_specs, self.kernel_addrs)}
        where = self._arena_plan[0]
        for ch in self.chains:
            last = ch.instrs[-1]
            fresh = [(ch.out, tuple(last.shape.dimensions), last.shape.dtype)] \
                if id(last) in self.outputs else []
            first[ch.out] = batch_chain.chain_thunk(
                ch, addrs[ch.kernel.output], self._chain_parts[ch.name], self._pool,
                lambda s=ch.scores: where[s], fresh, self._keep,
                addrs[ch.tail.output] if ch.tail is not None else 0)
            drop.update(ch.inside())
        self.thunks = [first.get(s, th) for s, th in zip(slots, self.thunks) if s not in drop]

    def _region_whole_reads(self) -> dict[int, set[int]]:
        """Per member slot of a row-parallel region, the slots its members read whole."""
        out: dict[int, set[int]] = {}
        for region in self.regions:
            whole = set().union(*(m.other_reads for m in region.members))
            out.update((m.slot, whole) for m in region.members)
        return out
