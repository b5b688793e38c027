"""Long column sums in two levels: reduce(reduce(reshape(x, [R / B, B, ...]), 1), 0).

A float sum over leading dimensions that keeps the innermost one (batch-norm statistics,
`jnp.sum(x, (0, 1, 2))` over NHWC, a bias gradient) is emitted as one accumulator per
output element adding the R rows in order: an error growing like R ulps. A 64 x 4096 x 16
sum over (0, 1) was 4.9e-6 off (relative) where XLA's was 1.1e-7, and a batch-norm
training step's gradients 30x further from the f64 result than XLA's. XLA's CPU compiler
splits long reductions the same way (its tree reduction rewriter). Here the rows are cut
into R / B blocks of B ~ sqrt(R): each block summed in order (B ulps), then the block sums
(R / B): ~2 sqrt(R) ulps, 40x better at R = 262144 (8.8e-8 there), and the first level
runs over threads by blocks.

Only single-operand add reduces of f32, f16 and bf16 whose reduced dimensions are
consecutive (the leading ones, or a middle run: [8, 4096, 16] over 1), not the innermost,
at least MIN_ROWS rows of them, with a divisor of R near sqrt(R) (else the reduce stays);
f64 sums are accurate enough in order. The sum's association is the
backend's choice (the kernels' accumulator chains reassociate too).
"""

from __future__ import annotations

from math import isqrt, prod

from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_each
from xlapy.types import ElementType

#: Fewest rows (the reduced dimensions' product) a column sum is split from (in order, 256
#: rows are at most 256 ulps off, ~16 typically).
MIN_ROWS = 256
#: ...and the block sums again, from this many blocks (8192 rows: blocks of 64, then 128
#: block sums in blocks of 8: 1.7e-7 instead of 4.0e-7 off).
MIN_BLOCKS = 64
#: The smallest block (a divisor of the rows) worth the split.
MIN_BLOCK = 8
_TYPES = frozenset({ElementType.F32, ElementType.F16, ElementType.BF16})


def block(rows: int) -> int | None:
    """The divisor of `rows` nearest sqrt(rows) from below, if at least MIN_BLOCK."""
    for b in range(isqrt(rows), MIN_BLOCK - 1, -1):
        if rows % b == 0:
            return b
    return None


def _split(r: Instruction, least: int = MIN_ROWS) -> tuple[int, int, int] | None:
    """(first and end reduced dimension, block) of a column sum of `least` or more rows to
    split, or None."""
    if r.opcode != "reduce" or len(r.operands) != 2 or reducer_op(r) != "add":
        return None
    x = r.operands[0]
    if x.shape.element_type not in _TYPES or r.shape.element_type not in _TYPES:
        return None
    dims = sorted(r.attrs.dimensions)
    if not dims or dims != list(range(dims[0], dims[-1] + 1)) or dims[-1] == x.shape.rank - 1:
        return None  # (row and full reductions have accumulator chains in lanes)
    a, e = dims[0], dims[-1] + 1
    rows = prod(x.shape.dimensions[a:e])
    b = block(rows) if rows >= least else None
    return None if b is None else (a, e, b)


def two_level(comp: Computation, r: Instruction, least: int = MIN_ROWS) -> Instruction:
    """`r` as the sum of per-block sums (module docstring)."""
    found = _split(r, least)
    assert found is not None
    a, e, b = found
    x, init = r.operands
    d = x.shape.dimensions
    em = Emitter(comp)
    rows = prod(d[a:e])
    blocks = em.regroup(x, (*d[:a], rows // b, b, *d[e:]))
    zero = em.const(0, x.shape.element_type)
    add = r.called[0]
    inner = em.reduce(blocks, zero, (a + 1,), add)
    outer = em.reduce(inner, init, (a,), add)
    return two_level(comp, outer, MIN_BLOCKS) if _split(outer, MIN_BLOCKS) else outer


class SplitColumnSums(ComputationPass):
    """Rewrites long float column sums as two-level sums (module docstring)."""

    name = "split-column-sums"

    def run_on_computation(self, comp: Computation) -> bool:
        return replace_each(comp, [i for i in comp.instructions if _split(i) is not None],
                            lambda r: two_level(comp, r))


__all__ = ["MIN_BLOCKS", "MIN_ROWS", "SplitColumnSums", "block", "two_level"]
