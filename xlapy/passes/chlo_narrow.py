"""chlo element-wise ops on f8 / f6 / f4 values computed in f32 and rounded back (chlo_lowering's
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

#: Infinity tests: on f4/f6 (no inf) they test the exact f32 value, since the +-inf
#: constant their lowering compares with would saturate to the largest value.
_INF_TESTS = frozenset({"chlo.is_inf", "chlo.is_pos_inf", "chlo.is_neg_inf"})


def in_f32(i: Instruction) -> bool:
    """An f8 / f6 / f4 value-level element-wise chlo op (not the bit-level `raw` rows
    next_after, conj; is_inf and co. on f4/f6 only), not f8e8m0fnu (no native converts)."""
    spec = OPS.get(i.opcode)
    et = i.operands[0].shape.element_type if i.operands else None
    if not (i.opcode.startswith("chlo.") and isinstance(spec, ElementwiseOp) and et is not None
            and et.is_float and et.bits <= 8 and et is not ElementType.F8E8M0FNU):
        return False
    return not spec.raw or (i.opcode in _INF_TESTS and et.bits < 8)


def widen(g: Emitter, i: Instruction,
          lower: Callable[[Instruction], Instruction | None]) -> Instruction:
    """convert(op(convert(operands, f32)), f8) (pred results as they are); `lower` rewrites
    the f32 op where it can (None: it stays a chlo op for a later pass)."""
    et = i.operands[0].shape.element_type
    inner = g.op(i.opcode, *(g.convert(o, new_element_type=ElementType.F32)
                             for o in i.operands))
    new = lower(inner)
    if new is not None:
        g.comp.remove(inner)
        inner = new
    if not inner.shape.element_type.is_float:
        return inner
    return g.convert(inner, new_element_type=et)
