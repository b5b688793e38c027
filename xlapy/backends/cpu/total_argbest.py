"""argmax / argmin over a whole array in two levels: each row's best and its first column,
then the best of those with its index made global.

jnp.argmax(x) reshapes x to one dimension and reduces (x, iota) with a comparator region:
a native reduce (reduce_region_emit.py) folding 1M floats as one scalar tree on one thread
behind a copy of the reshape, 3.5 ms against XLA's 1.1. As rows (the array's own where long
enough, else total_minmax's row length) the row reduce runs a row per lane over the
threads, and the regrouped operand is the buffer itself.

Valid when the region picks as "the best value, the smaller index on ties" does whenever
its left pair holds the smaller index (`picks_first_best`, checked on values that include
NaN, infinities and signed zeros): the native reduce keeps every left operand's indices
below its right one's (the init's, 0, leftmost), so a row's pick is its first best, the
rows' pick the first best row. The init then joins both levels: where it wins a row it
reads as that row's column 0, and at the second level its own index, 0, wins any tie with
such a row. An init index other than 0 is left alone.
"""

from __future__ import annotations

import itertools

import numpy as np

from xlapy.backends.cpu.total_minmax import MIN_ELEMENTS, first_level_row
from xlapy.ir import Computation, Instruction
from xlapy.passes.constant_folding import run_computation
from xlapy.passes.hlo_builder import Emitter, reshape_source
from xlapy.passes.pass_base import ComputationPass, replace_planned
from xlapy.types import Shape
from xlapy.types.element_type import iinfo

#: Values the region is checked on (each pair, in both places, with each index order).
_PROBES = (-np.inf, -2.5, -0.0, 0.0, 1.0, np.inf, np.nan)


def picks_first_best(r: Instruction) -> bool | None:
    """True for an argmax region, False for argmin, None for anything else (see module)."""
    comp = r.called[0]
    et = r.operands[0].shape.element_type
    if not et.is_float:
        return None
    pairs = list(itertools.product(_PROBES, (0, 1), _PROBES, (1, 2)))
    av, ai, ev, ei = (np.array(c) for c in zip(*pairs))
    keep = ai <= ei  # (the left pair's index the smaller)
    av, ai, ev, ei = av[keep], ai[keep], ev[keep], ei[keep]
    it = r.operands[1].shape.element_type.dtype
    try:
        with np.errstate(all="ignore"):
            got_v, got_i = run_computation(comp, [av.astype(et.dtype), ai.astype(it),
                                                  ev.astype(et.dtype), ei.astype(it)])
    except Exception:  # (a region the evaluator cannot run on arrays: no rewrite)
        return None
    got_v = np.broadcast_to(np.asarray(got_v, np.float64), av.shape)
    got_i = np.broadcast_to(got_i, av.shape)
    for best in (True, False):
        ka, ke = (np.where(np.isnan(v), np.inf if best else -np.inf, v) for v in (av, ev))
        nan = np.isnan(av) & np.isnan(ev)
        left = (ka > ke if best else ka < ke) | (ka == ke) | nan
        # (a NaN beats any number; among equal keys, NaN or not, the left pair stays)
        left &= ~(np.isnan(ev) & ~np.isnan(av))
        want_v, want_i = np.where(left, av, ev), np.where(left, ai, ei)
        if np.array_equal(got_v, want_v, equal_nan=True) and np.array_equal(got_i, want_i):
            return best
    return None


def _plan(r: Instruction) -> int | None:
    """The first level's row length of `r`, a whole-array argmax / argmin, or None."""
    if r.opcode != "reduce" or len(r.operands) != 4 or len(r.called) != 1:
        return None
    x, ids, init_v, init_i = r.operands
    if x.shape.rank != 1 or ids.opcode != "iota" or init_v.opcode != "constant" or \
            init_i.opcode != "constant" or not ids.shape.element_type.is_integer:
        return None
    n = x.shape.num_elements
    if n < MIN_ELEMENTS or n - 1 > int(iinfo(ids.shape.element_type).max) or \
            int(np.asarray(init_i.attrs.literal.to_numpy())) != 0:
        return None
    c = first_level_row(n, reshape_source(x).shape.dimensions)
    return c if c is not None and picks_first_best(r) is not None else None


def two_level(comp: Computation, r: Instruction, c: int) -> Instruction:
    """`r` as the best of its rows of c elements' bests (module docstring)."""
    x, ids, init_v, init_i = r.operands
    fn = r.called[0]
    n = x.shape.num_elements
    em = Emitter(comp)
    it = ids.shape.element_type
    rows = em.regroup(x, (n // c, c))
    cols = em.iota(shape=Shape.array(it, [n // c, c]), iota_dimension=1)
    first = em.op("reduce", rows, cols, init_v, init_i, called=[fn], dimensions=(1,))
    v, col = (em.get_tuple_element(first, index=k) for k in (0, 1))
    base = em.multiply(em.iota(shape=col.shape, iota_dimension=0), em.splat(c, col.shape))
    return em.op("reduce", v, em.add(base, col), init_v, init_i, called=[fn],
                 dimensions=(0,))


class TotalArgBest(ComputationPass):
    """Rewrites whole-array argmax / argmin reduces in two levels (module docstring)."""

    name = "total-arg-best"

    def run_on_computation(self, comp: Computation) -> bool:
        return replace_planned(comp, _plan, lambda r, cols: two_level(comp, r, cols))


__all__ = ["TotalArgBest", "picks_first_best", "two_level"]
