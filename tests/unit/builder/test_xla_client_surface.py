"""Issue 16: `xlapy.builder.ops` has the surface of jax's xla_client `ops` module.

XLA_CLIENT_OPS is xla_client's ops signature list (xla/python/xla_extension/ops.pyi and the
nanobind definitions in xla/python/ops.cc of jaxlib <= 0.4.x; jax 0.10 no longer ships it, so
the list is written down here): op name -> its overloads, each the parameter names in order.
A name starting with "__" is positional-only there (the unary ops, NextAfter's `from`), so
any name of ours is the same call.

Checked: every op exists; a single-form op has exactly these parameter names in this order
(xla_client's own spelling, no extra parameters); an overloaded op binds every form by
position and by keyword (its `overloads` attribute is the dispatch table; a form of ours
beyond xla_client's is listed in EXTENSIONS with the reason). Every op builds (NOT_BUILT is
empty); the differential tests against jax are in test_xla_client_vs_jax.py.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from xlapy.builder import OpMetadata, XlaBuilder, ops
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape

_BINARY = ("lhs", "rhs", "broadcast_dimensions")
_UNARY = ("__arg",)
_REPLICA = ("replica_groups",)
_CUSTOM_CALL_TAIL = ("opaque", "has_side_effect", "schedule", "api_version")

XLA_CLIENT_OPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "AfterAll": (("builder", "tokens"),),
    "AllGather": (("operand", "all_gather_dimension", "shard_count", "replica_groups",
                   "channel_id", "shape_with_layout", "use_global_device_ids"),),
    "AllReduce": (("operand", "computation", "replica_groups", "channel_id",
                   "shape_with_layout", "use_global_device_ids"),),
    "ReduceScatter": (("operand", "computation", "scatter_dimension", "shard_count",
                       "replica_groups", "channel_id", "layout", "use_global_device_ids"),),
    "AllToAll": (("operand", "split_dimension", "concat_dimension", "split_count",
                  "replica_groups", "layout", "channel_id"),),
    "ApproxTopK": (("builder", "operands", "init_values", "top_k", "reduction_dim",
                    "comparator", "recall_target", "aggregate_to_topk",
                    "reduction_input_size_override"),),
    "ApproxTopKFallback": (("builder", "operands", "init_values", "top_k", "reduction_dim",
                            "comparator", "recall_target", "aggregate_to_topk",
                            "reduction_input_size_override"),),
    "ApproxTopKReductionOutputSize": (("input_size", "rank", "top_k", "recall_target",
                                       "aggregate_to_topk", "input_size_override"),),
    "BitcastConvertType": (("operand", "new_element_type"),),
    "Broadcast": (("operand", "sizes"),),
    "BroadcastInDim": (("operand", "shape", "broadcast_dimensions"),),
    "Call": (("builder", "computation", "operands"),),
    "Cholesky": (("a", "lower"),),
    "Clamp": (("min", "operand", "max"),),
    "Collapse": (("operand", "dimensions"),),
    "CollectivePermute": (("operand", "source_target_pairs", "channel_id"),),
    "ConcatInDim": (("builder", "operands", "dimension"),),
    "Conditional": (("branch_index", "branch_computations", "branch_operands"),
                    ("predicate", "true_operand", "true_computation", "false_operand",
                     "false_computation")),
    "ConstantLiteral": (("builder", "literal"),),
    "ConvGeneralDilated": (("lhs", "rhs", "window_strides", "padding", "lhs_dilation",
                            "rhs_dilation", "dimension_numbers", "feature_group_count",
                            "batch_group_count", "precision_config", "preferred_element_type",
                            "window_reversal"),),
    "ConvertElementType": (("operand", "new_element_type"),),
    "CreateToken": (("builder",),),
    "CrossReplicaSum": (("operand",) + _REPLICA,),
    "CustomCall": (("builder", "call_target_name", "operands", "shape") + _CUSTOM_CALL_TAIL,),
    "CustomCallWithLayout": (("builder", "call_target_name", "operands", "shape_with_layout",
                              "operand_shapes_with_layout") + _CUSTOM_CALL_TAIL,),
    "CustomCallWithAliasing": (("builder", "call_target_name", "operands",
                                "shape_with_layout", "operand_shapes_with_layout", "opaque",
                                "has_side_effect", "output_operand_aliasing", "literal",
                                "schedule", "api_version"),),
    "Dot": (("lhs", "rhs", "precision_config", "preferred_element_type"),),
    "DotGeneral": (("lhs", "rhs", "dimension_numbers", "precision_config",
                    "preferred_element_type"),),
    "DynamicReshape": (("operand", "dim_sizes", "new_size_bounds", "dims_are_dynamic"),),
    "DynamicSlice": (("operand", "start_indices", "slice_sizes"),),
    "DynamicUpdateSlice": (("operand", "update", "start_indices"),),
    "Eigh": (("a", "lower", "max_iter", "epsilon", "sort_eigenvalues"),),
    "Fft": (("operand", "fft_type", "fft_length"),),
    "Gather": (("a", "start_indices", "dimension_numbers", "slice_sizes",
                "indices_are_sorted"),),
    "GetDimensionSize": (("operand", "dimension"),),
    "GetTupleElement": (("tuple_data", "index"),),
    "InfeedWithToken": (("token", "shape", "config"),),
    "Iota": (("builder", "shape", "iota_dimension"), ("builder", "type", "size")),
    "LU": (("operand",),),
    "Map": (("builder", "operands", "computation", "dimensions", "static_operands"),),
    "NextAfter": (("__from", "to"),),
    "OutfeedWithToken": (("operand", "token", "shape_with_layout", "outfeed_config"),),
    "Pad": (("operand", "padding_value", "padding_config"),),
    "Parameter": (("builder", "parameter_number", "shape", "name",
                   "replicated_at_leaf_buffers"),),
    "ProductOfElementaryHouseholderReflectors": (("a", "taus"),),
    "QR": (("operand", "full_matrices"),),
    "QrDecomposition": (("operand",),),
    "Reduce": (("builder", "operands", "init_values", "computation",
                "dimensions_to_reduce"),),
    "ReducePrecision": (("operand", "exponent_bits", "mantissa_bits"),),
    "ReduceWindowWithGeneralPadding": (
        ("operand", "init_value", "computation", "window_dimensions", "window_strides",
         "base_dilations", "window_dilations", "padding"),
        ("operands", "init_values", "computation", "window_dimensions", "window_strides",
         "base_dilations", "window_dilations", "padding")),
    "RecvFromHost": (("token", "shape", "handle"),),
    "ReplicaId": (("builder",),),
    "Reshape": (("operand", "dimensions", "new_sizes"), ("operand", "new_sizes")),
    "Rev": (("operand", "dimensions"),),
    "RngBitGenerator": (("algorithm", "initial_state", "shape"),),
    "RngNormal": (("mu", "sigma", "shape"),),
    "RngUniform": (("a", "b", "shape"),),
    "Scatter": (("input", "scatter_indices", "updates", "update_computation",
                 "dimension_numbers", "indices_are_sorted", "unique_indices"),
                ("builder", "operands", "scatter_indices", "updates", "update_computation",
                 "dimension_numbers", "indices_are_sorted", "unique_indices")),
    "Select": (("pred", "on_true", "on_false"),),
    "SelectAndScatterWithGeneralPadding": (("operand", "select", "window_dimensions",
                                            "window_strides", "padding", "source",
                                            "init_value", "scatter"),),
    "SendToHost": (("operand", "token", "shape_with_layout", "handle"),),
    "SetDimensionSize": (("operand", "val", "dimension"),),
    "Slice": (("operand", "start_indices", "limit_indices", "strides"),),
    "SliceInDim": (("operand", "start_index", "limit_index", "stride", "dimno"),),
    "Sort": (("builder", "operands", "comparator", "dimension", "is_stable"),),
    "SVD": (("a", "max_iter", "epsilon"),),
    "TopK": (("input", "k"),),
    "Transpose": (("operand", "permutation"),),
    "TriangularSolve": (("a", "b", "left_side", "lower", "unit_diagonal", "transpose_a"),),
    "Tuple": (("builder", "elements"),),
    "While": (("condition", "body", "init"),),
    "Igamma": (("a", "x"),),
    "Igammac": (("a", "x"),),
    "IgammaGradA": (("a", "x"),),
    "RandomGammaGrad": (("a", "x"),),
    "RegularizedIncompleteBeta": (("a", "b", "x"),),
    "Zeta": (("x", "q"),),
    **{name: (_BINARY,) for name in (
        "Eq", "Ne", "Ge", "Gt", "Lt", "Le", "Add", "Sub", "Mul", "Div", "Rem", "Max", "Min",
        "And", "Or", "Xor", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical", "Atan2",
        "Pow", "Complex")},
    **{name: (_UNARY,) for name in (
        "Not", "PopulationCount", "Clz", "Abs", "Exp", "Expm1", "Floor", "Ceil", "Round", "Log",
        "Log1p", "Sign", "Cos", "OptimizationBarrier", "Sin", "Tan", "Tanh", "IsFinite", "Neg",
        "Sqrt", "Rsqrt", "Cbrt", "Square", "Reciprocal", "Erfc", "Erf", "ErfInv", "Lgamma",
        "Digamma", "BesselI0e", "BesselI1e", "Acos", "Asin", "Atan", "Acosh", "Asinh", "Atanh",
        "Cosh", "Sinh", "Real", "Imag", "Conj")},
}

#: xla_client's enums in `ops`, with their members.
XLA_CLIENT_ENUMS = {
    "RandomAlgorithm": ("RNG_DEFAULT", "RNG_THREE_FRY", "RNG_PHILOX"),
    "TriangularSolveOptions_Transpose": ("TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE",
                                         "ADJOINT"),
    "CustomCallSchedule": ("SCHEDULE_NONE", "SCHEDULE_LATEST", "SCHEDULE_EARLIEST"),
    "CustomCallApiVersion": ("API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
                             "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"),
}

#: Our forms beyond xla_client's, and why.
EXTENSIONS = {
    "Reduce": "also seed 001's Reduce(operand, init_value, computation, dimensions_to_reduce)",
}

#: xla_client ops that report "not implemented" (a BuilderError naming them), and why: none
#: now. The one partial gap (CustomCallWithAliasing's `literal`) is tested in
#: test_ops_xla_client_extras.py.
NOT_BUILT: dict[str, str] = {}


def _params(fn: object) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize("name", sorted(XLA_CLIENT_OPS))
def test_op_has_xla_client_parameters(name: str) -> None:
    assert hasattr(ops, name), f"ops.{name} is missing"
    fn = getattr(ops, name)
    forms = XLA_CLIENT_OPS[name]
    overloads = getattr(fn, "overloads", None)
    if overloads is not None:
        for form in forms:
            assert form in overloads, f"{name}{form} is not one of our forms {overloads}"
        extra = set(overloads) - set(forms)
        assert not extra or name in EXTENSIONS, f"{name}: forms {extra} are not xla_client's"
        return
    assert len(forms) == 1, f"{name} is overloaded in xla_client but has no dispatch table"
    (form,) = forms
    params = _params(fn)
    ours = [p.name for p in params]
    assert len(ours) == len(form), f"{name}: ours {ours}, xla_client {list(form)}"
    for want, p in zip(form, params):
        if want.startswith("__"):
            assert p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD), (name, p)
        else:
            assert p.name == want, f"{name}: ours {ours}, xla_client {list(form)}"
            assert p.kind is p.POSITIONAL_OR_KEYWORD, (name, p)


def test_extensions_and_not_built_are_real() -> None:
    """Every listed extension/unbuilt op is an xla_client op (no stale entries)."""
    assert set(EXTENSIONS) <= set(XLA_CLIENT_OPS)
    assert set(NOT_BUILT) <= set(XLA_CLIENT_OPS)
    assert len(ops.Reduce.overloads) == 2


@pytest.mark.parametrize("name", sorted(XLA_CLIENT_ENUMS))
def test_enums(name: str) -> None:
    enum_type = getattr(ops, name)
    assert tuple(m.name for m in enum_type) == XLA_CLIENT_ENUMS[name]


S = Shape.array(ElementType.F32, (3,))


# ---- overloaded ops bind each form by keyword -------------------------------------------------
def _identity(shape: Shape, n: int = 1) -> object:
    sb = XlaBuilder("id")
    ps = [sb.parameter(i, shape) for i in range(n)]
    return sb.build(ps[0] if n == 1 else ops.Add(*ps))


def test_overloads_by_keyword() -> None:
    b = XlaBuilder("kw")
    x = ops.Parameter(b, 0, Shape.array(ElementType.F32, (2, 3)))
    assert ops.Reshape(operand=x, new_sizes=[3, 2]).shape().dimensions == (3, 2)
    r = ops.Reshape(operand=x, dimensions=[1, 0], new_sizes=[6])
    assert r.instr.opcode == "reshape" and r.instr.operands[0].opcode == "transpose"
    assert ops.Iota(builder=b, type=ElementType.S32, size=4).shape().dimensions == (4,)
    assert ops.Iota(b, ElementType.S32, 4).shape().dimensions == (4,)
    i = ops.Iota(builder=b, shape=Shape.array(ElementType.S32, (2, 3)), iota_dimension=1)
    assert i.instr.attrs.iota_dimension == 1
    f32 = Shape.scalar(ElementType.F32)
    zero = ops.Constant(b, np.float32(0))
    rw = ops.ReduceWindowWithGeneralPadding(
        operand=x, init_value=zero, computation=_identity(f32, 2), window_dimensions=[1, 2],
        window_strides=[1, 1], base_dilations=[1, 1], window_dilations=[1, 1],
        padding=[(0, 0), (0, 0)])
    assert rw.shape().dimensions == (2, 2)
    red = ops.Reduce(builder=b, operands=[x], init_values=[zero],
                     computation=_identity(f32, 2), dimensions_to_reduce=[1])
    assert red.shape().dimensions == (2,)
    p = ops.Parameter(b, 1, Shape.scalar(ElementType.PRED))
    c = ops.Conditional(predicate=p, true_operand=x, true_computation=_identity(x.shape()),
                        false_operand=x, false_computation=_identity(x.shape()))
    assert c.instr.opcode == "if"
    with pytest.raises(TypeError, match="Reshape takes Reshape"):
        ops.Reshape(x, [6], [6], [6])
    assert b.build() is not None


def test_scatter_forms() -> None:
    b = XlaBuilder("sc")
    x = ops.Parameter(b, 0, Shape.array(ElementType.F32, (4,)))
    idx = ops.Constant(b, np.array([[1], [3]], np.int32))
    upd = ops.Constant(b, np.array([10.0, 20.0], np.float32))
    dn = ops.ScatterDimensionNumbers((), (0,), (0,), 1)
    add = _identity(Shape.scalar(ElementType.F32), 2)
    one = ops.Scatter(input=x, scatter_indices=idx, updates=upd, update_computation=add,
                      dimension_numbers=dn)
    two = ops.Scatter(b, [x, x], idx, [upd, upd], _pair_add(), dn)
    assert one.shape() == x.shape() and two.shape().is_tuple
    b.build(two)


def _pair_add() -> object:
    f32 = Shape.scalar(ElementType.F32)
    sb = XlaBuilder("add2")
    a0, a1, b0, b1 = (sb.parameter(i, f32) for i in range(4))
    return sb.build(ops.Tuple(sb, [ops.Add(a0, b0), ops.Add(a1, b1)]))


# ---- XlaBuilder methods ------------------------------------------------------------------------
def test_builder_methods() -> None:
    b = XlaBuilder("m")
    x = ops.Parameter(b, 0, S)
    c = ops.Add(ops.Constant(b, np.float32(1)), ops.Constant(b, np.float32(2)))
    assert b.is_constant(c) and b.IsConstant(c) and not b.is_constant(x)
    rng = ops.RngUniform(ops.Constant(b, np.float32(0)), ops.Constant(b, np.float32(1)), S)
    assert not b.is_constant(rng)
    b.set_op_metadata(OpMetadata(op_type="add", op_name="jit(f)/add", source_file="f.py",
                                 source_line=3))
    b.set_sharding("{replicated}")
    y = ops.Add(x, x)
    b.clear_op_metadata()
    b.clear_sharding()
    z = ops.Mul(y, y)
    assert b.GetShape(z) == S and b.get_shape(z) == S
    assert b.GetProgramShape(y).result_shape() == S
    assert b.get_program_shape().parameter_shapes() == (S,)
    b.setup_alias([], 0, [])
    comp = b.Build(z)
    text = comp.as_hlo_text()
    add_line = next(line for line in text.splitlines() if "add(%p0, %p0)" in line)
    assert 'metadata={op_type="add" op_name="jit(f)/add" source_file="f.py" source_line=3}' \
        in add_line and "sharding={replicated}" in add_line
    mul_line = next(line for line in text.splitlines() if " multiply(" in line)
    assert "metadata" not in mul_line and "sharding" not in mul_line
    assert comp.module.meta["input_output_alias"] == [((), 0, ())]


def test_builder_method_errors() -> None:
    b = XlaBuilder("e")
    x = ops.Parameter(b, 0, S)
    with pytest.raises(BuilderError, match="set_sharding"):
        b.set_sharding("replicated")
    b.setup_alias([0], 0, [])
    with pytest.raises(BuilderError, match="setup_alias: output"):
        b.build(ops.Neg(x))
