"""Fusion decisions, each with a reason (`xlapy opt --explain-fusion` prints them).

Policy (XLA's InstructionFusion / CPU fusion, simplified):
* element-wise ops and broadcast, reshape, transpose, slice, pad, concatenate, iota,
  dynamic_slice, reverse and scalar constants fuse into their consumers;
* a producer used outside the fusion is duplicated only when cheap; expensive ops (exp, log,
  tanh, divide, ...) are never duplicated, nor recomputed per element of a broadcast;
* a reduce fuses with its producers ("input" fusion) and takes an element-wise epilogue of its
  own output shape; a fusion holds at most one reduce;
* dot_general / convolution take an element-wise epilogue of their output shape ("output").
"""

from __future__ import annotations

from dataclasses import dataclass

from xlapy.ir import Instruction
from xlapy.ops.base import OPS

SHAPE_OPS = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "pad",
                       "concatenate", "iota", "dynamic_slice", "reverse"})
EXPENSIVE = frozenset({"exponential", "exponential_minus_one", "log", "log_plus_one", "tanh",
                       "logistic", "divide", "remainder", "power", "sqrt", "rsqrt", "cbrt",
                       "sine", "cosine", "tan", "atan2", "erf",
                       "chlo.erfc", "chlo.erf_inv"})
REDUCE_OPS = frozenset({"reduce"})
OUTPUT_OPS = frozenset({"dot_general", "convolution"})
#: Shape ops that are cheap enough to duplicate (concatenate/pad copy whole arrays).
CHEAP_SHAPE_OPS = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "iota",
                             "reverse", "dynamic_slice"})


@dataclass(frozen=True)
class FusionDecision:
    """Whether `producer` goes into the kernel rooted at `consumer`, and why (`consumer` ==
    `producer`: it gets a buffer of its own)."""

    producer: str
    consumer: str
    fused: bool
    reason: str
    duplicated: bool = False

    def __str__(self) -> str:
        if self.producer == self.consumer:  # the cpu fusion's "materialized"
            return f"%{self.producer} gets a buffer: {self.reason}"
        verb = "fused into" if self.fused else "not fused into"
        dup = " (duplicated)" if self.duplicated else ""
        return f"%{self.producer} {verb} kernel of %{self.consumer}{dup}: {self.reason}"


#: Ops besides the element-wise table whose array operands are read at the result's own
#: index (compare, select and clamp take scalar operands too): with them, values a kernel
#: may compute element by element at one index (kernel_flat's flat copies, short_reduce's
#: reshape sinking and variadic folds, narrow_columns' transposed columns, fusion_plan).
SAME_INDEX = frozenset({"convert", "compare", "select", "clamp"})


def is_elementwise(instr: Instruction) -> bool:
    op = OPS.get(instr.opcode)
    return (op is not None and op.family == "elementwise" and not op.side_effecting
            and instr.shape.is_array)


def is_loop_fusible(instr: Instruction) -> bool:
    """Can be a member of a loop fusion (element-wise or a shape op or a scalar constant)."""
    if instr.opcode == "constant":
        return instr.shape.is_array and instr.shape.num_elements <= 1
    return is_elementwise(instr) or instr.opcode in SHAPE_OPS


def is_fusible(instr: Instruction) -> bool:
    return (is_loop_fusible(instr) or instr.opcode in REDUCE_OPS
            or instr.opcode in OUTPUT_OPS) and instr.shape.is_array


def is_cheap(instr: Instruction) -> bool:
    if instr.opcode == "constant":
        return True
    if instr.opcode in EXPENSIVE or instr.opcode in REDUCE_OPS | OUTPUT_OPS:
        return False
    return is_elementwise(instr) or instr.opcode in CHEAP_SHAPE_OPS


def can_root(instr: Instruction) -> bool:
    """May start a kernel: anything fusible except a lone constant or iota."""
    return is_fusible(instr) and instr.opcode not in ("constant",)
