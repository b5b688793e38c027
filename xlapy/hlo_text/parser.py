"""Parse HloModule text into plain nodes (module, computations, instructions, raw attributes).

Grammar (XLA's hlo_parser, the parts programs use):

    module      := 'HloModule' name (',' key '=' value)* section* computation*
    section     := ('FileNames' | 'FunctionNames' | 'FileLocations' | 'StackFrames') lines
    computation := ['ENTRY'] name [signature] '{' instruction* '}'
    signature   := '(' (name ':' shape),* ')' '->' shape
    instruction := ['ROOT'] name '=' shape opcode '(' operands ')' (',' key '=' value)*
    operand     := [shape] name            (constant / parameter: a literal / a number)
    shape       := type '[' dims ']' [layout] | '(' shape,* ')' | 'token[]'

Attribute values are kept as raw text with their position; `attrs.py` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xlapy.hlo_text.cursor import Cursor
from xlapy.types import ElementType, Layout, Shape
from xlapy.types.limits import MAX_NESTING

_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_ELEMENT_TYPES = {e.value: e for e in ElementType if e not in (ElementType.TUPLE,)}


@dataclass
class Attr:
    """`key=value` after an instruction's operands: raw value text and where it starts."""

    key: str
    value: str
    pos: int


@dataclass
class InstrNode:
    name: str
    shape: Shape
    opcode: str
    operands: list[tuple[str, int]]
    attrs: dict[str, Attr]
    pos: int
    opcode_pos: int
    is_root: bool = False
    #: The raw text between the parentheses for `constant(...)` and `parameter(...)`.
    raw_args: str = ""
    raw_pos: int = 0


@dataclass
class CompNode:
    name: str
    pos: int
    is_entry: bool
    instructions: list[InstrNode] = field(default_factory=list)
    param_shapes: list[Shape] | None = None


@dataclass
class ModuleNode:
    name: str
    attrs: dict[str, Attr]
    computations: list[CompNode]


class HloParser:
    """Reads one HloModule; errors are ParseErrors at the offending character."""

    def __init__(self, text: str, filename: str = "<input>") -> None:
        self.cur = Cursor(text, filename)

    # ---- module -------------------------------------------------------------------------------
    def parse_module(self) -> ModuleNode:
        c = self.cur
        c.expect("HloModule", "at the start of an HLO module")
        name, _ = c.name("a module name")
        attrs: dict[str, Attr] = {}
        while c.accept(","):
            key, _ = c.name("a module attribute")
            c.expect("=")
            value, pos = c.balanced(",")
            attrs[key] = Attr(key, value, pos)
        comps: list[CompNode] = []
        while not c.at_end():
            word = c.peek_name()
            if word in _SECTIONS:
                self._skip_section()
                continue
            comps.append(self.parse_computation())
        return ModuleNode(name, attrs, comps)

    def _skip_section(self) -> None:
        """Debug-info tables of optimized HLO (file names, stack frames): up to a blank line."""
        c = self.cur
        c.name()
        c.rest_of_line()
        text = c.text
        while c.pos < len(text):
            end = text.find("\n", c.pos + 1)
            end = len(text) if end < 0 else end
            line = text[c.pos + 1:end]
            if not line.strip():
                break
            c.pos = end

    def parse_computation(self) -> CompNode:
        c = self.cur
        is_entry = c.accept("ENTRY")
        name, pos = c.name("a computation name (or 'ENTRY')")
        comp = CompNode(name, pos, is_entry)
        if c.peek("("):
            comp.param_shapes = self._signature()
        c.expect("{", f"to open computation {name}")
        while not c.accept("}"):
            if c.at_end():
                raise c.error(c.end_pos(), f"computation {name} is not closed with '}}'")
            comp.instructions.append(self.parse_instruction())
        if not comp.instructions:
            raise c.error(pos, f"computation {name} has no instructions")
        return comp

    def _signature(self) -> list[Shape]:
        c = self.cur
        c.expect("(")
        shapes: list[Shape] = []
        if not c.accept(")"):
            while True:
                c.name("a parameter name")
                c.expect(":")
                shapes.append(self.parse_shape())
                if c.accept(")"):
                    break
                c.expect(",", "or ')' in the computation signature")
        c.expect("->", "after the parameter list")
        self.parse_shape()
        return shapes

    # ---- instructions -------------------------------------------------------------------------
    def parse_instruction(self) -> InstrNode:
        c = self.cur
        pos = c.skip()
        is_root = False
        if c.peek_name() == "ROOT":
            c.name()
            is_root = True
        name, pos = c.name("an instruction name")
        c.expect("=", f"after instruction name {name}")
        shape = self.parse_shape()
        opcode, opcode_pos = c.name("an opcode")
        node = InstrNode(name, shape, opcode, [], {}, pos, opcode_pos, is_root)
        c.expect("(", f"after opcode {opcode}")
        if opcode in ("constant", "parameter"):
            node.raw_args, node.raw_pos = c.balanced(")")
            c.expect(")")
        elif not c.accept(")"):
            while True:
                node.operands.append(self._operand())
                if c.accept(")"):
                    break
                c.expect(",", "or ')' between operands")
        while c.accept(","):
            key, kpos = c.name("an attribute name")
            c.expect("=", f"after attribute {key}")
            value, vpos = c.balanced(",")
            if key in node.attrs:
                raise c.error(kpos, f"attribute {key} given twice")
            node.attrs[key] = Attr(key, value, vpos)
        return node

    def _operand(self) -> tuple[str, int]:
        c = self.cur
        pos = c.skip()
        word = c.peek_name()
        if c.peek("(") or (word in _ELEMENT_TYPES and c.text.startswith("[", pos + len(word))):
            self.parse_shape()  # the old format spells each operand's shape
        return c.name("an operand name")

    # ---- shapes -------------------------------------------------------------------------------
    def parse_shape(self, depth: int = 0) -> Shape:
        c = self.cur
        pos = c.skip()
        if c.accept("("):
            if depth >= MAX_NESTING:
                raise c.error(pos, f"tuple shape nested more than {MAX_NESTING} levels deep")
            parts: list[Shape] = []
            if not c.accept(")"):
                while True:
                    parts.append(self.parse_shape(depth + 1))
                    if c.accept(")"):
                        break
                    c.expect(",", "or ')' in a tuple shape")
            return Shape.tuple(parts)
        word, _ = c.name("a shape")
        if word == "token":
            c.expect("[")
            c.expect("]")
            return Shape.token()
        et = _ELEMENT_TYPES.get(word)
        if et is None:
            raise c.error(pos, f"unknown element type '{word}'", len(word))
        c.expect("[", f"after element type {word}")
        dims: list[int] = []
        dynamic: list[bool] = []
        if not c.accept("]"):
            while True:
                dyn = c.accept("<=")
                if c.accept("?"):
                    raise c.error(c.pos - 1, "unbounded dynamic dimensions are not supported")
                dim_pos = c.skip()
                dims.append(c.integer("a dimension size"))
                if dims[-1] < 0:
                    raise c.error(dim_pos, f"dimension size {dims[-1]} is negative")
                dynamic.append(dyn)
                if c.accept("]"):
                    break
                c.expect(",", "or ']' in the dimensions")
        layout = self._layout(len(dims)) if c.text.startswith("{", c.pos) else None
        shape = Shape.array(et, dims, layout)
        if any(dynamic):
            shape = Shape(shape.element_type, shape.dimensions, (), shape.layout, tuple(dynamic))
        return shape

    def _layout(self, rank: int) -> Layout:
        """`{1,0}`, `{1,0:T(8,128)}` (tiling, memory space... read and ignored)."""
        c = self.cur
        pos = c.expect("{")
        m2m: list[int] = []
        while not c.peek("}") and not c.peek(":"):
            m2m.append(c.integer("a layout dimension"))
            if not c.accept(","):
                break
        if c.accept(":"):
            c.balanced("}")
        c.expect("}", "to close the layout")
        if sorted(m2m) != list(range(rank)):
            raise c.error(pos, f"layout {{{','.join(map(str, m2m))}}} is not a permutation of "
                               f"the {rank} dimension(s)")
        return Layout(tuple(m2m))
