"""The spec constraint a declared result type breaks when it differs from the inferred one.

`infer` computes every op's result type from its operands and attributes, so the spec's
result-type constraints (`add_c1`: lhs, rhs and result have the same type; `reshape_c2`: the
same number of elements...) are checked by comparing that with the declared type, in the
StableHLO importer and in `verify_module`. This table names the constraint for the message:
(label when the element types differ, label when only the shapes differ), spec 003 numbering.
Ops missing here report the generic `result_type`.
"""

from __future__ import annotations

from xlapy.types import Shape

_SAME_TYPE_C1 = (
    "add", "and", "atan2", "cbrt", "ceil", "cosine", "count_leading_zeros", "divide",
    "exponential", "exponential_minus_one", "floor", "log", "log_plus_one", "logistic",
    "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "power", "remainder",
    "reverse", "round_nearest_afz", "round_nearest_even", "rsqrt", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sine", "sqrt", "subtract",
    "tanh", "xor", "reduce_precision", "dynamic_update_slice", "cholesky", "bitcast_convert",
    "tan")

#: op -> (element-type label, shape label).
LABELS: dict[str, tuple[str, str]] = {op: ("c1", "c1") for op in _SAME_TYPE_C1}
LABELS.update({
    "abs": ("c2", "c1"), "all_reduce": ("c6", "c6"), "all_gather": ("c6", "c6"),
    "all_to_all": ("c8", "c8"), "reduce_scatter": ("c8", "c8"),
    "collective_permute": ("c5", "c5"), "batch_norm_inference": ("c2", "c7"),
    "batch_norm_training": ("c2", "c7"), "batch_norm_grad": ("c2", "c3"),
    "clamp": ("c4", "c4"), "compare": ("c2", "c2"), "complex": ("c3", "c2"),
    "concatenate": ("c5", "c6"), "convert": ("c1", "c1"), "convolution": ("c27", "c26"),
    "dot_general": ("c13", "c13"), "dynamic_slice": ("c1", "c5"), "fft": ("c2", "c5"),
    "get_tuple_element": ("c2", "c2"), "imag": ("c2", "c1"), "real": ("c2", "c1"),
    "map": ("c4", "c1"), "optimization_barrier": ("c2", "c2"), "pad": ("c1", "c4"),
    "reduce": ("c2", "c7"), "reduce_window": ("c16", "c15"), "reshape": ("c1", "c2"),
    "rng": ("c1", "c3"), "rng_bit_generator": ("c1", "c1"), "scatter": ("c16", "c16"),
    "select": ("c2", "c2"), "select_and_scatter": ("c12", "c12"), "slice": ("c1", "c5"),
    "sort": ("c2", "c2"), "transpose": ("c1", "c3"), "triangular_solve": ("c4", "c4"),
    "tuple": ("c2", "c2"), "while": ("c3", "c3"), "if": ("c3", "c3"), "case": ("c4", "c4"),
    "is_finite": ("c1", "c1"),
})


def result_type_label(op: str, inferred: Shape, declared: object) -> str:
    """`<op>_c<N>` for a declared result type that differs from `inferred`."""
    labels = LABELS.get(op)
    if labels is None:
        return "result_type"
    declared_element = getattr(declared, "element_type", None)  # Shape or dynamic TensorType
    element_differs = not (inferred.is_array and declared_element is inferred.element_type)
    return f"{op}_{labels[0] if element_differs else labels[1]}"
