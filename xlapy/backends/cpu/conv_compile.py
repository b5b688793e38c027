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
thread (parallel_compile.py) while this one writes and builds the -O0 one and goes on
with the rest of the program: the compile waits for it only as it ends (`finishing`).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from xlapy.backends.cpu import cache, llvm_util, parallel_compile
from xlapy.backends.cpu.conv_kernel import Split
from xlapy.backends.cpu.llvm_util import Engine
from xlapy.phases import phase


class Engines:
    """A nest's engines, kept alive by its runner; while its hot module still compiles on a
    compile thread, `ready()` waits for it and fills the cold module's table. A compile
    calls it as it ends (`finishing`): the hot module then compiles beside the rest of the
    program's emission and compiles, not only beside its own cold module, which the CNN's
    13-pixel blocks outlast by ~1.4 ms. Runners call it first too, in case one runs
    before its compile ends. A nest whose hot text another nest of the compile is compiling
    already (`like`: the phases of a transposed convolution) waits for that one's engine
    and fills its own table from it."""

    def __init__(self, cold: Engine, hot: Engine | None = None,
                 job: Future[tuple[bytes, Any]] | None = None, key: str = "",
                 exports: Sequence[str] = (), table: str = "",
                 like: Engines | None = None) -> None:
        self.engines = [cold] if hot is None else [hot, cold]
        self._job = job
        #: The pending nest of this compile whose hot module (the same text) this one uses.
        self._like = like
        self._key, self._exports, self._table = key, list(exports), table
        self._lock = threading.Lock()
        if hot is not None:
            self._fill(hot)

    def ready(self) -> None:
        if self._job is None and self._like is None:
            return
        with self._lock:
            if self._like is not None:
                self._like.ready()
                hot = self._like.engines[0]
                self._like = None
            else:
                job = self._job
                if job is None:
                    return
                with phase("llvm threads"):
                    compiled = job.result()
                cache.put(self._key, compiled[0])
                hot = Engine(compiled=compiled, light=True, exports=self._exports)
                self._job = None
            self._fill(hot)
            self.engines.insert(0, hot)

    def _fill(self, hot: Engine) -> None:
        cold = self.engines[-1]
        if cold.linked:
            table = cold.address(self._table)
            for k, block in enumerate(self._exports):
                ctypes.c_uint64.from_address(table + 8 * k).value = hot.address(block)


#: The nests of the compile in progress whose hot module is still compiling (None: no
#: compile collects them, and each waits for its hot module at once).
_PENDING: contextvars.ContextVar[list[Engines] | None] = \
    contextvars.ContextVar("xlapy_conv_pending", default=None)


@contextlib.contextmanager
def finishing() -> Iterator[None]:
    """Around one compile's emission: the hot modules started inside are waited for (and
    their tables filled) as it ends, so none is left compiling once the compile returns."""
    token = _PENDING.set([])
    try:
        yield
        for engines in _PENDING.get() or ():
            engines.ready()
    finally:
        _PENDING.reset(token)


def _build(split: Split, name: str, threads: int) -> Engines:
    """The hot module compiled on a compile thread while this one writes and compiles the
    cold module when a CPU is idle (parallel_compile.threads), else one after the other.
    The hot module is code generation alone (parallel_compile.codegen: the blocks' text is
    what the light pipeline would make of it, the same object); its key stays the light
    pipeline's."""
    text = split.hot_text()
    exports = split.blocks
    cold = lambda: _cold(split.cold_text(), [name, split.table])  # noqa: E731
    key = cache.key(text, "light")
    obj = cache.get(key)
    if obj is not None:
        hot = Engine(text, obj=obj, light=True, exports=exports)
        return Engines(cold(), hot, table=split.table, exports=exports)
    if parallel_compile.threads(threads) < 2:
        compiled = parallel_compile.codegen(text)
        cache.put(key, compiled[0])
        hot = Engine(compiled=compiled, light=True, exports=exports)
        return Engines(cold(), hot, table=split.table, exports=exports)
    pending = _PENDING.get()
    like = next((e for e in pending or () if e._key == key), None)
    if like is not None:  # compiling already: its hot engine serves this nest's table too
        engines = Engines(cold(), like=like, key=key, exports=exports, table=split.table)
        assert pending is not None
        pending.append(engines)
        return engines
    job = parallel_compile.submit(text, True, True, passes=False)
    engines = Engines(cold(), job=job, key=key, exports=exports, table=split.table)
    if pending is None:
        engines.ready()
    else:
        pending.append(engines)
    return engines


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


def build(name: str, split: Split, threads: int = 1) -> tuple[int, Engines]:
    """(address of `name`, the nest's Engines: its runner keeps them and calls `ready()`
    before it runs) for a nest's modules; `threads`: the program's threads (the two
    modules compile side by side when two are idle)."""
    engines = _build(split, name, threads)
    return engines.engines[-1].address(name), engines


__all__ = ["Engines", "build", "finishing"]
