import ml_dtypes
import numpy as np
import pytest

from xlapy.errors import XlapyError
from xlapy.types import ARRAY_TYPES, ElementType, from_dtype, from_hlo_name, from_shlo_name

E = ElementType


@pytest.mark.parametrize("t", ARRAY_TYPES, ids=lambda t: t.value)
def test_roundtrip_names_and_dtypes(t: ElementType) -> None:
    assert from_hlo_name(t.hlo_name) is t
    assert from_shlo_name(t.shlo_name) is t
    assert from_dtype(t.dtype) is t


@pytest.mark.parametrize("name,t", [
    ("i1", E.PRED), ("i32", E.S32), ("si32", E.S32), ("ui8", E.U8), ("i4", E.S4),
    ("ui4", E.U4), ("f8E4M3FN", E.F8E4M3FN), ("f8E5M2", E.F8E5M2), ("bf16", E.BF16),
    ("complex<f32>", E.C64), ("complex<f64>", E.C128), ("f64", E.F64),
])
def test_stablehlo_spellings(name: str, t: ElementType) -> None:
    assert from_shlo_name(name) is t


@pytest.mark.parametrize("name,t", [
    ("pred", E.PRED), ("s32", E.S32), ("u64", E.U64), ("bf16", E.BF16), ("f8e4m3fn", E.F8E4M3FN),
    ("f8e5m2", E.F8E5M2), ("c64", E.C64), ("c128", E.C128), ("s4", E.S4), ("token", E.TOKEN),
])
def test_hlo_spellings(name: str, t: ElementType) -> None:
    assert from_hlo_name(name) is t


def test_numpy_dtypes_through_ml_dtypes() -> None:
    assert E.BF16.dtype == np.dtype(ml_dtypes.bfloat16)
    assert E.F8E4M3FN.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert E.S4.dtype == np.dtype(ml_dtypes.int4)
    assert E.PRED.dtype == np.dtype(np.bool_)
    assert E.C64.dtype == np.dtype(np.complex64)


def test_kinds_and_widths() -> None:
    assert E.S8.is_signed and E.U16.is_unsigned and E.S4.bits == 4 and E.U4.is_integer
    assert E.BF16.is_float and not E.BF16.is_integer and E.C128.is_complex
    assert E.C64.component_type is E.F32 and E.C128.component_type is E.F64
    assert not E.TOKEN.is_array and not E.TUPLE.is_array


def test_unknown_names_are_clear_errors() -> None:
    with pytest.raises(XlapyError, match="unknown HLO element type 'f33'"):
        from_hlo_name("f33")
    with pytest.raises(XlapyError, match="unknown StableHLO element type 'si3'"):
        from_shlo_name("si3")
    with pytest.raises(XlapyError, match="has no XLA element type"):
        from_dtype(np.dtype("datetime64[s]"))


def test_six_bit_floats() -> None:
    """f6E2M3FN / f6E3M2FN (ml_dtypes float6_*): conformance constant.mlir and printing.mlir."""
    assert from_shlo_name("f6E2M3FN") is E.F6E2M3FN and E.F6E2M3FN.bits == 6
    assert from_hlo_name("f6e3m2fn") is E.F6E3M2FN and E.F6E3M2FN.is_float
    assert float(np.asarray(7.9, E.F6E2M3FN.dtype)) == 7.5  # its largest finite value
