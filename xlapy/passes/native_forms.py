"""The rewrites that give ops without a compiled form one the backends compile: chlo.scan as
a while loop (scan_lowering), dynamic-shape ops with constant sizes as their static forms
(static_shapes). The cpu backend runs them (after chlo lowering, before call inlining) both
in `backend_pipeline()` and in `compile_function`, so no op they cover falls back to the
interpreter.
"""

from __future__ import annotations

from xlapy.passes.pass_base import Pass
from xlapy.passes.scan_lowering import ScanLowering
from xlapy.passes.static_shapes import REWRITTEN as STATIC_SHAPES
from xlapy.passes.static_shapes import StaticShapes

#: Opcodes one of these passes may rewrite (compile_function runs them only when one occurs).
REWRITTEN = STATIC_SHAPES | {"chlo.scan"}


def native_form_passes() -> list[Pass]:
    return [ScanLowering(), StaticShapes()]


__all__ = ["REWRITTEN", "native_form_passes"]
