"""Reductions over a short last dimension as element-wise folds (the interpreter's order).

An image's channels (max - min over [16, 224, 224, 3]: hsv's value range) made a row kernel
whose rows are 3 elements long: per row a loop and its setup, 4.2 ms against XLA's 1.9. A
reduce over a last dimension of at most SHORT elements is written as the fold the
interpreter computes for it (ops/reduction.fold_last_axis: init, then each element left to
right), one slice per element: an element-wise kernel over the result's shape, vectorized
along its own last dimension, with the same bits. Dots contracting at most SHORT elements
(jnp.dot(image, [0.299, 0.587, 0.114]): BLAS with k = 3, 1.95x XLA's time) become such a
reduce of a broadcast product first (small_dots.rewrite), f32/f64 only as there.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from xlapy.backends.cpu import small_dots
from xlapy.backends.cpu.column_registers import orderless
from xlapy.backends.cpu.fold_paths import column_slice
from xlapy.backends.cpu.lanes import stored_identity
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.fusion_decision import EXPENSIVE, is_elementwise
from xlapy.passes.fusion_decision import SAME_INDEX as _SAME_INDEX
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.inliner import lift_elementwise
from xlapy.passes.pass_base import ComputationPass, replace_each
from xlapy.types import ElementType

#: The longest last dimension (contraction) folded element by element.
SHORT = 8
#: ... and the longest when what it reduces computes a transcendental per element (jax's
#: logsumexp, log_softmax and cross entropy over 10 classes: the row kernel ran each row's
#: exps in one masked vector, a row at a time, 2.4-3x the fold's time). A cheap row of a
#: vector's length is the row kernel's best case (an RMS norm over 16: the same time folded,
#: 2.5x the compile). Also the longest folded when no value of the result is spread back out
#: (`_spread`).
SHORT_HEAVY = 16


def short_reduce(instr: Instruction) -> bool:
    """A single-input reduce of its operand's last dimension only, to an array, folded: at
    most SHORT long, or SHORT_HEAVY when its operand computes a transcendental (or is
    broadcast back into one that is folded: logsumexp's max) or its result is not spread
    out again (`_spread`); never when broadcast back into values of the operand's shape
    that something other than a fold reads."""
    n = _row_length(instr)
    if not n:
        return False
    back, refolds = _backs(instr)
    return not back and (n <= SHORT or refolds or _heavy(instr.operands[0]) or
                         not _spread(instr))


def _row_length(instr: Instruction) -> int:
    """The length of the rows a single-input reduce of only its operand's last dimension
    (rank 2 or more) into an array folds, when at most SHORT_HEAVY; else 0."""
    if instr.opcode != "reduce" or reducer_op(instr) is None or not instr.shape.is_array:
        return 0
    dims = instr.operands[0].shape.dimensions
    r = len(dims)
    ok = r >= 2 and tuple(instr.attrs.dimensions) == (r - 1,) and 0 < dims[-1] <= SHORT_HEAVY
    return dims[-1] if ok else 0


def _heavy(x: Instruction, most: int = 32) -> bool:
    """Whether x's element-wise expression (its first `most` values) has a transcendental."""
    seen: set[int] = set()
    todo = [x]
    while todo and len(seen) < most:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v.opcode in EXPENSIVE:
            return True
        if is_elementwise(v) or v.opcode in ("broadcast_in_dim", "reshape", "convert"):
            todo.extend(v.operands)
    return False


def holds_fold(x: Instruction, most: int = 64) -> bool:
    """Whether x's expression (its first `most` values) holds a fold this pass made: a
    slice of one element of a short last dimension (the fold's columns)."""
    seen: set[int] = set()
    todo = [x]
    while todo and len(seen) < most:
        v = todo.pop()
        if id(v) in seen or v.opcode in ("parameter", "reduce"):
            continue
        seen.add(id(v))
        if column_slice(v) and v.operands[0].shape.dimensions[-1] <= SHORT_HEAVY:
            return True
        todo.extend(v.operands)
    return False


def _spread(instr: Instruction, depth: int = 8) -> bool:
    """Whether the reduce's result, through ops on its elements of any kind, is broadcast
    to any shape with more elements (an RMS norm's mean through its rsqrt): a reduce none of
    whose values are spread (a plain sum, a distance) folds up to SHORT_HEAVY. The row
    kernel walked rows of 9-16 elements as a loop each: a sum over [512, 1024, 12] 1.44 ms
    (XLA 1.10), 0.69 folded; squared distances over 12 coordinates of 1024 x 1024 pairs
    8.9 -> 1.3 (XLA 3.0). Spread, as the row kernel's one value a row, it was the faster
    (an RMS norm over 16: 1.36 ms, folded 2.43)."""
    n = instr.shape.num_elements
    return any(u.shape.is_array and u.shape.num_elements > n
               for v in [instr, *_reach(instr, depth, lambda u: True)] for u in v.users)


def broadcast_back(instr: Instruction) -> bool:
    """Whether the reduce's result (through ops on its elements) is broadcast back over its
    operand's shape: a normalization (softmax's max and sum), which the row kernel computes
    once per row and the fold would recompute per element. Not through a transcendental op
    (an n-body step's r2 ** 1.5 broadcast back over [n, n, 3]: the row kernel computed the
    pow once per row of 3 in scalar code, 1.1 ms for 256 bodies; folded, the pow gets a
    buffer in lanes, fusion_spread.SHORT_ROW, 0.2 ms). A broadcast back whose values are only
    folded again (`refolded`) does not count."""
    return _backs(instr)[0]


def _backs(instr: Instruction, depth: int = 8) -> tuple[bool, bool]:
    """(broadcast_back, whether some broadcast back is refolded)."""
    full = tuple(instr.operands[0].shape.dimensions)
    n = instr.shape.num_elements
    seen: set[int] = set()
    todo = [(instr, 0)]
    refolds = False
    while todo:
        v, d = todo.pop()
        for u in v.users:
            if id(u) in seen or not u.shape.is_array:
                continue
            seen.add(id(u))
            if u.opcode == "broadcast_in_dim" and tuple(u.shape.dimensions) == full:
                if not refolded(u):
                    return True, refolds
                refolds = True
                continue
            if u.shape.num_elements == n and d < depth and u.opcode not in EXPENSIVE:
                todo.append((u, d + 1))
    return False, refolds


def refolded(b: Instruction) -> bool:
    """Whether what a broadcast back computes over the full shape, through element-wise ops
    of that shape, is only reduced again by reduces this pass folds too (logsumexp's
    exp(x - max) summed): each element is then computed once, in its row's fold, and the
    kernel runs over the rows with no row kernel's per-row loops (jax.nn.logsumexp over
    rows of 8: 1.47 ms against XLA's 0.44 as a row kernel whose root is one element per
    row)."""
    full = b.shape.dimensions
    seen: set[int] = set()
    todo = [b]
    while todo:
        v = todo.pop()
        for u in v.users:
            if id(u) in seen:
                continue
            seen.add(id(u))
            if u.opcode == "reduce":
                if not (len(u.operands) == 2 and u.operands[0] is v and short_reduce(u)):
                    return False
            elif is_elementwise(u) and u.shape.dimensions == full and u.users:
                todo.append(u)  # (a value with no users is the computation's result)
            else:
                return False
    return True


#: The longest contraction of an unbatched product of two arrays folded (`narrow_dot`) ...
THIN = 6
#: ... into at least this many outputs. Xeon, 2 threads, BLAS -> the fold (ms; XLA):
#: 2048 x k x 2048, k = 2 0.77 -> 0.34, 4 0.82 -> 0.45 (0.50), 6 0.84 -> 0.71 (0.51), 8
#: 0.90 -> 1.07; 1024 x 4 x 2048 0.34 -> 0.25 (0.27), 1024 x 6 x 2048 0.65 -> 0.38, 8192 x
#: 4 x 256 0.35 -> 0.24; x86-64-v3 alike. The fold is one pass over the output, each
#: row's k values of the lhs broadcast once (hoist_emit.py); under 2M outputs BLAS won
#: some (256 x 4 x 4096: 0.12 -> 0.16).
THIN_OUTPUTS = 1 << 21


def narrow_dot(d: Instruction) -> bool:
    """An f32/f64 dot of an array with a vector of at most SHORT elements (the weighted sum
    of each row) into at least 1024 outputs, or an unbatched product contracting at most
    THIN elements into THIN_OUTPUTS or more; other narrow dots keep their routes (outer
    products, skinny GEMMs, batch chains)."""
    if d.opcode != "dot_general" or d.attrs.algorithm is not None or not d.shape.is_array:
        return False
    lhs, rhs = d.operands
    et = d.shape.element_type
    a = d.attrs
    k = math.prod(lhs.shape.dimensions[c] for c in a.lhs_contracting_dimensions)
    vector = (rhs.shape.rank == 1 and not a.rhs_batching_dimensions) or (
        lhs.shape.rank == 1 and not a.lhs_batching_dimensions)
    thin = not a.lhs_batching_dimensions and 1 < k <= THIN and \
        d.shape.num_elements >= THIN_OUTPUTS
    return (lhs.shape.element_type == rhs.shape.element_type == et
            and et in (ElementType.F32, ElementType.F64) and len(a.lhs_contracting_dimensions) == 1
            and ((0 < k <= SHORT and vector and d.shape.num_elements >= 1024) or thin))


def split_last(instr: Instruction) -> bool:
    """A single-input reduce of a short last dimension (at most SHORT) and of others, some
    kept dimension between them, whose reducer may take them in any order (integer ops,
    float max/min, f32/f64 sums and products): a 2 x 2 max pool written as
    x.reshape(n, c, h / 2, 2, w / 2, 2).max((3, 5)) reduced each output's two pairs in
    masked vectors of 2 (6.5 ms, XLA 3.3). Split (`split`), the last dimension folds
    element-wise and the rest fuses into one kernel over the output (1.3 ms)."""
    if instr.opcode != "reduce" or len(instr.operands) != 2 or not instr.shape.is_array:
        return False
    op = reducer_op(instr)
    x = instr.operands[0]
    et, dims, red = x.shape.element_type, x.shape.dimensions, set(instr.attrs.dimensions)
    r = len(dims)
    return op is not None and r >= 3 and (r - 1) in red and (r - 2) not in red and \
        len(red) >= 2 and 1 < dims[-1] <= SHORT and et is instr.shape.element_type and \
        orderless(op, et)


def split(comp: Computation, instr: Instruction) -> Instruction:
    """split_last reduce `instr` as a reduce of its last dimension (from the reducer's
    identity, so the init counts once) and then of the others."""
    e = Emitter(comp)
    x, init = instr.operands
    op = reducer_op(instr)
    assert op is not None
    et = x.shape.element_type
    r = x.shape.rank
    last = e.reduce(x, e.const(stored_identity(op, et), et), (r - 1,), instr.called[0])
    rest = tuple(sorted(d for d in instr.attrs.dimensions if d != r - 1))
    return e.reduce(last, init, rest, instr.called[0])


def unroll(comp: Computation, instr: Instruction) -> Instruction:
    """init op x[..., 0] op x[..., 1] ... (left to right) in the reduce's shape."""
    e = Emitter(comp)
    x, init = instr.operands
    op = reducer_op(instr)
    assert op is not None
    dims = list(instr.shape.dimensions)
    n = x.shape.dimensions[-1]
    x = sink_reshapes(e, x)
    acc = e.bcast(init, dims, [])
    for c in range(n):
        part = e.slice(x, start_indices=(0,) * (len(dims)) + (c,),
                       limit_indices=(*dims, c + 1), strides=(1,) * (len(dims) + 1))
        acc = e.op(op, acc, e.reshape(part, shape=tuple(dims)))
    return acc


def sink_reshapes(e: Emitter, x: Instruction) -> Instruction:
    """x with each reshape of element-wise ops (used there only) moved onto their operands
    (XLA's ReshapeMover, `Emitter.regroup`): jnp.packbits folds rows of 8 of
    reshape(convert(x > 0)) for a flat x; a kernel reads a reshaped buffer in the reshape's
    dims, so the fold's columns of reshape(x) read tiles of short rows (column_lanes.py)
    where columns of the flat x's values were a stride-8 scalar loop (1M floats: 0.57 ms,
    XLA 0.12)."""
    memo: dict[int, Instruction] = {}

    def moves(i: Instruction) -> bool:
        return is_elementwise(i) or i.opcode in _SAME_INDEX

    def down(i: Instruction) -> Instruction:
        if id(i) not in memo:
            if i.opcode == "reshape":
                memo[id(i)] = e.regroup(i.operands[0], tuple(i.shape.dimensions))
            elif not moves(i):
                memo[id(i)] = i
            else:
                ops = [down(o) for o in i.operands]
                memo[id(i)] = i if all(a is b for a, b in zip(ops, i.operands)) else \
                    e.comp.add(Instruction(i.opcode, ops, i.shape, i.attrs, i.called, i.name))
        return memo[id(i)]

    return down(x)


#: The most elements a variadic reduce folds (`variadic_short`), over leading dimensions.
#: Zen 4, 2 threads, the tuple kernel's time -> the fold's (argmin over axis 0 of n rows of
#: 2M elements): AVX-512 n = 3 0.22 -> 0.17 ms, 5 0.24 -> 0.20, 8 0.23 -> 0.26; AVX2 (x86-64-v3)
#: 3 0.25 -> 0.16, 5 0.29 -> 0.27, 6 0.26 -> 0.40, 8 0.29 -> 0.70; over a last dimension of 3
#: the fold's column shuffles lost on AVX2 (0.27 -> 0.41).
VARIADIC_SHORT = 4


def variadic_short(instr: Instruction) -> bool:
    """A reduce of several inputs (argmax: values and indices) over at most VARIADIC_SHORT
    elements of leading dimensions into arrays, whose reducer is scalar element-wise ops
    (compares, selects): folded too, its reducer applied to whole arrays (`unroll_variadic`):
    jnp.select's argmax over its stacked conditions then fuses with the selects."""
    if instr.opcode != "reduce" or len(instr.operands) < 4 or not instr.shape.is_tuple:
        return False
    x = instr.operands[0]
    dims, red = x.shape.dimensions, tuple(instr.attrs.dimensions)
    if not red or len(red) == len(dims) or len(dims) - 1 in red or \
            not 1 <= math.prod(dims[d] for d in red) <= VARIADIC_SHORT or \
            any(o.shape.element_type.is_complex for o in instr.operands):
        return False
    body = instr.called[0]
    return body.root is not None and all(
        i.opcode in ("parameter", "tuple") or (i.shape.rank == 0 and (
            i.opcode == "constant" or is_elementwise(i) or i.opcode in _SAME_INDEX))
        for i in body.instructions)


def unroll_variadic(comp: Computation, instr: Instruction) -> list[Instruction]:
    """The results of variadic_short reduce `instr`: from the inits, the reducer applied to
    each element of the reduced dimensions in row-major order (the interpreter's fold,
    ops/reduction.fold_last_axis), on arrays of the kept dimensions."""
    e = Emitter(comp)
    k = len(instr.operands) // 2
    xs, inits = instr.operands[:k], instr.operands[k:]
    dims = xs[0].shape.dimensions
    red = sorted(instr.attrs.dimensions)
    out = tuple(n for d, n in enumerate(dims) if d not in red)
    accs = [e.bcast(i, out, []) for i in inits]
    for at in itertools.product(*(range(dims[d]) for d in red)):
        start, limit = [0] * len(dims), list(dims)
        for d, v in zip(red, at):
            start[d], limit[d] = v, v + 1
        parts = [e.reshape(e.slice(x, start_indices=tuple(start), limit_indices=tuple(limit),
                                   strides=(1,) * len(dims)), shape=out) for x in xs]
        accs = lift_elementwise(comp, instr.called[0], accs + parts, out)
    return accs


def _fold_variadic(comp: Computation, r: Instruction) -> None:
    """Replaces reduce r by its unrolled results (get_tuple_element users take theirs)."""
    accs = unroll_variadic(comp, r)
    for u in list(r.users):
        if u.opcode == "get_tuple_element":
            u.replace_all_uses_with(accs[u.attrs.index])
            if u is not comp.root and not u.users:
                comp.remove(u)
    if r.users or r is comp.root:
        r.replace_all_uses_with(Emitter(comp).tuple(*accs))
    if r is not comp.root and not r.users:
        comp.remove(r)


class ShortReductions(ComputationPass):
    """Dots with a short contraction as reduces, reduces of a short last dimension as
    element-wise folds (module docstring)."""

    name = "short-reductions"

    def run_on_computation(self, comp: Computation) -> bool:
        module: Module | None = self.module
        assert module is not None
        changed = replace_each(comp, [i for i in comp.instructions if narrow_dot(i)],
                               lambda d: small_dots.rewrite(module, comp, d))
        for r in [i for i in comp.instructions if variadic_short(i)]:
            _fold_variadic(comp, r)
            changed = True
        changed = replace_each(comp, [i for i in comp.instructions if split_last(i)],
                               lambda i: split(comp, i)) or changed
        folds = [i for i in comp.instructions if short_reduce(i)]
        return replace_each(comp, folds + companions(comp, folds),
                            lambda i: unroll(comp, i)) or changed


def companions(comp: Computation, folds: list[Instruction]) -> list[Instruction]:
    """Reduces over a short last dimension (to SHORT_HEAVY) not folded for themselves whose
    results meet a fold's in element-wise ops (cross entropy's gradient divides the sum of
    its labels by the folded sum of exps): one kernel computes both, and a reduce left in
    it made it a row kernel running the fold a row at a time in scalar code (3.1 ms against
    0.8 for the two folded)."""
    if not folds:
        return []
    reached = set().union(*(_ahead(f) for f in folds))
    chosen = {id(f) for f in folds}
    out = []
    for i in comp.instructions:
        if id(i) not in chosen and _row_length(i) and not broadcast_back(i) and \
                _ahead(i) & reached:
            out.append(i)
    return out


def _ahead(r: Instruction, depth: int = 8) -> set[int]:
    """The values of r's element count that r reaches through element-wise ops and
    reshapes in `depth` steps."""
    return {id(u) for u in _reach(r, depth, lambda u: is_elementwise(u) or
                                  u.opcode == "reshape")}


def _reach(r: Instruction, depth: int, through: Callable[[Instruction], bool]
           ) -> list[Instruction]:
    """The arrays of r's element count that r reaches through users `through` accepts, in
    `depth` steps."""
    n = r.shape.num_elements
    seen: set[int] = set()
    out: list[Instruction] = []
    todo = [(r, 0)]
    while todo:
        v, d = todo.pop()
        for u in v.users:
            if id(u) not in seen and d < depth and u.shape.is_array and \
                    u.shape.num_elements == n and through(u):
                seen.add(id(u))
                out.append(u)
                todo.append((u, d + 1))
    return out


__all__ = ["SHORT", "SHORT_HEAVY", "THIN", "THIN_OUTPUTS", "ShortReductions", "companions",
           "holds_fold", "narrow_dot", "short_reduce", "split_last", "unroll"]
