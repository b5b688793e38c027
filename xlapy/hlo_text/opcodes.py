"""HLO opcode readers: each turns one parsed instruction into (op, operands, attrs, called).

Op attributes are built with the op's own attrs dataclass (`OPS[name].attrs`); XLA's spellings
map to the spec's fields here (`dimensions` of broadcast -> `broadcast_dimensions`,
`lhs_contracting_dims` -> `lhs_contracting_dimensions`, window `lhs_dilate` ->
`base_dilations`...). Ops without attributes use their registered HLO name (`HLO_NAMES`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.hlo_text import attrs as A
from xlapy.hlo_text.importer import InstrContext
from xlapy.ir import Instruction
from xlapy.ops.attrs import ComparisonDirection, ComparisonType, Precision
from xlapy.ops.base import HLO_NAMES, NO_ATTRS, OPS, NoAttrs
from xlapy.ops.indexing import GatherDimensionNumbers
from xlapy.ops.indexing_scatter import ScatterDimensionNumbers
from xlapy.ops.linalg import FftType, Transpose
from xlapy.ops.linalg_conv import ConvDimensionNumbers
from xlapy.ops.rng import RngAlgorithm, RngDistribution
from xlapy.types import ElementType, Literal, Shape

Reader = Callable[[InstrContext], Any]
READERS: dict[str, Reader] = {}

#: XLA spellings of enum values (lower-case in HLO text).
RNG_DISTRIBUTIONS = {"rng_uniform": RngDistribution.UNIFORM, "rng_normal": RngDistribution.NORMAL}
RNG_ALGORITHMS = {"rng_default": RngAlgorithm.DEFAULT, "rng_three_fry": RngAlgorithm.THREE_FRY,
                  "rng_philox": RngAlgorithm.PHILOX}
FUSION_KINDS = {"kLoop": "LOOP", "kInput": "INPUT", "kOutput": "OUTPUT", "kCustom": "CUSTOM"}
CUSTOM_CALL_API = {"API_VERSION_ORIGINAL": 1, "API_VERSION_STATUS_RETURNING": 2,
                   "API_VERSION_STATUS_RETURNING_UNIFIED": 3, "API_VERSION_TYPED_FFI": 4}


def reads(*opcodes: str) -> Callable[[Reader], Reader]:
    def deco(fn: Reader) -> Reader:
        for op in opcodes:
            READERS[op] = fn
        return fn
    return deco


def make(op: str, **fields: Any) -> Any:
    return OPS[op].attrs(**fields)


def _plain(hlo: str) -> Reader:
    op = HLO_NAMES[hlo]
    return lambda c: (op, c.operands, NO_ATTRS, [])


for _hlo, _op in list(HLO_NAMES.items()):
    if OPS[_op].attrs is NoAttrs and OPS[_op].num_regions == 0:
        READERS[_hlo] = _plain(_hlo)


def _dims(c: InstrContext) -> tuple[int, ...]:
    if not c.shape.is_array:
        raise c.error(f"expects an array result, declared {c.shape}")
    return c.shape.dimensions


def _enum(c: InstrContext, key: str, table: dict[str, Any], default: Any = None) -> Any:
    a = c.attr(key)
    if a is None:
        if default is None:
            raise c.error(f"missing attribute {key}=")
        return default
    if a.value not in table:
        raise c.error(f"{key}={a.value} is not one of {', '.join(table)}", a.pos)
    return table[a.value]


def _precision(c: InstrContext) -> tuple[Precision, ...]:
    a = c.attr("operand_precision")
    if a is None:
        return ()
    words = [w.strip().upper() for w in a.value.strip("{}").split(",") if w.strip()]
    try:
        return tuple(Precision[w] for w in words)
    except KeyError:
        raise c.error(f"bad operand_precision {a.value}", a.pos) from None


def _result_type(c: InstrContext) -> ElementType | None:
    et = c.shape.element_type
    return et if c.operands and et is not c.operands[0].shape.element_type else None


# ---- core --------------------------------------------------------------------------------------
@reads("parameter")
def _parameter(c: InstrContext) -> Any:
    try:
        number = int(c.node.raw_args)
    except ValueError:
        raise c.error("parameter(N) needs a number", c.node.raw_pos) from None
    return "parameter", [], make("parameter", number=number, shape=c.shape), []


@reads("constant")
def _constant(c: InstrContext) -> Any:
    lit = A.read_literal(c.cur, c.node.raw_args, c.node.raw_pos, c.shape)
    return "constant", [], make("constant", literal=lit), []


@reads("get-tuple-element")
def _gte(c: InstrContext) -> Any:
    return "get_tuple_element", c.operands, make("get_tuple_element",
                                                 index=c.req("index", A.read_int)), []


@reads("copy", "add-dependency", "domain", "copy-done")
def _identity(c: InstrContext) -> Any:
    if not c.operands:
        raise c.error("expects an operand")
    return c.operands[0]


@reads("bitcast")
def _bitcast(c: InstrContext) -> Any:
    """A reinterpretation of the operand's bytes in the result's layout: transpose to the
    operand's physical order, bitcast_convert, reshape, transpose to the result's order."""
    c.arity(1)
    (x,) = c.operands
    src, dst = c.declared[0], c.shape
    if not (src.is_array and dst.is_array):
        raise c.error("bitcast needs array shapes")
    if src.element_type.bits * src.num_elements != dst.element_type.bits * dst.num_elements \
            or src.element_type.bits != dst.element_type.bits:
        raise c.error(f"cannot bitcast {src} to {dst}")
    src_order = tuple(reversed(src.effective_layout().minor_to_major))
    dst_order = tuple(reversed(dst.effective_layout().minor_to_major))
    if src_order != tuple(range(src.rank)):
        x = c.add("transpose", [x], make("transpose", permutation=src_order))
    if src.element_type is not dst.element_type:
        x = c.add("bitcast_convert", [x], make("bitcast_convert",
                                                new_element_type=dst.element_type))
    phys = tuple(dst.dimensions[d] for d in dst_order)
    if x.shape.dimensions != phys:
        x = c.add("reshape", [x], make("reshape", shape=phys))
    if dst_order != tuple(range(dst.rank)):
        x = c.add("transpose", [x], make("transpose",
                                          permutation=tuple(int(i) for i in np.argsort(dst_order))))
    if x is c.operands[0]:
        return x
    x.meta["hlo_bitcast"] = True
    return c.finish(x)


# ---- shape ops -----------------------------------------------------------------------------------
@reads("broadcast")
def _broadcast(c: InstrContext) -> Any:
    return "broadcast_in_dim", c.operands, make(
        "broadcast_in_dim", shape=_dims(c), broadcast_dimensions=c.req("dimensions", A.read_ints)
    ), []


@reads("reshape")
def _reshape(c: InstrContext) -> Any:
    return "reshape", c.operands, make("reshape", shape=_dims(c)), []


@reads("transpose")
def _transpose(c: InstrContext) -> Any:
    return "transpose", c.operands, make("transpose",
                                         permutation=c.req("dimensions", A.read_ints)), []


@reads("reverse")
def _reverse(c: InstrContext) -> Any:
    return "reverse", c.operands, make("reverse", dimensions=c.req("dimensions", A.read_ints)), []


@reads("slice")
def _slice(c: InstrContext) -> Any:
    s, lim, st = c.req("slice", A.read_slice)
    return "slice", c.operands, make("slice", start_indices=s, limit_indices=lim, strides=st), []


@reads("dynamic-slice")
def _dynamic_slice(c: InstrContext) -> Any:
    return "dynamic_slice", c.operands, make(
        "dynamic_slice", slice_sizes=c.req("dynamic_slice_sizes", A.read_ints)), []


@reads("concatenate")
def _concatenate(c: InstrContext) -> Any:
    dims = c.req("dimensions", A.read_ints)
    if len(dims) != 1:
        raise c.error(f"concatenate takes one dimension, got {list(dims)}")
    return "concatenate", c.operands, make("concatenate", dimension=dims[0]), []


@reads("pad")
def _pad(c: InstrContext) -> Any:
    p = c.get("padding", A.read_padding, [])
    return "pad", c.operands, make(
        "pad", edge_padding_low=tuple(t[0] for t in p), edge_padding_high=tuple(t[1] for t in p),
        interior_padding=tuple(t[2] for t in p)), []


@reads("iota")
def _iota(c: InstrContext) -> Any:
    return "iota", [], make("iota", shape=c.shape,
                            iota_dimension=c.req("iota_dimension", A.read_int)), []


@reads("convert")
def _convert(c: InstrContext) -> Any:
    return "convert", c.operands, make("convert", new_element_type=c.shape.element_type), []


@reads("bitcast-convert")
def _bitcast_convert(c: InstrContext) -> Any:
    return "bitcast_convert", c.operands, make("bitcast_convert",
                                               new_element_type=c.shape.element_type), []


@reads("compare")
def _compare(c: InstrContext) -> Any:
    direction = _enum(c, "direction", {d.name: d for d in ComparisonDirection})
    ctype = _enum(c, "type", {t.name: t for t in ComparisonType}, False) or None
    # Newer XLA prints a float total order as `order=TOTAL` instead of `type=TOTALORDER`;
    # PARTIAL is the float default. Integer compares are total orders whatever is written.
    order = _enum(c, "order", {"TOTAL": True, "PARTIAL": False}, "")
    if order != "" and c.declared[0].element_type.is_float:
        if ctype is not None and (ctype is ComparisonType.TOTALORDER) != order:
            raise c.error(f"order={c.attr('order').value} contradicts type={ctype.name}")
        ctype = ctype or (ComparisonType.TOTALORDER if order else None)
    elif order is False:
        raise c.error("order=PARTIAL needs floating-point operands")
    return "compare", c.operands, make("compare", comparison_direction=direction,
                                       compare_type=ctype), []


@reads("reduce-precision")
def _reduce_precision(c: InstrContext) -> Any:
    return "reduce_precision", c.operands, make(
        "reduce_precision", exponent_bits=c.req("exponent_bits", A.read_int),
        mantissa_bits=c.req("mantissa_bits", A.read_int)), []


@reads("get-dimension-size", "set-dimension-size")
def _dimension_size(c: InstrContext) -> Any:
    op = HLO_NAMES[c.node.opcode]
    dims = c.req("dimensions", A.read_ints)
    if len(dims) != 1:
        raise c.error(f"takes one dimension, got {list(dims)}")
    return op, c.operands, make(op, dimension=dims[0]), []


# ---- regions -------------------------------------------------------------------------------------
@reads("reduce")
def _reduce(c: InstrContext) -> Any:
    return "reduce", c.operands, make("reduce", dimensions=c.req("dimensions", A.read_ints)), \
        [c.computation("to_apply")]


@reads("reduce-window")
def _reduce_window(c: InstrContext) -> Any:
    w = c.req("window", A.read_window)
    if w.rhs_reversal and any(w.rhs_reversal):
        raise c.error("reduce-window has no window reversal")
    return "reduce_window", c.operands, make(
        "reduce_window", window_dimensions=w.size, window_strides=w.stride,
        base_dilations=w.lhs_dilate, window_dilations=w.rhs_dilate, padding=w.pad), \
        [c.computation("to_apply")]


@reads("select-and-scatter")
def _select_and_scatter(c: InstrContext) -> Any:
    w = c.req("window", A.read_window)
    return "select_and_scatter", c.operands, make(
        "select_and_scatter", window_dimensions=w.size, window_strides=w.stride,
        padding=w.pad), [c.computation("select"), c.computation("scatter")]


@reads("sort")
def _sort(c: InstrContext) -> Any:
    dims = c.req("dimensions", A.read_ints)
    if len(dims) != 1:
        raise c.error(f"sort takes one dimension, got {list(dims)}")
    return "sort", c.operands, make("sort", dimension=dims[0],
                                    is_stable=c.get("is_stable", A.read_bool, False)), \
        [c.computation("to_apply")]


@reads("map")
def _map(c: InstrContext) -> Any:
    default = tuple(range(c.shape.rank)) if c.shape.is_array else ()
    return "map", c.operands, make("map", dimensions=c.get("dimensions", A.read_ints, default)), \
        [c.computation("to_apply")]


@reads("while")
def _while(c: InstrContext) -> Any:
    return "while", c.operands, NO_ATTRS, [c.computation("condition"), c.computation("body")]


@reads("call")
def _call(c: InstrContext) -> Any:
    return "call", c.operands, NO_ATTRS, [c.computation("to_apply")]


@reads("conditional")
def _conditional(c: InstrContext) -> Any:
    if c.attr("branch_computations") is not None:
        return "case", c.operands, NO_ATTRS, c.computations("branch_computations")
    return "if", c.operands, NO_ATTRS, [c.computation("true_computation"),
                                        c.computation("false_computation")]


@reads("fusion")
def _fusion(c: InstrContext) -> Any:
    comp = c.computation("calls")
    kind = c.need("kind")
    if kind.value not in FUSION_KINDS:
        raise c.error(f"unknown fusion kind {kind.value}", kind.pos)
    if "fusion" not in OPS:
        return "call", c.operands, NO_ATTRS, [comp]
    cls = OPS["fusion"].attrs
    kinds = type(dataclasses.fields(cls)[0].default)
    return "fusion", c.operands, cls(kinds[FUSION_KINDS[kind.value]]), [comp]


# ---- linear algebra ------------------------------------------------------------------------------
@reads("dot")
def _dot(c: InstrContext) -> Any:
    def ints(key: str) -> tuple[int, ...]:
        return c.get(key, A.read_ints, ())

    return "dot_general", c.operands, make(
        "dot_general", lhs_batching_dimensions=ints("lhs_batch_dims"),
        rhs_batching_dimensions=ints("rhs_batch_dims"),
        lhs_contracting_dimensions=ints("lhs_contracting_dims"),
        rhs_contracting_dimensions=ints("rhs_contracting_dims"),
        precision_config=_precision(c), result_element_type=_result_type(c)), []


@reads("convolution")
def _convolution(c: InstrContext) -> Any:
    c.arity(2)
    rank = c.operands[0].shape.rank
    dn = c.get("dim_labels", A.read_dim_labels) or ConvDimensionNumbers.default(max(0, rank - 2))
    n = len(dn.input_spatial_dimensions)
    w = c.get("window", A.read_window) or A.Window(())
    if w.size and len(w.size) != n:
        raise c.error(f"window has {len(w.size)} dimensions, dim_labels {n}")
    return "convolution", c.operands, make(
        "convolution", dimension_numbers=dn, window_strides=w.stride or (), padding=w.pad or (),
        lhs_dilation=w.lhs_dilate or (), rhs_dilation=w.rhs_dilate or (),
        window_reversal=w.rhs_reversal or (),
        feature_group_count=c.get("feature_group_count", A.read_int, 1),
        batch_group_count=c.get("batch_group_count", A.read_int, 1),
        precision_config=_precision(c), result_element_type=_result_type(c)), []


@reads("fft")
def _fft(c: InstrContext) -> Any:
    return "fft", c.operands, make("fft", fft_type=_enum(c, "fft_type", FftType.__members__),
                                   fft_length=c.req("fft_length", A.read_ints)), []


@reads("triangular-solve")
def _triangular_solve(c: InstrContext) -> Any:
    return "triangular_solve", c.operands, make(
        "triangular_solve", left_side=c.get("left_side", A.read_bool, False),
        lower=c.get("lower", A.read_bool, False),
        unit_diagonal=c.get("unit_diagonal", A.read_bool, False),
        transpose_a=_enum(c, "transpose_a", Transpose.__members__, Transpose.NO_TRANSPOSE)), []


@reads("cholesky")
def _cholesky(c: InstrContext) -> Any:
    return "cholesky", c.operands, make("cholesky", lower=c.get("lower", A.read_bool, False)), []


@reads("batch-norm-training", "batch-norm-inference", "batch-norm-grad")
def _batch_norm(c: InstrContext) -> Any:
    op = c.node.opcode.replace("-", "_")
    return op, c.operands, make(op, epsilon=c.req("epsilon", A.read_float),
                                feature_index=c.req("feature_index", A.read_int)), []


# ---- indexing ------------------------------------------------------------------------------------
@reads("gather")
def _gather(c: InstrContext) -> Any:
    def ints(key: str) -> tuple[int, ...]:
        return c.get(key, A.read_ints, ())

    dn = GatherDimensionNumbers(
        offset_dims=ints("offset_dims"), collapsed_slice_dims=ints("collapsed_slice_dims"),
        start_index_map=ints("start_index_map"),
        index_vector_dim=c.req("index_vector_dim", A.read_int),
        operand_batching_dims=ints("operand_batching_dims"),
        start_indices_batching_dims=ints("start_indices_batching_dims"))
    return "gather", c.operands, make(
        "gather", dimension_numbers=dn, slice_sizes=c.req("slice_sizes", A.read_ints),
        indices_are_sorted=c.get("indices_are_sorted", A.read_bool, False)), []


@reads("scatter")
def _scatter(c: InstrContext) -> Any:
    def ints(key: str) -> tuple[int, ...]:
        return c.get(key, A.read_ints, ())

    dn = ScatterDimensionNumbers(
        update_window_dims=ints("update_window_dims"),
        inserted_window_dims=ints("inserted_window_dims"),
        scatter_dims_to_operand_dims=ints("scatter_dims_to_operand_dims"),
        index_vector_dim=c.req("index_vector_dim", A.read_int),
        input_batching_dims=ints("input_batching_dims"),
        scatter_indices_batching_dims=ints("scatter_indices_batching_dims"))
    return "scatter", c.operands, make(
        "scatter", scatter_dimension_numbers=dn,
        indices_are_sorted=c.get("indices_are_sorted", A.read_bool, False),
        unique_indices=c.get("unique_indices", A.read_bool, False)), [c.computation("to_apply")]


# ---- rng, custom calls, feeds --------------------------------------------------------------------
@reads("rng")
def _rng(c: InstrContext) -> Any:
    """HLO rng(a, b) takes its shape from the result; the op's third operand is that shape."""
    c.arity(2)
    dims = np.array(_dims(c), np.int64)
    shape = c.add("constant", [], make("constant", literal=Literal.from_numpy(dims)))
    return "rng", [*c.operands, shape], make("rng", rng_distribution=_enum(c, "distribution",
                                                                 RNG_DISTRIBUTIONS),
                                   shape=c.shape), []


@reads("rng-bit-generator")
def _rng_bit_generator(c: InstrContext) -> Any:
    if not c.shape.is_tuple:
        raise c.error(f"expects a (state, bits) tuple result, declared {c.shape}")
    return "rng_bit_generator", c.operands, make(
        "rng_bit_generator", rng_algorithm=_enum(c, "algorithm", RNG_ALGORITHMS),
        result_shapes=c.shape.tuple_shapes), []


@reads("custom-call")
def _custom_call(c: InstrContext) -> Any:
    called = []
    for key in ("called_computations", "to_apply"):
        if c.attr(key) is not None:
            called += c.computations(key)
    target = A.read_string(c.cur, c.need("custom_call_target"))
    if target == "TopK":
        from xlapy.hlo_text.opcodes_more import custom_top_k

        return custom_top_k(c, called)
    cfg = c.attr("backend_config")
    config = "" if cfg is None else (A.read_string(c.cur, cfg) if cfg.value.startswith('"')
                                     else cfg.value)
    api = _enum(c, "api_version", CUSTOM_CALL_API, 1)
    return "custom_call", c.operands, make(
        "custom_call", call_target_name=A.read_string(c.cur, c.need("custom_call_target")),
        shape=c.shape, has_side_effect=c.get("custom_call_has_side_effect", A.read_bool, False),
        backend_config=config, api_version=api,
        mhlo_backend_config=_ffi_attributes(c, config, cfg) if api == 4 else ()), called


def _ffi_attributes(c: InstrContext, config: str, cfg: Any) -> tuple[tuple[str, Any], ...]:
    """A typed-FFI call's backend_config is an MLIR dictionary (`{uplo = 76 : ui8}`): the
    attributes StableHLO carries in `mhlo.backend_config` (custom_call_targets reads them
    there). The text is kept in `backend_config` too, so it prints back as written."""
    from xlapy.errors import ParseError
    from xlapy.stablehlo.attrmap import plain_value
    from xlapy.stablehlo.parser import Parser

    if not config.lstrip().startswith("{"):
        return ()
    try:
        value = Parser(config).parse_attr()
    except ParseError as e:
        raise c.error(f"backend_config of a typed FFI call is not an attribute dictionary: "
                      f"{e}", cfg.pos) from None
    return plain_value(value) if isinstance(value, dict) else ()


@reads("infeed")
def _infeed(c: InstrContext) -> Any:
    if not c.shape.is_tuple:
        raise c.error(f"expects a (data, token) result, declared {c.shape}")
    cfg = c.get("infeed_config", A.read_string, "")
    return "infeed", c.operands, make("infeed", result_shapes=c.shape.tuple_shapes,
                                      infeed_config=cfg), []


@reads("outfeed")
def _outfeed(c: InstrContext) -> Any:
    c.attr("outfeed_shape")
    return "outfeed", c.operands, make("outfeed", outfeed_config=c.get(
        "outfeed_config", A.read_string, "")), []


from xlapy.hlo_text import opcodes_collectives, opcodes_more  # noqa: E402, F401  (register readers)


def unsupported(opcode: str) -> bool:
    return opcode not in READERS


__all__ = ["READERS", "Instruction", "Shape", "unsupported"]
