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
import math
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
    """The index vector base + off + [0, W) of the innermost loop; `live` > 0: only the
    first `live` lanes are real (a row's masked tail: masked_emit.py)."""

    base: ir.Value
    off: int = 0
    live: int = 0

    @property
    def key(self) -> tuple[str, int, int, int]:
        return ("lane", id(self.base), self.off, self.live)

    def shifted(self, by: int) -> Lane:
        return Lane(self.base, self.off + by, self.live)

    def moved(self, base: ir.Value) -> Lane:
        return Lane(base, self.off, self.live)

    @property
    def whole(self) -> Lane:
        """Every lane (a row cache holds whole vectors: masked_emit.py)."""
        return Lane(self.base, self.off)


@dataclass(frozen=True)
class LanePattern:
    """Lane k's index is start + pattern[k]: an aligned lane index split by a reshape
    (`split_rule`; lane_split.py emits the reads)."""

    start: ir.Value
    pattern: tuple[int, ...]

    @property
    def key(self) -> tuple[str, int, tuple[int, ...]]:
        return ("pattern", id(self.start), self.pattern)


def split_rule(s: int, n: int, w: int, outer: bool = False) -> str | None:
    """How (lin // s) % n varies over lanes lin = base + k (k < w, base a multiple of w):
    'uniform' (one value), 'div' (start + k // s), 'periodic' ((k // s) % n) or None.
    `outer`: the outermost regrouped dimension, its lanes never past its end (a minor
    stack's whole vectors, the rest scalar): no wrap, start + k // s for any s dividing w."""
    if n == 1 or s % w == 0:
        return "uniform"
    if w % s == 0 and ((s * n) % w == 0 or outer):
        return "div"
    return "periodic" if w % (s * n) == 0 else None


def split_patterns(out: Sequence[int], src: Sequence[int], p: int, w: int,
                   pinned: bool = False, whole: bool = False
                   ) -> dict[int, tuple[int, ...]] | None:
    """The lane patterns of a reshape's operand dimensions (uniform ones left out) when its
    output dimension p holds aligned lanes and the reshape splits it, else None: p must be
    the last of the dimensions it regroups, a multiple of w long, and the last dimension
    unless the ones after it are `pinned` (constant indices: a minor stack's columns) and
    shared (jnp.repeat of 3-channel pixels along the row: [.., w, 2, 3] -> [.., 2w, 3]).
    `whole`: vectors never pass the end of dimension p (split_rule's `outer`)."""
    lead, trail = shared_dims(out, src)
    if (trail and not pinned) or p != len(out) - 1 - trail or (out[p] % w and not whole):
        return None
    return split_source(src[:len(src) - trail], lead, w, whole)


def merged(out: Sequence[int], src: Sequence[int], pats: dict[int, tuple[int, ...]],
           w: int, whole: bool = False) -> dict[int, tuple[int, ...]] | None:
    """The operand patterns of a reshape read at pattern indices `pats`: those of shared
    leading/trailing dimensions as they are; patterns on the trailing dimensions of the
    regrouped ones that add up to whole aligned lanes (other regrouped strides multiples of
    w) are split again (`split_source`). None otherwise."""
    units = unit_map(out, src)
    if units is not None:
        return {units[d]: v for d, v in pats.items()}
    lead, trail = shared_dims(out, src)
    shift = len(src) - len(out)
    if all(d < lead or d >= len(out) - trail for d in pats):
        return {d if d < lead else d + shift: v for d, v in pats.items()}
    mid = list(out[lead:])
    k = len(pats)
    if trail or sorted(pats) != list(range(len(out) - k, len(out))) or \
            any(st % w for st in row_strides(mid)[:len(mid) - k]) or \
            pattern_offsets({d - lead: v for d, v in pats.items()}, mid) != list(range(w)):
        return None
    return split_source(src, lead, w, whole)


def unit_map(out: Sequence[int], src: Sequence[int]) -> dict[int, int] | None:
    """Output dimension -> operand dimension of a reshape that only adds or drops extent-1
    dimensions (the extent-1 ones left out), else None."""
    o = [d for d, n in enumerate(out) if n != 1]
    i = [d for d, n in enumerate(src) if n != 1]
    return dict(zip(o, i)) if [out[d] for d in o] == [src[d] for d in i] else None


def split_source(src: Sequence[int], lead: int, w: int, whole: bool = False
                 ) -> dict[int, tuple[int, ...]] | None:
    """Patterns of src's dimensions from `lead` on, indexed by the split of one aligned lane
    index over them (row-major); None if one has no pattern (split_rule)."""
    pats: dict[int, tuple[int, ...]] = {}
    mid = list(src[lead:])
    total = math.prod(mid)
    for d, (s, n) in enumerate(zip(row_strides(mid), mid)):
        how = split_rule(s, n, w, whole and s * n == total)
        if how is None:
            return None
        if how != "uniform":
            pats[lead + d] = tuple((k // s) % n if how == "periodic" else k // s
                                   for k in range(w))
    return pats


def row_strides(dims: Sequence[int]) -> list[int]:
    """Row-major element strides of `dims`."""
    out, acc = [], 1
    for n in reversed(dims):
        out.append(acc)
        acc *= n
    return out[::-1]


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
    if isinstance(v, (Lane, LanePattern)):
        return v.key
    if isinstance(v, ir.Constant) and isinstance(v.constant, int):
        return ("const", str(v.type), v.constant)
    return id(v)


def has_lane(idx: Sequence[object]) -> bool:
    return any(isinstance(v, (Lane, LanePattern)) for v in idx)


def live_lanes(idx: Sequence[object]) -> int:
    """The live lanes of idx's Lane if it is a masked tail, else 0."""
    return next((v.live for v in idx if isinstance(v, Lane)), 0)


def trimmed(dims: Sequence[int]) -> tuple[int, ...]:
    """dims without their trailing 1s (a keepdims reduction's shape)."""
    n = len(dims)
    while n and dims[n - 1] == 1:
        n -= 1
    return tuple(dims[:n])


class LaneCheck:
    """Whether a kernel can be emitted in vector form: walks what the emitter generates,
    tracking which dimension of each value the innermost lane index runs along."""

    def __init__(self, leaves: dict[int, int], rows: Sequence[Instruction],
                 reducer: Callable[[Instruction], str | None], splits: bool = False,
                 cuts: bool = False, whole: bool = False) -> None:
        self.leaves = leaves
        self.rows = {id(r) for r in rows}
        self.reducer = reducer
        self.seen: set[tuple[object, ...]] = set()
        #: Whether a reshape may split the lane's dimension (LanePattern); `split` is set
        #: when one does (the kernel then keeps vector-wide lane groups: lane_split.py).
        self.splits = splits
        self.split = False
        #: Whether every vector is whole, inside its row (a minor stack: the rest scalar),
        #: so a split may leave a partial vector at a row's end (split_rule's `outer`).
        self.whole = whole
        #: With `cuts`: the concatenates and pads that branch along the lane, each reached
        #: with the lane index at a known shift `off` from the kernel's innermost index
        #: ((id, off) -> (instr, lane dimension, off)): its innermost loop then runs in
        #: segments where each takes one case (index_emit.segments); else None.
        self.cuts: dict[tuple[int, int], tuple[Instruction, int, int]] | None = \
            {} if cuts else None

    def kernel(self, root: Instruction, rows: Sequence[Instruction],
               segmented: bool = False) -> bool:
        """`segmented`: the root is an index op whose innermost loop runs in segments with
        no branch along it (index_emit.segments): its operands take the lane."""
        for red in rows:
            if not self.reduction(red) or not self.value(red.operands[0], red.shape.rank):
                return False
        if rows and trimmed(root.shape.dimensions) == trimmed(rows[0].shape.dimensions):
            # a per-row root (bf16 logsumexp's log(sum) + max; jnp.linalg.norm(x, axis=-1,
            # keepdims=True) [n, 1]): lanes in the rows. Without them, LLVM vectorized the
            # row sum as one vaddps chain: 8192 x 768 bf16 norms on AVX2 0.46 ms, XLA 0.28.
            return True
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

    def value(self, instr: Instruction, p: int | None, aligned: bool = True,
              off: int | None = 0, pinned: bool = False) -> bool:
        """`instr` generated with the lane along its dimension p (None: uniform); `aligned`:
        the lanes' first index is a multiple of the width (no shift on the way); `off`: the
        lane index's shift from the kernel's innermost index (None: a run-time one);
        `pinned`: its indices past p are constants (a leaf's short rows read a column)."""
        if p is None:
            return True
        if vector_width() < 1:
            return False  # (the `lanes` option 0: scalar IR throughout)
        key = (id(instr), p, aligned, off if self.cuts is not None else 0, pinned)
        if key in self.seen:
            return True
        self.seen.add(key)
        if instr.shape.is_array and instr.shape.element_type.is_complex:
            return False  # complex values are {re, im} structs: scalar kernels only
        if id(instr) in self.leaves:  # contiguous, or a column of short rows
            return all(d == 1 for d in instr.shape.dimensions[p + 1:]) or (
                pinned and column_ok(instr.shape.dimensions, p))
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
            bd = list(a.broadcast_dimensions)
            q = next((i for i, d in enumerate(bd) if d == p and src[i] != 1), None)
            return self.value(ops[0], q, True, off, pinned and bd == sorted(bd))
        if op == "transpose":
            return self.value(ops[0], list(a.permutation)[p], aligned, off)
        if op == "reshape":
            out, src = instr.shape.dimensions, ops[0].shape.dimensions
            if id(ops[0]) in self.leaves and (all(d == 1 for d in out[p + 1:]) or (
                    pinned and column_ok(out, p))):
                return True  # a leaf is read in the reshape's dims (kernels.py)
            q = _reshape_lane(p, out, src)
            if q is not False:
                return self.value(ops[0], q, aligned, off)  # type: ignore[arg-type]
            pats = split_patterns(out, src, p, vector_width(), pinned, self.whole) \
                if self.splits and aligned else None
            self.split = self.split or pats is not None
            return pats is not None and self._split(ops[0], pats, pinned)
        if op == "slice":  # (pinning: a column of short rows, column_lanes.py)
            return a.strides[p] == 1 and self.value(
                ops[0], p, aligned and a.start_indices[p] % vector_width() == 0,
                None if off is None else off + a.start_indices[p],
                pinned or column_pins(instr, p))
        if op == "reverse":  # (along the lane: the mirrored lanes reversed, reverse_emit.py)
            return self.value(ops[0], p, False, None, pinned) if p in a.dimensions else \
                self.value(ops[0], p, True, off)
        if op == "gather":  # along an offset dimension: the starts are uniform
            d = gather_operand_dim(instr, p)
            if d is not None:
                return self.value(ops[0], d, False, None)
            from xlapy.backends.cpu import gather_lanes  # (it imports this module)
            return gather_lanes.eligible(instr, self.leaves, p) and \
                self.value(ops[1], gather_lanes.index_dim(instr, p), False, None)
        if op in INDEX_LANES:  # operands along the same dimension; scalar operands uniform
            shifts = index_lane_shifts(instr, p, off, self.cuts is not None)
            if shifts is None:
                return False
            if not index_lane_ok(instr, p):
                assert self.cuts is not None and off is not None
                self.cuts[(id(instr), off)] = (instr, p, off)
            # (a concatenate past the lane keeps the columns constant: one operand each)
            pin = pinned and op == "concatenate" and a.dimension > p
            return all(self.value(o, p if o.shape.rank else None, False, k, pin)
                       for o, k in zip(ops, shifts) if o.shape.num_elements)
        return all(self.value(o, p if o.shape.rank else None, aligned, off, pinned)
                   for o in ops)

    def patterned(self, instr: Instruction, pats: dict[int, tuple[int, ...]],
                  pinned: bool = False) -> bool:
        """`instr` generated with LanePattern indices along the dimensions of `pats`: read
        from a leaf as one short load when the pattern covers [0, m), m <= W (lane_split);
        `pinned`: the indices past the patterns' are constants (a minor stack's columns),
        and whole rows covering [0, m) read as one tile (lane_split._pattern_column)."""
        if not pats:
            return True
        key = (id(instr), tuple(sorted(pats.items())), pinned)
        if key in self.seen:
            return True
        self.seen.add(key)
        if instr.shape.is_array and instr.shape.element_type.is_complex:
            return False
        dims = instr.shape.dimensions
        if id(instr) in self.leaves:
            return covers(pattern_offsets(pats, dims)) or (
                pinned and column_ok(dims, max(pats)) and
                covers(pattern_offsets(pats, dims[:max(pats) + 1])))
        op, a, ops = instr.opcode, instr.attrs, instr.operands
        if op in ("constant", "iota", "dynamic_iota"):
            return True
        if op == "broadcast_in_dim":
            src = ops[0].shape.dimensions
            bd = list(a.broadcast_dimensions)
            return self.patterned(ops[0], {i: pats[d] for i, d in enumerate(bd)
                                           if d in pats and src[i] != 1},
                                  pinned and bd == sorted(bd))
        if op == "transpose":
            return self.patterned(ops[0], {a.permutation[d]: v for d, v in pats.items()})
        if op == "slice":  # (a start would shift the patterns off their alignment)
            return all(a.strides[d] == 1 and a.start_indices[d] == 0 for d in pats) and \
                self.patterned(ops[0], pats, pinned)
        if op == "reshape":
            src = ops[0].shape.dimensions
            sub = merged(dims, src, pats, len(next(iter(pats.values()))), self.whole)
            # (the pinned indices stay constants where they pass through unchanged)
            pin = pinned and (unit_map(dims, src) is not None or
                              max(pats) >= len(dims) - shared_dims(dims, src)[1])
            return sub is not None and self._split(ops[0], sub, pin)
        if op in ("reduce", "reverse", "bitcast_convert") or op in INDEX_LANES:
            return False
        return all(self.patterned(o, pats if o.shape.rank else {}, pinned) for o in ops)

    def _split(self, instr: Instruction, pats: dict[int, tuple[int, ...]],
               pinned: bool = False) -> bool:
        """patterned(), or value() where the one pattern is whole aligned lanes (the
        emitter makes that a Lane again)."""
        if len(pats) == 1:
            (d, v), = pats.items()
            if v == tuple(range(len(v))):
                return self.value(instr, d, True, None, pinned)
        return self.patterned(instr, pats, pinned)


#: Longest rows (elements of the leaf after the lane's dimension) read as tiles: a tile is
#: that many vectors.
MAX_COLUMNS = 16


def column_pins(instr: Instruction, p: int) -> bool:
    """Whether slice `instr`, generated with the lane along its dimension p, fixes every
    index past p to a constant (its dimensions there are one element each): what it reads
    (a leaf, or element-wise ops of leaves) is then read at one column of each row
    (column_lanes.py)."""
    dims = instr.shape.dimensions
    return p < len(dims) - 1 and all(d == 1 for d in dims[p + 1:])


def column_ok(dims: Sequence[int], p: int) -> bool:
    """Whether a leaf read with the lane along dimension p, its later indices constant, is a
    column read: 2 to MAX_COLUMNS elements past p."""
    return 1 < math.prod(dims[p + 1:]) <= MAX_COLUMNS


def covers(offsets: Sequence[int]) -> bool:
    """Whether lane offsets cover [0, m) for an m no longer than the lanes."""
    return sorted(set(offsets)) == list(range(max(offsets) + 1)) and max(offsets) < len(offsets)


def pattern_offsets(pats: dict[int, tuple[int, ...]], dims: Sequence[int]) -> list[int]:
    """Each lane's offset from the pattern starts' element in a row-major array."""
    strides = row_strides(dims)
    w = len(next(iter(pats.values())))
    return [sum(v[k] * strides[d] for d, v in pats.items()) for k in range(w)]


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


def index_lane_shifts(instr: Instruction, p: int, off: int | None, cuts: bool
                      ) -> list[int | None] | None:
    """Each operand's lane shift (None: a run-time one) when index op `instr` (not a gather)
    is generated with the lane along p at shift `off`, or None where it cannot be: a branch
    along p (index_lane_ok) needs `cuts` and a known shift, and a concatenate or a pad with
    no interior padding there (the segments force its case)."""
    op, a, ops = instr.opcode, instr.attrs, instr.operands
    same = off  # (scalar operands are uniform: their shift is never read)
    if op == "concatenate" and p == a.dimension:
        if not cuts or off is None:
            return None
        starts = [0]
        for o in ops:
            starts.append(starts[-1] + o.shape.dimensions[p])
        return [off - s for s in starts[:-1]]
    if op == "pad":
        if a.interior_padding[p] or (not index_lane_ok(instr, p) and (not cuts or off is None)):
            return None
        return [None if off is None else off - a.edge_padding_low[p], same]
    if op == "dynamic_slice":  # a run-time start along p, unless it spans p (start 0)
        return [same if ops[0].shape.dimensions[p] == a.slice_sizes[p] else None] + \
            [same] * (len(ops) - 1)
    if op == "dynamic_update_slice" and not index_lane_ok(instr, p):
        return None
    return [same] * len(ops)


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


def shared_dims(out: Sequence[int], src: Sequence[int]) -> tuple[int, int]:
    """(leading, trailing) dimensions a reshape's output and operand share."""
    lead = 0
    while lead < min(len(out), len(src)) and out[lead] == src[lead]:
        lead += 1
    trail = 0
    while trail < min(len(out), len(src)) - lead and out[-1 - trail] == src[-1 - trail]:
        trail += 1
    return lead, trail


def _reshape_lane(p: int, out: Sequence[int], src: Sequence[int]) -> int | None | bool:
    """The operand dimension of a reshape's output dimension p when the emitter maps it
    directly (shared leading or trailing dimensions, as lane_split.reshape_index); False
    when it goes through a division."""
    lead, trail = shared_dims(out, src)
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


def stored_identity(op: str, et: ET) -> object:
    """`identity` as a constant of `et` holds it: an unsigned type's -1 (min, and) all ones."""
    v = identity(op, et)
    return int(v) & ((1 << et.bits) - 1) if not et.is_float and not et.is_signed else v


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
