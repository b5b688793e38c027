"""Column reductions of a narrow last dimension through whole vectors.

`jnp.mean(points, 0)` of [262144, 3] points kept the 3 columns innermost: each of the three
sums ran down 262144 rows one element at a time, 1.1 ms against XLA's 0.2-0.7 (`jnp.max`
2.8 ms). Read as [R / k, k * c] (k = lcm(c, W) / c for W elements per 64 bytes) the same
reduce keeps k * c columns, whole vectors of them: [16384, 48] summed into 48 lanes, then
[16, 3] into the 3 results, 0.07 ms. Rows past the last whole group of k (R mod k) are
reduced apart and combined last (the whole groups, a slice of the buffer's first rows, are
read as the buffer itself: hlo_builder.prefix_slice). Only reducers whose order is the
backend's choice: integer ops, float max/min (exact in any order), f32/f64 products, float
sums (as column_sums.py, which then splits the first level's long sums in two) and complex
sums (their parts add apart: c64[256K, 3] summed down its rows 2.1x -> 0.68x XLA's time).
"""

from __future__ import annotations

from math import lcm, prod

from xlapy.backends.cpu.lanes import stored_identity
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Computation, Instruction
from xlapy.passes.fusion_decision import SAME_INDEX, is_elementwise
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_each
from xlapy.types import ElementType as ET

#: A last dimension narrower than this many bytes (one AVX-512 vector) is narrow.
NARROW_BYTES = 64
#: Fewest groups of k rows the rewrite is worth.
MIN_GROUPS = 16
_ORDERLESS = {"add": (ET.F32, ET.F64, ET.F16, ET.BF16), "multiply": (ET.F32, ET.F64),
              "maximum": None, "minimum": None}


def _plan(r: Instruction) -> tuple[int, int, int] | None:
    """(first reduced dimension, rows R, group k) of a reduce to rewrite, or None."""
    if r.opcode != "reduce" or len(r.operands) != 2 or not r.shape.is_array:
        return None
    op = reducer_op(r)
    x = r.operands[0]
    et = x.shape.element_type
    if op is None or et is not r.shape.element_type or (et.is_complex and op != "add") or \
            et is ET.PRED:
        return None
    if et.is_float and (op not in _ORDERLESS or (
            _ORDERLESS[op] is not None and et not in _ORDERLESS[op])):
        return None
    rank = x.shape.rank
    dims = sorted(r.attrs.dimensions)
    if rank < 2 or not dims or dims != list(range(dims[0], rank - 1)):
        return None
    c, size = x.shape.dimensions[-1], et.bits // 8
    if size == 0 or not 2 <= c or c * size >= NARROW_BYTES:
        return None
    k = lcm(c, NARROW_BYTES // size) // c
    rows = prod(x.shape.dimensions[dims[0]:rank - 1])
    return (dims[0], rows, k) if rows // k >= MIN_GROUPS else None


def fold(comp: Computation, r: Instruction) -> Instruction:
    """`r` through whole vectors of columns (module docstring)."""
    plan = _plan(r)
    assert plan is not None
    a, rows, k = plan
    x, init = r.operands
    op = reducer_op(r)
    assert op is not None
    et = x.shape.element_type
    lead, c = tuple(x.shape.dimensions[:a]), x.shape.dimensions[-1]
    em = Emitter(comp)
    if across(x, a):  # rows in lanes, one row reduction per column
        rank = x.shape.rank
        moved = em.op("transpose", x, permutation=(*range(a), rank - 1, *range(a, rank - 1)))
        return em.reduce(moved, init, tuple(range(a + 1, rank)), r.called[0])
    unit = em.const(stored_identity(op, et), et)
    xr = em.regroup(x, (*lead, rows, c))
    groups, rest = divmod(rows, k)

    def rows_of(lo: int, hi: int) -> Instruction:
        n = len(lead)
        return em.op("slice", xr, start_indices=(0,) * n + (lo, 0),
                     limit_indices=(*lead, hi, c), strides=(1,) * (n + 2))

    head = rows_of(0, groups * k) if rest else xr
    wide = em.reduce(em.regroup(head, (*lead, groups, k * c)), unit, (a,),
                     r.called[0])
    out = em.reduce(em.regroup(wide, (*lead, k, c)), unit if rest else init, (a,),
                    r.called[0])
    if rest:
        out = em.op(op, out, em.reduce(rows_of(groups * k, rows), init, (a,), r.called[0]))
    return out


def across(x: Instruction, a: int) -> bool:
    """Whether x [lead (a dims), rows..., c] is computed from values broadcast along its
    columns or along its rows (jnp.vander(x) ** 2: x[:, None] ** e[None, :]), none a
    buffer of its shape: its columns then read rows in lanes (transposed, x's rows are
    contiguous, e's uniform), where k rows regrouped into k * c columns split both
    broadcasts' indices unevenly (c = 6 of 16 lanes) - scalar code (np.polyfit's column
    norms of its Vandermonde matrix: 0.70 ms, XLA 0.16)."""
    rank = x.shape.rank
    seen: set[int] = set()
    todo = [x]
    found = False
    while todo:
        v = todo.pop()
        if id(v) in seen or v.shape.rank == 0:
            continue
        seen.add(id(v))
        if v.opcode == "broadcast_in_dim":
            o, bd = v.operands[0], tuple(v.attrs.broadcast_dimensions)
            spans = {d for d, n in zip(bd, o.shape.dimensions) if n != 1}
            if not spans <= set(range(a)) | {rank - 1} and rank - 1 in spans:
                return False  # both along the rows and the columns
            found = found or o.shape.rank > 0
        elif v.opcode == "iota":
            continue
        elif is_elementwise(v) or v.opcode in SAME_INDEX:
            todo.extend(v.operands)
        else:
            return False
    return found


class FoldNarrowColumns(ComputationPass):
    """Column reductions of a narrow last dimension through whole vectors (module
    docstring)."""

    name = "fold-narrow-columns"

    def run_on_computation(self, comp: Computation) -> bool:
        return replace_each(comp, [i for i in comp.instructions if _plan(i) is not None],
                            lambda r: fold(comp, r))


__all__ = ["FoldNarrowColumns", "fold"]
