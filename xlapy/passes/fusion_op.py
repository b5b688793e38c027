"""The `fusion` op: a kernel whose called computation holds the fused instructions.

Registered here (the passes create it), so the verifier and interpreter run fused modules
unchanged: shape inference returns the called computation's result shape, and evaluation runs
the called computation on the operands.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xlapy.ops.base import OPS, VARIADIC, EvalContext, OpDef, Region, add_op, check
from xlapy.types import Shape


class FusionKind(enum.Enum):
    """XLA's fusion kinds: element-wise loop, reduce ("input"), dot/conv epilogue ("output"),
    a kernel with several outputs (a tuple root), and a backend's own kind ("custom": XLA:CPU's
    `__ynn_fusion` / oneDNN fusions, named in its backend_config; only read from HLO text,
    the cpu backend inlines it like any fusion)."""

    LOOP = "loop"
    INPUT = "input"
    OUTPUT = "output"
    MULTI_OUTPUT = "multi_output"
    CUSTOM = "custom"


@dataclass(frozen=True)
class FusionAttrs:
    kind: FusionKind = FusionKind.LOOP


class Fusion(OpDef):
    """HLO `fusion` (XLA HloFusionInstruction): runs its fused computation on its operands."""

    name = "fusion"
    arity = VARIADIC
    attrs = FusionAttrs
    num_regions = 1
    family = "fusion"

    def infer(self, operands: Sequence[Shape], attrs: FusionAttrs,
              regions: Sequence[Region]) -> Shape:
        (comp,) = regions
        params = list(comp.parameter_shapes)
        check(params == list(operands), "fusion_c1",
              f"fused computation {comp.name} takes ({', '.join(map(str, params))}) but the "
              f"fusion has {len(operands)} operand(s)")
        return comp.result_shape

    def evaluate(self, operands: Sequence[Any], attrs: FusionAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return ctx.call(0, *operands)


if "fusion" not in OPS:
    add_op(Fusion())
