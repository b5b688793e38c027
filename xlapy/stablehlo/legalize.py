"""Deprecated StableHLO ops, legalized into spec ops on import (as StableHLO's
`stablehlo-legalize-deprecated-ops` and MHLO's legalizations do):

* `stablehlo.dot` (lhs, rhs of rank 1 or 2) -> `dot_general`, contracting [lhs_rank-1] x [0];
* `stablehlo.broadcast` (`broadcast_sizes`) -> `broadcast_in_dim` to sizes + operand dims,
  the operand's dimensions the trailing ones;
* `stablehlo.einsum` / `stablehlo.unary_einsum` (`einsum_config = "ab,bc->ac"`) -> `reduce`
  (sum) over indices only one operand has, `dot_general`, and a `transpose` into the output's
  order where needed; equations with `...` or an index repeated within one operand (a
  diagonal) raise `UnimplementedAt` (a ParseError that is also Unimplemented);
* `stablehlo.torch_index_select` (`dim`, `batch_dims`) -> `gather`;
* `stablehlo.cross-replica-sum` (`replica_groups`) -> `all_reduce` with an add region.

(`stablehlo.create_token` is `after_all` under another name: `importer._DEPRECATED`.)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.errors import ParseError, Unimplemented, XlapyError
from xlapy.ir import Computation, Instruction
from xlapy.ops.base import infer_shape
from xlapy.ops.core import ConstantAttrs, ParameterAttrs
from xlapy.ops.indexing import GatherAttrs, GatherDimensionNumbers
from xlapy.ops.linalg import DotGeneralAttrs
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.shape import BroadcastInDimAttrs, TransposeAttrs
from xlapy.stablehlo.attrmap import convert
from xlapy.stablehlo.generic_form import compatible
from xlapy.stablehlo.nodes import OpNode, StructAttr, type_str
from xlapy.types import Literal, Shape

if TYPE_CHECKING:
    from xlapy.stablehlo.importer import Importer, Scope


class UnimplementedAt(ParseError, Unimplemented):
    """A deprecated op whose legalization xlapy lacks (an einsum equation); names the op and
    the source position."""


def _operands(imp: Importer, node: OpNode, scope: Scope, n: int) -> list[Instruction]:
    operands = [scope.lookup(r) for r in node.operands]
    if len(operands) != n:
        raise imp.error(node.pos, f"{node.name} takes {n} operand(s), got {len(operands)}")
    imp.check_operand_types(node, operands)
    for i, o in enumerate(operands):
        if not o.shape.is_array:
            raise imp.error(node.operands[i].pos, f"{node.name}: operand {i} must be a tensor, "
                                                  f"got {o.shape.to_shlo()}")
    return operands


def _int_attr(imp: Importer, node: OpNode, key: str, hint: Any) -> Any:
    if key not in node.attrs:
        raise imp.error(node.pos, f"{node.name} needs attribute '{key}'")
    try:
        return convert(node.attrs[key], hint)
    except (XlapyError, ValueError, TypeError, KeyError) as e:
        raise imp.error(node.pos, f"{node.name}: bad value for attribute '{key}': {e}") from None


def _add_region(imp: Importer, element: Shape, hint: str) -> Computation:
    """`(a, b) -> a + b` on scalars of `element`'s type."""
    imp._region_count += 1
    comp = Computation(f"{hint}_region{imp._region_count}")
    s = Shape.scalar(element.element_type)
    a = comp.add(Instruction("parameter", [], s, ParameterAttrs(0, s), (), "lhs"))
    b = comp.add(Instruction("parameter", [], s, ParameterAttrs(1, s), (), "rhs"))
    comp.root = comp.add(Instruction("add", [a, b], s))
    imp.module.add_computation(comp)
    return comp


# ---- dot / broadcast / torch_index_select / cross-replica-sum ---------------------------------
def legalize_dot(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    lhs, rhs = _operands(imp, node, scope, 2)
    for i, (side, o) in enumerate((("lhs", lhs), ("rhs", rhs))):
        if o.shape.rank not in (1, 2):
            raise imp.error(node.operands[i].pos, f"{node.name}: {side} must have rank 1 or 2, "
                                                  f"got {o.shape.to_shlo()}")
    dn = StructAttr("stablehlo.dot", {"lhs_contracting_dimensions": [lhs.shape.rank - 1],
                                      "rhs_contracting_dimensions": [0]})
    attrs: dict[str, Any] = {"dot_dimension_numbers": dn}
    if "precision_config" in node.attrs:
        attrs["precision_config"] = node.attrs["precision_config"]
    return imp.emit(dataclasses.replace(node, attrs=attrs), "dot_general", [lhs, rhs], [])


def legalize_broadcast(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    (x,) = _operands(imp, node, scope, 1)
    sizes = _int_attr(imp, node, "broadcast_sizes", tuple[int, ...])
    if any(s < 0 for s in sizes):
        raise imp.error(node.pos, f"{node.name}: broadcast_sizes must be non-negative, got "
                                  f"{list(sizes)}")
    n = len(sizes)
    attrs = BroadcastInDimAttrs(tuple(sizes) + x.shape.dims,
                                tuple(range(n, n + x.shape.rank)))
    return imp.emit(node, "broadcast_in_dim", [x], [], attrs)


def legalize_torch_index_select(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    """Result dims: operand[:dim] + index[batch_dims:] + operand[dim+1:]; the first
    `batch_dims` dimensions of operand and index are shared (gather batching dims)."""
    x, index = _operands(imp, node, scope, 2)
    dim = _int_attr(imp, node, "dim", int)
    batch = _int_attr(imp, node, "batch_dims", int)
    r, ir = x.shape.rank, index.shape.rank
    problem = ""
    if not index.shape.element_type.is_integer:
        problem = f"index must have an integer type, got {index.shape.to_shlo()}"
    elif not 0 <= dim < r:
        problem = f"dim {dim} is out of range for operand {x.shape.to_shlo()}"
    elif not 0 <= batch <= min(dim, ir):
        problem = (f"batch_dims {batch} must be in [0, min(dim, index rank)] = "
                   f"[0, {min(dim, ir)}]")
    elif x.shape.dims[:batch] != index.shape.dims[:batch]:
        problem = (f"the first {batch} dimension(s) of operand {x.shape.to_shlo()} and index "
                   f"{index.shape.to_shlo()} must match")
    if problem:
        raise imp.error(node.pos, f"{node.name}: {problem}")
    offset = tuple(range(batch, dim)) + tuple(dim + ir - batch + j for j in range(r - dim - 1))
    dn = GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=(dim,),
                                start_index_map=(dim,), index_vector_dim=ir,
                                operand_batching_dims=tuple(range(batch)),
                                start_indices_batching_dims=tuple(range(batch)))
    sizes = tuple(1 if d == dim or d < batch else n for d, n in enumerate(x.shape.dims))
    return imp.emit(node, "gather", [x, index], [], GatherAttrs(dn, sizes))


def legalize_cross_replica_sum(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    (x,) = _operands(imp, node, scope, 1)
    attrs = {k: v for k, v in node.attrs.items() if k == "replica_groups"}
    region = _add_region(imp, x.shape, "cross_replica_sum")
    return imp.emit(dataclasses.replace(node, attrs=attrs), "all_reduce", [x], [region])


# ---- einsum -----------------------------------------------------------------------------------
_TERM = re.compile(r"[A-Za-z]*")


def _equation(imp: Importer, node: OpNode, n: int) -> tuple[str, list[str], str]:
    eq = node.attrs.get("einsum_config")
    if not isinstance(eq, str):
        raise imp.error(node.pos, f'{node.name} needs einsum_config = "...", like "ab,bc->ac"')
    text = eq.replace(" ", "")
    if "..." in text:
        raise UnimplementedAt(imp.lex.span(node.pos), f"{node.name}: equation '{eq}' is not "
                                                      "implemented (ellipsis '...')")
    if text.count("->") != 1:
        raise imp.error(node.pos, f"{node.name}: einsum_config '{eq}' needs one '->'")
    ins, out = text.split("->")
    terms = ins.split(",")
    if len(terms) != n or not all(_TERM.fullmatch(t) for t in terms + [out]):
        raise imp.error(node.pos, f"{node.name}: einsum_config '{eq}' must be {n} comma-separated "
                                  "term(s) of letters, '->', and an output term")
    return eq, terms, out


def legalize_einsum(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    return _einsum(imp, node, scope, 2)


def legalize_unary_einsum(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    return _einsum(imp, node, scope, 1)


def _einsum(imp: Importer, node: OpNode, scope: Scope, n: int) -> list[Instruction]:
    operands = _operands(imp, node, scope, n)
    eq, terms, out = _equation(imp, node, n)
    sizes: dict[str, int] = {}
    for t, o in zip(terms, operands):
        if len(t) != o.shape.rank:
            raise imp.error(node.pos, f"{node.name}: term '{t}' of '{eq}' has {len(t)} index(es) "
                                      f"but its operand is {o.shape.to_shlo()}")
        if len(set(t)) != len(t):
            raise UnimplementedAt(imp.lex.span(node.pos), f"{node.name}: equation '{eq}' is not "
                                  f"implemented (an index repeated in '{t}': a diagonal)")
        for c, d in zip(t, o.shape.dims):
            if sizes.setdefault(c, d) != d:
                raise imp.error(node.pos, f"{node.name}: index '{c}' of '{eq}' has sizes "
                                          f"{sizes[c]} and {d}")
    if len(set(out)) != len(out) or not set(out) <= set(sizes):
        raise imp.error(node.pos, f"{node.name}: output '{out}' of '{eq}' must use distinct "
                                  "indices of the inputs")
    steps = _Steps(imp, node)
    # Sum over indices that only one operand has and the output lacks.
    vals, lets = [], []
    for i, (t, o) in enumerate(zip(terms, operands)):
        others = set(out).union(*(terms[j] for j in range(n) if j != i))
        gone = [d for d, c in enumerate(t) if c not in others]
        if gone:
            o = steps.reduce_sum(o, gone)
        vals.append(o)
        lets.append("".join(c for c in t if c in others))
    if n == 1:
        x, have = vals[0], lets[0]
    else:
        (lhs, rhs), (lt, rt) = vals, lets
        batch = [c for c in out if c in lt and c in rt]
        contract = [c for c in lt if c in rt and c not in out]
        lfree = [c for c in lt if c not in rt]
        rfree = [c for c in rt if c not in lt]
        declared = imp.declared_results(node)
        et = declared[0].element_type if declared and isinstance(declared[0], Shape) \
            and declared[0].is_array else None
        attrs = DotGeneralAttrs(tuple(lt.index(c) for c in batch),
                                tuple(rt.index(c) for c in batch),
                                tuple(lt.index(c) for c in contract),
                                tuple(rt.index(c) for c in contract),
                                result_element_type=et if et is not lhs.shape.element_type
                                else None)
        have = "".join(batch + lfree + rfree)
        x = steps.add("dot_general", [lhs, rhs], attrs, last=have == out)
    if have != out:
        x = steps.add("transpose", [x], TransposeAttrs(tuple(have.index(c) for c in out)),
                      last=True)
    if not steps.emitted:  # an identity (`ab->ab`): the operand itself, of the declared type
        declared = imp.declared_results(node)
        if declared and not compatible(x.shape, declared[0]):
            raise imp.error(node.pos, f"{node.name}: result 0 has type {x.shape.to_shlo()} but "
                                      f"is declared as {type_str(declared[0])}")
    return [x]


class _Steps:
    """Instructions of one legalization; the last one is emitted as the op (named, checked
    against the declared result type)."""

    def __init__(self, imp: Importer, node: OpNode) -> None:
        self.imp = imp
        self.node = node
        self.emitted = False

    def add(self, opcode: str, operands: list[Instruction], attrs: Any,
            regions: list[Computation] | None = None, last: bool = False) -> Instruction:
        regions = regions or []
        if last:
            self.emitted = True
            return self.imp.emit(self.node, opcode, operands, regions, attrs)[0]
        shape = infer_shape(opcode, [o.shape for o in operands], attrs, regions)
        return self.imp.cur.add(Instruction(opcode, operands, shape, attrs, regions))

    def reduce_sum(self, x: Instruction, dims: list[int]) -> Instruction:
        s = Shape.scalar(x.shape.element_type)
        zero = self.imp.cur.add(Instruction("constant", [], s, ConstantAttrs(
            Literal(s, np.zeros((), s.dtype)))))
        region = _add_region(self.imp, x.shape, "einsum")
        return self.add("reduce", [x, zero], ReduceAttrs(tuple(dims)), [region])


LEGALIZE: dict[str, Callable[[Importer, OpNode, Scope], list[Instruction]]] = {
    "dot": legalize_dot,
    "broadcast": legalize_broadcast,
    "einsum": legalize_einsum,
    "unary_einsum": legalize_unary_einsum,
    "torch_index_select": legalize_torch_index_select,
    "cross-replica-sum": legalize_cross_replica_sum,
}
