"""The op coverage table: every seed op x {infer, evaluate, builder}; gaps must be declared.

Print it with `python -m tests.meta.test_op_coverage` (writes docs/op_coverage.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import xlapy.ops as xops
from xlapy.builder import ops as bops

# The StableHLO spec's ops (seed 003) plus the newer ones JAX prints.
SPEC_OPS = """
abs add after_all all_gather all_reduce all_to_all and atan2 batch_norm_grad batch_norm_inference
batch_norm_training bitcast_convert broadcast_in_dim case cbrt ceil cholesky clamp
collective_broadcast collective_permute compare complex composite concatenate constant convert
convolution cosine count_leading_zeros custom_call divide dot_general dynamic_slice
dynamic_update_slice exponential exponential_minus_one fft floor gather get_dimension_size
get_tuple_element if imag infeed iota is_finite log log_plus_one logistic map maximum minimum
multiply negate not optimization_barrier or outfeed pad partition_id popcnt power real recv reduce
reduce_precision reduce_scatter reduce_window remainder replica_id reshape reverse rng
rng_bit_generator round_nearest_afz round_nearest_even rsqrt scatter select select_and_scatter send
shift_left shift_right_arithmetic shift_right_logical sign sine slice sort sqrt subtract tan tanh
transpose triangular_solve tuple while xor
""".split()

# Seed 000/001/002 builder ops -> the op they build (one op, several spellings).
BUILDER_OPS = {
    "AfterAll": "after_all", "AllGather": "all_gather", "AllReduce": "all_reduce",
    "AllToAll": "all_to_all", "BatchNormGrad": "batch_norm_grad",
    "BatchNormInference": "batch_norm_inference", "BatchNormTraining": "batch_norm_training",
    "BitcastConvertType": "bitcast_convert", "Broadcast": "broadcast_in_dim",
    "BroadcastInDim": "broadcast_in_dim", "Call": "call", "Cholesky": "cholesky",
    "Clamp": "clamp", "Collapse": "reshape", "CollectivePermute": "collective_permute",
    "ConcatInDim": "concatenate", "Conditional": "case", "Conv": "convolution",
    "ConvWithGeneralPadding": "convolution", "ConvertElementType": "convert",
    "CrossReplicaSum": "all_reduce", "CustomCall": "custom_call", "Dot": "dot_general",
    "DotGeneral": "dot_general", "DynamicSlice": "dynamic_slice",
    "DynamicUpdateSlice": "dynamic_update_slice", "Add": "add", "Sub": "subtract",
    "Mul": "multiply", "Div": "divide", "Rem": "remainder", "Max": "maximum", "Min": "minimum",
    "Pow": "power", "And": "and", "Or": "or", "Xor": "xor", "Not": "not", "Atan2": "atan2",
    "Complex": "complex", "ShiftLeft": "shift_left", "ShiftRightArithmetic":
    "shift_right_arithmetic", "ShiftRightLogical": "shift_right_logical", "Eq": "compare",
    "Ne": "compare", "Ge": "compare", "Gt": "compare", "Le": "compare", "Lt": "compare",
    "Abs": "abs", "Ceil": "ceil", "Cos": "cosine", "Exp": "exponential", "Floor": "floor",
    "Imag": "imag", "IsFinite": "is_finite", "Log": "log", "Neg": "negate",
    "PopulationCount": "popcnt", "Real": "real", "Rsqrt": "rsqrt", "Sign": "sign", "Sin": "sine",
    "Sqrt": "sqrt", "Tanh": "tanh", "Cbrt": "cbrt", "Expm1": "exponential_minus_one",
    "Log1p": "log_plus_one", "Logistic": "logistic", "Clz": "count_leading_zeros",
    "RoundNearestAfz": "round_nearest_afz", "RoundNearestEven": "round_nearest_even",
    "Tan": "tan", "Fft": "fft", "Gather": "gather", "GetDimensionSize": "get_dimension_size",
    "SetDimensionSize": "set_dimension_size", "GetTupleElement": "get_tuple_element",
    "Infeed": "infeed", "Outfeed": "outfeed", "Iota": "iota", "Map": "map", "Pad": "pad",
    "Recv": "recv", "Reduce": "reduce", "ReducePrecision": "reduce_precision",
    "ReduceWindow": "reduce_window", "ReplicaId": "replica_id", "Reshape": "reshape",
    "Rev": "reverse", "RngNormal": "rng", "RngUniform": "rng", "RngBernoulli": "rng",
    "RngBitGenerator": "rng_bit_generator", "Scatter": "scatter", "Select": "select",
    "SelectAndScatter": "select_and_scatter", "Send": "send", "Slice": "slice", "Sort": "sort",
    "Transpose": "transpose", "Trans": "transpose", "TriangularSolve": "triangular_solve",
    "Tuple": "tuple", "While": "while", "Parameter": "parameter", "ConstantLiteral": "constant",
    "ConstantR0": "constant", "ConstantR1": "constant", "ConstantR2": "constant",
    "OptimizationBarrier": "optimization_barrier", "ReduceScatter": "reduce_scatter",
    "PartitionId": "partition_id",
}

# Declared gaps: (op or builder name, column) -> reason. Collectives are evaluated on a 1x1 grid
# only until the process-grid issue lands; the grid itself is not a gap of this table.
KNOWN_GAPS: dict[tuple[str, str], str] = {}


def coverage() -> dict[str, dict[str, bool]]:
    ops = sorted(set(SPEC_OPS) | set(BUILDER_OPS.values()))
    builders_for: dict[str, list[str]] = {}
    for b, op in BUILDER_OPS.items():
        builders_for.setdefault(op, []).append(b)
    table = {}
    for name in ops:
        op = xops.OPS.get(name)
        table[name] = {
            "defined": op is not None,
            "infer": op is not None and type(op).has_infer(),
            "evaluate": op is not None and type(op).has_evaluate(),
            "builder": all(hasattr(bops, b) for b in builders_for.get(name, [])),
        }
    return table


def gaps() -> set[tuple[str, str]]:
    return {(op, col) for op, row in coverage().items() for col, ok in row.items() if not ok}


def render() -> str:
    rows = ["| op | infer | evaluate | builder |", "| --- | --- | --- | --- |"]
    for op, row in coverage().items():
        marks = ["yes" if row[c] else "**gap**" for c in ("infer", "evaluate", "builder")]
        rows.append(f"| `{op}` | " + " | ".join(marks) + " |")
    rows.append("")
    missing = sorted(b for b in BUILDER_OPS if not hasattr(bops, b))
    rows.append("Builder functions missing: " + (", ".join(missing) if missing else "none"))
    rows.append("")
    rows.append("Declared gaps:" + ("" if KNOWN_GAPS else " none"))
    rows += [f"- `{op}` {col}: {why}" for (op, col), why in sorted(KNOWN_GAPS.items())]
    return "\n".join(rows) + "\n"


def test_every_seed_op_is_covered_or_its_gap_declared() -> None:
    found = gaps() - {(op, "defined") for op, _ in KNOWN_GAPS}
    undeclared = sorted(found - set(KNOWN_GAPS))
    listed = ", ".join(f"{o}/{c}" for o, c in undeclared)
    assert not undeclared, f"undeclared coverage gaps: {listed}"


def test_declared_gaps_are_still_gaps() -> None:
    stale = sorted(set(KNOWN_GAPS) - gaps())
    assert not stale, f"KNOWN_GAPS lists entries that are now covered: {stale}"


def test_table_renders() -> None:
    text = render()
    print(text)
    assert "| `dot_general` |" in text and "| `add` | yes | yes | yes |" in text


if __name__ == "__main__":
    out = Path(__file__).resolve().parents[2] / "docs" / "op_coverage.md"
    out.write_text("# Op coverage\n\nGenerated by `python -m tests.meta.test_op_coverage`.\n\n"
                   + render())
    sys.stdout.write(render())
