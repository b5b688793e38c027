"""An executable's fused kernels compiled to engines (CpuExecutable._compile_kernels).

Kernels written in explicit vectors (lanes.py) are compiled with the light pipeline, the
others (native loops, gathers, transposes) with O3 and the loop vectorizer, each group as a
module of its own: one such kernel put the whole module through O3 (the CNN's pooling
kernel: 29 ms of LLVM optimization for its 4 kernels, most of it on the convolution
epilogues that need none). With idle CPUs each group is cut into modules of similar size
and every module is compiled on a thread of its own (parallel_compile.py); the code of each
kernel is the same either way. Big kernels that started compiling as they were emitted
(early_compile.py) take their engines from there.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from xlapy.backends.cpu import cache, kernel_sequence, kernels, parallel_compile, sched_mode
from xlapy.backends.cpu.early_compile import EarlyCompiles
from xlapy.backends.cpu.fusion_plan import kernel_elements
from xlapy.backends.cpu.llvm_util import Engine, module_texts
from xlapy.backends.cpu.options import CpuOptions
from xlapy.phases import phase


class KernelCode:
    """An executable's kernels cut into the modules they compile as, printed (`whole`: the
    module's text before optimization) and compiled only by `compile`: a loop whose
    condition and body run as one fused function (loop_fused.py) never needs theirs."""

    def __init__(self, mod: Any, specs: list[kernels.Kernel], skip: AbstractSet[int],
                 options: CpuOptions, early: EarlyCompiles,
                 sequence: Sequence[kernels.Kernel] = (),
                 extra: Sequence[kernels.Kernel] = ()) -> None:
        """`specs` and `extra` (kernels no thunk runs: a loop body's window kernels),
        emitted into `mod`; kernels whose output is in `skip` (a chain's dropped ones) are
        not compiled (address 0). `sequence`: the kernels kernel_sequence.NAME runs
        (compiled in a module of its own, their copies inlined into it; else address 0)."""
        self.specs, self.skip, self.extra, self.early = specs, skip, extra, early
        jobs = early.jobs
        together = {k.name for k in sequence}
        built = [k for k in specs if k.output not in skip and k.name not in jobs
                 and k.name not in together] + [k for k in extra if k.name not in together]
        self.threads = n = parallel_compile.threads(options.num_threads) \
            if len(built) > 1 else 1
        groups: list[list[kernels.Kernel]] = []
        lights: list[bool] = []
        for explicit in (True, False):
            kind = [k for k in built if k.explicit == explicit]
            sizes = [sum(len(bb.instructions) for bb in mod.globals[k.name].blocks)
                     for k in kind]
            for r in parallel_compile.chunks(sizes, n):
                if r:
                    groups.append([kind[i] for i in r])
                    lights.append(explicit)
        self.names = [[k.name for k in g] for g in groups]
        if sequence:  # one module: the kernels, and the function their copies are inlined into
            groups.append(list(sequence))
            lights.append(all(k.explicit for k in sequence))
            self.names.append([k.name for k in sequence] + [kernel_sequence.NAME])
        self.whole, texts = module_texts(mod, self.names)
        self.texts = [sched_mode.marked(t) for t in texts]  # (fused kernels: sched_mode.py)
        self.cells = [[c for k in g for c in k.cells] for g in groups]
        self.exports = [n + [name for name, _ in c] for n, c in zip(self.names, self.cells)]
        self.modes = [(lt, any(kernel_elements(k) >= options.small_kernel for k in group))
                      for lt, group in zip(lights, groups)]

    def compile(self) -> tuple[list[Engine], list[int], int, list[int]]:
        """(engines, each kernel's address, the sequence function's, each of `extra`'s)."""
        texts, modes, jobs, n = self.texts, self.modes, self.early.jobs, self.threads
        keys = [cache.key(text, "light" if light else "" if vec else "novec")
                for text, (light, vec) in zip(texts, modes)]
        objs = [cache.get(key) for key in keys]
        todo = [i for i, obj in enumerate(objs) if obj is None]
        compiled: dict[int, Any] = {}
        if n > 1 and len(todo) > 1:
            with phase("llvm threads"):
                compiled = dict(zip(todo, parallel_compile.compile_all(
                    [(texts[i], modes[i][1], modes[i][0]) for i in todo], n)))
        elif jobs:  # here, beside the early ones: outside llvmlite's lock, which Engine holds
            # through a whole compile while a compile thread's calls wait for it
            compiled = {i: parallel_compile.compile_here(texts[i], modes[i][1], modes[i][0])
                        for i in todo}
        engines: list[Engine] = []
        addrs: dict[str, int] = {}
        for i, (text, (light, vec)) in enumerate(zip(texts, modes)):
            engine = Engine(text, obj=objs[i], vectorize=vec, light=light,
                            exports=self.exports[i], compiled=compiled.get(i))
            if objs[i] is None:
                cache.put(keys[i], engine.object)
            for name, value in self.cells[i]:  # (transpose_lib's routine addresses)
                if engine.linked:
                    ctypes.c_int64.from_address(engine.address(name)).value = value
            engines.append(engine)
            addrs.update((k, engine.address(k)) for k in self.names[i])
        for k in self.specs:  # (after the others: their compile overlaps the early ones')
            if k.name in jobs and k.output not in self.skip:
                engine = self.early.engine(k.name)
                engines.append(engine)
                addrs[k.name] = engine.address(k.name)
        return engines, [addrs.get(k.name, 0) for k in self.specs], \
            addrs.get(kernel_sequence.NAME, 0), [addrs[k.name] for k in self.extra]


def plan_for(exe: Any, mod: Any, specs: list[kernels.Kernel],
             skip: AbstractSet[int] = frozenset()) -> KernelCode:
    """An executable's kernels as they will compile (`compile_for`): a loop body's window
    kernels and the sequence function emitted, the modules printed (`kernel_ir`)."""
    from xlapy.backends.cpu import dus_window
    from xlapy.backends.cpu.loop_steps import steps

    windows = dus_window.early(exe, specs, mod)  # (a loop body's in-place updates)
    seq = kernel_sequence.emit(mod, specs, steps(exe), exe._early.jobs, windows) \
        if exe.options.loop_part and not exe.regions and not exe.chains else None
    code = KernelCode(mod, specs, skip, exe.options, exe._early,
                      [windows.get(j, specs[j]) for j in seq or ()], list(windows.values()))
    exe.kernel_ir = code.whole
    exe.windows = windows
    exe.sequence = kernel_sequence.KernelSequence(seq) if seq else None
    return code


def compile_for(exe: Any, code: KernelCode) -> None:
    """An executable's kernels' engines and addresses (`plan_for`'s modules compiled)."""
    engines, exe.kernel_addrs, exe.sequence_addr, extra = code.compile()
    exe.window_addrs = dict(zip(exe.windows, extra))
    exe.engines.extend(engines)
    exe.engine = exe.engines[0] if exe.engines else None


__all__ = ["KernelCode", "compile_for", "plan_for"]
