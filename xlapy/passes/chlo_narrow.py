"""chlo element-wise ops on f8 values computed in f32 and rounded back (chlo_lowering's
first rule): the interpreter evaluates them so (ops/elementwise.to_compute / from_compute:
f8 -> f32 exactly, the row in f32, one rounding back), so the rewrite changes no value as
long as the f32 op's lowering matches the interpreter's f32 result (tested on every f8
value: tests/unit/backends/cpu/test_chlo_f8.py). The f32 op is then lowered as any f32 one
(chlo_lowering, or chlo_special among the native forms)."""

from __future__ import annotations

from collections.abc import Callable

from xlapy.ir import Instruction
from xlapy.ops.base import OPS
from xlapy.ops.elementwise import ElementwiseOp
from xlapy.passes.hlo_builder import Emitter
from xlapy.types import ElementType


def in_f32(i: Instruction) -> bool:
    """An f8 value-level element-wise chlo op: not the bit-level (`raw`) rows next_after,
    is_inf, conj; not f8e8m0fnu, whose converts are not native yet."""
    spec = OPS.get(i.opcode)
    et = i.operands[0].shape.element_type if i.operands else None
    return (i.opcode.startswith("chlo.") and isinstance(spec, ElementwiseOp) and not spec.raw
            and et is not None and et.is_float and et.bits == 8
            and et is not ElementType.F8E8M0FNU)


def widen(g: Emitter, i: Instruction,
          lower: Callable[[Instruction], Instruction | None]) -> Instruction:
    """convert(op(convert(operands, f32)), f8); `lower` rewrites the f32 op where it can
    (None: it stays a chlo op for a later pass)."""
    et = i.operands[0].shape.element_type
    inner = g.op(i.opcode, *(g.convert(o, new_element_type=ElementType.F32)
                             for o in i.operands))
    new = lower(inner)
    if new is not None:
        g.comp.remove(inner)
        inner = new
    return g.convert(inner, new_element_type=et)
