"""Shape specialization at import: `?` dimensions made static by the argument shapes.

JAX's shape-polymorphic exports (`jax.export` with symbolic shapes) take `tensor<?x3xf32>`
arguments, compute sizes with `get_dimension_size`, pass them to a private function and build
shapes for `dynamic_*` ops from them. Given concrete argument shapes, the importer:

* gives the entry function's parameters those shapes;
* folds small pure integer computations whose leaves are constants or `get_dimension_size`
  of a static operand (`fold`), so `dynamic_*` ops with `?` result types get static ones;
* imports a function whose arguments have `?` dimensions once per call site signature, with
  the call's foldable operands bound to constants (`specialize_call`);
* checks JAX's `@shape_assertion` custom calls when their predicate folds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.ir import Instruction
from xlapy.ops.base import OPS
from xlapy.stablehlo.nodes import FuncNode, OpNode, TensorType, type_str
from xlapy.types import Shape

if TYPE_CHECKING:
    from xlapy.stablehlo.importer import Importer, Scope

#: Folding stops at arrays larger than this (sizes and shapes are tiny).
MAX_FOLD_ELEMENTS = 1024


def has_dynamic_args(f: FuncNode) -> bool:
    return any(isinstance(a.type, TensorType) for a in f.args)


def fold(instr: Instruction, memo: dict[int, Any] | None = None, depth: int = 0) -> Any:
    """The value of `instr` when it depends only on constants and static sizes, else None."""
    memo = {} if memo is None else memo
    if id(instr) in memo:
        return memo[id(instr)]
    value: Any = None
    op = OPS.get(instr.opcode)
    if instr.opcode == "constant":
        value = instr.attrs.literal.to_numpy()
    elif instr.opcode == "get_dimension_size":
        operand = instr.operands[0]
        dyn = operand.shape.dynamic
        d = instr.attrs.dimension
        if operand.opcode != "set_dimension_size" and not (dyn and dyn[d]):
            value = np.array(operand.shape.dimensions[d], instr.shape.element_type.dtype)
    elif (op is not None and not op.side_effecting and not instr.called and depth < 64 and
          instr.shape.is_array and instr.shape.num_elements <= MAX_FOLD_ELEMENTS and
          instr.opcode not in ("parameter", "custom_call", "rng", "rng_bit_generator")):
        args = [fold(o, memo, depth + 1) for o in instr.operands]
        if all(a is not None for a in args):
            try:
                value = op.evaluate(args, instr.attrs, instr.shape, None)  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - not foldable; evaluated at run time instead
                value = None
    memo[id(instr)] = value
    return value


def call_key(name: str, operands: list[Instruction]) -> tuple[Any, ...]:
    """A specialization's identity: callee, operand shapes, folded operand values."""
    consts = []
    for i, o in enumerate(operands):
        v = fold(o)
        if v is not None:
            consts.append((i, str(o.shape), np.ascontiguousarray(v).tobytes()))
    return (name, tuple(str(o.shape) for o in operands), tuple(consts))


def specialize_call(imp: Importer, name: str, operands: list[Instruction], pos: int) -> Any:
    """The callee's computation specialized to these operands (cached per signature)."""
    key = call_key(name, operands)
    comp = imp.specialized.get(key)
    if comp is None:
        consts = {i: fold(o) for i, o in enumerate(operands)}
        consts = {i: v for i, v in consts.items() if v is not None}
        comp = imp.function(name, pos, [o.shape for o in operands], consts,
                            f"{name}_{len(imp.specialized) + 1}")
        imp.specialized[key] = comp
    return comp


def check_shape_assertion(operands: list[Instruction], message: str) -> bool:
    """True when JAX's shape assertion folds to true (drop it); raises when it folds to
    false; False when it cannot be decided at import (kept, checked at run time)."""
    if not operands:
        return True
    pred = fold(operands[0])
    if pred is None:
        return False
    if not bool(np.all(pred)):
        values = [fold(o) for o in operands[1:]]
        text = message
        for i, v in enumerate(values):
            text = text.replace("{" + str(i) + "}", str(v) if v is not None else "?")
        raise XlapyError(f"shape assertion failed: {text}")
    return True


def _shape_assertion(operands: list[Any], result_shape: Any, attrs: Any) -> Any:
    if not bool(np.all(operands[0])):
        raise XlapyError("shape assertion failed (jax shape_assertion custom call)")
    return ()


def register_targets() -> None:
    from xlapy.ops.misc import CUSTOM_CALL_TARGETS, register_custom_call

    if "shape_assertion" not in CUSTOM_CALL_TARGETS:
        register_custom_call("shape_assertion", _shape_assertion)


def import_dynamic(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    """A dynamic_* op: its static result type is declared, or computed from size operands
    that fold (a clear error when they depend on run-time values)."""
    from xlapy.ops.dynamic import DYNAMIC_OPS
    from xlapy.stablehlo.attrmap import build_attrs
    from xlapy.stablehlo.importer import compatible, opcode_of

    opcode = opcode_of(node.name)
    operands = [scope.lookup(r) for r in node.operands]
    imp.check_operand_types(node, operands)
    declared = imp.declared_results(node)
    if len(declared) != 1 or isinstance(declared[0], Shape):
        return imp.emit(node, opcode, operands, [])
    t = declared[0]
    if not isinstance(t, TensorType):
        raise imp.error(node.pos, f"{node.name}: result type {type_str(t)} not supported")
    op = DYNAMIC_OPS[opcode]
    sizes = []
    for i in op.size_operands:
        value = fold(operands[i]) if i < len(operands) else None
        if value is None:
            raise imp.error(node.pos, f"dynamic shape not supported: {node.name} has result "
                                      f"type {t} and its size operand {i} is not a constant "
                                      "(nor computed from static sizes)")
        sizes.append(value)
    shapes = [o.shape for o in operands]
    guess = Shape.array(t.element_type, [d or 0 for d in t.dims])
    _, shape = op.resolve(shapes, sizes, build_attrs(opcode, op.attrs, node.attrs, [guess],
                                                     shapes))
    if not compatible(shape, t):
        raise imp.error(node.pos, f"{node.name}: its size operands give {shape.to_shlo()} but "
                                  f"the result type is {t}")
    attrs = build_attrs(opcode, op.attrs, node.attrs, [shape], shapes)
    return imp.emit(node, opcode, operands, [], attrs)


def import_dynamic_reduce_window(imp: Importer, node: OpNode, scope: Scope,
                                 operands: list[Instruction]) -> list[Instruction]:
    """`custom_call @stablehlo.dynamic_reduce_window(inputs..., inits..., window_dimensions,
    window_strides, base_dilations, window_dilations, padding)` with
    `called_computations = [@reducer]`: a static reduce_window once the sizes fold."""
    from xlapy.ops.base import infer_shape
    from xlapy.ops.reduction_window import ReduceWindowAttrs
    from xlapy.stablehlo.importer import split_results
    from xlapy.stablehlo.nodes import SymbolRef

    called = node.attrs.get("called_computations")
    if not (isinstance(called, list) and len(called) == 1 and isinstance(called[0], SymbolRef)):
        raise imp.error(node.pos, "stablehlo.dynamic_reduce_window needs "
                                  "called_computations = [@reducer]")
    if len(operands) < 7 or (len(operands) - 5) % 2:
        raise imp.error(node.pos, f"stablehlo.dynamic_reduce_window: {len(operands)} operands; "
                                  "expected inputs, inits and 5 size operands")
    sizes = [fold(o) for o in operands[-5:]]
    if any(v is None for v in sizes):
        raise imp.error(node.pos, "dynamic shape not supported: the window sizes of "
                                  "stablehlo.dynamic_reduce_window are not constant")
    dims, strides, base, wdil, pad = [np.asarray(v).astype(np.int64) for v in sizes]
    attrs = ReduceWindowAttrs(tuple(map(int, dims)), tuple(map(int, strides)),
                              tuple(map(int, base)), tuple(map(int, wdil)),
                              tuple((int(lo), int(hi)) for lo, hi in pad.reshape(-1, 2)))
    data = operands[:-5]
    reducer = imp.function(called[0].name, node.pos)
    shape = infer_shape("reduce_window", [o.shape for o in data], attrs, [reducer])
    name = node.results[0][0].lstrip("%") if node.results else ""
    instr = scope.comp.add(Instruction("reduce_window", data, shape, attrs, [reducer], name))
    return split_results(instr, node.num_results)


def import_approx_top_k(imp: Importer, node: OpNode, scope: Scope,
                        operands: list[Instruction]) -> list[Instruction]:
    """`custom_call @ApproxTopK(inputs..., inits...)` with `called_computations = [@cmp]`: on
    CPU, XLA's fallback is an exact top-k, a stable sort along `reduction_dim` with the
    comparator followed by a slice to the declared result size."""
    from xlapy.ops.base import get_op, infer_shape
    from xlapy.ops.reduction_sort import SortAttrs
    from xlapy.ops.shape import SliceAttrs
    from xlapy.stablehlo.attrmap import build_attrs
    from xlapy.stablehlo.importer import split_results
    from xlapy.stablehlo.nodes import SymbolRef

    called = node.attrs.get("called_computations")
    if not (isinstance(called, list) and len(called) == 1 and isinstance(called[0], SymbolRef)):
        raise imp.error(node.pos, "ApproxTopK needs called_computations = [@comparator]")
    if not operands or len(operands) % 2:
        raise imp.error(node.pos, f"ApproxTopK: {len(operands)} operands; expected inputs and "
                                  "as many init values")
    op = get_op("custom_call")
    attrs = dict(node.attrs)
    attrs.setdefault("shape", None)
    config = dict(build_attrs("custom_call", op.attrs, attrs, []).mhlo_backend_config)
    if "reduction_dim" not in config:
        raise imp.error(node.pos, "ApproxTopK needs mhlo.backend_config.reduction_dim")
    data = operands[: len(operands) // 2]
    dim = int(config["reduction_dim"]) % max(1, data[0].shape.rank)
    declared = [imp.static(t, node.pos, "ApproxTopK result") for t in imp.declared_results(node)]
    if len(declared) != len(data):
        raise imp.error(node.pos, f"ApproxTopK: {len(declared)} results for {len(data)} inputs")
    comparator = imp.function(called[0].name, node.pos)
    sort_attrs = SortAttrs(dim, True)
    shape = infer_shape("sort", [o.shape for o in data], sort_attrs, [comparator])
    sorted_ = scope.comp.add(Instruction("sort", data, shape, sort_attrs, [comparator]))
    columns = split_results(sorted_, len(data))
    out = []
    for col, want in zip(columns, declared):
        limit = list(col.shape.dimensions)
        limit[dim] = want.dimensions[dim]
        slice_attrs = SliceAttrs((0,) * col.shape.rank, tuple(limit), (1,) * col.shape.rank)
        sliced = infer_shape("slice", [col.shape], slice_attrs, [])
        out.append(scope.comp.add(Instruction("slice", [col], sliced, slice_attrs)))
    return out
