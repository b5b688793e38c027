"""uniform_quantize / uniform_dequantize as integer and float HLO (StableHLO's
quant-to-int legalization), so backends compile plain ops.

xlapy holds a quantized tensor as its storage tensor (i8, ...) and the quantization
parameters on the ops that convert to and from it (xlapy.ops.quantization); the importer
already runs every other op on quantized values as dequantize -> op -> quantize. These two
ops become, per tensor or per axis (the scales and zero points a constant vector broadcast
along the quantization dimension), in the order the interpreter computes them:

* dequantize(q) = convert<E>(convert<s64>(q) - zero_point) * scale;
* quantize(x) = convert<S>(clamp(min, round_nearest_even(x / scale) + zero_point, max)),
  the rounding, addition and clamp in the expressed type E (exact: integer values);
* requantize (storage -> storage) = quantize(dequantize(q)).

Integer results are bit-exact to the interpreter except where its numpy cast is undefined:
a NaN (convert gives 0) and a storage bound that E cannot hold (i32:f32: 2^31 - 1 rounds to
2^31, which convert saturates back to 2^31 - 1, as XLA's convert does; numpy gives -2^31).
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.ops.quantization import QuantParams
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass
from xlapy.types import ElementType, Shape

OPS = frozenset({"uniform_quantize", "uniform_dequantize"})


def _per_element(e: Emitter, values: tuple[float, ...] | tuple[int, ...], et: ElementType,
                 like: Shape, p: QuantParams) -> Instruction:
    """The scales or zero points as a tensor of `like`'s dimensions and type `et`."""
    if p.quantization_dimension < 0:
        return e.splat(values[0], Shape.array(et, like.dimensions))
    vec = e.const(list(values), et)
    return e.broadcast_in_dim(vec, shape=like.dimensions,
                              broadcast_dimensions=(p.quantization_dimension,))


def dequantize(e: Emitter, q: Instruction, p: QuantParams) -> Instruction:
    et = p.expressed_type
    wide = e.convert(q, new_element_type=ElementType.S64)
    shifted = e.subtract(wide, _per_element(e, p.zero_points, ElementType.S64, q.shape, p))
    return e.multiply(e.convert(shifted, new_element_type=et),
                      _per_element(e, p.scales, et, q.shape, p))


def quantize(e: Emitter, x: Instruction, p: QuantParams) -> Instruction:
    et = p.expressed_type
    r = e.round_nearest_even(e.divide(x, _per_element(e, p.scales, et, x.shape, p)))
    v = e.add(r, _per_element(e, p.zero_points, et, x.shape, p))
    lo, hi = (e.splat(float(b), Shape.array(et, x.shape.dimensions))
              for b in (p.storage_min, p.storage_max))
    return e.convert(e.clamp(lo, v, hi), new_element_type=p.storage_type)


def lower_quant(comp: Computation, instr: Instruction) -> Instruction:
    """The plain-HLO form of a uniform_quantize / uniform_dequantize (added to `comp`)."""
    e = Emitter(comp)
    (x,) = instr.operands
    if instr.opcode == "uniform_dequantize":
        return dequantize(e, x, instr.attrs.operand)
    if instr.attrs.operand is not None:
        x = dequantize(e, x, instr.attrs.operand)
    return quantize(e, x, instr.attrs.result)


class QuantToInt(ComputationPass):
    """uniform_quantize / uniform_dequantize => convert, arithmetic, round and clamp."""

    name = "quant-to-int"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in [i for i in comp.instructions if i.opcode in OPS]:
            comp.replace_instruction(instr, lower_quant(comp, instr))
            changed = True
        return changed


__all__ = ["OPS", "QuantToInt", "lower_quant"]
