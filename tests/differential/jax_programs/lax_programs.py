"""Element-wise lax primitives over several dtypes: unary, binary, comparisons, conversions,
bit manipulation and complex numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from tests.differential.jax_programs.table import (
    BF16,
    BOOL,
    C64,
    C128,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U32,
    U64,
    Program,
    arr,
    bits,
    dtype_id,
    inexact,
)

S = (3, 4)
FLOATS = (BF16, F16, F32, F64)

# name -> (function, domain, exact?)
UNARY_FLOAT: dict[str, tuple[Callable[..., Any], tuple[float, float], bool]] = {
    "abs": (lax.abs, (-3, 3), True),
    "neg": (lax.neg, (-3, 3), True),
    "sign": (lax.sign, (-3, 3), True),
    "floor": (lax.floor, (-3, 3), True),
    "ceil": (lax.ceil, (-3, 3), True),
    "round_even": (lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), (-4, 4), True),
    "round_away": (lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), (-4, 4), True),
    "is_finite": (lax.is_finite, (-3, 3), True),
    "sqrt": (lax.sqrt, (0.01, 9), True),
    "square": (lax.square, (-3, 3), True),
    "rsqrt": (lax.rsqrt, (0.1, 9), False),
    "cbrt": (lax.cbrt, (-8, 8), False),
    "exp": (lax.exp, (-4, 4), False),
    "exp2": (lax.exp2, (-4, 4), False),
    "expm1": (lax.expm1, (-2, 2), False),
    "log": (lax.log, (0.05, 9), False),
    "log1p": (lax.log1p, (-0.5, 4), False),
    "tanh": (lax.tanh, (-4, 4), False),
    "logistic": (lax.logistic, (-6, 6), False),
    "sin": (lax.sin, (-4, 4), False),
    "cos": (lax.cos, (-4, 4), False),
    "tan": (lax.tan, (-1.2, 1.2), False),
    "asin": (lax.asin, (-0.9, 0.9), False),
    "acos": (lax.acos, (-0.9, 0.9), False),
    "atan": (lax.atan, (-4, 4), False),
    "sinh": (lax.sinh, (-3, 3), False),
    "cosh": (lax.cosh, (-3, 3), False),
    "asinh": (lax.asinh, (-4, 4), False),
    "acosh": (lax.acosh, (1.1, 6), False),
    "atanh": (lax.atanh, (-0.9, 0.9), False),
    "erf": (lax.erf, (-2, 2), False),
    "erfc": (lax.erfc, (-1, 2), False),
    "erf_inv": (lax.erf_inv, (-0.9, 0.9), False),
    "lgamma": (lax.lgamma, (0.2, 6), False),
    "digamma": (lax.digamma, (0.5, 6), False),
    "bessel_i0e": (lax.bessel_i0e, (-4, 4), False),
    "bessel_i1e": (lax.bessel_i1e, (-4, 4), False),
    "integer_pow3": (lambda x: lax.integer_pow(x, 3), (-2, 2), False),
    "integer_pow_m2": (lambda x: lax.integer_pow(x, -2), (0.5, 2), False),
}

#: The dtypes each unary op runs over (all four floats for the common ones).
UNARY_DTYPES = {name: FLOATS if name in {"abs", "neg", "floor", "exp", "log", "tanh", "sqrt",
                                         "sin", "logistic", "round_even"} else (F32, F64)
                for name in UNARY_FLOAT}

BINARY_FLOAT: dict[str, tuple[Callable[..., Any], tuple[float, float], bool]] = {
    "add": (lax.add, (-3, 3), True),
    "sub": (lax.sub, (-3, 3), True),
    "mul": (lax.mul, (-3, 3), True),
    "div": (lax.div, (0.5, 3), True),
    "rem": (lax.rem, (0.5, 5), True),
    "max": (lax.max, (-3, 3), True),
    "min": (lax.min, (-3, 3), True),
    "pow": (lax.pow, (0.1, 3), False),
    "atan2": (lax.atan2, (-3, 3), False),
    "nextafter": (lax.nextafter, (-3, 3), True),
}
BINARY_DTYPES = {name: FLOATS if name in {"add", "mul", "div", "max"} else (F32, F64)
                 for name in BINARY_FLOAT}

BINARY_INT: dict[str, Callable[..., Any]] = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "max": lax.max, "min": lax.min,
    "and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor,
}
INTS = (I8, I32, I64, U8, U32)

COMPARES = {"eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge}


def _unary() -> list[Program]:
    out = []
    for name, (fn, (lo, hi), exact) in UNARY_FLOAT.items():
        for dt in UNARY_DTYPES[name]:
            out.append(Program(f"lax.{name}[{dtype_id(dt)}]", fn, (arr(S, dt, lo, hi),),
                               None if exact else inexact(dt)))
    return out


def _binary() -> list[Program]:
    out = []
    for name, (fn, (lo, hi), exact) in BINARY_FLOAT.items():
        for dt in BINARY_DTYPES[name]:
            out.append(Program(f"lax.{name}[{dtype_id(dt)}]", fn,
                               (arr(S, dt, lo, hi), arr(S, dt, lo, hi)),
                               None if exact else inexact(dt)))
    for name, fn in BINARY_INT.items():
        for dt in INTS if name in {"add", "mul", "and"} else (I32, U8):
            lo, hi = (0, 255) if dt.kind == "u" else (-100, 100)
            out.append(Program(f"lax.{name}[{dtype_id(dt)}]", fn,
                               (arr(S, dt, lo, hi), arr(S, dt, lo, hi))))
    for dt in (I8, I32, I64, U32):
        lo = 0 if dt.kind == "u" else -50
        num = arr((4, 6), dt, lo, 50)
        den = np.array([[3, -3, 0, 7, 1, -1]] * 4).astype(dt) if dt.kind == "i" else \
            np.array([[3, 5, 0, 7, 1, 2]] * 4).astype(dt)
        out.append(Program(f"lax.div_by_zero[{dtype_id(dt)}]", lax.div, (num, den)))
        out.append(Program(f"lax.rem_by_zero[{dtype_id(dt)}]", lax.rem, (num, den)))
    imin = np.array([np.iinfo(np.int32).min, 7, -7], np.int32)
    out.append(Program("lax.div_int_min_by_minus_one[s32]", lax.div,
                       (imin, np.array([-1, -1, 2], np.int32))))
    for dt in (I8, I32, U32, I64):
        nbits = dt.itemsize * 8
        lo = 0 if dt.kind == "u" else -100
        x = arr(S, dt, lo, 100)
        sh = arr(S, dt, 0, nbits + 3)
        for name, fn in (("shift_left", lax.shift_left),
                         ("shift_right_logical", lax.shift_right_logical),
                         ("shift_right_arithmetic", lax.shift_right_arithmetic)):
            out.append(Program(f"lax.{name}[{dtype_id(dt)}]", fn, (x, sh)))
    for dt in (I8, I32, U8, U64):
        x = bits(S, dt)
        out.append(Program(f"lax.population_count[{dtype_id(dt)}]", lax.population_count, (x,)))
        out.append(Program(f"lax.clz[{dtype_id(dt)}]", lax.clz, (x,)))
        out.append(Program(f"lax.not[{dtype_id(dt)}]", lax.bitwise_not, (x,)))
    for dt in (I32, I64):
        out.append(Program(f"lax.integer_pow5[{dtype_id(dt)}]", lambda x: lax.integer_pow(x, 5),
                           (arr(S, dt, -6, 6),)))
        out.append(Program(f"lax.abs[{dtype_id(dt)}]", lax.abs, (arr(S, dt, -50, 50),)))
        out.append(Program(f"lax.sign[{dtype_id(dt)}]", lax.sign, (arr(S, dt, -5, 5),)))
        out.append(Program(f"lax.neg[{dtype_id(dt)}]", lax.neg, (arr(S, dt, -50, 50),)))
    out.append(Program("jnp.power[s32]", jnp.power, (arr(S, I32, -4, 4), arr(S, I32, 0, 7))))
    for name in ("and", "or", "xor"):
        out.append(Program(f"lax.{name}[pred]", BINARY_INT[name], (arr(S, BOOL), arr(S, BOOL))))
    out.append(Program("lax.not[pred]", lax.bitwise_not, (arr(S, BOOL),)))
    return out


def _compare_select() -> list[Program]:
    out = []
    for dt in (F32, I32, U32, BF16, F64):
        x = arr(S, dt, 0, 4)
        y = arr(S, dt, 0, 4)
        if dt.kind == "f":
            x = x.copy()
            x[0, 0] = np.nan
        for name, fn in COMPARES.items():
            if dt in (BF16, F64) and name not in ("lt", "eq"):
                continue
            out.append(Program(f"lax.{name}[{dtype_id(dt)}]", fn, (x, y)))
    out.append(Program("lax.eq[pred]", lax.eq, (arr(S, BOOL), arr(S, BOOL))))
    for dt in (F32, I8, BF16):
        out.append(Program(f"lax.select[{dtype_id(dt)}]", lax.select,
                           (arr(S, BOOL), arr(S, dt, -5, 5), arr(S, dt, -5, 5))))
        out.append(Program(f"lax.clamp[{dtype_id(dt)}]", lambda x: lax.clamp(
            np.array(-1, x.dtype), x, np.array(2, x.dtype)), (arr(S, dt, -5, 5),)))
    out.append(Program("lax.select_n3[s32]", lax.select_n,
                       (arr(S, I32, 0, 2), arr(S, I32, 0, 9), arr(S, I32, 10, 19),
                        arr(S, I32, 20, 29))))
    out.append(Program("lax.clamp_array[f32]", lax.clamp,
                       (arr(S, F32, -2, -1), arr(S, F32, -3, 3), arr(S, F32, 1, 2))))
    return out


CONVERSIONS = [
    (F32, I32, -300, 300), (F32, U8, -10, 300), (F32, I8, -200, 200), (F64, F32, -1e3, 1e3),
    (F32, BF16, -3, 3), (F32, F16, -7e4, 7e4), (BF16, F32, -3, 3), (F16, F64, -3, 3),
    (I32, F32, -2**30, 2**30), (I64, F64, -2**60, 2**60), (I64, I8, -1000, 1000),
    (I32, U32, -100, 100), (U32, I64, 0, 2**32 - 1), (BOOL, F32, 0, 1), (F32, BOOL, -1, 1),
    (I32, BOOL, -2, 2), (F64, I64, -1e10, 1e10), (F32, C64, -3, 3), (I8, F16, -128, 127),
    (U8, BF16, 0, 255), (F64, F16, -1e5, 1e5), (I16, F32, -3e4, 3e4),
]


def _conversions() -> list[Program]:
    out = []
    for src, dst, lo, hi in CONVERSIONS:
        x = arr(S, src, lo, hi)
        if src.kind == "f":
            x = x.copy()
            x.flat[:3] = [np.nan, np.inf, -np.inf]
        out.append(Program(f"lax.convert[{dtype_id(src)}->{dtype_id(dst)}]",
                           lambda a, d=dst: lax.convert_element_type(a, d), (x,)))
    for src, dst in ((F32, I32), (I32, F32), (F32, U32), (F64, I64), (F16, I16), (BF16, U8),
                     (U32, F32), (F64, U32), (I64, F64), (U64, I8)):
        out.append(Program(f"lax.bitcast_convert[{dtype_id(src)}->{dtype_id(dst)}]",
                           lambda a, d=dst: lax.bitcast_convert_type(a, d),
                           (bits((3, 4, 2) if src.itemsize < dst.itemsize else S, src)
                            if src.kind != "f" else arr((3, 4, 2) if src.itemsize <
                                                        dst.itemsize else S, src),)))
    for dt, eb, mb in ((F32, 5, 10), (F32, 8, 7), (F64, 11, 23), (F32, 4, 3)):
        x = arr(S, dt, -1e5, 1e5)
        out.append(Program(f"lax.reduce_precision_e{eb}m{mb}[{dtype_id(dt)}]",
                           lambda a, e=eb, m=mb: lax.reduce_precision(a, e, m), (x,)))
    return out


COMPLEX_UNARY = {
    "abs": (lax.abs, False), "neg": (lax.neg, True), "real": (lax.real, True),
    "imag": (lax.imag, True), "conj": (lax.conj, True), "exp": (lax.exp, False),
    "log": (lax.log, False), "sqrt": (lax.sqrt, False), "sign": (lax.sign, False),
    "tanh": (lax.tanh, False), "sin": (lax.sin, False), "expm1": (lax.expm1, False),
    "log1p": (lax.log1p, False), "rsqrt": (lax.rsqrt, False),
}


def _complex() -> list[Program]:
    out = []
    for name, (fn, exact) in COMPLEX_UNARY.items():
        for dt in (C64, C128) if name in {"abs", "exp", "real", "sqrt"} else (C64,):
            out.append(Program(f"lax.{name}[{dtype_id(dt)}]", fn, (arr(S, dt, -2, 2),),
                               None if exact else inexact(dt, 5)))
    for name, fn, exact in (("add", lax.add, True), ("mul", lax.mul, False),
                            ("div", lax.div, False), ("pow", lax.pow, False),
                            ("eq", lax.eq, True)):
        for dt in (C64, C128):
            out.append(Program(f"lax.{name}[{dtype_id(dt)}]", fn,
                               (arr(S, dt, -2, 2), arr(S, dt, 0.5, 2)),
                               None if exact else inexact(dt, 5)))
    out.append(Program("lax.complex[f32]", lax.complex, (arr(S, F32), arr(S, F32))))
    out.append(Program("lax.complex[f64]", lax.complex, (arr(S, F64), arr(S, F64))))
    return out


def _special() -> list[Program]:
    out = []
    for dt in (F32, F64):
        a = arr(S, dt, 0.5, 4)
        x = arr(S, dt, 0.1, 5)
        out.append(Program(f"lax.igamma[{dtype_id(dt)}]", lax.igamma, (a, x), inexact(dt, 50)))
        out.append(Program(f"lax.igammac[{dtype_id(dt)}]", lax.igammac, (a, x),
                           inexact(dt, 50)))
        out.append(Program(f"lax.zeta[{dtype_id(dt)}]", lax.zeta,
                           (arr(S, dt, 1.5, 4), arr(S, dt, 0.5, 3)), inexact(dt, 50)))
        out.append(Program(f"lax.polygamma[{dtype_id(dt)}]", lax.polygamma,
                           (np.full(S, 1, dt), arr(S, dt, 0.5, 3)), inexact(dt, 50)))
        out.append(Program(f"lax.random_gamma_grad[{dtype_id(dt)}]", lax.random_gamma_grad,
                           (a, x), inexact(dt, 100)))
    return out


def programs() -> list[Program]:
    return _unary() + _binary() + _compare_select() + _conversions() + _complex() + _special()
