"""sort in the object: the JIT's merge sort (sort_emit.py: `sort_rows` computes each row's
stable permutation with the comparator region compiled in) around copies the JIT makes in
numpy, emitted here as loops.

`void sort(i8** operands, i8** results, i8* scratch)`: each operand is copied with the sort
dimension innermost ([rows, n], in scratch), `sort_rows` fills the permutation, and each
result gathers its operand's rows through it back into the original layout.
"""

from __future__ import annotations

from math import prod

from llvmlite import ir

from xlapy.aot.errors import Unimplemented
from xlapy.backends.cpu.llvm_util import I8P, I64, VOID, for_range, i64, module_text
from xlapy.ir import Instruction

SORT_TYPE = ir.FunctionType(VOID, [I8P.as_pointer(), I8P.as_pointer(), I8P])


def _row_layout(instr: Instruction) -> tuple[int, int, int]:
    """(dimensions before the sort dimension, its size, after it) as flat extents."""
    dims = list(instr.operands[0].shape.dimensions)
    axis = instr.attrs.dimension % len(dims)
    return prod(dims[:axis]), dims[axis], prod(dims[axis + 1:])


def emit_sort(mod: ir.Module, name: str, instr: Instruction) -> tuple[ir.Function, int, str]:
    """(the sort's function, scratch bytes, the merge sort module's IR text, whose
    `sort_rows` the function calls as `{name}_sort_rows`: link it with that prefix)."""
    from xlapy.backends.cpu import sort_emit

    if instr.operands[0].shape.rank == 0:
        raise Unimplemented("sort", "a rank-0 sort")  # never reaches here: simplified away
    if not sort_emit.supported(instr):
        raise Unimplemented("sort", "a comparator or element type the JIT merge sort "
                                    "(sort_emit.py) does not compile")
    rows_text = module_text(sort_emit._emit(instr))
    pre, n, post = _row_layout(instr)
    rows = pre * post
    sizes = [o.shape.dtype.itemsize for o in instr.operands]
    moved_bytes = [-(-rows * n * s // 64) * 64 for s in sizes]
    perm_bytes = -(-rows * n * 8 // 64) * 64
    scratch = sum(moved_bytes) + 2 * perm_bytes
    fn = ir.Function(mod, SORT_TYPE, name=name)
    fn.linkage = "internal"
    rows_fn = ir.Function(mod, ir.FunctionType(VOID, [I8P.as_pointer(), I64, I64, I64,
                                                      I64.as_pointer(), I64.as_pointer()]),
                          name=f"{name}_sort_rows")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ops, res, sc = fn.args
    if rows * n == 0:
        b.ret_void()
        return fn, 0, rows_text
    table = b.alloca(I8P, len(sizes))
    off = 0
    moved = []
    for k, (size, nb) in enumerate(zip(sizes, moved_bytes)):
        et = ir.IntType(8 * size)
        src = b.bitcast(b.load(b.gep(ops, [i64(k)])), et.as_pointer())
        dst_raw = b.gep(sc, [i64(off)])
        b.store(dst_raw, b.gep(table, [i64(k)]))
        dst = b.bitcast(dst_raw, et.as_pointer())
        moved.append((et, dst))
        off += nb
        with for_range(b, i64(0), i64(pre), name="p") as p, \
                for_range(b, i64(0), i64(n), name="i") as i, \
                for_range(b, i64(0), i64(post), name="q") as q:
            orig = b.add(b.mul(b.add(b.mul(p, i64(n)), i), i64(post)), q)
            row = b.add(b.mul(p, i64(post)), q)
            b.store(b.load(b.gep(src, [orig])), b.gep(dst, [b.add(b.mul(row, i64(n)), i)]))
    perm = b.bitcast(b.gep(sc, [i64(off)]), I64.as_pointer())
    tmp = b.bitcast(b.gep(sc, [i64(off + perm_bytes)]), I64.as_pointer())
    b.call(rows_fn, [table, i64(0), i64(rows), i64(n), perm, tmp])
    for k, (et, src) in enumerate(moved):
        dst = b.bitcast(b.load(b.gep(res, [i64(k)])), et.as_pointer())
        with for_range(b, i64(0), i64(pre), name="p") as p, \
                for_range(b, i64(0), i64(n), name="i") as i, \
                for_range(b, i64(0), i64(post), name="q") as q:
            orig = b.add(b.mul(b.add(b.mul(p, i64(n)), i), i64(post)), q)
            row = b.mul(b.add(b.mul(p, i64(post)), q), i64(n))
            j = b.load(b.gep(perm, [b.add(row, i)]))
            b.store(b.load(b.gep(src, [b.add(row, j)])), b.gep(dst, [orig]))
    b.ret_void()
    return fn, scratch, rows_text


__all__ = ["emit_sort", "SORT_TYPE"]
