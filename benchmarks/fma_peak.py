"""The machine's f32 multiply-add peak: independent vector FMAs on registers only (no loads, no
stores), JIT-compiled for the host through llvmlite and run on one thread and on one thread
per CPU at once. No GEMM or convolution can beat it; XLA's matmul (jax_run.matmul_peak) shows
what a tuned library reaches. On the 2-CPU Sapphire-Rapids VM: ~238 GFLOP/s a core (two
512-bit FMA ports at ~3.7 GHz), ~470 on both, where XLA's matmul gets ~300-340.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

import llvmlite.binding as llvm
from llvmlite import ir

#: FMAs per chain per loop iteration (the loop's own instructions are then noise).
_DEPTH = 4


def _kernel(lanes: int, chains: int) -> tuple[object, int]:
    """(engine, address of `void peak(i64 iters)`): `chains` independent accumulators of
    `lanes` f32, each taking _DEPTH dependent FMAs an iteration."""
    f32 = ir.FloatType()
    vt = ir.VectorType(f32, lanes)
    i64 = ir.IntType(64)
    mod = ir.Module("fma_peak")
    mod.triple = llvm.get_process_triple()
    fma = ir.Function(mod, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.v{lanes}f32")
    fn = ir.Function(mod, ir.FunctionType(f32, [i64]), "peak")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    entry, loop, done = b.block, fn.append_basic_block("loop"), fn.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    accs = []
    for c in range(chains):
        p = b.phi(vt)
        p.add_incoming(ir.Constant(vt, [1e-3 * (c + 1)] * lanes), entry)
        accs.append(p)
    mul, add = ir.Constant(vt, [0.999] * lanes), ir.Constant(vt, [1e-3] * lanes)
    new = []
    for p in accs:
        x = p
        for _ in range(_DEPTH):
            x = b.call(fma, [x, mul, add])
        new.append(x)
    nxt = b.add(i, ir.Constant(i64, 1))
    for p, x in zip(accs, new):
        p.add_incoming(x, loop)
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = new[0]
    for x in new[1:]:
        total = b.fadd(total, x)
    b.ret(b.extract_element(total, ir.Constant(ir.IntType(32), 0)))  # keeps the chains live
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), tm)
    engine.finalize_object()
    return engine, engine.get_function_address("peak")


def _shape() -> tuple[int, int]:
    """(lanes, chains) for the host: the widest vectors and as many accumulators as leave
    registers for the constants (32 registers with AVX-512, 16 with AVX, else SSE's 16)."""
    feats = llvm.get_host_cpu_features()
    if feats.get("avx512f"):
        return 16, 24
    if feats.get("avx") and feats.get("fma"):
        return 8, 12
    return 4, 12


def fma_peak(seconds: float = 0.2) -> tuple[float, float]:
    """f32 GFLOP/s of the FMA loop: (one thread, one thread per CPU of the process)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    lanes, chains = _shape()
    engine, addr = _kernel(lanes, chains)
    run = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(addr)  # releases the GIL
    per_iter = chains * _DEPTH * lanes * 2
    t0 = time.perf_counter()
    run(100_000)
    iters = max(100_000, int(100_000 * seconds / max(time.perf_counter() - t0, 1e-6)))

    def rate(threads: int) -> float:
        best = float("inf")
        for _ in range(3):
            ts = [threading.Thread(target=run, args=(iters,)) for _ in range(threads)]
            t = time.perf_counter()
            for th in ts:
                th.start()
            for th in ts:
                th.join()
            best = min(best, time.perf_counter() - t)
        return per_iter * iters * threads / best / 1e9

    out = rate(1), rate(len(os.sched_getaffinity(0)))
    del engine
    return out


__all__ = ["fma_peak"]
