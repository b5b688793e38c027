"""The Shardy (`sdy`) dialect as jax writes it, and GSPMD sharding attributes, imported into
the IR's one sharding representation (xlapy/ir/sharding.py).

- `sdy.mesh @m = <["x"=2, "y"=2]>` (module level): ModuleNode.meshes.
- `sdy.sharding = #sdy.sharding<@m, [{"x"}, {}]>` on arguments / results and
  `#sdy.sharding_per_value<[...]>` or `mhlo.sharding = "{devices=...}"` on ops:
  Instruction.meta["sharding"]; argument and result shardings of a function also in
  module.meta["arg_shardings" / "result_shardings"][name].
- `sdy.sharding_constraint` / `sdy.reshard`: a `Sharding` custom call (GSPMD's spelling).
- `sdy.manual_computation`: the GSPMD form `Sharding` -> `SPMDFullToShardShape` -> a call of
  the body -> `Sharding {manual}` -> `SPMDShardToFullShape`, so one partitioner serves both.
- `sdy.sharding_group`: ties values to one sharding; the partitioner's propagation gives
  every value one sharding anyway, so the op imports as nothing (its values are kept).
Open / closed dimensions and priorities steer Shardy's propagation; xlapy's propagation
keeps what is written and leaves open dims to its own rules (an open empty dim is
unsharded unless propagation shards it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlapy.errors import ParseError, Unimplemented
from xlapy.ir import Computation, Instruction
from xlapy.ir.sharding import (
    AnySharding,
    Mesh,
    Sharding,
    parse_gspmd,
    parse_mesh,
    parse_sdy,
    parse_sdy_list,
)
from xlapy.ops.misc import CustomCallAttrs
from xlapy.stablehlo.nodes import FuncNode, OpNode, RegionNode, StructAttr
from xlapy.types import Shape

if TYPE_CHECKING:
    from xlapy.stablehlo.importer import Importer, Scope
    from xlapy.stablehlo.lexer import Token
    from xlapy.stablehlo.parser import Parser


# ---- parsing ---------------------------------------------------------------------------------
def parse_mesh_decl(p: Parser) -> tuple[str, Mesh]:
    """`sdy.mesh @name = <...> {attrs}` at module level."""
    p.expect("sdy.mesh")
    name = p.expect_kind("symbol", "a mesh name (@name)").text[1:].strip('"')
    p.expect("=")
    body = _angle(p)
    if p.at("{"):
        p.parse_attr_dict()
    p.skip_loc()
    try:
        return name, parse_mesh(body)
    except ParseError as e:
        raise p.error(p.peek(), str(e.args[0] if e.args else e)) from None


def _angle(p: Parser) -> str:
    p.expect("<")
    body, _ = p.lex.raw_until(">")
    p.expect(">")
    return body


def _bracketed(p: Parser) -> str:
    open_ = p.next().text
    close = {"[": "]", "{": "}"}.get(open_)
    if close is None:
        raise p.error(p.peek(), f"expected '[' or '{{', found '{open_}'")
    body, _ = p.lex.raw_until(close)
    p.expect(close)
    return body


def parse_constraint(p: Parser, name: str, tok: Token) -> OpNode:
    """`sdy.sharding_constraint %x <@mesh, [...]> : type` (and `sdy.reshard`)."""
    from xlapy.stablehlo.syntax import _finish

    operands = p.parse_operand_list(None)
    return _finish(p, name, tok, operands, {"sdy.target": _angle(p)})


def parse_group(p: Parser, name: str, tok: Token) -> OpNode:
    """`sdy.sharding_group %x group_id=0 : type`."""
    from xlapy.stablehlo.syntax import _finish

    operands = p.parse_operand_list(None)
    attrs: dict[str, Any] = {}
    while p.peek().kind == "ident" and not p.at("{"):
        key = p.next().text
        p.expect("=")
        attrs[key] = p.parse_attr()
    return _finish(p, name, tok, operands, attrs)


def parse_manual(p: Parser, name: str, tok: Token) -> OpNode:
    """`sdy.manual_computation(%x) in_shardings=[...] out_shardings=[...] manual_axes={...}
    (%arg: local type) { ... sdy.return %y } : (global types) -> global types`."""
    from xlapy.stablehlo.syntax import _finish

    p.expect("(")
    operands = p.parse_operand_list(")")
    attrs: dict[str, Any] = {}
    while p.peek().text in ("in_shardings", "out_shardings", "manual_axes"):
        key = p.next().text
        p.expect("=")
        attrs[key] = _bracketed(p)
    p.expect("(", "to open the manual computation's arguments")
    args = p.parse_block_args()
    p.expect("{", "to open the manual computation's body")
    region = RegionNode(args, p.parse_block_ops())
    return _finish(p, name, tok, operands, attrs, [region])


def register_syntax() -> None:
    from xlapy.stablehlo.syntax import PRETTY, parse_return

    PRETTY.update({"sdy.sharding_constraint": parse_constraint, "sdy.reshard": parse_constraint,
                   "sdy.sharding_group": parse_group, "sdy.manual_computation": parse_manual,
                   "sdy.return": parse_return})


# ---- attributes ------------------------------------------------------------------------------
def attr_sharding(attrs: dict[str, Any], meshes: dict[str, Mesh], per_value: bool = True
                  ) -> AnySharding | None:
    """The sharding an op / argument / result attribute dict names, if any."""
    if "mhlo.sharding" in attrs:
        return parse_gspmd(str(attrs["mhlo.sharding"]))
    value = attrs.get("sdy.sharding")
    if not isinstance(value, StructAttr):
        return None
    raw = str(value.fields.get("raw", ""))
    if value.name == "sdy.sharding_per_value":
        shardings = parse_sdy_list(raw, meshes)
        return shardings[0] if len(shardings) == 1 else tuple(shardings)
    return parse_sdy(raw, meshes)


# ---- import ----------------------------------------------------------------------------------
def attach_sharding(imp: Importer, instr: Instruction, attrs: dict[str, Any]) -> None:
    """An op's `mhlo.sharding` / `sdy.sharding` into instr.meta["sharding"]."""
    if "mhlo.sharding" not in attrs and "sdy.sharding" not in attrs:
        return
    s = attr_sharding(attrs, imp.node.meshes)
    if s is not None:
        instr.meta["sharding"] = s


def attach_signature(imp: Importer, f: FuncNode, comp: Computation) -> None:
    """Argument shardings onto the parameters; result shardings into module.meta."""
    meshes = imp.node.meshes
    args = [attr_sharding(a, meshes) for a in f.arg_attrs]
    results = [attr_sharding(a, meshes) for a in f.result_attrs]
    for p, s in zip(comp.parameters, args):
        if s is not None:
            p.meta["sharding"] = s
    if any(s is not None for s in args + results):
        imp.module.meta.setdefault("arg_shardings", {})[comp.name] = args
        imp.module.meta.setdefault("result_shardings", {})[comp.name] = results


def sharding_call(imp: Importer, x: Instruction, target: str, shape: Shape, s: AnySharding,
                  name: str = "") -> Instruction:
    """A GSPMD marker custom call (`Sharding`, `SPMDFullToShardShape`, ...)."""
    attrs = CustomCallAttrs(call_target_name=target, shape=shape)
    return imp.cur.add(Instruction("custom_call", [x], shape, attrs, (), name or target.lower(),
                                   {"sharding": s}))


def import_constraint(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    x = scope.lookup(node.operands[0])
    s = parse_sdy(str(node.attrs["sdy.target"]), imp.node.meshes)
    name = node.results[0][0].lstrip("%") if node.results else ""
    return [sharding_call(imp, x, "Sharding", x.shape, s, name)]


def import_group(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    return []


def import_manual(imp: Importer, node: OpNode, scope: Scope) -> list[Instruction]:
    meshes = imp.node.meshes
    ins = parse_sdy_list("[" + str(node.attrs.get("in_shardings", "")) + "]", meshes)
    outs = parse_sdy_list("[" + str(node.attrs.get("out_shardings", "")) + "]", meshes)
    axes = {a.strip().strip('"') for a in str(node.attrs.get("manual_axes", "")).split(",")
            if a.strip()}
    mesh_axes = {a for m in meshes.values() for a, size in m.axes if size > 1}
    if not mesh_axes <= axes:
        raise Unimplemented(f"sdy.manual_computation over axes {sorted(axes)} of a mesh with "
                            f"axes {sorted(mesh_axes)}: partially manual computations are not "
                            "supported")
    operands = [scope.lookup(r) for r in node.operands]
    region = node.regions[0]
    if len(ins) != len(operands) or len(region.args) != len(operands):
        raise imp.error(node.pos, "sdy.manual_computation: in_shardings, operands and body "
                                  "arguments differ in number")
    local = []
    for x, s, arg in zip(operands, ins, region.args):
        shape = imp.static(arg.type, arg.pos, f"argument {arg.name}")
        marked = sharding_call(imp, x, "Sharding", x.shape, s)
        local.append(sharding_call(imp, marked, "SPMDFullToShardShape", shape,
                                   Sharding.manual()))
    body = imp.region(region, scope, "manual_computation")
    from xlapy.stablehlo.importer import split_results

    called = imp.cur.add(Instruction("call", local, body.root.shape if body.root else
                                     Shape.tuple([]), called=[body], name="manual_body"))
    results = split_results(called, len(outs)) if body.multi_result else [called]
    declared = imp.declared_results(node)
    out = []
    for r, s, t in zip(results, outs, declared):
        full = imp.static(t, node.pos, "sdy.manual_computation result")
        marked = sharding_call(imp, r, "Sharding", r.shape, Sharding.manual())
        out.append(sharding_call(imp, marked, "SPMDShardToFullShape", full, s))
    return out


IMPORTERS = {"sdy.sharding_constraint": import_constraint, "sdy.reshard": import_constraint,
             "sdy.sharding_group": import_group, "sdy.manual_computation": import_manual}

__all__ = ["IMPORTERS", "attr_sharding", "parse_mesh_decl", "register_syntax"]
