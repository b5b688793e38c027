"""Import parsed HLO text (`parser` nodes) into the IR: one Computation per HLO computation.

* Computations are imported on first use (callees may be written after their callers); a
  computation that calls itself is an error.
* Instructions may be written in any order; operands are imported first.
* Each instruction is built through its opcode's reader in `opcodes.py`, then checked: the op's
  shape inference must give the declared shape (layouts aside), else a ParseError at the
  instruction with both shapes.
* `copy`, `add-dependency` and `domain` are the identity here; `bitcast` becomes transpose /
  reshape / bitcast_convert as the two layouts say.
"""

from __future__ import annotations

import re
from typing import Any

from xlapy.errors import ParseError, ShapeInferenceError, Span, Unimplemented
from xlapy.hlo_text.attrs import read_computations
from xlapy.hlo_text.cursor import Cursor
from xlapy.hlo_text.parser import Attr, CompNode, InstrNode, ModuleNode
from xlapy.ir import Computation, Instruction, Module
from xlapy.ir.location import SourceLoc, stamp
from xlapy.ops.base import NO_ATTRS, infer_shape
from xlapy.types import Shape
from xlapy.types.limits import process_count_problem

#: Attributes with no effect on the result; kept in `meta["hlo_attrs"]` and printed back.
#: XLA's optimized HLO adds more: `backend_config` (fusion kinds, `outer_dimension_partitions`:
#: XLA:CPU's own thread split, ours is the backend's), `metadata`, `frontend_attributes`,
#: `sharding` (one device: no effect), `schedule=` and `is_scheduled=true` (XLA's order;
#: the cpu backend schedules itself), `statistics_viz`, `control-predecessors` (ordering
#: only; the IR keeps data dependences). An attribute no reader uses and not listed here
#: is kept the same way and never an error -- XLA adds annotations between versions, and
#: any attribute that changes a result is read by its opcode's reader (a missing required
#: one is an error there); the module lists them in `meta["unknown_hlo_attrs"]`
#: ("opcode attribute").
PASSIVE_ATTRS = frozenset({
    "metadata", "sharding", "frontend_attributes", "backend_config", "statistics_viz",
    "control-predecessors", "origin", "result_accuracy", "schedule", "algorithm",
    "operand_layout_constraints", "output_to_operand_aliasing", "parameter_replication",
    "raw_backend_config_string", "schedule_name", "custom_call_schedule", "padding_type",
})
MULTI_RESULT_MARK = 'xlapy_multi_result="true"'
_METADATA_FIELD = re.compile(r'(op_name|source_file|source_line|source_column)\s*=\s*'
                             r'(?:"((?:[^"\\]|\\.)*)"|(\d+))')


def metadata_location(metadata: str | None, span: Span) -> SourceLoc:
    """The instruction's place in the text and its `metadata={op_name=... source_file=...
    source_line=...}` (what JAX records: the op's path and the Python line that made it)."""
    fields = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
              for m in _METADATA_FIELD.finditer(metadata or "")}
    line, col = fields.get("source_line"), fields.get("source_column")
    return SourceLoc(span=span, name=fields.get("op_name"), file=fields.get("source_file"),
                     line=int(line) if line else None, col=int(col) if col else None)


class InstrContext:
    """What an opcode reader sees: the node, its operands, and typed attribute access."""

    def __init__(self, imp: HloImporter, comp: Computation, node: InstrNode,
                 operands: list[Instruction], declared: list[Shape] | None = None) -> None:
        self.imp = imp
        #: The operands' shapes as written (a `copy` is the identity here but may change the
        #: layout that a later `bitcast` reads).
        self.declared = declared if declared is not None else [o.shape for o in operands]
        self.cur = imp.cur
        self.comp = comp
        self.node = node
        self.operands = operands
        self.used: set[str] = set()

    @property
    def shape(self) -> Shape:
        return self.node.shape

    def error(self, message: str, pos: int | None = None) -> ParseError:
        return self.cur.error(self.node.opcode_pos if pos is None else pos,
                              f"{self.node.opcode} %{self.node.name}: {message}")

    def attr(self, key: str) -> Attr | None:
        self.used.add(key)
        return self.node.attrs.get(key)

    def need(self, key: str) -> Attr:
        a = self.attr(key)
        if a is None:
            raise self.error(f"missing attribute {key}=")
        return a

    def get(self, key: str, reader: Any, default: Any = None) -> Any:
        a = self.attr(key)
        return default if a is None else reader(self.cur, a)

    def req(self, key: str, reader: Any) -> Any:
        return reader(self.cur, self.need(key))

    def computation(self, key: str) -> Computation:
        comps = self.computations(key)
        if len(comps) != 1:
            raise self.error(f"{key}= names {len(comps)} computations, expected one")
        return comps[0]

    def computations(self, key: str) -> list[Computation]:
        return [self.imp.computation(n, p) for n, p in read_computations(self.cur, self.need(key))]

    def arity(self, n: int) -> None:
        if len(self.operands) != n:
            raise self.error(f"expects {n} operand(s), got {len(self.operands)}")

    def add(self, opcode: str, operands: list[Instruction], attrs: Any = NO_ATTRS,
            called: list[Computation] | None = None, shape: Shape | None = None) -> Instruction:
        """An intermediate instruction (bitcast lowering); shape from inference."""
        called = called or []
        try:
            inferred = infer_shape(opcode, [o.shape for o in operands], attrs, called)
        except ShapeInferenceError as e:
            raise self.error(str(e)) from None
        return self.comp.add(Instruction(opcode, operands, shape or inferred, attrs, called,
                                         f"{self.node.name}.lowered"))

    def finish(self, instr: Instruction) -> Instruction:
        """Give the last lowered instruction the node's name and declared shape (layout)."""
        self.comp._names.discard(instr.name)
        instr.name = self.comp.unique_name(self.node.name)
        instr.shape = self.node.shape
        return instr


class HloImporter:
    def __init__(self, node: ModuleNode, cur: Cursor) -> None:
        self.node = node
        self.cur = cur
        self.by_name: dict[str, CompNode] = {}
        for c in node.computations:
            if c.name in self.by_name:
                raise cur.error(c.pos, f"computation {c.name} is defined twice")
            self.by_name[c.name] = c
        self.done: dict[str, Computation] = {}
        self.active: set[str] = set()
        self.unknown: set[str] = set()  # "opcode attribute" of attributes nobody knows
        self.module = Module(node.name)

    def run(self) -> Module:
        from xlapy.hlo_text.attrs import read_int

        entries = [c for c in self.node.computations if c.is_entry]
        if len(entries) > 1:
            raise self.cur.error(entries[1].pos, "a module has one ENTRY computation")
        if not self.node.computations:
            raise self.cur.error(len(self.cur.text), "the module has no computations")
        entry = entries[0] if entries else self.node.computations[-1]
        for c in self.node.computations:
            self.computation(c.name, c.pos)
        for key, field in (("replica_count", "num_replicas"), ("num_partitions",
                                                               "num_partitions")):
            if key in self.node.attrs:
                setattr(self.module, field, read_int(self.cur, self.node.attrs[key]))
        problem = process_count_problem(self.module.num_replicas, self.module.num_partitions)
        if problem:
            attr = self.node.attrs.get("replica_count") or self.node.attrs.get("num_partitions")
            raise self.cur.error(attr.pos if attr is not None else 0, problem)
        self.module.meta["hlo_attrs"] = {k: a.value for k, a in self.node.attrs.items()
                                         if k not in ("replica_count", "num_partitions",
                                                      "entry_computation_layout")}
        if self.unknown:
            self.module.meta["unknown_hlo_attrs"] = sorted(self.unknown)
        # Module order: callees first, as imported; the entry is marked.
        for c in self.node.computations:
            comp = self.done[c.name]
            self.module.add_computation(comp, entry=c is entry)
        return self.module

    def computation(self, name: str, pos: int) -> Computation:
        if name in self.done:
            return self.done[name]
        node = self.by_name.get(name)
        if node is None:
            raise self.cur.error(pos, f"no computation named {name}", len(name) + 1)
        if name in self.active:
            raise self.cur.error(pos, f"computation {name} calls itself")
        self.active.add(name)
        comp = self._import(node)
        self.active.discard(name)
        self.done[name] = comp
        return comp

    def _import(self, cnode: CompNode) -> Computation:
        from xlapy.hlo_text.opcodes import READERS

        comp = Computation(cnode.name)
        nodes: dict[str, InstrNode] = {}
        for n in cnode.instructions:
            if n.name in nodes:
                raise self.cur.error(n.pos, f"instruction {n.name} is defined twice in "
                                            f"{cnode.name}")
            nodes[n.name] = n
        values: dict[str, Instruction] = {}
        roots = [n for n in cnode.instructions if n.is_root]
        if len(roots) > 1:
            raise self.cur.error(roots[1].pos, f"computation {cnode.name} has two ROOTs")
        root_node = roots[0] if roots else cnode.instructions[-1]

        def build(n: InstrNode) -> Instruction:
            ops = [values[name] for name, _ in n.operands]
            ctx = InstrContext(self, comp, n, ops, [nodes[name].shape for name, _ in n.operands])
            reader = READERS.get(n.opcode)
            if reader is None:
                raise self.cur.error(n.opcode_pos, f"unknown or unsupported HLO opcode "
                                                   f"'{n.opcode}'", len(n.opcode))
            first = len(comp.instructions)
            try:
                out = reader(ctx)
            except (Unimplemented, ShapeInferenceError) as e:
                raise ctx.error(str(e)) from None
            if isinstance(out, Instruction):
                result = out
            else:
                opcode, operands, attrs, called = out
                result = self._checked(ctx, opcode, operands, attrs, called)
            stamp(comp.instructions[first:], metadata_location(
                n.attrs["metadata"].value if "metadata" in n.attrs else None,
                self.cur.span(n.pos)))
            extra = {k: a.value for k, a in n.attrs.items() if k not in ctx.used}
            self.unknown.update(f"{n.opcode} {k}" for k in extra if k not in PASSIVE_ATTRS)
            if extra and result.name == n.name:  # merged: a send-done joins its send
                result.meta["hlo_attrs"] = {**result.meta.get("hlo_attrs", {}), **extra}
            return result

        order = self._order(cnode, nodes)
        for n in order:
            values[n.name] = build(n)
        comp.root = values[root_node.name]
        fa = root_node.attrs.get("frontend_attributes")
        comp.multi_result = bool(fa and MULTI_RESULT_MARK in fa.value
                                 and comp.root.shape.is_tuple)
        if cnode.param_shapes is not None:
            got = [p.shape for p in comp.parameters]
            if got != cnode.param_shapes:
                raise self.cur.error(cnode.pos, f"computation {cnode.name}: signature says "
                                                f"parameters {_shapes(cnode.param_shapes)}, its "
                                                f"parameter instructions are {_shapes(got)}")
        numbers = sorted(p.parameter_number for p in comp.parameters)
        if numbers != list(range(len(numbers))):
            raise self.cur.error(cnode.pos, f"computation {cnode.name}: parameter numbers "
                                            f"{numbers} are not 0..{len(numbers) - 1}")
        return comp

    def _order(self, cnode: CompNode, nodes: dict[str, InstrNode]) -> list[InstrNode]:
        """Operands before users (text order where it already is); undefined names and
        cycles are errors."""
        state: dict[str, int] = {}
        out: list[InstrNode] = []
        for start in cnode.instructions:
            if state.get(start.name):
                continue
            stack: list[tuple[InstrNode, int]] = [(start, 0)]
            state[start.name] = 1
            while stack:
                n, i = stack.pop()
                if i < len(n.operands):
                    stack.append((n, i + 1))
                    name, pos = n.operands[i]
                    dep = nodes.get(name)
                    if dep is None:
                        raise self.cur.error(pos, f"use of undefined value {name} in "
                                                  f"{cnode.name}", len(name) + 1)
                    if state.get(name) == 1:
                        raise self.cur.error(pos, f"{name} depends on itself")
                    if not state.get(name):
                        state[name] = 1
                        stack.append((dep, 0))
                else:
                    state[n.name] = 2
                    out.append(n)
        return out

    def _checked(self, ctx: InstrContext, opcode: str, operands: list[Instruction], attrs: Any,
                 called: list[Computation]) -> Instruction:
        n = ctx.node
        try:
            inferred = infer_shape(opcode, [o.shape for o in operands], attrs, called)
        except ShapeInferenceError as e:
            raise ctx.error(str(e)) from None
        if inferred != n.shape:
            raise self.cur.error(n.pos, f"%{n.name} is declared {n.shape} but {n.opcode} of "
                                        f"{_shapes([o.shape for o in operands]) or 'nothing'} "
                                        f"gives {inferred}", len(n.name) + 1)
        return ctx.comp.add(Instruction(opcode, operands, n.shape, attrs, called, n.name))


def _shapes(shapes: list[Shape]) -> str:
    return "(" + ", ".join(str(s) for s in shapes) + ")"
