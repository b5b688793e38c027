"""Recursive-descent parser of MLIR text (StableHLO, chlo, check, interpreter, func) into nodes.

Generic ops are parsed here; pretty forms dispatch through `syntax.PRETTY` to per-op parsers
that use the same primitives. Errors carry spans (`file:line:col`, source line, caret).
"""

from __future__ import annotations

from typing import Any

from xlapy.errors import ParseError
from xlapy.stablehlo.attr_structs import parse_conv_dims, parse_hash_body
from xlapy.stablehlo.generic_form import func_from_generic, module_from_generic
from xlapy.stablehlo.lexer import Lexer, Token, _number, _symbol_name, _unescape, nested
from xlapy.stablehlo.line_forms import match_line
from xlapy.stablehlo.nodes import (
    BlockArg,
    ConvDims,
    DenseArray,
    DenseAttr,
    EnumAttr,
    FuncNode,
    FunctionTypeAttr,
    ModuleNode,
    OpNode,
    RegionNode,
    SymbolRef,
    TypedNumber,
    ValueRef,
)
from xlapy.stablehlo.sdy import parse_mesh_decl
from xlapy.stablehlo.type_parser import SCALAR_TYPES, TypeParsing
from xlapy.types import Shape


class Parser(TypeParsing):
    #: Read JAX's most common op lines in one match each (line_forms.py); off: every op
    #: token by token (tests compare the two).
    line_forms = True

    def __init__(self, text: str, filename: str = "<input>", line_offset: int = 0) -> None:
        self.lex = Lexer(text, filename, line_offset)
        self.aliases: dict[str, Any] = {}
        self.locs: dict[str, str] = {}  # `#locN = loc(...)`: raw text, resolved on import
        self.depth = 0  # nesting of types, attributes and regions (see `nested`)
        #: `tensor<...>` text -> its Shape, for the plain static types (_PLAIN_TENSOR).
        self._tensor_types: dict[str, Shape] = {}

    # ---- token helpers ---------------------------------------------------------------------
    # at / accept run for most tokens: they read the lexer's lookahead slot directly.
    def peek(self) -> Token:
        return self.lex._peeked or self.lex.peek()

    def next(self) -> Token:
        return self.lex.next()

    def at(self, text: str) -> bool:
        return (self.lex._peeked or self.lex.peek()).text == text

    def accept(self, text: str) -> bool:
        lex = self.lex
        if (lex._peeked or lex.peek()).text == text:
            lex._peeked = None
            return True
        return False

    def expect(self, text: str, what: str = "") -> Token:
        tok = self.lex.next()
        if tok.text != text:
            found = "end of input" if tok.kind == "eof" else f"'{tok.text}'"
            raise self.lex.error(tok, f"expected '{text}'{' ' + what if what else ''}, "
                                      f"found {found}")
        return tok

    def expect_kind(self, kind: str, what: str) -> Token:
        tok = self.lex.next()
        if tok.kind != kind:
            found = "end of input" if tok.kind == "eof" else f"'{tok.text}'"
            raise self.lex.error(tok, f"expected {what}, found {found}")
        return tok

    def error(self, tok: Token, message: str) -> ParseError:
        return self.lex.error(tok, message)

    def number(self, tok: Token) -> int | float:
        """The value of a number token (ParseError for one Python cannot convert)."""
        if tok.kind != "number":
            found = "end of input" if tok.kind == "eof" else f"'{tok.text}'"
            raise self.error(tok, f"expected a number, found {found}")
        try:
            return _number(tok.text)
        except ValueError:
            raise self.error(tok, f"number '{tok.text[:24]}' is out of range") from None

    def integer(self, what: str) -> int:
        """The next token as an integer that fits int64 (`what` names it in errors)."""
        tok = self.expect_kind("number", what)
        value = self.number(tok)
        if not isinstance(value, int):
            raise self.error(tok, f"expected {what} (an integer), found '{tok.text}'")
        if not -(1 << 63) <= value < (1 << 63):
            raise self.error(tok, f"{what} {tok.text[:24]} does not fit in 64 bits")
        return value

    # ---- module structure --------------------------------------------------------------------
    def parse_module(self) -> ModuleNode:
        funcs: list[FuncNode] = []
        meshes: dict[str, Any] = {}
        name, attrs, pos = "main", {}, 0
        wrapped = False
        while True:
            tok = self.peek()
            if tok.kind == "eof":
                break
            if tok.kind == "hash":  # `#loc1 = loc(...)` or an attribute alias
                self.next()
                self.expect("=")
                if self.at("loc"):
                    self.locs[tok.text] = self.skip_loc() or ""
                else:
                    self.aliases[tok.text] = self.parse_attr()
            elif tok.text == '"builtin.module"':
                if wrapped or funcs:
                    raise self.error(tok, "expected one module per input chunk")
                wrapped, pos = True, tok.pos
                name, attrs, funcs = module_from_generic(self, self.parse_op())
            elif tok.text == "module":
                if wrapped or funcs:
                    raise self.error(tok, "expected one module per input chunk")
                self.next()
                pos = tok.pos
                wrapped = True
                if self.peek().kind == "symbol":
                    name = _symbol_name(self.next().text)
                if self.accept("attributes"):
                    attrs = self.parse_attr_dict()
                self.expect("{", "to open the module body")
                while not self.accept("}"):
                    if self.peek().kind == "eof":
                        raise self.error(self.peek(), "unterminated module: expected '}'")
                    if self.at("sdy.mesh"):
                        meshes.update([parse_mesh_decl(self)])
                        continue
                    funcs.append(self.parse_func())
                self.skip_loc()
            elif tok.text in ("func.func", '"func.func"'):
                funcs.append(self.parse_func())
            elif tok.text == "{-#":
                raise self.error(tok, "dialect resources are not supported")
            else:
                raise self.error(tok, f"expected 'module' or 'func.func', found '{tok.text}'")
        return ModuleNode(name, attrs, funcs, pos, meshes=meshes, locs=self.locs)

    def parse_func(self) -> FuncNode:
        if self.at('"func.func"'):
            return func_from_generic(self, self.parse_op())
        tok = self.expect("func.func", "to start a function")
        visibility = "public"
        if self.peek().text in ("private", "public", "nested"):
            visibility = self.next().text
        name = _symbol_name(self.expect_kind("symbol", "a function name (@name)").text)
        self.expect("(", "to open the argument list")
        args: list[BlockArg] = []
        arg_attrs: list[dict[str, Any]] = []
        if not self.accept(")"):
            while True:
                vt = self.expect_kind("value", "an argument name (%name)")
                self.expect(":")
                args.append(BlockArg(vt.text, self.parse_type(), vt.pos))
                arg_attrs.append(self.parse_attr_dict() if self.at("{") else {})
                self.skip_loc()
                if self.accept(")"):
                    break
                self.expect(",", "between arguments")
        results: list[Any] = []
        result_attrs: list[dict[str, Any]] = []
        if self.accept("->"):
            if self.accept("("):
                if not self.accept(")"):
                    while True:
                        results.append(self.parse_type())
                        result_attrs.append(self.parse_attr_dict() if self.at("{") else {})
                        if self.accept(")"):
                            break
                        self.expect(",", "between result types")
            else:
                results.append(self.parse_type())
        if self.accept("attributes"):
            self.parse_attr_dict()
        self.expect("{", "to open the function body")
        body = self.parse_block_ops()
        self.skip_loc()
        return FuncNode(name, args, results, body, visibility, arg_attrs, tok.pos, result_attrs)

    def parse_block_ops(self) -> list[OpNode]:
        """Ops up to and including the closing `}`."""
        ops: list[OpNode] = []
        lex = self.lex
        while True:
            if lex._peeked is None and self.line_forms:  # (no token read ahead: try the line)
                op = match_line(self, lex.pos)
                if op is not None:
                    ops.append(op)
                    continue
            if self.accept("}"):
                return ops
            if self.peek().kind == "eof":
                raise self.error(self.peek(), "unterminated block: expected '}'")
            ops.append(self.parse_op())

    @nested
    def parse_region(self) -> RegionNode:
        """`{ ^bb0(%a: t, ...): ops }` or `{ ops }` (the `{` not yet consumed)."""
        self.expect("{", "to open a region")
        args: list[BlockArg] = []
        if self.peek().kind == "block":
            self.next()
            if self.accept("("):
                args = self.parse_block_args()
            self.expect(":", "after the block label")
        ops = self.parse_block_ops()
        if self.peek().kind == "block":
            raise self.error(self.peek(), "regions with several blocks are not supported")
        return RegionNode(args, ops)

    def parse_block_args(self) -> list[BlockArg]:
        """`%a: t, ...)` (after the `(`): block arguments (a region's, a manual
        computation's)."""
        args: list[BlockArg] = []
        if self.accept(")"):
            return args
        while True:
            vt = self.expect_kind("value", "a block argument (%name)")
            self.expect(":")
            args.append(BlockArg(vt.text, self.parse_type(), vt.pos))
            self.skip_loc()
            if self.accept(")"):
                return args
            self.expect(",", "between block arguments")

    # ---- ops ---------------------------------------------------------------------------------
    def parse_op(self) -> OpNode:
        start = self.peek()
        results: list[tuple[str, int]] = []
        if start.kind == "value":
            if self.line_forms:
                op = match_line(self, start.pos)
                if op is not None:
                    return op
            while True:
                vt = self.expect_kind("value", "a result name")
                if "#" in vt.text:
                    raise self.error(vt, "a result name cannot have a '#' index")
                count = 1
                if self.accept(":"):
                    count = self.integer("a result count")
                results.append((vt.text, count))
                if self.accept("="):
                    break
                self.expect(",", "between results or '=' after them")
        tok = self.next()
        if tok.kind == "string":
            op = self.parse_generic(tok.text[1:-1], tok)
        elif tok.kind == "ident":
            from xlapy.stablehlo.syntax import parse_pretty

            op = parse_pretty(self, tok.text, tok)
        elif tok.kind == "eof":
            raise self.error(tok, "unexpected end of input: expected an op")
        else:
            raise self.error(tok, f"expected an op, found '{tok.text}'")
        op.results = results
        op.pos = tok.pos
        op.loc = self.skip_loc()
        return op

    def parse_generic(self, name: str, tok: Token) -> OpNode:
        self.expect("(", "to open the operand list")
        operands = self.parse_operand_list(")")
        attrs: dict[str, Any] = {}
        if self.at("["):
            raise self.error(self.peek(), "successor blocks are not supported")
        if self.accept("<"):
            self.expect("{", "to open the properties")
            attrs.update(self.parse_attr_dict_body())
            self.expect(">")
        regions: list[RegionNode] = []
        if self.accept("("):
            while True:
                regions.append(self.parse_region())
                if self.accept(")"):
                    break
                self.expect(",", "between regions")
        if self.at("{"):
            attrs.update(self.parse_attr_dict())
        self.expect(":", "before the op's function type")
        operand_types, result_types = self.parse_function_type()
        return OpNode(name, [], operands, attrs, regions, operand_types, result_types, tok.pos)

    def parse_operand_list(self, close: str | None) -> list[ValueRef]:
        """Comma-separated `%v` / `%v#i` up to `close` (consumed), or as many as there are."""
        out: list[ValueRef] = []
        if close is not None and self.accept(close):
            return out
        while True:
            vt = self.expect_kind("value", "an operand (%name)")
            out.append(value_ref(vt))
            if close is not None:
                if self.accept(close):
                    return out
                self.expect(",", "between operands")
            elif not (self.at(",") and self._next_is_value()):
                return out
            else:
                self.next()

    def _next_is_value(self) -> bool:
        """After a `,`: is the token following it a value (without consuming anything)?"""
        lex = self.lex
        save_pos, save_peek = lex.pos, lex._peeked
        lex.next()
        ok = lex.peek().kind == "value"
        lex.pos, lex._peeked = save_pos, save_peek
        return ok

    def parse_function_type(self) -> tuple[list[Any], list[Any]]:
        self.expect("(", "to open the operand types")
        operand_types = self.parse_type_list(")")
        self.expect("->", "between operand and result types")
        if self.accept("("):
            results = self.parse_type_list(")")
        else:
            results = [self.parse_type()]
        return operand_types, results

    def parse_type_list(self, close: str) -> list[Any]:
        out: list[Any] = []
        if self.accept(close):
            return out
        while True:
            out.append(self.parse_type())
            if self.accept(close):
                return out
            self.expect(",", "between types")

    def parse_trailing_types(self) -> tuple[list[Any] | None, list[Any]]:
        """After `:`: a function type `(a, b) -> c` or a list of types `a, b`."""
        if self.at("("):
            return self.parse_function_type()
        types = [self.parse_type()]
        while self.at(",") and not self._next_is_value():
            self.next()
            types.append(self.parse_type())
        if self.accept("->"):  # chlo's `a, b -> c` / `a -> (b, c)`
            if self.accept("("):
                return types, self.parse_type_list(")")
            return types, [self.parse_type()]
        return None, types

    def skip_loc(self) -> str | None:
        """Step over a `loc(...)`; returns the text inside it (None when there is none)."""
        if not self.at("loc"):
            return None
        self.next()
        self.expect("(")
        text, _ = self.lex.raw_until(")")
        self.expect(")")
        return text

    # ---- attributes ----------------------------------------------------------------------------
    def parse_attr_dict(self) -> dict[str, Any]:
        self.expect("{")
        return self.parse_attr_dict_body()

    def parse_attr_dict_body(self) -> dict[str, Any]:
        """`name = value, flag, ...}` (the `{` already consumed; the `}` consumed)."""
        out: dict[str, Any] = {}
        if self.accept("}"):
            return out
        while True:
            tok = self.next()
            if tok.kind not in ("ident", "string"):
                raise self.error(tok, f"expected an attribute name, found '{tok.text}'")
            key = tok.text[1:-1] if tok.kind == "string" else tok.text
            out[key] = self.parse_attr() if self.accept("=") else True
            if self.accept("}"):
                return out
            self.expect(",", "between attributes")

    @nested
    def parse_attr(self) -> Any:
        tok = self.peek()
        text, kind = tok.text, tok.kind
        if kind == "number":
            self.next()
            value: Any = self.number(tok)
            if self.at(":") and not self._colon_is_type_separator():
                self.next()
                typ = self.parse_type()
                if isinstance(value, int) and isinstance(typ, Shape) and typ.is_array and \
                        typ.element_type.is_float:
                    value = float(value)
                return TypedNumber(value, typ)
            return value
        if kind == "string":
            self.next()
            return _unescape(text[1:-1])
        if kind == "symbol":
            self.next()
            return SymbolRef(_symbol_name(text))
        if text in ("true", "false"):
            self.next()
            return text == "true"
        if text == "unit":
            self.next()
            return True
        if text == "dense":
            self.next()
            lt = self.expect("<")
            body, pos = self.lex.raw_until(">", lt.pos + 1)
            self.expect(">")
            typ = None
            if self.accept(":"):
                typ = self.parse_type()
            return DenseAttr(body.strip(), typ, pos)
        if text == "array":
            self.next()
            self.expect("<")
            el = self.next().text
            values: list[Any] = []
            if self.accept(":"):
                while not self.at(">"):
                    v = self.next()
                    values.append(v.text == "true" if v.text in ("true", "false")
                                  else self.number(v))
                    if not self.at(">"):
                        self.expect(",", "between array elements")
            self.expect(">")
            return DenseArray(el, tuple(values))
        if text == "[":
            self.next()
            items: list[Any] = []
            if not self.accept("]"):
                while True:
                    items.append(self.parse_attr())
                    if self.accept("]"):
                        break
                    self.expect(",", "between list elements")
            return items
        if text == "{":
            return self.parse_attr_dict()
        if text == "(":  # `function_type = (a, b) -> c` of a generic func.func
            inputs, results = self.parse_function_type()
            return FunctionTypeAttr(tuple(inputs), tuple(results))
        if kind == "hash":
            self.next()
            if text in self.aliases:
                return self.aliases[text]
            if self.accept("<"):
                return self.parse_hash_body(text, tok)
            return EnumAttr("alias", text)
        if text == "loc":
            self.skip_loc()
            return None
        if text in ("tensor", "tuple", "complex") or kind == "bang" or text in SCALAR_TYPES:
            return self.parse_type()
        if kind == "ident":
            self.next()
            return EnumAttr("", text)
        raise self.error(tok, f"expected an attribute value, found '{text}'" if text else
                         "expected an attribute value, found end of input")

    def _colon_is_type_separator(self) -> bool:
        """`1 : i64` vs a trailing `: type` of a pretty op; look at what follows the colon."""
        lex = self.lex
        save_pos, save_peek = lex.pos, lex._peeked
        lex.next()
        nxt = lex.peek()
        lex.pos, lex._peeked = save_pos, save_peek
        return not (nxt.text in SCALAR_TYPES or nxt.text == "index")

    def parse_hash_body(self, name: str, tok: Token) -> Any:
        """After `#name<`: an enum, a struct or another dialect's attribute (`attr_structs`)."""
        return parse_hash_body(self, name, tok)

    def parse_conv_dims(self) -> ConvDims:
        return parse_conv_dims(self)


def value_ref(tok: Token) -> ValueRef:
    name, _, idx = tok.text.partition("#")
    return ValueRef(name, int(idx) if idx else None, tok.pos)


def parse_text(text: str, filename: str = "<input>", line_offset: int = 0) -> ModuleNode:
    """Parse one module (a whole file or one `// -----` chunk)."""
    return Parser(text, filename, line_offset).parse_module()
