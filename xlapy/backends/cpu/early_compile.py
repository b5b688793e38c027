"""A big kernel compiled on a compile thread as soon as it is emitted (issue 14: cold
compile time).

Why: the executable compiled its kernels only once every kernel was emitted, the regions
and chains planned and every kernel printed (kernel_compile.KernelCode); x86-64-v3's
attention_bf16 emitted its softmax kernel (~260 IR instructions, ~8 ms to compile, the
longest part of its cold compile) 4-5 ms before that compile could start. A kernel of at
least MIN_INSTRUCTIONS is printed alone (its module: the declarations and metadata so far,
the definitions it reaches) and handed to a compile thread right away
(parallel_compile.submit); the main thread waits until that compile reaches code
generation (its one long call without the GIL: `offer`), then goes on emitting, and
`KernelCode` leaves the kernel out of its groups and takes its object from here.
Row kernels (the big ones) are built before the small kernels ahead of them in program
order (CpuExecutable._plan), so they start first; the last kernel too compiles early (what
follows its emission then runs beside its code generation). The object is the serial path's: the
same function through the same pipeline and machine settings, in a module of its own as
when the groups are compiled on threads. Only with more than one compile thread
(parallel_compile.threads): otherwise the main thread compiles everything after emitting,
as before. A kernel that is compiled early and then not needed (a chain reads its leaf
instead: batch_chain.dropped) costs a compile thread's time only.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import cache, parallel_compile, sched_mode
from xlapy.backends.cpu.fusion_plan import kernel_elements
from xlapy.backends.cpu.ir_print import function_text
from xlapy.backends.cpu.llvm_util import Engine, module_head, module_text, references
from xlapy.backends.cpu.options import CpuOptions
from xlapy.phases import phase

#: IR instructions a kernel has at least to be compiled early: a kernel costs ~1 ms to
#: compile however small, and small ones are grouped (parallel_compile.MIN_INSTRUCTIONS).
MIN_INSTRUCTIONS = 200
#: The longest an early compile's start is waited for (s; parallel_compile.submit).
WAIT_S = 0.05


@dataclass
class _Job:
    """One early kernel: its module text, cache key and pipeline, and the cached object or
    the compile in flight."""

    text: str
    key: str
    vectorize: bool
    light: bool
    cached: bytes | None
    future: Future[tuple[bytes, Any]] | None


def group_text(mod: ir.Module, names: list[str]) -> str:
    """The module text of the functions `names` of `mod` alone: every declaration and
    metadata node so far, the definitions they reach (each printed once), with the
    kernels' attributes (llvm_util.module_text)."""
    head = module_head(mod)
    defined = {v.name: v for v in mod.globals.values()
               if not (isinstance(v, ir.Function) and not v.blocks)}
    texts: dict[str, str] = {}
    todo = [n for n in names if n in defined]
    while todo:
        name = todo.pop()
        if name in texts:
            continue
        v = defined[name]
        texts[name] = function_text(v) if isinstance(v, ir.Function) else str(v)
        if isinstance(v, ir.Function):  # printed once (llvm_util.module_texts reads it)
            v._xlapy_text = texts[name]  # type: ignore[attr-defined]
        todo += [ref for ref in references(texts[name]) if ref in defined and ref not in texts]
    body = [texts[v.name] if v.name in texts else str(v) for v in mod.globals.values()
            if v.name in texts or v.name not in defined]
    return module_text("\n".join(head + body + mod._get_metadata_lines()))


class EarlyCompiles:
    """The early compiles of one executable's kernel module."""

    def __init__(self, mod: ir.Module, options: CpuOptions) -> None:
        self.mod = mod
        self.options = options
        self.on = parallel_compile.threads(options.num_threads) > 1
        self.jobs: dict[str, _Job] = {}

    def offer(self, spec: Any) -> None:
        """Start compiling kernel `spec` (kernels.Kernel, just emitted) if it is big and no
        other early compile is still running: one compile thread beside the emitting one (a
        second would share the two CPUs with them, and a module per big kernel adds a
        module's fixed cost each: those are grouped by `KernelCode` as before). The
        last kernel too: the rest of the executable's planning (library calls, regions,
        chains, the other kernels' printing) then runs beside its code generation, and its
        own-context parse takes no turn at llvmlite's lock (softmax: its one kernel, cold
        compile 16.8 -> 15.9 ms; the JAX fori/scan loops' 2-3 ms less)."""
        if not self.on or spec.cells or any(j.future is not None and not j.future.done()
                                            for j in self.jobs.values()) or self._fusible(spec):
            return
        fn = self.mod.globals.get(spec.name)
        if not isinstance(fn, ir.Function) or \
                sum(len(bb.instructions) for bb in fn.blocks) < MIN_INSTRUCTIONS:
            return
        light = spec.explicit
        vec = kernel_elements(spec) >= self.options.small_kernel
        with phase("ir text"):
            text = sched_mode.marked(group_text(self.mod, [spec.name]))
        key = cache.key(text, "light" if light else "" if vec else "novec")
        obj = cache.get(key)
        future = None
        if obj is None:
            # Until its code generation starts the compile thread needs the GIL back after
            # every short LLVM call, and this thread, emitting the next kernels in Python,
            # would hold it for up to the switch interval (5 ms) each time: wait here
            # (~1-2 ms: the parse and the light pipeline), then go on beside it.
            emitting = threading.Event()
            future = parallel_compile.submit(text, vec, light, emitting=emitting)
            with phase("llvm threads"):
                emitting.wait(WAIT_S)
        self.jobs[spec.name] = _Job(text, key, vec, light, obj, future)

    def _fusible(self, spec: Any) -> bool:
        """A small kernel of a loop's condition or body: its loop may run fused
        (loop_fused.py), which compiles a copy of it and never its own code."""
        from xlapy.backends.cpu import loop_fused

        o = self.options
        return o.loop_part and o.fused_loops and kernel_elements(spec) <= loop_fused.MAX_ELEMENTS

    def engine(self, name: str) -> Engine:
        """The Engine of early kernel `name` (waits for its compile)."""
        job = self.jobs[name]
        if job.future is None:
            return Engine(job.text, obj=job.cached, vectorize=job.vectorize, light=job.light,
                          exports=[name])
        with phase("llvm threads"):
            compiled = job.future.result()
        engine = Engine(compiled=compiled, vectorize=job.vectorize, light=job.light,
                        exports=[name])
        cache.put(job.key, engine.object)
        return engine


__all__ = ["MIN_INSTRUCTIONS", "EarlyCompiles", "group_text"]
