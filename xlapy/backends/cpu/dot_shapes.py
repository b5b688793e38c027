"""Which dot_generals are plain products, and of what extents: a 2-D [m, k] x [k, n] (or
x [n, k]), one laid out as such in higher ranks, one of a transposed lhs, a batch of them.
The GEMM routes (gemm_small.py, regions.py, library.py, small_dots.py, dot_epilogue.py)
read a dot through these, so they agree on which dots each takes."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: The largest extent (and element count) BLAS's and the JIT loops' int32 arguments take.
_INT_MAX = (1 << 31) - 1


def plain_dot(instr: Instruction, vectors: bool = False, flat: bool = False,
              cplx: bool = False) -> tuple[int, int, int, bool, bool] | None:
    """(m, n, k, rhs transposed, f64) of a plain 2-D f32/f64 dot_general ([m, k] x [k, n] or
    x [n, k]) whose result rows are the lhs rows, or None (regions.gemm_of reads the same).
    `vectors`: a 1-D lhs [k] is one row (m = 1), a 1-D rhs [k] one column (n = 1, as [1, k]
    transposed), in the same memory (the native loop driver's steps take these). `flat`:
    higher ranks too when the memory is that of such a product (dot_flatten.py): no batch
    dimensions, the lhs contracting its last dimensions in order (m its free ones), the rhs
    its first (or last) ones in order. `cplx`: c64/c128 instead (f64: c128)."""
    if instr.opcode != "dot_general":
        return None
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    if not (lhs.element_type == rhs.element_type == et and
            et in ((ET.C64, ET.C128) if cplx else (ET.F32, ET.F64))):
        return None
    lc, rc = list(a.lhs_contracting_dimensions), list(a.rhs_contracting_dimensions)
    if flat and (lhs.rank > 2 or rhs.rank > 2):
        return _flat(lhs.dimensions, rhs.dimensions, lc, rc, list(a.lhs_batching_dimensions),
                     et in (ET.F64, ET.C128))
    ranks = (1, 2) if vectors else (2,)
    if lhs.rank not in ranks or rhs.rank not in ranks or list(a.lhs_batching_dimensions) or \
            lc != [lhs.rank - 1]:
        return None
    if rhs.rank == 1:
        if rc != [0]:
            return None
        n, rhs_t = 1, True
    elif rc in ([0], [1]):
        n, rhs_t = rhs.dimensions[1 - rc[0]], rc == [1]
    else:
        return None
    m, k = (lhs.dimensions if lhs.rank == 2 else (1, lhs.dimensions[0]))
    return m, n, k, rhs_t, et in (ET.F64, ET.C128)


def lhs_transposed(instr: Instruction) -> tuple[int, int, int, bool, bool] | None:
    """(m, n, k, rhs transposed, f64) of a 2-D f32/f64 dot_general of lhs [k, m] (its first
    dimension contracted) with rhs [k, n] or [n, k], or None."""
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    if instr.opcode != "dot_general" or lhs.rank != 2 or rhs.rank != 2 or \
            not lhs.element_type == rhs.element_type == et or et not in (ET.F32, ET.F64) or \
            list(a.lhs_batching_dimensions) or list(a.lhs_contracting_dimensions) != [0]:
        return None
    rc = list(a.rhs_contracting_dimensions)
    if rc not in ([0], [1]):
        return None
    (k, m), n = lhs.dimensions, rhs.dimensions[1 - rc[0]]
    if min(m, n, k) == 0 or max(m, n, k) > _INT_MAX:
        return None
    return m, n, k, rc == [1], et == ET.F64


def batched_dot(instr: Instruction) -> tuple[int, int, int, int, bool] | None:
    """(batch, m, n, k, f64) of an f32/f64 dot_general [b..., m, k] x [b..., k, n] ->
    [b..., m, n] (batch dimensions leading and in order, one free and one contracting
    dimension each: what DotDecomposer leaves; or no free dimension on one side, a batch of
    matrix-vector [b..., m, k] x [b..., k] or vector-matrix products, laid out as n or m
    = 1), or None."""
    from xlapy.passes.dot_decomposer import is_canonical

    if instr.opcode != "dot_general" or instr.attrs.algorithm is not None:
        return None
    nb = len(instr.attrs.lhs_batching_dimensions)
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    if not (lhs.element_type == rhs.element_type == et and et in (ET.F32, ET.F64)) or \
            nb == 0 or lhs.rank + rhs.rank < 2 * nb + 3 or not is_canonical(instr):
        return None
    batch = prod(lhs.dimensions[:nb])
    k = lhs.dimensions[-1]
    m = lhs.dimensions[nb] if lhs.rank == nb + 2 else 1
    n = rhs.dimensions[nb + 1] if rhs.rank == nb + 2 else 1
    if min(batch, m, n, k) < 1 or max(batch * m * k, batch * k * n, batch * m * n) > _INT_MAX:
        return None
    return batch, m, n, k, et == ET.F64


def _flat(ld: Sequence[int], rd: Sequence[int], lc: list[int], rc: list[int],
          batch: list[int], f64: bool) -> tuple[int, int, int, bool, bool] | None:
    """plain_dot's `flat` case: lhs [free..., contracting...], rhs [contracting..., free...]
    or [free..., contracting...] (transposed), each part at least one dimension."""
    nl, nr, nc = len(ld), len(rd), len(lc)
    if batch or nl < 2 or not 0 < nc < nl or nc >= nr or lc != list(range(nl - nc, nl)):
        return None
    if rc == list(range(nc)):
        rhs_t = False
    elif rc == list(range(nr - nc, nr)):
        rhs_t = True
    else:
        return None
    k = prod(ld[d] for d in lc)
    if any(rd[d] != ld[c] for d, c in zip(rc, lc)):
        return None
    return prod(ld[:nl - nc]), prod(rd) // k if k else 0, k, rhs_t, f64


__all__ = ["batched_dot", "lhs_transposed", "plain_dot"]
