"""The generic form of the structural ops: `"builtin.module"` and `"func.func"`.

The parser reads them as ordinary generic ops (`parse_generic`: properties, one region, a
function type) and these functions turn the resulting `OpNode` into the `ModuleNode` /
`FuncNode` the pretty forms produce, so the importer sees one shape of input:

    "builtin.module"() <{sym_name = "m"}> ({ "func.func"() <{...}> ({...}) : () -> () })
        {mhlo.num_partitions = 1 : i32} : () -> ()
    "func.func"() <{function_type = (tensor<3xi64>) -> tensor<3xi64>, sym_name = "main",
                    sym_visibility = "private", arg_attrs = [{...}]}> ({
    ^bb0(%arg0: tensor<3xi64>):
      "func.return"(%arg0) : (tensor<3xi64>) -> ()
    }) : () -> ()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlapy.errors import ParseError
from xlapy.stablehlo.nodes import (
    BlockArg,
    FuncNode,
    FunctionTypeAttr,
    OpNode,
    SymbolRef,
    TensorType,
    type_str,
)
from xlapy.stablehlo.quant import storage_type
from xlapy.types import Shape

if TYPE_CHECKING:
    from xlapy.stablehlo.parser import Parser


def _error(p: Parser, pos: int, message: str) -> ParseError:
    return ParseError(p.lex.span(pos, 1), message)


def _structural(p: Parser, op: OpNode, what: str) -> None:
    """The common shape: no operands, no results, exactly one region, `() -> ()`."""
    if op.results or op.operands or op.operand_types or op.result_types:
        raise _error(p, op.pos, f"{what} takes no operands and has no results")
    if len(op.regions) != 1:
        raise _error(p, op.pos, f"{what} needs exactly one region, found "
                                     f"{len(op.regions)}")


def _symbol(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, SymbolRef):
        return value.name
    return None


def func_from_generic(p: Parser, op: OpNode) -> FuncNode:
    """A generic `"func.func"` op as a `FuncNode` (argument types checked against the
    block's arguments, which carry the names the body uses)."""
    if op.name != "func.func":
        raise _error(p, op.pos, f"expected \"func.func\", found \"{op.name}\"")
    _structural(p, op, '"func.func"')
    name = _symbol(op.attrs.get("sym_name"))
    if name is None:
        raise _error(p, op.pos, '"func.func" needs sym_name = "name"')
    ftype = op.attrs.get("function_type")
    if not isinstance(ftype, FunctionTypeAttr):
        raise _error(p, op.pos, f'"func.func" @{name} needs function_type = (...) -> ...')
    region = op.regions[0]
    if len(region.args) != len(ftype.inputs):
        raise _error(p, op.pos, f"function @{name}: function_type has "
                                     f"{len(ftype.inputs)} inputs but the body's block has "
                                     f"{len(region.args)} arguments")
    args: list[BlockArg] = []
    for i, (a, t) in enumerate(zip(region.args, ftype.inputs)):
        if a.type != t:
            raise _error(p, a.pos, f"function @{name}: block argument {i} ({a.name}) "
                                        f"does not have the type function_type gives it")
        args.append(BlockArg(a.name, t, a.pos))
    arg_attrs = op.attrs.get("arg_attrs")
    arg_attrs = [d if isinstance(d, dict) else {} for d in arg_attrs] \
        if isinstance(arg_attrs, list) else [{} for _ in args]
    visibility = _symbol(op.attrs.get("sym_visibility")) or "public"
    return FuncNode(name, args, list(ftype.results), region.ops, visibility, arg_attrs, op.pos)


def module_from_generic(p: Parser, op: OpNode) -> tuple[str, dict[str, Any], list[FuncNode]]:
    """A generic `"builtin.module"` op: its name, its attributes (`mhlo.num_replicas`...)
    and its functions (each a generic `"func.func"`)."""
    _structural(p, op, '"builtin.module"')
    attrs = dict(op.attrs)
    name = _symbol(attrs.pop("sym_name", None)) or "main"
    region = op.regions[0]
    if region.args:
        raise _error(p, op.pos, '"builtin.module" body takes no block arguments')
    return name, attrs, [func_from_generic(p, f) for f in region.ops]


def terminator_type_problem(op: OpNode, shapes: list[Any]) -> str | None:
    """What is wrong with the types a terminator declares for the values it returns, if
    anything. Pretty `return %a : T` lists operand types after the colon (they land in
    `result_types`); generic `"func.return"(%a) : (T) -> ()` gives a function type."""
    types = op.result_types if op.operand_types is None else op.operand_types
    if op.operand_types is not None and op.result_types:
        return (f"{op.name} is a terminator and has no results; its type declares "
                f"({', '.join(map(type_str, op.result_types))})")
    if types is not None and (len(types) != len(shapes) or
                              any(not compatible(s, t) for s, t in zip(shapes, types))):
        return (f"{op.name} operand types ({', '.join(s.to_shlo() for s in shapes)}) do not "
                f"match the declared ({', '.join(map(type_str, types))})")
    return None


def compatible(shape: Shape, t: Any) -> bool:
    t = storage_type(t)
    if isinstance(t, Shape):
        return shape == t
    if isinstance(t, TensorType):
        return (shape.is_array and shape.element_type is t.element_type
                and len(shape.dimensions) == len(t.dims)
                and all(d is None or d == s for d, s in zip(t.dims, shape.dimensions)))
    return False
