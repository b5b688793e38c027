"""Compiling a convolution's loop nest (conv_kernel.Split): its register blocks at -O3,
the rest (epilogues included, conv_kernel's docstring) at LLVM's -O0 code generator.

The cold compile of JAX's CNN was ~37 ms of CPU against XLA's ~18, of which ~17 ms was
-O3 code generation of the nest's module; the -O0 generator takes ~5 ms for the same module
but spills every value a loop carries, which the blocks' accumulators cannot afford, while
the row bookkeeping, ring copies and (written for it) the epilogues can. So the hot
functions are a module of their own, compiled as every kernel (light pipeline, -O3 code
generation), and the rest is a second module, no pass then -O0 code generation (as
gemm_bf16.py's and gemm_amx.py's tile kernels, which keep the light pipeline). Both
objects go through the disk cache, each keyed by its IR text; the cold module reaches the
hot functions through a table of pointers written here once both are linked (each Engine
is a JIT library of its own). With an idle CPU the -O3 module compiles on a compile
thread (parallel_compile.py) while this one writes and builds the -O0 one.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from xlapy.backends.cpu import cache, llvm_util, parallel_compile
from xlapy.backends.cpu.conv_kernel import Split
from xlapy.backends.cpu.llvm_util import Engine


def _hot(text: str, exports: list[str], cold: Callable[[], Engine], threads: int
         ) -> tuple[Engine, Engine]:
    """(hot engine, cold()): the hot module compiled on a compile thread while this one
    writes and compiles the cold module when a CPU is idle (parallel_compile.threads), else
    one after the other. The hot module is code generation alone
    (parallel_compile.codegen: the blocks' text is what the light pipeline would make of
    it, the same object); its key stays the light pipeline's."""
    key = cache.key(text, "light")
    obj = cache.get(key)
    if obj is not None:
        return Engine(text, obj=obj, light=True, exports=exports), cold()
    if parallel_compile.threads(threads) < 2:
        compiled = parallel_compile.codegen(text)
        cache.put(key, compiled[0])
        return Engine(compiled=compiled, light=True, exports=exports), cold()
    job = parallel_compile.submit(text, True, True, passes=False)
    other = cold()
    compiled = job.result()
    cache.put(key, compiled[0])
    return Engine(compiled=compiled, light=True, exports=exports), other


def _cold(text: str, exports: list[str]) -> Engine:
    """The cold module: no optimization pass (its text is already what the -O0 generator
    wants: SSA loops, no promotable allocas; the light pipeline was 0.3 ms of the CNN's
    ~3), -O0 code generation on this thread without llvmlite's lock
    (parallel_compile.compile_o0), so it overlaps the hot module's compile thread."""
    key = cache.key(text, "O0")
    obj = cache.get(key)
    if obj is not None:  # one that fails to load is recompiled (light, -O3) by Engine
        return Engine(text, obj=obj, light=True, exports=exports)
    compiled = parallel_compile.compile_o0(llvm_util.module_text(text))
    cache.put(key, compiled[0])
    return Engine(compiled=compiled, exports=exports)


def build(name: str, split: Split, threads: int = 1) -> tuple[int, tuple[Engine, Engine]]:
    """(address of `name`, the engines to keep alive) for a nest's modules; `threads`: the
    program's threads (the two modules compile side by side when two are idle)."""
    hot, cold = _hot(split.hot_text(), split.blocks,
                     lambda: _cold(split.cold_text(), [name, split.table]), threads)
    if cold.linked:
        table = cold.address(split.table)
        for k, block in enumerate(split.blocks):
            ctypes.c_uint64.from_address(table + 8 * k).value = hot.address(block)
    return cold.address(name), (hot, cold)


__all__ = ["build"]
