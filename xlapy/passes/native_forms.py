"""The rewrites that give ops without a compiled form one the backends compile:

* chlo.scan as a while loop (scan_lowering);
* the chlo special functions as XLA's polynomial / series HLO (chlo_special);
* dynamic-shape ops with constant sizes as their static forms (static_shapes);
* complex bitcasts as bitcasts of their parts (complex_bitcast);
* complex reduce_windows that add as windows of their parts (complex_windows);
* uniform_quantize / uniform_dequantize as integer and float arithmetic (quant_lowering).

The cpu backend runs them (after chlo lowering, before call inlining) both in
`backend_pipeline()` and in `compile_function`, so no op they cover falls back to the
interpreter.
"""

from __future__ import annotations

from xlapy.passes.chlo_special import LOWERED as CHLO_SPECIAL
from xlapy.passes.chlo_special import ChloSpecialLowering
from xlapy.passes.complex_bitcast import ComplexBitcast
from xlapy.passes.complex_windows import ComplexWindows
from xlapy.passes.pass_base import Pass
from xlapy.passes.quant_lowering import OPS as QUANT_OPS
from xlapy.passes.quant_lowering import QuantToInt
from xlapy.passes.scan_lowering import ScanLowering
from xlapy.passes.static_shapes import REWRITTEN as STATIC_SHAPES
from xlapy.passes.static_shapes import StaticShapes

#: Opcodes one of these passes may rewrite (compile_function runs them only when one occurs,
#: or a complex window `complex_windows.splits` takes).
REWRITTEN = STATIC_SHAPES | CHLO_SPECIAL | QUANT_OPS | {"chlo.scan", "bitcast_convert"}


def native_form_passes(exact_only: bool = False) -> list[Pass]:
    """`exact_only`: no rewrite that changes values (the special functions stay chlo ops)."""
    return [ScanLowering(), ChloSpecialLowering(exact_only), StaticShapes(), ComplexBitcast(),
            ComplexWindows(), QuantToInt()]


__all__ = ["REWRITTEN", "native_form_passes"]
