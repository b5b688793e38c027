"""`dense<...>` bodies -> numpy arrays of exactly the element type (nested, splat, hex, complex).

Large numeric bodies take a vectorized path (one split, one numpy conversion), which keeps
parsing of big constants fast.
"""

from __future__ import annotations

import re

import numpy as np

from xlapy.errors import XlapyError
from xlapy.types import ElementType, Shape
from xlapy.types.float_range import _limit, fit_decimals, out_of_range_message
from xlapy.types.limits import literal_size_problem

_TOKEN = re.compile(r"\(|\)|true|false|[-+]?0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|"
                    r"[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
_SIMPLE = re.compile(r"^[\s\[\],0-9.eE+\-]*$")


class DenseError(XlapyError):
    """A dense literal does not fit its tensor type."""


def _uint_for_bits(bits: int) -> np.dtype:
    return np.dtype({1: np.uint8, 2: np.uint8, 4: np.uint8, 6: np.uint8, 8: np.uint8,
                     16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])


def _scalar_array(tokens: list[str], et: ElementType) -> np.ndarray:
    dtype = et.dtype
    if et is ElementType.PRED:
        return np.array([t in ("true", "1") for t in tokens], dtype=np.bool_)
    if et.is_float:
        hex_ = [t.lstrip("+-").startswith("0x") for t in tokens]
        values = np.array([0.0 if h else float(t) for t, h in zip(tokens, hex_, strict=True)],
                          dtype=np.float64)
        decimal = np.array([not h and t.lstrip("+-")[:1] not in ("i", "n")
                            for t, h in zip(tokens, hex_, strict=True)], dtype=bool)
        values = np.where(decimal, _fit(np.where(decimal, values, 0.0), tokens, et), values)
        if any(hex_):
            out = np.empty(len(tokens), dtype=dtype)
            for i, t in enumerate(tokens):
                if hex_[i]:
                    out[i] = np.array(int(t, 16), _uint_for_bits(et.bits)).view(dtype)
                else:
                    out[i] = values[i].astype(dtype)
            return out
        return values.astype(dtype)
    if et.is_complex:
        raise DenseError("complex element needs (re, im) pairs")
    values = [int(t, 16) if t.lstrip("+-").startswith("0x") else int(t) for t in tokens]
    bits = et.bits
    if et.is_signed:
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    for v in values:
        if not lo <= v <= hi:
            raise DenseError(f"value {v} does not fit {et.shlo_name}")
    if et.is_signed:  # hex bit patterns of negative numbers wrap
        values = [v - (1 << bits) if v >= (1 << (bits - 1)) else v for v in values]
    return np.array(values, dtype=np.int64 if et.is_signed else np.uint64).astype(dtype)


def _fit(values: np.ndarray, tokens: list[str], et: ElementType) -> np.ndarray:
    """Refuse a finite decimal that rounds past `et`'s largest finite value (float_range)."""
    i, values = fit_decimals(values, et, tokens)
    if i is not None:
        n = len(tokens)
        where = f" (element {i} of {n})" if n > 1 else ""
        raise DenseError(out_of_range_message(tokens[i], et, et.shlo_name) + where)
    return values


def dense_to_array(body: str, shape: Shape) -> np.ndarray:
    """Parse a dense body for `shape`; a single value is a splat."""
    try:
        return _dense_to_array(body, shape)
    except (ValueError, OverflowError) as e:
        raise DenseError(f"bad dense literal for {shape.to_shlo()}: {e}") from None


def _dense_to_array(body: str, shape: Shape) -> np.ndarray:
    if not shape.is_array:
        raise DenseError(f"dense literal needs a tensor type, got {shape.to_shlo()}")
    et = shape.element_type
    n = shape.num_elements
    body = body.strip()
    if n != 1 and _is_splat(body, et):  # one element, whatever the size: stays a splat
        one = _dense_to_array(body, Shape.array(et, ()))
        return np.broadcast_to(one, shape.dimensions)
    problem = literal_size_problem(n, et.dtype.itemsize, f"dense literal {shape.to_shlo()}")
    if problem:
        raise DenseError(problem)
    if n == 1:
        one = _plain_scalar(body, et)
        if one is not None:
            return one.reshape(shape.dimensions)
    if body.startswith('"0x') or body.startswith("'0x"):
        raw = bytes.fromhex(body[3:-1])
        itemsize = et.dtype.itemsize
        count = len(raw) // itemsize
        if count not in (1, n) or len(raw) % itemsize:
            raise DenseError(f"hex data of {len(raw)} bytes does not fit {shape.to_shlo()}")
        arr = np.frombuffer(raw, dtype=et.dtype).copy()
        return np.broadcast_to(arr, (n,)).reshape(shape.dimensions).copy() if count == 1 \
            else arr.reshape(shape.dimensions)
    if et.is_complex:
        arr = _complex(body, et)
    elif len(body) > 256 and _SIMPLE.match(body) and not et.is_float and "." not in body:
        arr = np.array(re.split(r"[\s\[\],]+", body.strip("[] \n")),
                       dtype=np.int64 if et.is_signed else np.uint64).astype(et.dtype)
    elif len(body) > 256 and _SIMPLE.match(body) and et.is_float:
        words = re.split(r"[\s\[\],]+", body.strip("[] \n"))
        arr = _fit(np.array(words, dtype=np.float64), words, et).astype(et.dtype)
    else:
        tokens = _TOKEN.findall(body)
        rest = re.sub(r"[\s\[\],]", "", _TOKEN.sub("", body))
        if rest:
            raise DenseError(f"unexpected {rest[:12]!r} in dense literal for "
                             f"{shape.to_shlo()}")
        arr = _scalar_array(tokens, et)
    if arr.size == 1 and n != 1 and not body.startswith("["):
        return np.full(shape.dimensions, arr.reshape(()), dtype=et.dtype)
    if arr.size != n:
        raise DenseError(f"dense literal has {arr.size} element(s) but {shape.to_shlo()} "
                         f"needs {n}")
    return arr.reshape(shape.dimensions)


_DECIMAL = re.compile(r"[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
_INTEGER = re.compile(r"[-+]?[0-9]{1,18}")


def _plain_scalar(body: str, et: ElementType) -> np.ndarray | None:
    """A one-element body that is a plain decimal well inside `et`'s range (most of a JAX
    module's constants: `0.000000e+00`, `5.120000e+02`, `1`), as the general path reads it
    (float64 then cast; the integer itself); None for anything else (hex, inf, nan, a
    value at or past the edge of the range, booleans, complex): the general path."""
    if et.is_float:
        if _DECIMAL.fullmatch(body) is None:
            return None
        value = float(body)
        if not abs(value) < _limit(et)[1]:  # past or at the rounding edge: fit_decimals
            return None
        return np.array([value]).astype(et.dtype)
    if et.is_integer:
        if _INTEGER.fullmatch(body) is None:
            return None
        v, bits = int(body), et.bits
        lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if et.is_signed else (0, 1 << bits)
        if not lo <= v < hi:  # (the general path wraps some; it decides those)
            return None
        return np.array([v], dtype=np.int64 if et.is_signed else np.uint64).astype(et.dtype)
    return None


def _is_splat(body: str, et: ElementType) -> bool:
    """A body holding a single element (`1.5`, `(1.0, 2.0)`, `"0x0000C03F"`), not a list."""
    if body.startswith("["):
        return False
    if body.startswith('"0x') or body.startswith("'0x"):
        return len(body) - 4 == 2 * et.dtype.itemsize
    if et.is_complex:
        return len(_PAREN.findall(body)) == 1
    return len(_TOKEN.findall(body)) == 1


_PAREN = re.compile(r"\(([^()]*)\)")  # linear: no two quantifiers over the same characters


def _complex(body: str, et: ElementType) -> np.ndarray:
    parts: list[tuple[str, str]] = []
    for group in _PAREN.findall(body):
        pair = [p.strip() for p in group.split(",")]
        if len(pair) != 2 or not all(pair):
            raise DenseError(f"complex element needs (re, im), got ({group.strip()[:24]})")
        parts.append((pair[0], pair[1]))
    rest = re.sub(r"[\s\[\],]", "", _PAREN.sub("", body))
    if rest:
        raise DenseError(f"unexpected {rest[:12]!r} in complex dense literal")
    part_t = ElementType.F32 if et is ElementType.C64 else ElementType.F64
    re_ = _scalar_array([a for a, _ in parts], part_t)
    im = _scalar_array([b for _, b in parts], part_t)
    out = np.empty(len(parts), dtype=et.dtype)
    out.real, out.imag = re_, im
    return out
