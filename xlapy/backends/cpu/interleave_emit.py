"""How many vector bodies a kernel's innermost loop runs per iteration (KernelEmitter's
`_interleave`): a long dependent chain per element leaves the out-of-order window with one
iteration in flight, so independent ones interleaved run faster."""

from __future__ import annotations

import numpy as np

from xlapy.backends.cpu import elementwise as ew
from xlapy.ir import Instruction

#: Interleave count of innermost loops whose body weighs (ops + 10 per transcendental) at
#: least INTERLEAVE_WEIGHT (the GELU chain: 27 ms -> 21 at 2, 16 at 4, compile 37 -> 47 ->
#: 59 ms), and HEAVY_INTERLEAVE from HEAVY_WEIGHT on: the JAX GELU chain (7 tanh, weight
#: ~135) was latency-bound at 2 (2 chains in flight, ~450 cycles an iteration for 359
#: instructions): 2.06 -> 1.43 ms at 4 (1.15 at 8), cold compile 21 -> 26 ms (43 at 8).
INTERLEAVE, INTERLEAVE_WEIGHT, HEAVY_INTERLEAVE, HEAVY_WEIGHT = 2, 24, 4, 64


class InterleaveEmitter:
    """Mixin of KernelEmitter (its root, leaves and op counts)."""

    root: Instruction
    leaves: dict[int, int]
    ops: int
    heavy: int

    def _weight(self) -> int:
        """The interleave weight of the kernel's fused expression, before emitting it."""
        free = ("constant", "broadcast_in_dim", "transpose", "reshape", "slice", "reverse",
                "iota", "dynamic_iota", "reduce")
        seen: set[int] = set()
        stack = [self.root]
        weight = 0
        while stack:
            i = stack.pop()
            if id(i) in seen or id(i) in self.leaves:
                continue
            seen.add(id(i))
            if i.opcode not in free:
                weight += 11 if i.opcode in ew.INEXACT else 1
            if i.opcode != "reduce":
                stack.extend(i.operands)
        return weight

    def _interleave(self, weight: int | None = None) -> int:
        """Vector bodies per iteration of the innermost loop (asked once its body is built):
        a long dependent chain per element (the GELU chain: 7 tanh in a row) leaves the
        out-of-order window with one iteration in flight, so two independent ones run ~1.3x
        faster; short bodies gain nothing and would only compile slower."""
        dims = self.root.shape.dimensions
        if not dims or dims[-1] < 64 or int(np.prod(dims)) < 1 << 14:
            return 0  # small kernels: compile time matters more
        if weight is None:
            weight = self.ops + 10 * self.heavy
        if weight >= HEAVY_WEIGHT:
            return HEAVY_INTERLEAVE
        return INTERLEAVE if weight >= INTERLEAVE_WEIGHT else 0


__all__ = ["HEAVY_INTERLEAVE", "HEAVY_WEIGHT", "INTERLEAVE", "INTERLEAVE_WEIGHT",
           "InterleaveEmitter"]
