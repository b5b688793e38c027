"""`NAME_run_threaded(args, results, scratch, num_threads)`: the kernels of an object split
over POSIX threads.

Every function of the object takes the thread count as its last argument (NAME_run passes
1). A kernel the cpu backend marks splittable (the JIT's thread pool splits it too; not a
partial reduction, whose ranges would add into one output), of at least SPLIT_COST
element-ops, is cut into min(num_threads, outer / align, MAX_THREADS) contiguous ranges of
its outer loop at multiples of its `align`; the caller runs the first range
and `pthread_create`s one thread per other range, joining them before the next thunk. A
thread that cannot be created has its range run by the caller, so the result never depends
on the thread count (each element is computed by the same code either way). Threads live
for one kernel call: no pool, no global state, so concurrent calls with distinct scratch
stay safe. Products, convolutions, sorts and the other loops of this package run on the
calling thread.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import I8P, I32, I64, KERNEL_TYPE, for_range, i64
from xlapy.backends.cpu.options import CpuOptions

#: Most threads one kernel call uses.
MAX_THREADS = 64
#: Element-ops (kernels.Kernel.cost) from which a kernel call is split (CpuOptions'
#: split_cost, the JIT pool's threshold; a thread's creation costs tens of microseconds,
#: about what 2^18 element-ops take on one core).
SPLIT_COST = CpuOptions.split_cost
#: The pthread functions an object with run_threaded needs (libc in glibc 2.34 and later,
#: libpthread before: link with -pthread).
PTHREAD = ("pthread_create", "pthread_join")

_JOB = ir.LiteralStructType([KERNEL_TYPE.as_pointer(), I8P.as_pointer(), I64, I64])
_WORKER = ir.FunctionType(I8P, [I8P])


def _declare(mod: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ty, name=name)


def _worker(mod: ir.Module) -> ir.Function:
    """`void *worker(void *job)`: runs job->fn(job->table, job->lo, job->hi)."""
    name = f"{mod.name}__kernel_worker"
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(mod, _WORKER, name=name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    job = b.bitcast(fn.args[0], _JOB.as_pointer())
    parts = [b.load(b.gep(job, [ir.Constant(I32, 0), ir.Constant(I32, k)])) for k in range(4)]
    b.call(parts[0], parts[1:])
    b.ret(ir.Constant(I8P, None))
    return fn


def parts(spec: Any) -> int:
    """How many ranges a kernel may be cut into at most (1: never split)."""
    if not spec.splittable or spec.partial or spec.cost < SPLIT_COST:
        return 1
    return min(spec.outer // max(spec.align, 1), MAX_THREADS)


def _slots(em: Any) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The function's job, thread id and created-flag arrays (one set per function, in its
    entry block: kernel calls run one after another)."""
    got = getattr(em, "_thread_slots", None)
    if got is None:
        b = em.b
        with b.goto_entry_block():
            b.position_at_start(em.fn.entry_basic_block)
            got = (b.alloca(_JOB, MAX_THREADS), b.alloca(I64, MAX_THREADS),
                   b.alloca(ir.IntType(8), MAX_THREADS))
        em._thread_slots = got
    return got


def call_kernel(em: Any, fn: ir.Function, table: ir.Value, spec: Any) -> None:
    """fn(table, 0, spec.outer), split over em.threads threads when allowed and worth it
    (module docstring)."""
    b = em.b
    outer, align, most = spec.outer, max(spec.align, 1), parts(spec)
    if most < 2 or em.prog.freestanding:  # freestanding: no pthreads
        b.call(fn, [table, i64(0), i64(outer)])
        return
    mod = b.module
    n = b.sext(em.threads, I64)
    cap = i64(most)
    n = b.select(b.icmp_signed(">", n, cap), cap, n)
    with b.if_else(b.icmp_signed(">", n, i64(1))) as (split, whole):
        with split:
            jobs, tids, made = _slots(em)
            create = _declare(mod, "pthread_create", ir.FunctionType(
                I32, [I64.as_pointer(), I8P, _WORKER.as_pointer(), I8P]))
            join = _declare(mod, "pthread_join", ir.FunctionType(
                I32, [I64, I8P.as_pointer()]))
            worker = _worker(mod)

            def cut(t: ir.Value) -> ir.Value:  # range t starts here (outer for t = n)
                at = b.mul(b.sdiv(b.mul(i64(outer // align), t), n), i64(align))
                return b.select(b.icmp_signed("==", t, n), i64(outer), at)

            with for_range(b, i64(1), n, name="spawn") as t:
                lo, hi = cut(t), cut(b.add(t, i64(1)))
                job = b.gep(jobs, [t])
                for k, v in enumerate((fn, table, lo, hi)):
                    b.store(v, b.gep(job, [ir.Constant(I32, 0), ir.Constant(I32, k)]))
                rc = b.call(create, [b.gep(tids, [t]), ir.Constant(I8P, None), worker,
                                     b.bitcast(job, I8P)])
                ok = b.icmp_signed("==", rc, ir.Constant(I32, 0))
                b.store(b.zext(ok, ir.IntType(8)), b.gep(made, [t]))
                with b.if_then(b.not_(ok)):
                    b.call(fn, [table, lo, hi])
            b.call(fn, [table, i64(0), cut(i64(1))])
            with for_range(b, i64(1), n, name="join") as t:
                with b.if_then(b.icmp_unsigned("!=", b.load(b.gep(made, [t])),
                                               ir.Constant(ir.IntType(8), 0))):
                    b.call(join, [b.load(b.gep(tids, [t])),
                                  ir.Constant(I8P.as_pointer(), None)])
        with whole:
            b.call(fn, [table, i64(0), i64(outer)])


__all__ = ["call_kernel", "parts", "MAX_THREADS", "SPLIT_COST", "PTHREAD"]
