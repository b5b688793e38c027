"""A bf16 value summed along rows in f32 is read by its other users through that f32 copy, so
the row kernel computes it once.

JAX's bf16 softmax is `e = exp(x - max)` (bf16), `s = reduce_add(convert_f32(e))`, then
`e / s`: the row kernel keeps a row reduction's operand in a stack row when something else
reads it too (reduce_emit's row cache), but here the operand is the convert, read only by the
sum, while the divide reads `e` - so the exp chain ran twice per element, once per loop
(attention_bf16's softmax kernel: ~40% of it). Rewriting the other users of `e` to read
`convert_bf16(convert_f32(e))` makes the convert the shared value: it is kept in the row
cache and the divide rounds it back to bf16, a no-op on its value (bf16 -> f32 is exact, and
rounding an exact bf16 returns it). Only a signaling NaN would change (quieted), so only
users that compute with the value (which quiet NaNs anyway) are rewritten.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.passes.pass_base import ComputationPass
from xlapy.types import ElementType as ET

#: Narrow types whose f32 widening is exact and whose rounding back is the identity.
NARROW = frozenset({ET.BF16, ET.F16})
#: Users that compute with the value (a NaN operand gives a quiet NaN either way).
ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum"})


def _row_sum_of(x: Instruction) -> bool:
    """x feeds a reduce over its last dimension (a row reduction the kernel may keep)."""
    last = x.shape.rank - 1
    return x.shape.rank >= 1 and any(
        u.opcode == "reduce" and u.operands[0] is x and
        tuple(u.attrs.dimensions) == (last,) for u in x.users)


def shared_widening(x: Instruction) -> list[Instruction] | None:
    """For x = convert_f32(e) (e bf16/f16) summed along rows: the other users of e to
    rewrite (every one arithmetic, at least one), else None."""
    if x.opcode != "convert" or x.shape.element_type != ET.F32 or not _row_sum_of(x):
        return None
    e = x.operands[0]
    if e.shape.element_type not in NARROW or e.opcode in ("parameter", "constant"):
        return None
    others = [u for u in e.users if u is not x]
    if not others or any(u.opcode not in ARITHMETIC for u in others):
        return None
    return others


class ShareWidenedRows(ComputationPass):
    """Other users of a narrow value summed in f32 along rows read it back from the f32 copy
    (module docstring)."""

    name = "share-widened-rows"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for x in list(comp.instructions):
            others = shared_widening(x)
            if others is None:
                continue
            e = x.operands[0]
            back = comp.add(Instruction("convert", [x], e.shape,
                                        ConvertAttrs(e.shape.element_type), (),
                                        f"{e.name}.back"))
            back.meta.update(e.meta)
            for u in others:
                u.replace_operand_with(e, back)
            changed = True
        return changed


__all__ = ["ShareWidenedRows", "shared_widening"]
