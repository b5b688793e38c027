"""chlo ops that decompose at import: the broadcasting binary ops and `chlo.constant_like`.

`chlo.broadcast_<op>(%a, %b) {broadcast_dimensions = ...}` broadcasts its operands numpy-style
(the lower-rank operand's dimensions map to `broadcast_dimensions`, or to the trailing result
dimensions when absent; size-1 dimensions expand) and applies `<op>` (CHLO dialect reference,
§broadcasting binary ops). The importer emits explicit `broadcast_in_dim` ops and the plain op.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.ir import Instruction
from xlapy.ops.base import OPS
from xlapy.ops.core import ConstantAttrs
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.stablehlo.nodes import DenseArray, OpNode, TypedNumber
from xlapy.types import Literal, Shape

if TYPE_CHECKING:
    from xlapy.stablehlo.importer import Importer, Scope


def target_op(name: str) -> str:
    """`chlo.broadcast_add` -> `add`; chlo-only ops (`next_after`) keep their chlo name."""
    short = name[len("chlo.broadcast_"):]
    return short if short in OPS else f"chlo.{short}"


def _broadcast(imp: Importer, scope: Scope, x: Instruction, dims: tuple[int, ...],
               mapping: tuple[int, ...], pos: int) -> Instruction:
    if x.shape.dimensions == dims and mapping == tuple(range(len(dims))):
        return x
    shape = Shape.array(x.shape.element_type, dims)
    for i, d in enumerate(mapping):
        if not 0 <= d < len(dims) or x.shape.dimensions[i] not in (1, dims[d]):
            raise imp.error(pos, f"cannot broadcast {x.shape.to_shlo()} to {list(dims)} with "
                                 f"broadcast_dimensions {list(mapping)}")
    return scope.comp.add(Instruction("broadcast_in_dim", [x], shape,
                                      BroadcastInDimAttrs(dims, mapping)))


def import_broadcast(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    operands = [scope.lookup(r) for r in node.operands]
    imp.check_operand_types(node, operands)
    opcode = target_op(node.name)
    if opcode not in OPS:
        raise imp.error(node.pos, f"unknown op '{node.name}'")
    for o in operands:
        if not o.shape.is_array:
            raise imp.error(node.pos, f"{node.name}: operand {o.shape} is not a tensor")
    rank = max(o.shape.rank for o in operands)
    bd = node.attrs.get("broadcast_dimensions")
    explicit = tuple(int(v) for v in bd.values) if isinstance(bd, DenseArray) else None
    maps: list[tuple[int, ...]] = []
    for o in operands:
        r = o.shape.rank
        if explicit is not None and r < rank:
            if len(explicit) != r:
                raise imp.error(node.pos, f"{node.name}: broadcast_dimensions {list(explicit)} "
                                          f"do not fit the rank-{r} operand")
            maps.append(explicit)
        else:
            maps.append(tuple(range(rank - r, rank)))
    dims = [1] * rank
    for o, m in zip(operands, maps):
        for size, d in zip(o.shape.dimensions, m):
            if 0 <= d < rank and size != 1:
                if dims[d] not in (1, size):
                    raise imp.error(node.pos, f"{node.name}: operands "
                                              f"{', '.join(x.shape.to_shlo() for x in operands)}"
                                              " are not broadcast-compatible")
                dims[d] = size
    result = tuple(dims)
    args = [_broadcast(imp, scope, o, result, m, node.pos) for o, m in zip(operands, maps)]
    attrs = {k: v for k, v in node.attrs.items() if k != "broadcast_dimensions"}
    plain = OpNode(opcode, node.results, node.operands, attrs, [], None, node.result_types,
                   node.pos)
    return imp.emit(plain, opcode, args, [])


def import_constant_like(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    """`chlo.constant_like {value = v} %x`: `v` broadcast to the shape of `%x`."""
    operands = [scope.lookup(r) for r in node.operands]
    if len(operands) != 1 or not operands[0].shape.is_array:
        raise imp.error(node.pos, "chlo.constant_like takes one tensor operand")
    shape = operands[0].shape
    value: Any = node.attrs.get("value")
    if isinstance(value, TypedNumber):
        value = value.value
    if not isinstance(value, (int, float, bool)):
        raise imp.error(node.pos, "chlo.constant_like needs a scalar value attribute")
    scalar = Shape.scalar(shape.element_type)
    lit = Literal(scalar, np.array(value).astype(shape.element_type.dtype))
    c = scope.comp.add(Instruction("constant", [], scalar, ConstantAttrs(lit)))
    out = scope.comp.add(Instruction("broadcast_in_dim", [c], shape,
                                     BroadcastInDimAttrs(shape.dimensions, ())))
    return [out]
