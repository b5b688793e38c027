"""Layout assignment: every array gets a layout; row-major unless the program says otherwise,
and a `copy` wherever a producer's layout conflicts with what its consumer needs.

* Instructions that already carry a layout keep it (entry parameters, a requested entry
  result layout, layouts from HLO text); every other array becomes row-major
  ({rank-1,...,0}).
* dot_general and convolution read row-major operands and write row-major results (the
  backend's BLAS / conv kernels): an operand in another layout is read through a
  `copy` to row-major; a dot/conv that was given another result layout computes row-major
  and a `copy` produces the requested layout for its users.
* Element-wise ops read every array operand in the result's layout: a conflicting operand is
  read through a `copy` to that layout (XLA makes element-wise operands match the output).
The copies are listed in `module.meta["layout_copies"]` ("producer -> consumer").
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.base import OPS
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import Layout, Shape

_ROW_MAJOR_OPS = ("dot_general", "convolution")


def with_default_layout(shape: Shape) -> Shape:
    if shape.is_tuple:
        return Shape.tuple([with_default_layout(s) for s in shape.tuple_shapes])
    if not shape.is_array or shape.layout is not None:
        return shape
    return shape.with_layout(Layout.row_major(shape.rank))


def _row_major(shape: Shape) -> bool:
    return shape.layout is None or shape.layout == Layout.row_major(shape.rank)


def _copy(comp: Computation, x: Instruction, shape: Shape) -> Instruction:
    c = comp.add(Instruction("copy", [x], shape, name="copy"))
    return c


class LayoutAssignment(Pass):
    name = "layout-assignment"

    def run(self, module: Module) -> bool:
        changed = False
        copies: list[str] = []
        for comp in module.computations:
            for instr in list(comp.instructions):
                new = with_default_layout(instr.shape)
                if not new.equal_with_layout(instr.shape) or (
                        new.is_array and instr.shape.layout is None):
                    instr.shape = new
                    changed = True
            touched = False
            for instr in list(comp.instructions):
                if instr.opcode in _ROW_MAJOR_OPS:
                    touched |= self._row_major_op(comp, instr, copies)
                elif getattr(OPS.get(instr.opcode), "family", "") == "elementwise":
                    touched |= self._elementwise(comp, instr, copies)
            if touched:
                sort_instructions(comp)
                changed = True
        module.meta["layout_copies"] = copies
        return changed

    def _row_major_op(self, comp: Computation, instr: Instruction, copies: list[str]) -> bool:
        touched = False
        for o in list(instr.operands):
            if o.shape.is_array and not _row_major(o.shape):
                c = _copy(comp, o, o.shape.with_layout(Layout.row_major(o.shape.rank)))
                instr.replace_operand_with(o, c)
                copies.append(f"{o.name} -> {instr.name}")
                touched = True
        if not _row_major(instr.shape):
            wanted = instr.shape
            instr.shape = wanted.with_layout(Layout.row_major(wanted.rank))
            users = list(instr.users)
            c = _copy(comp, instr, wanted)
            for u in users:
                u.replace_operand_with(instr, c)
            if comp.root is instr:
                comp.root = c
            copies.append(f"{instr.name} -> {c.name} (result layout {wanted.layout})")
            touched = True
        return touched

    def _elementwise(self, comp: Computation, instr: Instruction, copies: list[str]) -> bool:
        if not instr.shape.is_array or instr.shape.layout is None:
            return False
        lay = instr.shape.layout
        touched = False
        for o in list(instr.operands):
            s = o.shape
            if not s.is_array or s.rank != instr.shape.rank or s.rank < 2:
                continue
            if s.layout is not None and s.layout.minor_to_major != lay.minor_to_major:
                c = _copy(comp, o, s.with_layout(Layout(lay.minor_to_major)))
                instr.replace_operand_with(o, c)
                copies.append(f"{o.name} -> {instr.name}")
                touched = True
        return touched
