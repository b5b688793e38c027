"""The type grammar of the MLIR text parser (the `Parser` methods that read types):
tensor, tuple, token, scalar and dialect types, with a one-match path for the plain static
tensor types that make up most of a JAX module's types."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from xlapy.stablehlo.attr_structs import bounded_dims
from xlapy.stablehlo.lexer import nested
from xlapy.stablehlo.nodes import OpaqueType, TensorType
from xlapy.types import ElementType, Shape, from_shlo_name

if TYPE_CHECKING:
    from xlapy.errors import ParseError
    from xlapy.stablehlo.lexer import Lexer, Token

SCALAR_TYPES = {t.shlo_name: t for t in ElementType if t.is_array}
SCALAR_TYPES.update({f"s{t.shlo_name[1:]}": t for t in ElementType
                     if t.is_signed and t.shlo_name.startswith("i")})
SCALAR_TYPES["index"] = ElementType.S64  # `tensor<2xindex>` in custom_call layout attributes
#: A static tensor type written without spaces (`tensor<32x64xf32>`, most of a JAX module's
#: types): group 1 the dims, group 2 the element type. parse_type reads one in a single match
#: (a quarter of a JAX module's parse was scanning its tokens one by one); anything else (a
#: space, `?`, an encoding, 19+ digit dims, an unknown element type) takes the token path,
#: which gives the same Shape or the error with its location.
_PLAIN_TENSOR = re.compile(r"tensor<((?:[0-9]{1,18}x)*)([A-Za-z0-9_]+)>")


class TypeParsing:
    """Mixed into Parser: reads types with its token primitives."""

    lex: Lexer
    _tensor_types: dict[str, Shape]

    if TYPE_CHECKING:
        def next(self) -> Token: ...
        def peek(self) -> Token: ...
        def at(self, text: str) -> bool: ...
        def accept(self, text: str) -> bool: ...
        def expect(self, text: str, what: str = "") -> Token: ...
        def error(self, tok: Token, message: str) -> ParseError: ...
        def parse_attr(self) -> Any: ...
        def parse_type_list(self, close: str) -> list[Any]: ...

    @nested
    def parse_type(self) -> Any:
        lex = self.lex
        tok = lex._peeked or lex.peek()
        text = tok.text
        if text == "tensor":
            m = _PLAIN_TENSOR.match(lex.text, tok.pos)
            if m is not None:
                got = self._tensor_types.get(m.group())
                if got is None:
                    got = self._plain_tensor(m)
                if got is not None:
                    lex._peeked = None
                    lex.pos = m.end()
                    return got
        lex._peeked = None
        if text == "tensor":
            self.expect("<", "after 'tensor'")
            if self.at("*"):
                raise self.error(self.peek(), "unranked tensors are not supported")
            dims = self.lex.scan_dims()
            et = self.parse_element_type()
            dynamic: tuple[bool, ...] = ()
            if self.accept(","):  # an encoding: `#stablehlo.bounds<4, ?>` is read, others ignored
                enc_tok = self.peek()
                dims, dynamic = bounded_dims(self, enc_tok, dims, self.parse_attr())
            self.expect(">", "to close the tensor type")
            if isinstance(et, OpaqueType):
                d = "".join(("?" if x is None else str(x)) + "x" for x in dims)
                return OpaqueType(f"tensor<{d}{et.text}>")
            if any(d is None for d in dims):
                return TensorType(et, tuple(dims))
            if any(dynamic):  # a bounded dynamic dimension: the bound, marked dynamic
                return Shape(et, tuple(dims), dynamic=dynamic)  # type: ignore[arg-type]
            return Shape.array(et, dims)  # type: ignore[arg-type]
        if text == "tuple":
            self.expect("<")
            return Shape.tuple(self.parse_type_list(">"))
        if text == "!stablehlo.token":
            return Shape.token()
        if tok.kind == "bang":
            if self.at("<"):
                body, _ = self.lex.raw_until(">", self.peek().pos + 1)
                self.expect(">")
                return OpaqueType(f"{text}<{body}>")
            return OpaqueType(text)
        if tok.kind == "ident":
            self.lex._peeked = None
            self.lex.pos = tok.pos
            et = self.parse_element_type()
            if isinstance(et, OpaqueType):
                return et
            return Shape.scalar(et)
        raise self.error(tok, f"expected a type, found '{text}'" if text else
                         "expected a type, found end of input")

    def _plain_tensor(self, m: re.Match[str]) -> Shape | None:
        """The Shape of a _PLAIN_TENSOR match, shared per parse (None: an element type this
        path does not know; the token path reads it or says what is wrong)."""
        et = SCALAR_TYPES.get(m.group(2))
        if et is None:
            return None
        dims = [int(d) for d in m.group(1).split("x")[:-1]]
        got = self._tensor_types[m.group()] = Shape.array(et, dims)
        return got

    def plain_tensor(self, text: str) -> Shape | None:
        """`text`, a whole plain static tensor type (line_forms.py), as parse_type reads it."""
        got = self._tensor_types.get(text)
        if got is None:
            m = _PLAIN_TENSOR.fullmatch(text)
            got = self._plain_tensor(m) if m is not None else None
        return got

    def parse_element_type(self) -> ElementType | OpaqueType:
        tok = self.next()
        if tok.text == "complex":
            self.expect("<")
            inner = self.next()
            self.expect(">")
            try:
                return from_shlo_name(f"complex<{inner.text}>")
            except Exception:
                raise self.error(inner, f"unsupported complex element type "
                                        f"'{inner.text}'") from None
        if tok.kind == "bang":
            body = ""
            if self.at("<"):
                body, _ = self.lex.raw_until(">", self.peek().pos + 1)
                self.expect(">")
                body = f"<{body}>"
            return OpaqueType(tok.text + body)
        et = SCALAR_TYPES.get(tok.text)
        if et is None:
            raise self.error(tok, f"unknown element type '{tok.text}'")
        return et


__all__ = ["SCALAR_TYPES", "TypeParsing"]
