"""Quantized types (`tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>`) at import.

A quantized tensor becomes its storage tensor plus `QuantParams` (xlapy.ops.quantization).
`uniform_quantize` / `uniform_dequantize` map onto the ops of that name; `bitcast_convert`
between a quantized type and its storage type is the identity; any other op with quantized
operands or results runs as the spec's `dequantize_op_quantize` (dequantize the operands, run
the op in the expressed type, quantize the results).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.errors import ParseError, ShapeInferenceError, Unimplemented, XlapyError
from xlapy.ir import Instruction
from xlapy.ops.base import infer_shape
from xlapy.ops.quantization import QuantParams, UniformDequantizeAttrs, UniformQuantizeAttrs
from xlapy.ops.quantization_rules import check_quantized_op, check_same_baseline
from xlapy.stablehlo.nodes import OpaqueType, OpNode
from xlapy.types import Shape, from_shlo_name

if TYPE_CHECKING:
    from xlapy.stablehlo.importer import Importer, Scope

_TYPE = re.compile(r"^tensor<((?:\d+x)*)!quant\.uniform<(.*)>>$", re.S)
# Possessive blanks (`\s*+`) and no lazy `.*?` before `\s*$`: linear on long runs of blanks.
_HEAD = re.compile(r"^\s*+(u?i?\d+)(?:<\s*+(-?\d+)\s*+:\s*+(-?\d+)\s*+>)?\s*+:\s*+(\w+)"
                   r"(?:\s*+:\s*+(\d+))?\s*+,(.*)$", re.S)
_PAIR = re.compile(r"^\s*+([-+0-9.eE]+|0x[0-9A-Fa-f]+)\s*+(?::\s*+(-?\d+))?\s*+$")


def quant_type(t: Any) -> tuple[Shape, QuantParams] | None:
    """(storage shape, parameters) of a quantized tensor type, None for any other type."""
    if not isinstance(t, OpaqueType):
        return None
    m = _TYPE.match(t.text)
    if m is None:
        return None
    dims = [int(d) for d in m.group(1).split("x")[:-1]]
    h = _HEAD.match(m.group(2))
    if h is None:
        raise Unimplemented(f"quantized type not supported: {t}")
    name = h.group(1)
    # MLIR's quant syntax spells unsigned storage `u8`; xlapy's type names say `ui8`.
    storage = from_shlo_name("ui" + name[1:] if name.startswith("u") and name[1:].isdigit()
                             else name)
    expressed = from_shlo_name(h.group(4))
    body = h.group(6).strip()
    items = body[1:-1].split(",") if body.startswith("{") else [body]
    scales: list[float] = []
    zps: list[int] = []
    for item in items:
        p = _PAIR.match(item)
        if p is None:
            raise Unimplemented(f"quantized type not supported: {t}")
        scales.append(_scale(p.group(1), t))
        zps.append(_int(p.group(2) or "0", "zero point", t))
    info = np.iinfo(storage.dtype) if storage.bits >= 8 else None
    lo = _int(h.group(2), "storage minimum", t) if h.group(2) else (
        info.min if info else -(1 << (storage.bits - 1)) * storage.is_signed)
    hi = _int(h.group(3), "storage maximum", t) if h.group(3) else (
        info.max if info else (1 << (storage.bits - storage.is_signed)) - 1)
    axis = _int(h.group(5), "quantization axis", t) if h.group(5) is not None else -1
    params = QuantParams(storage, expressed, tuple(scales), tuple(zps), lo, hi, axis)
    return Shape.array(storage, dims), params


class QuantTypeError(XlapyError):
    """A malformed `!quant.uniform` type; the importer re-raises it as a ParseError at the op."""


def _scale(text: str, t: Any) -> float:
    """A scale: a decimal float, or `0x...` the bits of an f64 (16 hex digits at most)."""
    try:
        if text.lower().startswith("0x"):
            if len(text) > 18:
                raise ValueError
            return float(np.array(int(text, 16), np.uint64).view(np.float64))
        return float(text)
    except (ValueError, OverflowError):
        raise QuantTypeError(f"bad scale '{text[:24]}' in {str(t)[:80]}") from None


def _int(text: str, what: str, t: Any) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 1 << 64
    if not -(1 << 63) <= value < (1 << 63):
        raise QuantTypeError(f"{what} {text[:24]} does not fit in 64 bits in {str(t)[:80]}")
    return value


def storage_type(t: Any) -> Any:
    """The storage shape for a quantized type, the type itself otherwise."""
    q = quant_type(t)
    return q[0] if q is not None else t


def involves_quant(node: OpNode) -> bool:
    for types in (node.operand_types, node.result_types):  # (per op: no lists built)
        if types:
            for t in types:
                if isinstance(t, OpaqueType) and "!quant." in t.text:
                    return True
    return False


def _types(node: OpNode, n_operands: int) -> tuple[list[Any], list[Any]]:
    """Operand and result types of a generic or pretty (`: t` for all) op."""
    rt = list(node.result_types or [])
    ot = list(node.operand_types) if node.operand_types is not None else None
    if ot is None:
        if len(rt) == 1:
            ot = rt * n_operands
        else:
            ot, rt = rt[:len(rt) - node.num_results], rt[len(rt) - node.num_results:]
    return ot, rt


def import_quantized(imp: Importer, node: OpNode, scope: Scope, opcode: str
                     ) -> list[Instruction]:
    operands = [scope.lookup(r) for r in node.operands]
    if node.regions:
        raise Unimplemented(f"quantized {node.name} with regions is not supported")
    otypes, rtypes = _types(node, len(operands))
    oq = [quant_type(t) for t in otypes] + [None] * (len(operands) - len(otypes))
    rq = [quant_type(t) for t in rtypes]
    for i, (o, q) in enumerate(zip(operands, oq)):
        if q is not None and o.shape != q[0]:
            raise ParseError(imp.lex.span(node.operands[i].pos),
                             f"{node.name}: operand {i} has type {o.shape.to_shlo()} but the "
                             f"op's type says {otypes[i]}")
    comp = scope.comp

    def add(op: str, x: Instruction, attrs: Any) -> Instruction:
        shape = infer_shape(op, [x.shape], attrs)
        return comp.add(Instruction(op, [x], shape, attrs))

    def declared(result: Instruction, label: str) -> list[Instruction]:
        """The op's own declared result type (storage shape for a quantized one)."""
        want = rq[0][0] if rq and rq[0] is not None else (rtypes[0] if rtypes else None)
        if isinstance(want, Shape) and want != result.shape:
            t = rtypes[0].to_shlo() if isinstance(rtypes[0], Shape) else rtypes[0]
            raise ShapeInferenceError(label, f"result is declared {t} but the op gives "
                                             f"{result.shape.to_shlo()}")
        return [result]

    if opcode == "uniform_quantize":
        if len(operands) != 1 or len(rq) != 1 or rq[0] is None:
            raise Unimplemented("uniform_quantize needs one operand and a quantized result")
        q_in = oq[0][1] if oq[0] is not None else None
        return declared(add("uniform_quantize", operands[0],
                            UniformQuantizeAttrs(rq[0][1], q_in)), "uniform_quantize_c1")
    if opcode == "uniform_dequantize":
        if len(operands) != 1 or oq[0] is None:
            raise Unimplemented("uniform_dequantize needs one quantized operand")
        return declared(add("uniform_dequantize", operands[0],
                            UniformDequantizeAttrs(oq[0][1])), "uniform_dequantize_c2")
    if opcode == "bitcast_convert" and len(operands) == 1 and len(rtypes) == 1:
        target = storage_type(rtypes[0])
        if isinstance(target, Shape) and target == operands[0].shape:
            return [operands[0]]
    check_same_baseline(opcode, [o.shape for o in operands] + [storage_type(t) for t in rtypes],
                        [q[1] if q else None for q in oq] + [q[1] if q else None for q in rq])
    args = [add("uniform_dequantize", o, UniformDequantizeAttrs(q[1])) if q is not None else o
            for o, q in zip(operands, oq)]
    plain_types = [Shape.array(q[1].expressed_type, q[0].dimensions) if q is not None else t
                   for t, q in zip(rtypes, rq)]
    plain = OpNode(node.name, node.results, node.operands, node.attrs, [],
                   [a.shape for a in args], plain_types, node.pos)
    results = imp.emit(plain, opcode, args, [])
    if len(results) == 1 and results[0].opcode == opcode:
        check_quantized_op(opcode, results[0].attrs, [a.shape for a in args],
                           [q[1] if q is not None else None for q in oq],
                           [q[1] if q is not None else None for q in rq],
                           [r.shape for r in results])
    return [add("uniform_quantize", r, UniformQuantizeAttrs(q[1])) if q is not None else r
            for r, q in zip(results, rq)]
