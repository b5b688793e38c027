"""Float max/min over a whole array in two levels: row maxima first, then their max.

A reduce to one value splits its range over the threads as partial reductions (reduce_emit's
`_partial_kind`), each range one vector accumulator: for max/min that is llvm.maximum's
chain of ~6 instructions a vector (sign test, blends, max, NaN compare), not minmax_emit's
fast loop, which runs over rows. jnp.max of 16M floats took 4.3 ms (XLA 1.5-1.9), of 16M
bf16 7.8 ms (XLA 0.71). As row maxima (`row_length`), then the max of those, the rows run
the fast loop over the threads: 1.2 ms. max/min are exact in any order (a NaN anywhere is
the result, -0 < +0); the init joins each level (max(init, max(init, ...)) is the same
value).
"""

from __future__ import annotations

from xlapy.backends.cpu.minmax_emit import FAST_TYPES
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_planned

#: The row length of the first level where the array's length allows: a multiple of every
#: fast loop's group (4 vectors of up to 16 lanes).
ROW = 4096
#: Shortest row of the first level: an array's own rows from this long (rows of 3001: 0.66
#: ms for 9M floats, XLA 0.77), else a divisor of its length. A length with neither stays
#: one reduce (a slice of the whole rows read through div/mod ran 9x slower than that).
MIN_ROW = 512
#: Fewest elements a whole-array max/min is split from (two rows a thread).
MIN_ELEMENTS = 4 * ROW


def row_length(r: Instruction) -> int | None:
    """The first level's row length for `r`, a float max/min of one operand over all its
    dimensions and long enough, or None to leave it."""
    if r.opcode != "reduce" or reducer_op(r) not in ("maximum", "minimum"):
        return None
    x = r.operands[0]
    n = x.shape.num_elements
    if x.shape.element_type not in FAST_TYPES or r.shape.rank != 0 or n < MIN_ELEMENTS or \
            sorted(r.attrs.dimensions) != list(range(x.shape.rank)):
        return None
    return first_level_row(n, x.shape.dimensions)


def first_level_row(n: int, dims: tuple[int, ...]) -> int | None:
    """The row length of a two-level reduction of n elements held in shape `dims`: its own
    rows where long enough, else ROW or a divisor of n at least MIN_ROW long (None: none)."""
    if len(dims) >= 2 and dims[-1] >= MIN_ROW:
        return dims[-1]  # (what a row fixes is then computed once a row)
    if n % ROW == 0:
        return ROW
    fast = [c for c in range(ROW, MIN_ROW - 1, -64) if n % c == 0]
    return fast[0] if fast else next((c for c in range(2 * ROW, MIN_ROW - 1, -1)
                                      if n % c == 0), None)


def two_level(comp: Computation, r: Instruction, c: int) -> Instruction:
    """`r` as the max/min of the maxima/minima of its rows of c (module docstring)."""
    x, init = r.operands
    fn = r.called[0]
    em = Emitter(comp)
    rows = em.regroup(x, (x.shape.num_elements // c, c))
    return em.reduce(em.reduce(rows, init, (1,), fn), init, (0,), fn)


class TotalMinMax(ComputationPass):
    """Rewrites whole-array float max/min reduces in two levels (module docstring)."""

    name = "total-min-max"

    def run_on_computation(self, comp: Computation) -> bool:
        return replace_planned(comp, row_length, lambda r, c: two_level(comp, r, c))


__all__ = ["MIN_ELEMENTS", "MIN_ROW", "ROW", "TotalMinMax", "first_level_row", "row_length",
           "two_level"]
