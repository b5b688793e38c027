"""Explicit vectorization of kernels: which kernels can be written in vector form, and the
pieces the emitter needs for it.

A kernel's innermost loop runs W lanes at a time (`Lane(base, off)` is the index vector
base + off + [0, W)), then a scalar loop for the rest. That needs every value the kernel
reads to be contiguous along the innermost output index (stride 1 in its buffer) or not to
depend on it at all (uniform, kept as a scalar and broadcast where it meets a vector). Such a
module is compiled with the light pipeline (llvm_util.optimize(light=True)): the O3
pipeline's loop vectorizer was half of a kernel's compile time (softmax: 10 of 22 ms).
Kernels that read along another stride (transposes, reversed or strided slices, reshapes
that split the innermost index) keep scalar IR and the O3 pipeline.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import I32, splat
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Float types whose add/multiply reductions may reassociate (bf16/f16 round every step).
REASSOC = frozenset({ET.F32, ET.F64})


@dataclass(frozen=True)
class Lane:
    """The index vector base + off + [0, W) of the innermost loop."""

    base: ir.Value
    off: int = 0

    @property
    def key(self) -> tuple[str, int, int]:
        return ("lane", id(self.base), self.off)

    def shifted(self, by: int) -> Lane:
        return Lane(self.base, self.off + by)


#: The compile's `lanes` option (CpuOptions; $XLAPY_CPU_LANES its default), set by `use`
#: around planning.
_FORCED: contextvars.ContextVar[int | None] = contextvars.ContextVar("xlapy_cpu_lanes",
                                                                    default=None)


@contextlib.contextmanager
def use(lanes: int | None) -> Iterator[None]:
    """Emit kernels with `lanes` lanes inside the block (None: the target's width)."""
    token = _FORCED.set(lanes)
    try:
        yield
    finally:
        _FORCED.reset(token)


def vector_width() -> int:
    """Lanes per vector on the current target: 16 with AVX-512 (one zmm of f32), 8 with AVX,
    else 4 (SSE, NEON). The `lanes` option 0 turns explicit vectorization off (scalar IR and
    the O3 pipeline: A/B comparisons); another number sets the lanes."""
    forced = _FORCED.get()
    if forced is not None:
        return forced
    return target.current().vector_bits // 32


def index_key(v: object) -> object:
    """A memo key for an index value: a Lane's, a constant's value (an index constant made
    for one lookup is freed after it, and a later object could take its id: the hoisted
    values of hoist_emit.py live for a whole loop), else the value's identity."""
    if isinstance(v, Lane):
        return v.key
    if isinstance(v, ir.Constant) and isinstance(v.constant, int):
        return ("const", str(v.type), v.constant)
    return id(v)


def has_lane(idx: Sequence[object]) -> bool:
    return any(isinstance(v, Lane) for v in idx)


class LaneCheck:
    """Whether a kernel can be emitted in vector form: walks what the emitter generates,
    tracking which dimension of each value the innermost lane index runs along."""

    def __init__(self, leaves: dict[int, int], rows: Sequence[Instruction],
                 reducer: Callable[[Instruction], str | None]) -> None:
        self.leaves = leaves
        self.rows = {id(r) for r in rows}
        self.reducer = reducer
        self.seen: set[tuple[int, int | None]] = set()

    def kernel(self, root: Instruction, rows: Sequence[Instruction],
               segmented: bool = False) -> bool:
        """`segmented`: the root is an index op whose innermost loop runs in segments with
        no branch along it (index_emit.segments): its operands take the lane."""
        for red in rows:
            if not self.reduction(red) or not self.value(red.operands[0], red.shape.rank):
                return False
        if root.opcode == "reduce" and id(root) not in self.leaves:
            x = root.operands[0]
            return self.reduction(root) and (x.shape.rank == 0 or
                                             self.value(x, x.shape.rank - 1))
        if segmented:
            p = root.shape.rank - 1
            return all(self.value(o, p if o.shape.rank else None) for o in root.operands
                       if o.shape.num_elements)
        return root.shape.rank == 0 or self.value(root, root.shape.rank - 1)

    def reduction(self, red: Instruction) -> bool:
        """Lanes reorder the reduction: exact for everything but bf16/f16 add/multiply."""
        op = self.reducer(red)
        et = red.shape.element_type
        return op is not None and not (op in ("add", "multiply") and et.is_float
                                       and et not in REASSOC)

    def value(self, instr: Instruction, p: int | None) -> bool:
        """`instr` generated with the lane along its dimension p (None: uniform)."""
        if p is None:
            return True
        key = (id(instr), p)
        if key in self.seen:
            return True
        self.seen.add(key)
        if instr.shape.is_array and instr.shape.element_type.is_complex:
            return False  # complex values are {re, im} structs: scalar kernels only
        if id(instr) in self.leaves:
            return all(d == 1 for d in instr.shape.dimensions[p + 1:])  # contiguous
        op = instr.opcode
        a = instr.attrs
        ops = instr.operands
        if op == "reduce":
            return False  # a row value is uniform along the row's columns only
        if op == "bitcast_convert" and instr.shape.rank != ops[0].shape.rank:
            return False  # elements split into (or joined from) a minor dimension
        if op in ("constant", "iota", "dynamic_iota"):
            return True
        if op == "broadcast_in_dim":
            src = ops[0].shape.dimensions
            q = next((i for i, d in enumerate(a.broadcast_dimensions)
                      if d == p and src[i] != 1), None)
            return self.value(ops[0], q)
        if op == "transpose":
            return self.value(ops[0], list(a.permutation)[p])
        if op == "reshape":
            q = _reshape_lane(p, instr.shape.dimensions, ops[0].shape.dimensions)
            return q is not False and self.value(ops[0], q)  # type: ignore[arg-type]
        if op == "slice":
            return a.strides[p] == 1 and self.value(ops[0], p)
        if op == "reverse":
            return p not in a.dimensions and self.value(ops[0], p)
        if op == "gather":  # along an offset dimension: the starts are uniform
            d = gather_operand_dim(instr, p)
            return d is not None and self.value(ops[0], d)
        if op in INDEX_LANES:  # operands along the same dimension; scalar operands uniform
            return index_lane_ok(instr, p) and all(
                self.value(o, p if o.shape.rank else None) for o in ops
                if o.shape.num_elements)
        return all(self.value(o, p if o.shape.rank else None) for o in ops)


#: The index ops of index_emit.py (its INDEX_OPS): the emitter branches on every index it
#: does not simply shift, so the lane may only run along a dimension that is a shift.
INDEX_LANES = frozenset({"concatenate", "pad", "dynamic_slice", "dynamic_update_slice",
                         "gather"})


def index_lane_ok(instr: Instruction, p: int) -> bool:
    """Whether index_emit generates `instr` with no branch on its output dimension p (the
    lane's): its operands then take the lane along the same dimension p."""
    op = instr.opcode
    a = instr.attrs
    if op == "concatenate":
        return p != a.dimension
    if op == "pad":
        return (a.edge_padding_low[p] <= 0 and a.edge_padding_high[p] <= 0
                and a.interior_padding[p] == 0)
    if op == "dynamic_slice":  # a uniform run-time shift
        return True
    if op == "dynamic_update_slice":  # the window spans dimension p
        operand, update = instr.operands[:2]
        return update.shape.dimensions[p] == operand.shape.dimensions[p]
    return False  # gather: see gather_operand_dim


def gather_operand_dim(instr: Instruction, p: int) -> int | None:
    """The operand dimension a gather's output dimension p walks when p is an offset
    dimension (the operand index is then start + offset, the start read at the batch
    position: uniform along p); None for a batch dimension."""
    dn = instr.attrs.dimension_numbers
    if p not in dn.offset_dims:
        return None
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(instr.operands[0].shape.rank) if d not in dropped]
    return kept[list(dn.offset_dims).index(p)]


def _reshape_lane(p: int, out: Sequence[int], src: Sequence[int]) -> int | None | bool:
    """The operand dimension of a reshape's output dimension p when the emitter maps it
    directly (shared leading or trailing dimensions, as KernelEmitter._reshape_index);
    False when it goes through a division."""
    lead = 0
    while lead < min(len(out), len(src)) and out[lead] == src[lead]:
        lead += 1
    trail = 0
    while trail < min(len(out), len(src)) - lead and out[-1 - trail] == src[-1 - trail]:
        trail += 1
    if p < lead:
        return p
    if p >= len(out) - trail:
        return p - len(out) + len(src)
    return False


def identity(op: str, et: ET) -> object:
    """The identity of a reducer on `et` (a lane accumulator's start)."""
    if et is ET.PRED:
        return 1 if op in ("multiply", "minimum", "and") else 0
    if et.is_float:
        return {"add": -0.0, "multiply": 1.0, "maximum": float("-inf"),
                "minimum": float("inf")}[op]
    bits = et.bits
    if op in ("add", "or", "xor"):
        return 0
    if op == "multiply":
        return 1
    if op == "and":
        return -1
    if op == "maximum":
        return -(1 << (bits - 1)) if et.is_signed else 0
    return (1 << (bits - 1)) - 1 if et.is_signed else -1  # minimum


def accumulator_start(op: str, et: ET, width: int) -> ir.Constant:
    return splat(ir.VectorType(ew.compute_type(et), width), identity(op, et))


def horizontal(b: ir.IRBuilder, v: ir.Value,
               combine: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """Combine a vector's lanes into one scalar by halving (log2 W steps of `combine`)."""
    n = v.type.count
    while n > 2:
        half = n // 2
        lo = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, half), list(range(half))))
        hi = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, half),
                                                list(range(half, n))))
        v = combine(lo, hi)
        n = half
    first = b.extract_element(v, ir.Constant(I32, 0))
    return combine(first, b.extract_element(v, ir.Constant(I32, 1))) if n == 2 else first
