"""Printing interpreter values the way the StableHLO reference interpreter does."""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.types import Shape, from_dtype
from xlapy.types.literal import Token


def _elem(x: Any, kind: str) -> str:
    if kind == "b":
        return "true" if x else "false"
    if kind == "c":
        return f"({_elem(x.real, 'f')}, {_elem(x.imag, 'f')})"
    if kind in "iu":
        return str(int(x))
    f = float(x)
    if np.isnan(f) or np.isinf(f):
        return str(f).upper() if np.isnan(f) else ("-INF" if f < 0 else "INF")
    return repr(f) if f != int(f) or abs(f) >= 1e16 else f"{f:.6e}" if abs(f) >= 1e7 \
        else f"{f:.6f}".rstrip("0").rstrip(".") + (".0" if f == int(f) else "")


def format_array(arr: np.ndarray) -> str:
    kind = arr.dtype.kind
    if kind not in "biufc":
        kind = "i" if from_dtype(arr.dtype).is_integer else "f"

    def rec(a: np.ndarray) -> str:
        if a.ndim == 0:
            return _elem(a[()], kind)
        return "[" + ", ".join(rec(x) for x in a) + "]"

    return rec(arr)


def format_value(value: Any) -> str:
    """`tensor<2xi32> {\\n  [0, 1]\\n}`; tuples print each element."""
    if isinstance(value, tuple):
        return "\n".join(format_value(v) for v in value)
    if isinstance(value, Token):
        return "!stablehlo.token"
    arr = np.asarray(value)
    shape = Shape.array(from_dtype(arr.dtype), arr.shape)
    return f"{shape.to_shlo()} {{\n  {format_array(arr)}\n}}"
