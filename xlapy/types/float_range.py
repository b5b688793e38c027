"""Decimal float literals that do not fit their element type.

Both text front doors (StableHLO `dense<...>`, HLO `constant(...)`) refuse a finite decimal
literal whose value rounds (to nearest, ties to even) past the type's largest finite value:
numpy would make it inf (or NaN for the `fn`/`fnuz` f8 types, or saturate for f4/f6) with at
most a RuntimeWarning. A value that rounds to the largest finite value is fine, and so is one
that underflows to zero or a subnormal (MLIR and XLA accept both). `inf`/`nan` spellings and hex
bit patterns are not decimal literals and are never checked here.

XLA's HLO parser refuses the same values ("value ... is out of range for literal's primitive
type"); MLIR's parser (as shipped with jaxlib 0.10) rounds them silently to inf: xlapy follows
XLA for both front doors, so a program never silently computes with an infinity it did not
spell.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import cache

import ml_dtypes
import numpy as np

from xlapy.types.element_type import ElementType


@cache
def _limit(et: ElementType) -> tuple[float, float, bool]:
    """(largest finite, overflow threshold, whether a value exactly at it overflows)."""
    dtype = et.dtype
    fmax = np.array(ml_dtypes.finfo(dtype).max, dtype)
    if et is ElementType.F64:
        return float(fmax), float("inf"), False
    uint = np.dtype(f"u{dtype.itemsize}")
    bits = fmax.view(uint)
    prev = np.array(bits - 1, uint).view(dtype)
    top, below = float(fmax), float(prev)
    # Halfway between max and the next value (max + half an ulp) overflows only when ties to
    # even go up, i.e. when max's last significand bit is 1 (not for e4m3fn, whose all-ones
    # significand at the top exponent is NaN).
    return top, top + (top - below) / 2, bool(int(bits) & 1)


def fit_decimals(values: np.ndarray, et: ElementType, tokens: Sequence[str] | None = None
                 ) -> tuple[int | None, np.ndarray]:
    """(index of the first value that overflows `et` or None, the values to convert).

    `values` are float64 parses of decimal literals only (0 elsewhere; inf means the decimal
    overflowed float64 itself); `tokens`, when given, are their spellings. A float64 value
    exactly halfway between `et`'s max and the next power is decided on the exact decimal
    (no double rounding through float64), and one that rounds to max comes back as +-max, so
    numpy's cast does not round it up to inf a second time.
    """
    values = np.array(values, dtype=np.float64)
    if not et.is_float:
        return None, values
    top, threshold, tie_up = _limit(et)
    mag = np.abs(values)
    bad = np.isinf(mag) | (mag > threshold)
    for i in np.flatnonzero(mag == threshold) if threshold < float("inf") else ():
        exact: Fraction | None = None
        if tokens is not None:
            try:
                exact = abs(Fraction(tokens[i].strip()))
            except (ValueError, ZeroDivisionError):
                exact = None
        edge = Fraction(threshold)
        bad[i] = (exact > edge or (exact == edge and tie_up)) if exact is not None else tie_up
        if not bad[i]:
            values[i] = np.copysign(top, values[i])
    idx = np.flatnonzero(bad)
    return (int(idx[0]) if idx.size else None), values


def out_of_range_message(token: str, et: ElementType, type_name: str) -> str:
    top, _, _ = _limit(et)
    return (f"float literal {token.strip()} is out of range for {type_name} (largest finite "
            f"value {top:.9g}); spell inf or a hex bit pattern for a non-finite value")
