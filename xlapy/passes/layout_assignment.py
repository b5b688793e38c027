"""Layout assignment: every array gets a layout; row-major unless the entry says otherwise.

Entry parameters and the entry result keep the layouts they were given (the program's
interface); everything else is row-major ({rank-1,...,0}), which is also what dot_general and
convolution require of their operands. A dot/convolution operand that arrives in another
layout is recorded in `module.meta["layout_copies"]` (a backend inserts a relayout copy).
"""

from __future__ import annotations

from xlapy.ir import Module
from xlapy.passes.pass_base import Pass
from xlapy.types import Layout, Shape


def with_default_layout(shape: Shape) -> Shape:
    if shape.is_tuple:
        return Shape.tuple([with_default_layout(s) for s in shape.tuple_shapes])
    if not shape.is_array or shape.layout is not None:
        return shape
    return shape.with_layout(Layout.row_major(shape.rank))


class LayoutAssignment(Pass):
    name = "layout-assignment"

    def run(self, module: Module) -> bool:
        changed = False
        copies: list[str] = []
        for comp in module.computations:
            for instr in comp.instructions:
                new = with_default_layout(instr.shape)
                if not new.equal_with_layout(instr.shape) or (
                        new.is_array and instr.shape.layout is None):
                    instr.shape = new
                    changed = True
                if instr.opcode in ("dot_general", "convolution"):
                    for o in instr.operands:
                        lay = o.shape.layout
                        if lay is not None and lay != Layout.row_major(o.shape.rank):
                            copies.append(f"{o.name} -> {instr.name}")
        module.meta["layout_copies"] = copies
        return changed
