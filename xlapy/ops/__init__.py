"""Layer 2: one definition per op (signature, attributes, shape rule, reference semantics).

Importing this package fills `OPS` with every family; families never register each other.
"""

from xlapy.ops import (  # noqa: F401  (each family registers its ops)
    collectives,
    control_flow,
    core,
    elementwise,
    indexing,
    linalg,
    misc,
    reduction,
    rng,
    shape,
)
from xlapy.ops.base import HLO_NAMES, NO_ATTRS, OPS, VARIADIC, OpDef, check, get_op, infer_shape

__all__ = ["HLO_NAMES", "NO_ATTRS", "OPS", "VARIADIC", "OpDef", "check", "get_op", "infer_shape"]
