"""Layer 1: element types, shapes, layouts and literals."""

from xlapy.types.element_type import (
    ARRAY_TYPES,
    COMPLEX_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    ElementType,
    Kind,
    from_dtype,
    from_hlo_name,
    from_shlo_name,
)
from xlapy.types.literal import Literal
from xlapy.types.shape import Layout, Shape, shapes_str

PRED = ElementType.PRED
S4, S8, S16, S32, S64 = (ElementType.S4, ElementType.S8, ElementType.S16, ElementType.S32,
                         ElementType.S64)
U4, U8, U16, U32, U64 = (ElementType.U4, ElementType.U8, ElementType.U16, ElementType.U32,
                         ElementType.U64)
F8E4M3FN, F8E5M2 = ElementType.F8E4M3FN, ElementType.F8E5M2
BF16, F16, F32, F64 = ElementType.BF16, ElementType.F16, ElementType.F32, ElementType.F64
C64, C128 = ElementType.C64, ElementType.C128
TOKEN = ElementType.TOKEN

__all__ = [
    "ARRAY_TYPES", "COMPLEX_TYPES", "FLOAT_TYPES", "INT_TYPES", "ElementType", "Kind",
    "Layout", "Literal", "Shape", "from_dtype", "from_hlo_name", "from_shlo_name", "shapes_str",
    "PRED", "S4", "S8", "S16", "S32", "S64", "U4", "U8", "U16", "U32", "U64", "F8E4M3FN",
    "F8E5M2", "BF16", "F16", "F32", "F64", "C64", "C128", "TOKEN",
]
