"""HLO `copy`: the operand's value in a buffer of its own, possibly in another layout.

XLA HLO §copy (HloOpcode::kCopy): layout assignment inserts it where a producer's layout
differs from the one a consumer needs (a dot operand that must be row-major, an entry result
with a requested layout). Logically it is the identity: values are numpy arrays in logical
order, so evaluation returns a copy; the result's layout lives in its shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlapy.ops.base import OPS, EvalContext, OpDef, Region, check, register
from xlapy.types import Shape


class Copy(OpDef):
    """HLO copy (XLA operation semantics: the kCopy opcode; no StableHLO counterpart):
    identity on values; the result shape may carry another layout than the operand's."""

    name = "copy"
    arity = 1
    family = "core"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        (x,) = operands
        check(x.is_array or x.is_tuple, "copy_c1", f"operand {x} is not an array or a tuple")
        return x

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        (x,) = operands
        return _copy_value(x)


def _copy_value(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(_copy_value(v) for v in x)
    return np.array(x, copy=True)


if "copy" not in OPS:
    register(Copy)
