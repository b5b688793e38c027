"""The native steps of a while loop's condition or body (native_loop.py): which of an
executable's thunks the driver runs, in order, and as what."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu import loop_library, loop_tuples, nested_loop, target
from xlapy.backends.cpu.kernel_sequence import KernelSequence

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.backends.cpu.regions import Gemm, Region
    from xlapy.ir import Instruction

#: BLAS dots above this many multiply-adds keep the Python loop (blas.gemm's chunks).
MAX_NATIVE_MACS = 1 << 20
#: How the report names the dots a step may run (executable.py, library.library_kind;
#: native_gemm decides): a [1, k] @ [k, n] product is "jit gemv" on the Python path, and a
#: fori_loop of them (batch-1 decoding) ran there, 5x XLA's time, once it was no "blas".
GEMM_KINDS = ("library blas", "library jit gemm", "library jit gemv",
              "library jit gemv (matvec)", "library jit gemm (skinny)")
#: How the report names a native loop (and so an inner loop a step may run).
NATIVE_WHILE = "native while loop"


def steps(exe: CpuExecutable) -> list[int | Gemm | Region | nested_loop.Nested | KernelSequence
                                    | loop_library.LibStep | None]:
    """The native steps of a cond/body in thunk order (the report's): kernel indices, GEMMs,
    row-parallel regions (in place of their members), native inner loops and sorts; None for
    a dot, an inner loop or a sort the driver may not run. A body of tiny kernels is one step, their
    sequence function (kernel_sequence.py)."""
    if exe.sequence is not None:
        return [exe.sequence]
    by_name = {i.name: i for i in exe.comp.instructions}
    first = {r.members[0].slot: r for r in exe.regions}
    inside = {m.slot for r in exe.regions for m in r.members[1:]}
    out: list[int | Gemm | Region | nested_loop.Nested | loop_library.LibStep | None] = []
    for name, op, how in exe.report:
        instr = by_name.get(name) if op != "region" else None
        s = exe.slot.get(id(instr)) if instr is not None else None
        if s in first:
            out.append(first[s])
        elif s in inside:
            continue
        elif how.startswith("kernel "):
            out.append(int(how.split()[1][1:]))
        elif (j := loop_tuples.index(exe, name, how)) is not None:
            out.append(j if loop_tuples.readers_ok(exe, j) else None)
        elif how in GEMM_KINDS:  # (else a callback: loop_callback.py)
            out.append(native_gemm(exe, by_name[name]) or loop_library.step(exe, name, how))
        elif loop_library.takes(how):
            out.append(loop_library.step(exe, name, how))
        elif how.startswith(NATIVE_WHILE):
            n = exe.nested.get(name)
            out.append(n if nested_loop.valid(exe, n) else None)
    return out


def native_gemm(exe: CpuExecutable, instr: Instruction) -> Gemm | None:
    """The Gemm of a dot_general the driver may run: 2-D f32/f64 (regions.gemm_of), a
    batch of small ones (regions.batched_gemm_of: gemm_small, one product at a time) or a
    2-D complex one (cgemm / zgemm: a callback into Python had cost ~60 us a step, a
    fori_loop of a 256 x 256 c64 matrix times a state 3x XLA's time), written
    into a buffer the tables hold (below); through BLAS only when small
    (MAX_NATIVE_MACS), gemm_small's loop nest at any size it takes (split over threads).
    A batched dot is gemm_small's only where the target has FMA: its element is then one
    fused chain in contracting order, as OpenBLAS sums it on the Python path; without FMA
    (x86-64-v2) it rounds each product, and a program's bits would change with its loop."""
    from xlapy.backends.cpu import regions

    t = target.current()
    if not t.is_x86 or id(instr) not in exe.slot:
        return None
    g = regions.gemm_of(instr, exe.slot, vectors=True, flat=True, lhs_t=True, cplx=True) or \
        (regions.batched_gemm_of(instr, exe.slot) if t.has("fma") else None)
    # an arena temporary, or a result of the body (a fresh array per call on the Python
    # path: NativeWhile._prepare gives it a buffer of the loop's own)
    if g is None or (g.out not in exe.temp_slots and g.out not in exe._native) or \
            (g.small is None and g.m * g.n * g.k > MAX_NATIVE_MACS):
        return None
    return g


def gemm_outputs(step: object) -> list[int]:
    """The output slots of a step's GEMMs: a GEMM step's, a row-parallel region's members'
    (a loop prepares a buffer for each one no arena or binding gives: a branch trip's
    `a @ (...)` result member of a region wrote through a null pointer)."""
    from xlapy.backends.cpu import regions

    if isinstance(step, regions.Gemm):
        return [step.out]
    if isinstance(step, regions.Region):
        return [m.gemm.out for m in step.members if m.gemm is not None]
    return []


def blas_words(keep: list[Any], d: np.ndarray) -> list[int]:
    """xlapy_gemm_call and its argument for BLAS on descriptor d: [gemm_rows, d] (BLAS with
    MXCSR FTZ/DAZ clear, as the Python path runs it); what the words point at joins `keep`."""
    from xlapy.backends.cpu import regions
    from xlapy.backends.cpu.while_driver import driver

    w = np.array([regions.gemm_rows_address(), d.ctypes.data], np.int64)
    keep.append(w)
    return [driver()[0].address("xlapy_gemm_call"), int(w.ctypes.data)]


def region_steps(keep: list[Any], exe: CpuExecutable, region: Region, table: int) -> int:
    """A region's steps array (regions.steps) over `table`, its BLAS members behind
    xlapy_gemm_call (the driver's thread runs with FTZ set; BLAS must not) and BLAS
    single-threaded on the workers (blas.ready)."""
    from xlapy.backends.cpu import blas, parallel, regions

    index = {id(k): j for j, k in enumerate(exe.kernel_specs)}
    words = [len(region.members)]
    for m in region.members:
        if m.kernel is not None:
            words += [exe.kernel_addrs[index[id(m.kernel)]], table]
            continue
        assert m.gemm is not None
        d = regions.gemm_descriptor(m.gemm, table)
        keep.append(d)
        if m.gemm.small is not None:
            words += [m.gemm.small.rows_address, int(d.ctypes.data)]
        else:
            blas.ready(parallel.pool(exe.num_threads))
            words += blas_words(keep, d)
    arr = np.array(words, np.int64)
    keep.append(arr)
    return int(arr.ctypes.data)


def split_cost(cond: CpuExecutable, body: CpuExecutable, base: int) -> int:
    """The cost from which the loop's kernel steps split over the worker pool: `base`
    (native_loop.NATIVE_SPLIT_COST), or FOLLOW_SPLIT_COST once one of them reaches it. A
    step left to the calling thread moves the rows the worker's share of a split one read or
    wrote to its core each iteration: a while loop stopping on jnp.max(jnp.abs(x)) of
    f32[256..512, 256] (its max split, its x * 0.9 not) took 15-37 us more a trip on two
    Zen 4 threads than on one, where with both steps split each thread keeps its rows."""
    specs = [exe.kernel_specs[s] for exe in (cond, body) for s in steps(exe)
             if isinstance(s, int)]
    big = any(k.splittable and not k.partial and k.outer >= 2 and k.cost >= base
              for k in specs)
    return min(base, FOLLOW_SPLIT_COST) if big else base


#: A loop's kernel steps split from this cost when one of them splits anyway (split_cost).
FOLLOW_SPLIT_COST = 1 << 15

__all__ = ["FOLLOW_SPLIT_COST", "GEMM_KINDS", "MAX_NATIVE_MACS", "NATIVE_WHILE", "blas_words",
           "gemm_outputs", "native_gemm", "region_steps", "split_cost", "steps"]
