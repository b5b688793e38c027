"""How many vector bodies a kernel's innermost loop runs per iteration (KernelEmitter's
`_interleave`): a long dependent chain per element leaves the out-of-order window with one
iteration in flight, so independent ones interleaved run faster."""

from __future__ import annotations

import numpy as np

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import target
from xlapy.backends.cpu.fold_paths import column_slice
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Instruction
from xlapy.passes.fusion_decision import SHAPE_OPS
from xlapy.types import ElementType as ET

#: Ops that only move or pick values (`_computed_bytes`).
_MOVES = SHAPE_OPS - {"iota"} | {"gather", "select", "copy", "dynamic_update_slice", "constant"}
#: Operands along the lanes of index ops (their first ones; the rest are start indices).
_DATA = {"gather": 1, "dynamic_slice": 1, "dynamic_update_slice": 2}


def _computed_bytes(i: Instruction) -> int:
    """Bytes of a value of `i` as kernels compute it (`_narrow_lanes`)."""
    t = i.shape.element_type
    if t is ET.PRED or t.is_integer:
        return max(1, t.bits // 8)
    return t.dtype.itemsize if (t is ET.BF16 or t in ew.F8) and i.opcode in _MOVES else 4


#: Interleave count of innermost loops whose body weighs (ops + 10 per transcendental) at
#: least INTERLEAVE_WEIGHT (the GELU chain: 27 ms -> 21 at 2, 16 at 4, compile 37 -> 47 ->
#: 59 ms), and HEAVY_INTERLEAVE from HEAVY_WEIGHT on: the JAX GELU chain (7 tanh, weight
#: ~135) was latency-bound at 2 (2 chains in flight, ~450 cycles an iteration for 359
#: instructions): 2.06 -> 1.43 ms at 4 (1.15 at 8), cold compile 21 -> 26 ms (43 at 8).
INTERLEAVE, INTERLEAVE_WEIGHT, HEAVY_INTERLEAVE, HEAVY_WEIGHT = 2, 24, 4, 64
#: The medium count on x86 targets with 16 vector registers (AVX2), whose fused kernels are
#: scheduled without register-pressure tracking (sched_mode.py): Zen 3, same process, 2 -> 4:
#: jnp.polyval of degree 19 0.66 -> 0.52 ms, softmax 1.45 -> 1.28, scan_ys 11.5 -> 8.3, the
#: rest within noise (every jax_run workload; cold compile the same but scan_ys 49 -> 66 ms).
INTERLEAVE_AVX2 = 4
#: At most this many for kernels that compute in f64 for a narrower root (`_widens`), whose
#: lane groups are already two f64 vectors each: at 4 they spilled (Zen 3: erf_inv 3.2 -> 3.5
#: ms, exact GELU 1.18 -> 1.59, arcsin 1.05 -> 1.55 against 2); and for f64 roots on 16
#: registers (1024^2 f64, 2 / 4: tanh(tanh(x) / 2 + x) + x 8.3 / 10.5 ms, exp 0.81 / 0.96,
#: log 1.23 / 1.45, erf 4.8 / 5.3).
WIDE_INTERLEAVE = 2
#: Ops whose kernels run best at no more than this many (their own registers spill past it;
#: Zen 3, 1024^2 f32, 0 / 2 / 4: jnp.sin 1.32 / 1.15 / 1.52 ms, cos 1.37 / 1.09 / 1.11, x ** y
#: 4.70 / 3.46 / 3.67, arctan2 2.03 / 1.59 / 2.29, cbrt 1.75 / 1.41 / 1.84).
OP_INTERLEAVE = {"sine": 2, "cosine": 2, "power": 2, "atan2": 2, "cbrt": 2}
#: Column slices (each one element of a short last dimension) from which a kernel is a fold
#: (short_reduce.py) of that many independent chains, interleaved already: four vectors per
#: group made jax.nn.logsumexp over 16 columns compile in 130-150 ms.
FOLD_COLUMNS = 4
#: Beside elementwise.INEXACT, the f32 ops computed as long f64 vector code (libm_f32.py;
#: their f64 forms call libm a lane): fmod 0.78 -> 0.59 ms at 4.
LONG_F32 = frozenset({"power", "atan2", "cbrt", "remainder"})


def sixteen_registers() -> bool:
    """x86 without AVX-512: 16 vector registers (where the counts above were measured)."""
    t = target.current()
    return t.is_x86 and not t.has("avx512f")


def medium_interleave() -> int:
    """The count for bodies from INTERLEAVE_WEIGHT to HEAVY_WEIGHT on the current target."""
    return INTERLEAVE_AVX2 if sixteen_registers() else INTERLEAVE


def _long(i: Instruction) -> bool:
    """A transcendental: one op that is a long dependent chain per element."""
    return i.opcode in ew.INEXACT or (i.opcode in LONG_F32 and i.shape.element_type.is_float
                                      and i.shape.element_type.bits < 64)


class InterleaveEmitter:
    """Mixin of KernelEmitter (its root, leaves and op counts)."""

    root: Instruction
    leaves: dict[int, int]
    ops: int
    heavy: int
    #: A reduce root's operand whose lanes widen as an element-wise root's (`summed`).
    summand: Instruction | None = None

    def summed(self) -> Instruction | None:
        """The operand of a reduce root that is a float sum (f32/f64, the last dimension
        among those reduced) of an expression with a transcendental: its vector groups widen
        like an element-wise kernel's (Zen 3, 1M f32, one thread: the sum of
        log1p(exp(-|x|)) 2.3 -> 1.45 ms, as the element-wise kernel's; a vector an iteration
        left one chain in the out-of-order window, and separate accumulator chains are
        copies of the expression one after another, no better)."""
        r = self.root
        if r.opcode != "reduce" or len(r.operands) != 2 or id(r.operands[0]) in self.leaves \
                or r.shape.element_type not in (ET.F32, ET.F64):
            return None
        x = r.operands[0]
        return x if reducer_op(r) == "add" and x.shape.rank - 1 in r.attrs.dimensions and \
            any(_long(i) for i in self._expression(x)) else None

    def _expression(self, top: Instruction | None = None) -> list[Instruction]:
        """The kernel's fused expression (its root, or `top`, down to the leaves, into no
        reduce)."""
        seen: set[int] = set()
        stack, out = [top or self.summand or self.root], []
        while stack:
            i = stack.pop()
            if id(i) in seen or id(i) in self.leaves:
                continue
            seen.add(id(i))
            out.append(i)
            if i.opcode != "reduce":
                stack.extend(i.operands)
        return out

    def _weight(self) -> int:
        """The interleave weight of the kernel's fused expression, before emitting it."""
        free = ("constant", "broadcast_in_dim", "transpose", "reshape", "slice", "reverse",
                "iota", "dynamic_iota", "reduce")
        return sum(11 if i.opcode in ew.INEXACT else 1
                   for i in self._expression() if i.opcode not in free)

    def _widens(self, expr: list[Instruction]) -> bool:
        """Whether the expression computes in f64 for a narrower root (f32 erf, erf_inv,
        asin... evaluate in f64 and round once): each lane group is then two f64 vectors,
        already two chains in flight, and twice the registers."""
        if self.root.shape.element_type.bits >= 64:
            return False
        return any(i.shape.element_type is ET.F64 for i in expr)

    def _narrow_lanes(self) -> int:
        """Times the vector width for a kernel whose values are all 1 or 2 bytes wide as it
        computes them: integers, preds, and bf16 or 8-bit floats that are only moved (their
        stored bits: stored_bits.py). Lanes as many as f32's would move 16 or 32 bytes a
        step (an f8 row gather ran at 1.6x XLA's time, an int8 or bool column max / any 1.9x)."""
        seen: set[int] = set()
        stack, widest = [self.root], 1
        while stack:  # (the values along the lanes: a gather's indices are one a row)
            i = stack.pop()
            if id(i) in seen or id(i) in self.leaves:
                continue
            seen.add(id(i))
            widest = max(widest, _computed_bytes(i))
            stack.extend(i.operands[:_DATA.get(i.opcode, len(i.operands))])
        return 4 // widest if widest < 4 else 1

    def _interleave(self, weight: int | None = None) -> int:
        """Vector bodies per iteration of the innermost loop (asked once its body is built):
        a long dependent chain per element (the GELU chain: 7 tanh in a row) leaves the
        out-of-order window with one iteration in flight, so two independent ones run ~1.3x
        faster; short bodies gain nothing and would only compile slower."""
        dims = (self.summand or self.root).shape.dimensions
        if not dims or dims[-1] < 64 or int(np.prod(dims)) < 1 << 14:
            return 0  # small kernels: compile time matters more
        if weight is None:
            weight = self.ops + 10 * self.heavy
        expr = self._expression()
        if sum(column_slice(i) for i in expr) >= FOLD_COLUMNS:
            return 0  # a fold over columns (short_reduce.py): a chain per column in flight
        k = HEAVY_INTERLEAVE if weight >= HEAVY_WEIGHT else \
            medium_interleave() if weight >= INTERLEAVE_WEIGHT else \
            (INTERLEAVE_AVX2 if sixteen_registers() else INTERLEAVE) \
            if any(_long(i) for i in expr) else 0
        # (one transcendental alone is a long chain too: Zen 3, 1024^2 f32, 0 -> 4: exp 0.42
        # -> 0.27 ms, log 0.62 -> 0.39, logistic 0.41 -> 0.27, erf 1.08 -> 0.70, exact GELU's
        # erfc 1.18 -> 0.96; Zen 4 with AVX-512, 0 -> 2: exp 0.125 -> 0.114, erf 0.57 ->
        # 0.53, f32 x ** y 1.55 -> 1.46, log and tanh within the noise)
        for i in expr:
            k = min(k, OP_INTERLEAVE.get(i.opcode, k))
        f64 = self.root.shape.element_type.bits >= 64 and sixteen_registers()
        return min(k, WIDE_INTERLEAVE) if k and (f64 or self._widens(expr)) else k


__all__ = ["HEAVY_INTERLEAVE", "HEAVY_WEIGHT", "INTERLEAVE", "INTERLEAVE_WEIGHT",
           "INTERLEAVE_AVX2", "InterleaveEmitter", "LONG_F32", "OP_INTERLEAVE", "WIDE_INTERLEAVE",
           "medium_interleave", "sixteen_registers"]
