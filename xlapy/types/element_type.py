"""Element types: their kinds, bit widths, HLO and StableHLO spellings and numpy dtypes."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from xlapy.errors import XlapyError


class Kind(enum.Enum):
    PRED = "pred"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    COMPLEX = "complex"
    TOKEN = "token"
    TUPLE = "tuple"


@dataclass(frozen=True)
class _Info:
    hlo: str
    shlo: str
    kind: Kind
    bits: int
    dtype: np.dtype | None


def _dt(x: object) -> np.dtype:
    return np.dtype(x)  # type: ignore[call-overload]


class ElementType(enum.Enum):
    """XLA's PrimitiveType. Values are the HLO text spellings."""

    PRED = "pred"
    S2 = "s2"
    S4 = "s4"
    S8 = "s8"
    S16 = "s16"
    S32 = "s32"
    S64 = "s64"
    U2 = "u2"
    U4 = "u4"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    F4E2M1FN = "f4e2m1fn"
    F6E2M3FN = "f6e2m3fn"
    F6E3M2FN = "f6e3m2fn"
    F8E3M4 = "f8e3m4"
    F8E4M3 = "f8e4m3"
    F8E4M3FN = "f8e4m3fn"
    F8E4M3FNUZ = "f8e4m3fnuz"
    F8E4M3B11FNUZ = "f8e4m3b11fnuz"
    F8E5M2 = "f8e5m2"
    F8E5M2FNUZ = "f8e5m2fnuz"
    F8E8M0FNU = "f8e8m0fnu"
    BF16 = "bf16"
    F16 = "f16"
    F32 = "f32"
    F64 = "f64"
    C64 = "c64"
    C128 = "c128"
    TOKEN = "token"
    TUPLE = "tuple"

    # Identity hashing (members are singletons, equality is identity): Enum's own hashes the
    # member's name in Python code, and element types are hashed and tested for kinds
    # millions of times per compile (set membership in shape rules, dict keys).
    __hash__ = object.__hash__

    # Set on each member below the table (_INFO): plain attribute reads, no table lookup.
    _info: _Info
    _kind: Kind
    _is_array: bool

    # ---- properties -------------------------------------------------------------------------
    @property
    def info(self) -> _Info:
        return self._info

    @property
    def hlo_name(self) -> str:
        return self.value

    @property
    def shlo_name(self) -> str:
        """The spelling JAX prints (`i32`, `ui8`, `f8E4M3FN`, `complex<f32>`)."""
        return self.info.shlo

    @property
    def kind(self) -> Kind:
        return self._kind

    @property
    def bits(self) -> int:
        return self.info.bits

    @property
    def dtype(self) -> np.dtype:
        dt = self.info.dtype
        if dt is None:
            raise XlapyError(f"element type {self.value} has no numpy dtype")
        return dt

    @property
    def is_pred(self) -> bool:
        return self is ElementType.PRED

    @property
    def is_signed(self) -> bool:
        return self._kind is Kind.SIGNED

    @property
    def is_unsigned(self) -> bool:
        return self._kind is Kind.UNSIGNED

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not pred)."""
        return self._kind is Kind.SIGNED or self._kind is Kind.UNSIGNED

    @property
    def is_float(self) -> bool:
        return self._kind is Kind.FLOAT

    @property
    def is_complex(self) -> bool:
        return self._kind is Kind.COMPLEX

    @property
    def is_array(self) -> bool:
        return self._is_array

    @property
    def component_type(self) -> ElementType:
        """The real type of a complex type's parts; itself otherwise."""
        if self is ElementType.C64:
            return ElementType.F32
        if self is ElementType.C128:
            return ElementType.F64
        return self

    def __repr__(self) -> str:
        return f"ElementType.{self.name}"

    def __str__(self) -> str:
        return self.value


_E = ElementType
_INFO: dict[ElementType, _Info] = {
    _E.PRED: _Info("pred", "i1", Kind.PRED, 1, _dt(np.bool_)),
    _E.S2: _Info("s2", "i2", Kind.SIGNED, 2, _dt(ml_dtypes.int2)),
    _E.S4: _Info("s4", "i4", Kind.SIGNED, 4, _dt(ml_dtypes.int4)),
    _E.S8: _Info("s8", "i8", Kind.SIGNED, 8, _dt(np.int8)),
    _E.S16: _Info("s16", "i16", Kind.SIGNED, 16, _dt(np.int16)),
    _E.S32: _Info("s32", "i32", Kind.SIGNED, 32, _dt(np.int32)),
    _E.S64: _Info("s64", "i64", Kind.SIGNED, 64, _dt(np.int64)),
    _E.U2: _Info("u2", "ui2", Kind.UNSIGNED, 2, _dt(ml_dtypes.uint2)),
    _E.U4: _Info("u4", "ui4", Kind.UNSIGNED, 4, _dt(ml_dtypes.uint4)),
    _E.U8: _Info("u8", "ui8", Kind.UNSIGNED, 8, _dt(np.uint8)),
    _E.U16: _Info("u16", "ui16", Kind.UNSIGNED, 16, _dt(np.uint16)),
    _E.U32: _Info("u32", "ui32", Kind.UNSIGNED, 32, _dt(np.uint32)),
    _E.U64: _Info("u64", "ui64", Kind.UNSIGNED, 64, _dt(np.uint64)),
    _E.F4E2M1FN: _Info("f4e2m1fn", "f4E2M1FN", Kind.FLOAT, 4, _dt(ml_dtypes.float4_e2m1fn)),
    _E.F6E2M3FN: _Info("f6e2m3fn", "f6E2M3FN", Kind.FLOAT, 6, _dt(ml_dtypes.float6_e2m3fn)),
    _E.F6E3M2FN: _Info("f6e3m2fn", "f6E3M2FN", Kind.FLOAT, 6, _dt(ml_dtypes.float6_e3m2fn)),
    _E.F8E3M4: _Info("f8e3m4", "f8E3M4", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e3m4)),
    _E.F8E4M3: _Info("f8e4m3", "f8E4M3", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e4m3)),
    _E.F8E4M3FN: _Info("f8e4m3fn", "f8E4M3FN", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e4m3fn)),
    _E.F8E4M3FNUZ: _Info(
        "f8e4m3fnuz", "f8E4M3FNUZ", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e4m3fnuz)
    ),
    _E.F8E4M3B11FNUZ: _Info(
        "f8e4m3b11fnuz", "f8E4M3B11FNUZ", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e4m3b11fnuz)
    ),
    _E.F8E5M2: _Info("f8e5m2", "f8E5M2", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e5m2)),
    _E.F8E5M2FNUZ: _Info(
        "f8e5m2fnuz", "f8E5M2FNUZ", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e5m2fnuz)
    ),
    _E.F8E8M0FNU: _Info("f8e8m0fnu", "f8E8M0FNU", Kind.FLOAT, 8, _dt(ml_dtypes.float8_e8m0fnu)),
    _E.BF16: _Info("bf16", "bf16", Kind.FLOAT, 16, _dt(ml_dtypes.bfloat16)),
    _E.F16: _Info("f16", "f16", Kind.FLOAT, 16, _dt(np.float16)),
    _E.F32: _Info("f32", "f32", Kind.FLOAT, 32, _dt(np.float32)),
    _E.F64: _Info("f64", "f64", Kind.FLOAT, 64, _dt(np.float64)),
    _E.C64: _Info("c64", "complex<f32>", Kind.COMPLEX, 64, _dt(np.complex64)),
    _E.C128: _Info("c128", "complex<f64>", Kind.COMPLEX, 128, _dt(np.complex128)),
    _E.TOKEN: _Info("token", "!stablehlo.token", Kind.TOKEN, 0, None),
    _E.TUPLE: _Info("tuple", "tuple", Kind.TUPLE, 0, None),
}

for _t, _i in _INFO.items():
    _t._info, _t._kind = _i, _i.kind
    _t._is_array = _i.kind not in (Kind.TOKEN, Kind.TUPLE)
del _t, _i

#: Every array element type, in a stable order.
ARRAY_TYPES: tuple[ElementType, ...] = tuple(t for t in ElementType if t.is_array)
FLOAT_TYPES = tuple(t for t in ARRAY_TYPES if t.is_float)
INT_TYPES = tuple(t for t in ARRAY_TYPES if t.is_integer)
COMPLEX_TYPES = (ElementType.C64, ElementType.C128)

_BY_HLO = {t.hlo_name: t for t in ElementType}
_BY_SHLO: dict[str, ElementType] = {t.shlo_name: t for t in ARRAY_TYPES}
# The spec's `siN` spellings and MLIR's signless `iN` both mean signed.
_BY_SHLO.update({f"si{t.bits}": t for t in ARRAY_TYPES if t.is_signed})
_BY_DTYPE: dict[np.dtype, ElementType] = {t.dtype: t for t in ARRAY_TYPES}


def from_hlo_name(name: str) -> ElementType:
    try:
        return _BY_HLO[name]
    except KeyError:
        raise XlapyError(f"unknown HLO element type '{name}'") from None


def from_shlo_name(name: str) -> ElementType:
    try:
        return _BY_SHLO[name]
    except KeyError:
        raise XlapyError(f"unknown StableHLO element type '{name}'") from None


def from_dtype(dtype: object) -> ElementType:
    """The element type of a numpy dtype (bool, int*, float*, complex*, ml_dtypes)."""
    try:
        return _BY_DTYPE[np.dtype(dtype)]  # type: ignore[call-overload]
    except (KeyError, TypeError):
        raise XlapyError(f"numpy dtype {dtype!r} has no XLA element type") from None


def finfo(t: ElementType) -> ml_dtypes.finfo:
    return ml_dtypes.finfo(t.dtype)


def iinfo(t: ElementType) -> ml_dtypes.iinfo:
    return ml_dtypes.iinfo(t.dtype)
