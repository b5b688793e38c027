"""chlo.ragged_dot (mode 1: the ragged dimension is an lhs free dimension) as one LLVM loop
nest, `void ragged_dot(i8* lhs, i8* rhs, i8* group_sizes, i8* out)` over dense row-major
buffers: the code an ahead-of-time object carries (xlapy/aot), where the JIT's BLAS thunk
(library.ragged_dot_plan) cannot go.

Semantics are the interpreter's (chlo_ops.RaggedDot.evaluate) and the thunk's: the output
starts at zero; groups k = 0 .. G-1 in order take the lhs rows [lo, hi) of the ragged
dimension (lo, hi the running sums of group_sizes, clipped to the rows) and write, for each
of those rows, the product with rhs[k] (a later group overrides an earlier one where negative
sizes make ranges overlap). Each output element sums the contracting indices in order in the
interpreter's wide type (f64 for floats, c128 for complex, i64 for integers and pred, as
numpy computes the einsum) and is rounded once to the result type.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.backends.cpu.llvm_util import I8P, I64, VOID, for_range, i64
from xlapy.errors import Unimplemented
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

RAGGED_TYPE = ir.FunctionType(VOID, [I8P, I8P, I8P, I8P])
#: Largest row of sums (bytes of the wide type) kept on the stack; wider rows are summed
#: one element at a time.
ROW_BYTES = 1 << 15


def _strides(dims: Sequence[int]) -> list[int]:
    out = [1] * len(dims)
    for d in range(len(dims) - 2, -1, -1):
        out[d] = out[d + 1] * dims[d + 1]
    return out


def flat_offset(b: ir.IRBuilder, flat: ir.Value, dims: Sequence[int],
                strides: Sequence[int]) -> ir.Value:
    """The element offset of row-major index `flat` over `dims`, with `strides` for them."""
    off: ir.Value = i64(0)
    rest = flat
    for d in range(len(dims) - 1, -1, -1):
        if dims[d] == 1:
            continue
        q = b.urem(rest, i64(dims[d])) if d else rest
        off = b.add(off, b.mul(q, i64(strides[d])))
        if d:
            rest = b.udiv(rest, i64(dims[d]))
    return off


def wide_type(et: ET) -> ET:
    """The interpreter's accumulation type for lhs element type `et`."""
    return ET.C128 if et.is_complex else ET.F64 if et.is_float else ET.S64


def supported(instr: Instruction) -> bool:
    types = [o.shape.element_type for o in instr.operands] + [instr.shape.element_type]
    return all(t in ew.SUPPORTED or t in ewc.COMPLEX for t in types) and types[2].is_integer


def emit(mod: ir.Module, name: str, instr: Instruction) -> ir.Function:
    """The ragged product's function (internal linkage) in `mod`."""
    if not supported(instr):
        raise Unimplemented(f"chlo.ragged_dot of {', '.join(str(o.shape) for o in instr.operands)}"
                            " has an element type the cpu kernels do not compute")
    a = instr.attrs
    lhs, rhs, groups = (o.shape for o in instr.operands)
    lt, rt, gt, ot = (lhs.element_type, rhs.element_type, groups.element_type,
                      instr.shape.element_type)
    wt = wide_type(lt)
    g, r = a.rhs_group_dimensions[0], a.lhs_ragged_dimensions[0]
    lb, lc = list(a.lhs_batching_dimensions), list(a.lhs_contracting_dimensions)
    rb, rc = list(a.rhs_batching_dimensions), list(a.rhs_contracting_dimensions)
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d != g and d not in rb and d not in rc]
    ld, rd = lhs.dimensions, rhs.dimensions
    ls, rs = _strides(ld), _strides(rd)
    p = lf.index(r)
    pre_d, post_d = [ld[d] for d in lf[:p]], [ld[d] for d in lf[p + 1:]]
    nb, pre, post = prod(ld[d] for d in lb), prod(pre_d), prod(post_d)
    rows, k_total, n = ld[r], prod(ld[d] for d in lc), prod(rd[d] for d in rf)
    ngroups, total = rd[g], prod(instr.shape.dimensions)

    fn = ir.Function(mod, RAGGED_TYPE, name=name)
    fn.linkage = "internal"
    for arg in fn.args:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pl, pr, pg, po = (b.bitcast(x, ew.storage_type(t).as_pointer())
                      for x, t in zip(fn.args, (lt, rt, gt, ot)))
    acc = b.alloca(ew.compute_type(wt), name="acc")
    bound = b.alloca(I64, name="bound")
    b.store(i64(0), bound)
    if total:
        zero = ew.to_storage(b, ew.constant(0, ot), ot)
        with for_range(b, i64(0), i64(total), name="zero") as i:
            b.store(zero, b.gep(po, [i]))

    def load(ptr: ir.Value, at: ir.Value, t: ET) -> ir.Value:
        return ewconv.convert(b, ew.from_storage(b, b.load(b.gep(ptr, [at])), t), t, wt)

    def mac(s: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        if wt.is_complex:
            return ewc.binary(b, "add", [s, ewc.binary(b, "multiply", [x, y])])
        if wt.is_float:
            return b.fadd(s, b.fmul(x, y))
        return b.add(s, b.mul(x, y))

    rfd, rfs = [rd[d] for d in rf], [rs[d] for d in rf]
    lcd, lcs, rcs = [ld[d] for d in lc], [ls[d] for d in lc], [rs[d] for d in rc]
    # A row of n wide sums on the stack when small: the innermost loop runs along the rhs
    # free dimensions (contiguous in the usual [G, K, N] layout: vectorized), each sum
    # still over k in order (the same values as one element at a time).
    row_acc = None
    if 0 < n * wt.dtype.itemsize <= ROW_BYTES:
        with b.goto_entry_block():
            b.position_at_start(fn.entry_basic_block)
            row_acc = b.alloca(ew.compute_type(wt), n, name="row")

    def by_rows(lrow: ir.Value, rbase: ir.Value, obase: ir.Value) -> None:
        with for_range(b, i64(0), i64(n), name="zero_row") as j:
            b.store(ew.constant(0, wt), b.gep(row_acc, [j]))
        with for_range(b, i64(0), i64(k_total), name="k") as kc:
            x = load(pl, b.add(lrow, flat_offset(b, kc, lcd, lcs)), lt)
            rk = b.add(rbase, flat_offset(b, kc, lcd, rcs))
            with for_range(b, i64(0), i64(n), name="n") as j:
                y = load(pr, b.add(rk, flat_offset(b, j, rfd, rfs)), rt)
                cell = b.gep(row_acc, [j])
                b.store(mac(b.load(cell), x, y), cell)
        with for_range(b, i64(0), i64(n), name="store") as j:
            v = ew.to_storage(b, ewconv.convert(b, b.load(b.gep(row_acc, [j])), wt, ot), ot)
            b.store(v, b.gep(po, [b.add(obase, j)]))

    def product(k: ir.Value, row: ir.Value) -> None:
        """Every output element of lhs row `row` times rhs[k]."""
        with for_range(b, i64(0), i64(nb), name="batch") as bi:
            lbase = b.add(flat_offset(b, bi, [ld[d] for d in lb], [ls[d] for d in lb]),
                          b.mul(row, i64(ls[r])))
            rbase = b.add(flat_offset(b, bi, [rd[d] for d in rb], [rs[d] for d in rb]),
                          b.mul(k, i64(rs[g])))
            with for_range(b, i64(0), i64(pre * post), name="free") as f:
                ip, iq = b.udiv(f, i64(post)), b.urem(f, i64(post))
                lrow = b.add(lbase, b.add(flat_offset(b, ip, pre_d, [ls[d] for d in lf[:p]]),
                                          flat_offset(b, iq, post_d, [ls[d] for d in lf[p + 1:]])))
                orow = b.mul(b.add(b.mul(b.add(b.mul(bi, i64(pre)), ip), i64(rows)), row),
                             i64(post))
                obase = b.mul(b.add(orow, iq), i64(n))
                if row_acc is not None:
                    by_rows(lrow, rbase, obase)
                    return
                with for_range(b, i64(0), i64(n), name="n") as j:
                    rcol = b.add(rbase, flat_offset(b, j, [rd[d] for d in rf], [rs[d] for d in rf]))
                    b.store(ew.constant(0, wt), acc)
                    with for_range(b, i64(0), i64(k_total), name="k") as kc:
                        x = load(pl, b.add(lrow, flat_offset(b, kc, [ld[d] for d in lc],
                                                         [ls[d] for d in lc])), lt)
                        y = load(pr, b.add(rcol, flat_offset(b, kc, [rd[d] for d in rc],
                                                         [rs[d] for d in rc])), rt)
                        b.store(mac(b.load(acc), x, y), acc)
                    out = ew.to_storage(b, ewconv.convert(b, b.load(acc), wt, ot), ot)
                    b.store(out, b.gep(po, [b.add(obase, j)]))

    if total and ngroups:
        with for_range(b, i64(0), i64(ngroups), name="group") as k:
            size = b.load(b.gep(pg, [k]))
            size = ew.from_storage(b, size, gt)
            size = (b.sext if gt.is_signed else b.zext)(size, I64) if size.type.width < 64 \
                else size
            lo = b.load(bound)
            hi = b.add(lo, size)
            b.store(hi, bound)
            lo = b.select(b.icmp_signed("<", lo, i64(0)), i64(0), lo)
            hi = b.select(b.icmp_signed(">", hi, i64(rows)), i64(rows), hi)
            with for_range(b, lo, hi, name="row") as row:
                product(k, row)
    b.ret_void()
    return fn


__all__ = ["emit", "supported", "wide_type", "RAGGED_TYPE"]
