"""chlo.scan as a `while` loop (chlo-legalize-to-stablehlo's decomposition).

The loop state is (position counter, inputs..., carries..., stacked outputs...). Each
iteration takes the input slices at the current position (dynamic_slice + reshape; from the
end when `is_reverse`), pastes the scan body on (slices, carries), writes the body's outputs
into the stacked results at that position (dynamic_update_slice) and passes its new carries
on. The outputs start as zeros (every position is written before the loop ends). A backend
that runs while loops natively then runs scans natively.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.inliner import inline_body
from xlapy.passes.pass_base import Pass, constant_like, sort_instructions
from xlapy.types import ElementType, Shape

S32 = ElementType.S32


def _at(e: Emitter, x: Instruction, d: int, pos: Instruction) -> list[Instruction]:
    """Start indices selecting position `pos` of dimension `d` of x (0 elsewhere)."""
    zero = e.const(0, S32)
    return [pos if k == d else zero for k in range(x.shape.rank)]


def _with_unit(shape: Shape, d: int) -> tuple[int, ...]:
    return shape.dimensions[:d] + (1,) + shape.dimensions[d:]


def _body(scan: Instruction, state: list[Shape], n: int, k: int) -> Computation:
    """(i, inputs, carries, outs) -> (i + 1, inputs, body carries, outs with row i set)."""
    d, length = scan.attrs.dimension, scan.operands[0].shape.dimensions[scan.attrs.dimension]
    e = Emitter(Computation(f"{scan.name}_body"))
    ps = [e.param(s) for s in state]
    i, inputs, rest = ps[0], ps[1:1 + n], ps[1 + n:]
    carries, outs = rest[:len(rest) - k], rest[len(rest) - k:]
    pos = e.subtract(e.const(length - 1, S32), i) if scan.attrs.is_reverse else i
    slices = []
    for x in inputs:
        dims = x.shape.dimensions[:d] + x.shape.dimensions[d + 1:]
        s = e.dynamic_slice(x, *_at(e, x, d, pos), slice_sizes=_with_unit(Shape.array(
            x.shape.element_type, dims), d))
        slices.append(e.reshape(s, shape=dims))
    region = scan.called[0]
    root = inline_body(e.comp, region, slices + carries)
    results = list(root.operands) if region.multi_result else [root]
    new_outs = [e.dynamic_update_slice(o, e.reshape(r, shape=_with_unit(r.shape, d)),
                                       *_at(e, o, d, pos))
                for o, r in zip(outs, results[:k])]
    nxt = e.add(i, e.const(1, S32))
    e.comp.root = e.tuple(nxt, *inputs, *results[k:], *new_outs)
    e.comp.multi_result = True
    sort_instructions(e.comp)
    return e.comp


def _cond(scan: Instruction, state: list[Shape]) -> Computation:
    length = scan.operands[0].shape.dimensions[scan.attrs.dimension]
    e = Emitter(Computation(f"{scan.name}_cond"))
    ps = [e.param(s) for s in state]
    e.comp.root = e.cmp(ps[0], e.const(length, S32), "LT")
    return e.comp


def lower_scan(module: Module, comp: Computation, scan: Instruction) -> Instruction:
    """The while loop computing `scan` (added to `comp`); returns its replacement value."""
    n = scan.attrs.num_inputs
    inputs, inits = scan.operands[:n], scan.operands[n:]
    shapes = list(scan.shape.tuple_shapes) if scan.shape.is_tuple else [scan.shape]
    k = len(shapes) - len(inits)
    e = Emitter(comp)
    outs = [constant_like(comp, 0, s) for s in shapes[:k]]
    init = [e.const(0, S32), *inputs, *inits, *outs]
    state = [x.shape for x in init]
    cond, body = _cond(scan, state), _body(scan, state, n, k)
    module.add_computation(cond)
    module.add_computation(body)
    loop = e.op("while", *init, called=[cond, body], name=f"{scan.name}_loop")
    parts = [e.get_tuple_element(loop, index=j) for j in range(len(state))]
    first = 1 + n + len(inits)
    values = parts[first:] + parts[1 + n:first]
    return e.tuple(*values) if scan.shape.is_tuple else values[0]


class ScanLowering(Pass):
    """chlo.scan => while (position counter, inputs, carries, stacked outputs)."""

    name = "scan-lowering"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.post_order()):
            scans = [i for i in comp.instructions if i.opcode == "chlo.scan"]
            for scan in scans:
                comp.replace_instruction(scan, lower_scan(module, comp, scan))
            if scans:
                sort_instructions(comp)
                changed = True
        return changed


__all__ = ["ScanLowering", "lower_scan"]
