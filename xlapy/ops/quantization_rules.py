"""The spec's quantized-tensor constraints of dot_general and convolution.

xlapy runs a quantized op as dequantize, the float op, quantize (xlapy.stablehlo.quant), so
the float op's own `infer` never sees the quantization parameters. The StableHLO importer
calls `check_quantized_op` with each operand's and result's `QuantParams` (None for a plain
tensor) once the float op is built, so a program the spec rejects (a per-axis kernel quantized
along an input dimension, mixed expressed types, a non-zero kernel zero point) is an error,
not a silently dequantized run. Labels follow the StableHLO spec's quantized sections
(dot_general C14-C20, convolution C28-C34).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy.ops.base import check
from xlapy.ops.quantization import QuantParams
from xlapy.types import ElementType, Shape


def check_quantized_op(opcode: str, attrs: Any, operands: Sequence[Shape],
                       operand_params: Sequence[QuantParams | None],
                       result_params: Sequence[QuantParams | None],
                       results: Sequence[Shape]) -> None:
    """Raise ShapeInferenceError when `opcode`'s quantized operands/results break a rule.

    `operands` / `results` are the plain (expressed-type) shapes the float op saw.
    """
    if not any(list(operand_params)[:2]):
        return  # only the result is quantized: a float op whose result is quantized after
    if opcode == "dot_general":
        _check_dot_general(attrs, operands, operand_params, result_params, results)
    elif opcode == "convolution":
        _check_convolution(attrs, operands, operand_params, result_params, results)


#: Ops whose quantized form keeps one baseline type: every value operand and result is quantized
#: with the same storage type, storage range and expressed type (scales and zero points may
#: differ). The label is the op's "same element type" constraint (xlapy.ops.result_types).
SAME_BASELINE = frozenset({
    "abs", "add", "atan2", "cbrt", "ceil", "clamp", "concatenate", "cosine", "divide",
    "dynamic_slice", "dynamic_update_slice", "exponential", "exponential_minus_one", "floor",
    "log", "log_plus_one", "logistic", "maximum", "minimum", "multiply", "negate", "pad",
    "power", "remainder", "reshape", "reverse", "round_nearest_afz", "round_nearest_even",
    "rsqrt", "select", "sign", "sine", "slice", "sqrt", "subtract", "tan", "tanh", "transpose",
    "broadcast_in_dim"})


def check_same_baseline(opcode: str, types: Sequence[Any],
                        params: Sequence[QuantParams | None]) -> None:
    """For a SAME_BASELINE op: the floating-point operands and results (`types`: their plain
    shapes, None for non-tensors; `params`: their quantization) are all quantized alike.
    Integer and boolean operands (indices, a select predicate) are not part of the rule."""
    from xlapy.ops.result_types import LABELS

    if opcode not in SAME_BASELINE:
        return
    label = f"{opcode}_{LABELS.get(opcode, ('c1', 'c1'))[0]}"
    values = [(t, p) for t, p in zip(types, params)
              if p is not None or (isinstance(t, Shape) and t.is_array
                                   and t.element_type.is_float)]
    quantized = [p for _, p in values if p is not None]
    if not quantized:
        return
    check(len(quantized) == len(values), label,
          f"quantized {opcode} takes and gives quantized tensors only; got "
          f"{', '.join(str(t) if p is None else 'quantized' for t, p in values)}")
    first = quantized[0]
    for p in quantized[1:]:
        check((p.storage_type, p.storage_min, p.storage_max, p.expressed_type)
              == (first.storage_type, first.storage_min, first.storage_max,
                  first.expressed_type), label,
              f"quantized types differ: {_baseline(first)} vs {_baseline(p)}")


def _baseline(p: QuantParams) -> str:
    return f"{p.storage_type}<{p.storage_min}:{p.storage_max}>:{p.expressed_type}"


def _per_axis(p: QuantParams | None) -> bool:
    return p is not None and p.quantization_dimension >= 0


def _common(op: str, labels: tuple[str, ...], operands: Sequence[Shape],
            lq: QuantParams | None, rq: QuantParams | None, oq: QuantParams | None,
            result: Shape) -> None:
    """The rules dot_general and convolution share; `labels` are the op's numbers for
    (rhs quantized, storage, expressed, per-tensor result, hybrid types)."""
    c_quant, c_storage, c_expressed, c_per_tensor, c_hybrid = labels
    check(rq is not None and (lq is None) == (oq is None), f"{op}_{c_quant}",
          "with quantized tensors, rhs must be quantized, and lhs is quantized exactly when "
          "the result is")
    assert rq is not None
    if lq is not None:
        assert oq is not None
        check(lq.storage_type == rq.storage_type, f"{op}_{c_storage}",
              f"lhs storage type {lq.storage_type} differs from rhs {rq.storage_type}")
        check(lq.expressed_type == rq.expressed_type == oq.expressed_type, f"{op}_{c_expressed}",
              f"expressed types differ: lhs {lq.expressed_type}, rhs {rq.expressed_type}, "
              f"result {oq.expressed_type}")
        check(_per_axis(rq) or not _per_axis(oq), f"{op}_{c_per_tensor}",
              "a per-tensor quantized rhs needs a per-tensor quantized result")
    else:
        lhs_t: ElementType = operands[0].element_type
        check(lhs_t == rq.expressed_type == result.element_type, f"{op}_{c_hybrid}",
              f"hybrid {op}: lhs {lhs_t}, rhs expressed type {rq.expressed_type} and result "
              f"{result.element_type} must be the same type")


def _check_dot_general(attrs: Any, operands: Sequence[Shape],
                       operand_params: Sequence[QuantParams | None],
                       result_params: Sequence[QuantParams | None],
                       results: Sequence[Shape]) -> None:
    lq, rq = (list(operand_params) + [None, None])[:2]
    oq = result_params[0] if result_params else None
    _common("dot_general", ("c14", "c17", "c18", "c19", "c20"), operands, lq, rq, oq,
            results[0])
    assert rq is not None
    check(all(z == 0 for z in rq.zero_points), "dot_general_c15",
          f"rhs zero points {list(rq.zero_points)} must be 0")
    if _per_axis(rq):
        check(rq.quantization_dimension not in attrs.rhs_contracting_dimensions,
              "dot_general_c16", f"rhs quantization dimension {rq.quantization_dimension} is a "
              f"contracting dimension {list(attrs.rhs_contracting_dimensions)}")


def _check_convolution(attrs: Any, operands: Sequence[Shape],
                       operand_params: Sequence[QuantParams | None],
                       result_params: Sequence[QuantParams | None],
                       results: Sequence[Shape]) -> None:
    lq, rq = (list(operand_params) + [None, None])[:2]
    oq = result_params[0] if result_params else None
    _common("convolution", ("c28", "c31", "c32", "c33", "c34"), operands, lq, rq, oq,
            results[0])
    dn = attrs.dimension_numbers
    if _per_axis(rq):
        assert rq is not None
        check(rq.quantization_dimension == dn.kernel_output_feature_dimension,
              "convolution_c29", f"rhs quantization dimension {rq.quantization_dimension} is "
              f"not the kernel output feature dimension {dn.kernel_output_feature_dimension}")
    if _per_axis(oq):
        assert oq is not None
        check(oq.quantization_dimension == dn.output_feature_dimension, "convolution_c30",
              f"result quantization dimension {oq.quantization_dimension} is not the output "
              f"feature dimension {dn.output_feature_dimension}")
