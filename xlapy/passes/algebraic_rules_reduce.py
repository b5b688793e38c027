"""Algebraic simplifier rules, part 3: reductions that are cheaper as element-wise ops.

jnp.argmax / argmin of a boolean array along a short dimension (jnp.select's choice of the
first true condition, "the first index where" idioms) is a variadic reduce of the booleans
and an iota under a comparator region. Folded a step at a time it held each step's four
compares and two selects on masks: jnp.select of 3 conditions over 1M floats took 0.61 ms
against 0.135 for the same choice written as nested jnp.where (XLA 0.25, Zen 3). As a chain
of selects on the rows (first true index, else the init's) it is the nested where. Along a
long dimension it is a min-reduce of the true rows' indices: jnp.argmax(x > 1.5, -1) over
4096 x 1000 took 4.1 ms as the variadic reduce, 0.44 so (XLA 2.1-2.7).

The region is checked by what it computes, not how it is spelt: evaluated once on every
(accumulator, element) pair of values and indices the fold can meet (three indices where it
only compares them: `_order_only`), it must pick as an argmax (or argmin) with the smaller
index on ties does. Such a pick is associative and
commutative, so any fold order (the interpreter's sequential or pairwise one) gives the
first row holding the better value, or the init where none does.
"""

from __future__ import annotations

import itertools

import numpy as np

from xlapy.ir import Instruction
from xlapy.passes.algebraic_rules import Rule
from xlapy.passes.constant_folding import run_computation
from xlapy.passes.hlo_builder import Emitter, scalar_reducer
from xlapy.types.element_type import iinfo

#: Longest reduced dimension rewritten as a chain (a select a row); longer ones (up to
#: MAX_INDEX) become a min-reduce of the best rows' indices.
MAX_ROWS = 16
MAX_INDEX = 1 << 30


def _order_only(i: Instruction) -> bool:
    """Whether the region sees the indices only through compares of them and selects that
    pass them on (jax's comparators): its picks then depend on their order alone."""
    comp = i.called[0]
    params = comp.parameters
    index = {id(params[1]), id(params[3])}
    for x in comp.instructions:
        if x.opcode == "parameter":
            continue
        reads = [id(o) in index for o in x.operands]
        if x.opcode == "select" and not reads[0] and reads[1] == reads[2]:
            if reads[1]:
                index.add(id(x))
        elif x.opcode == "tuple" and x is comp.root:
            if not (reads[1] and not reads[0]):
                return False
        elif any(reads) and (x.opcode != "compare" or not all(reads)):
            return False
        elif x.shape.is_array and x.shape.element_type == params[1].shape.element_type \
                and not any(reads) and x.opcode != "compare":
            return False  # (an index made some other way: a constant, arithmetic)
    return True


def _picks_first_best(i: Instruction, k: int) -> bool | None:
    """The region's best value (True for argmax, False for argmin) where it picks as
    argmax / argmin of (bool, index) pairs with the smaller index on ties, on the indices
    0..k-1 and the init's (of any order where `_order_only`); None otherwise."""
    if _order_only(i):  # (three indices give every order of two)
        idx = np.arange(3)
    elif k <= MAX_ROWS:
        idx = np.array(sorted(set(range(k)) | {int(i.operands[3].attrs.literal.to_numpy())}))
    else:
        return None
    rows = list(itertools.product([False, True], idx, [False, True], idx))
    av, ai, ev, ei = (np.array(c) for c in zip(*rows))
    it = i.operands[1].shape.element_type.dtype
    try:
        got_v, got_i = run_computation(i.called[0], [av, ai.astype(it), ev, ei.astype(it)])
    except Exception:  # (a region the evaluator cannot run on arrays: no rewrite)
        return None
    got_v, got_i = np.broadcast_to(got_v, av.shape), np.broadcast_to(got_i, av.shape)
    for best in (True, False):
        acc = (av == best) & (ev != best) | (av == ev) & (ai <= ei)
        if np.array_equal(got_v, np.where(acc, av, ev)) and \
                np.array_equal(got_i, np.where(acc, ai, ei)):
            return best
    return None


def _first_true(i: Instruction, e: Emitter) -> Instruction | None:
    """reduce((X: pred, iota along d), (init_v, init_i), argmax/argmin region) over d alone,
    init_v the worse value => tuple(any/all of X's rows, select(X_0 == best, 0,
    select(X_1 == best, 1, ... min(init_i, 0)))) for k <= MAX_ROWS rows, `_first_by_min`
    for more."""
    if len(i.operands) != 4 or len(i.called) != 1 or len(i.attrs.dimensions) != 1:
        return None
    x, ids, init_v, init_i = i.operands
    d = i.attrs.dimensions[0]
    k = x.shape.dimensions[d] if x.shape.is_array else 0
    if not x.shape.element_type.is_pred or not 1 <= k <= MAX_INDEX or \
            ids.opcode != "iota" or ids.attrs.iota_dimension != d or \
            init_v.opcode != "constant" or init_i.opcode != "constant" or \
            not ids.shape.element_type.is_integer or \
            k > int(iinfo(ids.shape.element_type).max):  # (wrapping iotas; `none` = k)
        return None
    if k > MAX_ROWS and e.module is None:
        return None
    best = _picks_first_best(i, k)
    if best is None or bool(init_v.attrs.literal.to_numpy()) == best:
        return None
    if k > MAX_ROWS:
        return _first_by_min(i, e, best)
    out = tuple(i.shape.tuple_shapes[0].dimensions)
    dims = list(x.shape.dimensions)
    rows = []
    for r in range(k):
        lo, hi = [0] * len(dims), list(dims)
        lo[d], hi[d] = r, r + 1
        row = e.slice(x, start_indices=tuple(lo), limit_indices=tuple(hi),
                      strides=(1,) * len(dims))
        rows.append(e.reshape(row, shape=out))
    it = ids.shape.element_type
    idx = e.splat(min(int(init_i.attrs.literal.to_numpy()), 0), i.shape.tuple_shapes[1])
    for r in reversed(range(k)):
        hit = e.splat(r, i.shape.tuple_shapes[1])
        idx = e.select(rows[r], hit, idx) if best else e.select(rows[r], idx, hit)
    value = rows[0]
    for row in rows[1:]:
        value = e.op("or" if best else "and", value, row)
    assert idx.shape.element_type == it
    return e.tuple(value, idx)


def _first_by_min(i: Instruction, e: Emitter, best: bool) -> Instruction:
    """The first best row of a long dimension: min over select(X == best, index, k), k
    where none is (then the init's index, or 0); the value an or / and reduce."""
    x, ids, _, init_i = i.operands
    d = i.attrs.dimensions[0]
    k = x.shape.dimensions[d]
    it = ids.shape.element_type
    assert e.module is not None
    none = e.splat(k, ids)
    cand = e.select(x, ids, none) if best else e.select(x, none, ids)
    low = scalar_reducer(e.module, "minimum", it, f"first_index_min_{it.hlo_name}")
    first = e.reduce(cand, e.const(k, it), [d], low)
    miss = e.splat(min(int(init_i.attrs.literal.to_numpy()), 0), first)
    idx = e.select(e.cmp(first, e.splat(k, first), "EQ"), miss, first)
    pred = x.shape.element_type
    join = scalar_reducer(e.module, "or" if best else "and", pred,
                          f"first_index_{'or' if best else 'and'}")
    value = e.reduce(x, e.const(not best, pred), [d], join)
    return e.tuple(value, idx)


REDUCE_RULES: list[Rule] = [
    # reduce((X: pred, iota along d), (worse, c), argmax / argmin region) over d (k rows)
    #   => tuple(or / and of X's rows, select chain of the row indices: the first best)
    Rule("argmax_pred_rows", "reduce", _first_true),
]
