"""Readers for HLO attribute values and constant literals, each reporting errors in place.

Forms: `{1,0}`, `{{0,1},{2,3}}`, `{[0:2:1], [1:3]}` (slice), `0_0x1_2_1` (padding),
`{size=3x3 stride=1x1 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}` (window),
`b01f_01io->b01f` (dim_labels), `%comp` / `{%a, %b}` (computations), `true`, `"text"`, numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.errors import ParseError
from xlapy.hlo_text.cursor import Cursor
from xlapy.hlo_text.parser import Attr
from xlapy.ops.linalg_conv import ConvDimensionNumbers
from xlapy.types import ElementType, Literal, Shape
from xlapy.types.float_range import fit_decimals, out_of_range_message
from xlapy.types.limits import MAX_NESTING, literal_size_problem

_SCALAR = re.compile(r"-?(?:nan|inf)(?:\([^)]*\))?|true|false|-?0x[0-9A-Fa-f]+|"
                     r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


class AttrReader:
    """Reads one attribute's raw value; `done()` checks that all of it was used."""

    def __init__(self, cur: Cursor, attr: Attr) -> None:
        self.cur = cur
        self.attr = attr
        self.end = attr.pos + len(attr.value)
        cur.pos = attr.pos

    def error(self, message: str, pos: int | None = None) -> ParseError:
        at = self.cur.pos if pos is None else pos
        return self.cur.error(at, f"attribute {self.attr.key}: {message}")

    def done(self) -> None:
        if self.cur.skip() < self.end:
            raise self.error(f"unexpected '{self.cur.text[self.cur.pos:self.end]}'")

    def ints(self) -> tuple[int, ...]:
        """`{1,2}`, `{}` or one bare integer."""
        c = self.cur
        if not c.accept("{"):
            return (self.int_(),)
        out: list[int] = []
        if not c.accept("}"):
            while True:
                out.append(self.int_())
                if c.accept("}"):
                    break
                self.expect(",")
        return tuple(out)

    def int_(self) -> int:
        try:
            return self.cur.integer()
        except ParseError:
            raise self.error("expected an integer") from None

    def expect(self, s: str) -> None:
        if not self.cur.accept(s):
            raise self.error(f"expected '{s}'")

    def int_lists(self) -> tuple[tuple[int, ...], ...]:
        """`{{0,1},{2,3}}` (replica groups, source-target pairs)."""
        c = self.cur
        self.expect("{")
        out: list[tuple[int, ...]] = []
        if not c.accept("}"):
            while True:
                out.append(self.ints())
                if c.accept("}"):
                    break
                self.expect(",")
        return tuple(out)

    def word(self) -> str:
        m = re.compile(r"[A-Za-z0-9_.\-$]+").match(self.cur.text, self.cur.skip())
        if m is None:
            raise self.error("expected a word")
        self.cur.pos = m.end()
        return m.group()

    def x_list(self) -> list[str]:
        """`3x3`, `1_1x0_2`: the parts of one `x`-separated value."""
        return self.word().split("x")


def read_ints(cur: Cursor, attr: Attr) -> tuple[int, ...]:
    r = AttrReader(cur, attr)
    out = r.ints()
    r.done()
    return out


def read_int(cur: Cursor, attr: Attr) -> int:
    r = AttrReader(cur, attr)
    out = r.int_()
    r.done()
    return out


def read_int_lists(cur: Cursor, attr: Attr) -> tuple[tuple[int, ...], ...]:
    r = AttrReader(cur, attr)
    out = r.int_lists()
    r.done()
    return out


def read_bool(cur: Cursor, attr: Attr) -> bool:
    if attr.value not in ("true", "false"):
        raise cur.error(attr.pos, f"attribute {attr.key}: expected true or false",
                        len(attr.value) or 1)
    return attr.value == "true"


def read_float(cur: Cursor, attr: Attr) -> float:
    try:
        return float(attr.value)
    except ValueError:
        raise cur.error(attr.pos, f"attribute {attr.key}: expected a number") from None


def read_string(cur: Cursor, attr: Attr) -> str:
    v = attr.value
    if len(v) >= 2 and v[0] == v[-1] == '"':
        return bytes(v[1:-1], "utf-8").decode("unicode_escape")
    raise cur.error(attr.pos, f"attribute {attr.key}: expected a quoted string")


def read_computations(cur: Cursor, attr: Attr) -> list[tuple[str, int]]:
    """`%comp` or `{%a, %b}` -> names with positions."""
    r = AttrReader(cur, attr)
    out: list[tuple[str, int]] = []
    if cur.accept("{"):
        if not cur.accept("}"):
            while True:
                out.append(cur.name("a computation name"))
                if cur.accept("}"):
                    break
                r.expect(",")
    else:
        out.append(cur.name("a computation name"))
    r.done()
    return out


def read_slice(cur: Cursor, attr: Attr) -> tuple[tuple[int, ...], ...]:
    """`{[0:2:1], [1:3]}` -> (starts, limits, strides)."""
    r = AttrReader(cur, attr)
    r.expect("{")
    starts: list[int] = []
    limits: list[int] = []
    strides: list[int] = []
    if not cur.accept("}"):
        while True:
            r.expect("[")
            starts.append(r.int_())
            r.expect(":")
            limits.append(r.int_())
            strides.append(r.int_() if cur.accept(":") else 1)
            r.expect("]")
            if cur.accept("}"):
                break
            r.expect(",")
    r.done()
    return tuple(starts), tuple(limits), tuple(strides)


def _pad_triples(r: AttrReader, parts: list[str], allow_interior: bool
                 ) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    for p in parts:
        try:
            nums = tuple(int(v) for v in re.findall(r"-?[0-9]+", p))
            ok = re.fullmatch(r"-?[0-9]+_-?[0-9]+(?:_-?[0-9]+)?", p) is not None
        except ValueError:
            ok = False
        if not ok or (len(nums) == 3 and not allow_interior):
            raise r.error(f"bad padding '{p}' (expected low_high{'[_interior]' * allow_interior})",
                          r.attr.pos)
        out.append(nums if len(nums) == 3 else nums + (0,))
    return out


def read_padding(cur: Cursor, attr: Attr) -> list[tuple[int, ...]]:
    """`0_0x1_2_1` -> [(low, high, interior), ...]; empty for a scalar pad."""
    if attr.value == "":
        return []
    r = AttrReader(cur, attr)
    out = _pad_triples(r, r.x_list(), True)
    r.done()
    return out


@dataclass(frozen=True)
class Window:
    """A window attribute; a field the text leaves out is None (the op's default)."""

    size: tuple[int, ...]
    stride: tuple[int, ...] | None = None
    pad: tuple[tuple[int, int], ...] | None = None
    lhs_dilate: tuple[int, ...] | None = None
    rhs_dilate: tuple[int, ...] | None = None
    rhs_reversal: tuple[bool, ...] | None = None


_WINDOW_KEYS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


def read_window(cur: Cursor, attr: Attr) -> Window:
    """`{size=3x3 stride=1x1 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}`."""
    r = AttrReader(cur, attr)
    r.expect("{")
    fields: dict[str, list[str]] = {}
    while not cur.accept("}"):
        kpos = cur.skip()
        key = r.word()
        if key not in _WINDOW_KEYS:
            raise r.error(f"unknown window field '{key}'", kpos)
        r.expect("=")
        fields[key] = r.x_list()
    r.done()
    if not fields:
        return Window(())
    if "size" not in fields:
        raise r.error("window has no size", attr.pos)
    try:
        size = tuple(int(v) for v in fields["size"])
        n = len(size)

        def ints(key: str) -> tuple[int, ...] | None:
            if key not in fields:
                return None
            vals = tuple(int(v) for v in fields[key])
            if len(vals) != n:
                raise r.error(f"window {key} has {len(vals)} entries, size has {n}", attr.pos)
            return vals

        pad = None
        if "pad" in fields:
            triples = _pad_triples(r, fields["pad"], False)
            if len(triples) != n:
                raise r.error(f"window pad has {len(triples)} entries, size has {n}", attr.pos)
            pad = tuple((p[0], p[1]) for p in triples)
        rev = ints("rhs_reversal")
        return Window(size, ints("stride"), pad, ints("lhs_dilate"), ints("rhs_dilate"),
                      None if rev is None else tuple(bool(v) for v in rev))
    except ValueError:
        raise r.error("window values must be integers", attr.pos) from None


def format_window(size: tuple[int, ...], stride: tuple[int, ...] | None = None,
                  pad: tuple[tuple[int, int], ...] | None = None,
                  lhs_dilate: tuple[int, ...] | None = None,
                  rhs_dilate: tuple[int, ...] | None = None,
                  rhs_reversal: tuple[bool, ...] | None = None) -> str:
    """The inverse of `read_window`: fields that are None (or empty) are left out."""
    def x(vals: tuple[int, ...]) -> str:
        return "x".join(str(int(v)) for v in vals)

    parts = [f"size={x(size)}"] if size else []
    if stride:
        parts.append(f"stride={x(stride)}")
    if pad:
        parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in pad))
    if lhs_dilate:
        parts.append(f"lhs_dilate={x(lhs_dilate)}")
    if rhs_dilate:
        parts.append(f"rhs_dilate={x(rhs_dilate)}")
    if rhs_reversal:
        parts.append(f"rhs_reversal={x(tuple(int(v) for v in rhs_reversal))}")
    return "{" + " ".join(parts) + "}"


def read_dim_labels(cur: Cursor, attr: Attr) -> ConvDimensionNumbers:
    """`b01f_01io->b01f`: batch/feature/spatial letters of input, kernel and output."""
    m = re.fullmatch(r"([A-Za-z0-9]+)_([A-Za-z0-9]+)->([A-Za-z0-9]+)", attr.value)
    if m is None:
        raise cur.error(attr.pos, "attribute dim_labels: expected e.g. b01f_01io->b01f")
    lhs, rhs, out = m.groups()

    def spatial(labels: str) -> tuple[int, ...]:
        digits = sorted((int(ch), i) for i, ch in enumerate(labels) if ch.isdigit())
        return tuple(i for _, i in digits)

    try:
        return ConvDimensionNumbers(
            lhs.index("b"), lhs.index("f"), spatial(lhs),
            rhs.index("i"), rhs.index("o"), spatial(rhs),
            out.index("b"), out.index("f"), spatial(out))
    except ValueError:
        raise cur.error(attr.pos, "attribute dim_labels: input/output need 'b' and 'f', the "
                                  "kernel 'i' and 'o'") from None


def format_dim_labels(d: ConvDimensionNumbers) -> str:
    def labels(rank: int, named: dict[int, str], spatial: tuple[int, ...]) -> str:
        out = [""] * rank
        for i, ch in named.items():
            out[i] = ch
        for k, i in enumerate(spatial):
            out[i] = str(k)
        return "".join(out)

    n = len(d.input_spatial_dimensions) + 2
    return (labels(n, {d.input_batch_dimension: "b", d.input_feature_dimension: "f"},
                   d.input_spatial_dimensions) + "_"
            + labels(n, {d.kernel_input_feature_dimension: "i",
                         d.kernel_output_feature_dimension: "o"}, d.kernel_spatial_dimensions)
            + "->"
            + labels(n, {d.output_batch_dimension: "b", d.output_feature_dimension: "f"},
                     d.output_spatial_dimensions))


# ---- literals -----------------------------------------------------------------------------------
def read_literal(cur: Cursor, text: str, pos: int, shape: Shape) -> Literal:
    """A constant's value: `1`, `{ {1, 2}, {3, 4} }`, `(1, 2)` (complex), `( {1}, 2 )` (tuple)."""
    cur.pos = pos
    lit = _literal(cur, shape)
    if cur.skip() < pos + len(text):
        raise cur.error(cur.pos, "unexpected text after the constant's value")
    return lit


def _literal(cur: Cursor, shape: Shape) -> Literal:
    if shape.is_tuple:
        cur.expect("(", "to open a tuple constant")
        parts = []
        for i, s in enumerate(shape.tuple_shapes):
            if i:
                cur.expect(",")
            parts.append(_literal(cur, s))
        cur.expect(")", "to close a tuple constant")
        return Literal.tuple(parts)
    if shape.is_token:
        raise cur.error(cur.pos, "a constant cannot have token type")
    start = cur.skip()
    problem = literal_size_problem(shape.num_elements, shape.dtype.itemsize, f"constant {shape}")
    if problem:
        raise cur.error(start, problem)
    flat: list[Any] = []
    is_complex = shape.element_type.is_complex
    _values(cur, flat, is_complex)
    want = shape.num_elements
    if len(flat) != want:
        raise cur.error(start, f"constant of shape {shape} needs {want} element(s), got "
                               f"{len(flat)}")
    try:
        arr = _to_array(flat, shape)
    except (ValueError, OverflowError) as e:
        raise cur.error(start, f"bad constant value for {shape}: {e}") from None
    return Literal(Shape.array(shape.element_type, shape.dimensions, shape.layout), arr)


def _values(cur: Cursor, out: list[Any], is_complex: bool, depth: int = 0) -> None:
    if cur.accept("{"):
        if depth >= MAX_NESTING:
            raise cur.error(cur.pos - 1, f"constant nested more than {MAX_NESTING} levels deep")
        if cur.accept("}"):
            return
        while True:
            _values(cur, out, is_complex, depth + 1)
            if cur.accept("}"):
                return
            cur.expect(",", "or '}' in a constant")
    if is_complex and cur.accept("("):
        re_ = _scalar(cur)
        cur.expect(",", "in a complex constant")
        im = _scalar(cur)
        cur.expect(")", "to close a complex constant")
        out.append((re_, im))  # converted in _to_array, where bad values become ParseErrors
        return
    out.append(_scalar(cur))


def _scalar(cur: Cursor) -> str:
    pos = cur.skip()
    m = _SCALAR.match(cur.text, pos)
    if m is None:
        raise cur.error(pos, "expected a constant value")
    cur.pos = m.end()
    return m.group()


def _to_array(flat: list[Any], shape: Shape) -> np.ndarray:
    et, dtype = shape.element_type, shape.dtype
    if et.is_complex:
        part = ElementType.F32 if et is ElementType.C64 else ElementType.F64
        re_ = _floats([v[0] if isinstance(v, tuple) else v for v in flat], part, et.value)
        im = _floats([v[1] if isinstance(v, tuple) else "0" for v in flat], part, et.value)
        arr = np.empty(len(flat), dtype=dtype)
        arr.real, arr.imag = re_, im
    elif et.value == "pred":
        arr = np.array([_bool(v) for v in flat], dtype=dtype)
    elif et.is_integer:
        ints = [int(v, 0) if isinstance(v, str) and "x" in v else int(float(v))
                if isinstance(v, str) and ("." in v or "e" in v.lower()) else int(v) for v in flat]
        info = np.iinfo(np.int64 if et.is_signed else np.uint64)
        bits = et.bits
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if et.is_signed else (0,
                                                                                  (1 << bits) - 1)
        for v in ints:
            if not lo <= v <= hi or not info.min <= v <= info.max:
                raise ValueError(f"{v} is out of range for {et.value}")
        arr = np.array(ints, dtype=np.int64 if et.is_signed else np.uint64).astype(dtype)
    else:
        arr = _floats(flat, et, et.value).astype(dtype)
    return arr.reshape(shape.dimensions)


def _bool(v: str) -> bool:
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise ValueError(f"'{v}' is not a pred value")


def _float(v: str) -> float:
    s = v.split("(")[0]
    return float(s)


def _floats(flat: list[str], et: ElementType, type_name: str) -> np.ndarray:
    """float64 values of `flat` for element type `et`; a finite decimal that rounds past
    `et`'s largest finite value is a ValueError naming it (xlapy.types.float_range)."""
    values = np.array([_float(v) for v in flat], dtype=np.float64)
    decimal = np.array([not v.lstrip("+-")[:1].isalpha() and "x" not in v for v in flat],
                       dtype=bool)
    i, fitted = fit_decimals(np.where(decimal, values, 0.0), et, flat)
    if i is not None:
        where = f" (element {i} of {len(flat)})" if len(flat) > 1 else ""
        raise ValueError(out_of_range_message(flat[i], et, type_name) + where)
    return np.where(decimal, fitted, values)
