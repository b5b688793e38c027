"""The `cpu` backend: its pass pipeline (pipeline.py, ending in the cpu fusion), then
LLVM-compiled fused kernels, BLAS/LAPACK/FFT library thunks, and interpreter fallback for the
rest (see executable.py; `explain()` lists what runs where).

Options (one frozen CpuOptions per compile, options.py): `target` (target.py), `num_threads`
(parallel.py), `lanes` (lanes.py), the fusion limits and thresholds, `denormal` (`ftz`, the
default, or `ieee`: xlapy.denormal; kernels set or clear MXCSR FTZ/DAZ and flush explicitly to
match)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from xlapy import denormal
from xlapy.backends import register_backend
from xlapy.ir import Instruction, Module
from xlapy.phases import no_gc, phase, recording
from xlapy.verify import verify_module


class CpuBackend:
    name = "cpu"

    def compile(self, module: Module, options: Mapping[str, Any] | None = None) -> Any:
        """The cpu pipeline (pipeline.py), then an executable built from its fusion plans;
        `options` become one CpuOptions (options.py) that every stage reads."""
        from xlapy.backends.cpu import (
            branch_loop,
            conv_compile,
            loop_fused,
            once,
            parallel_compile,
        )
        from xlapy.backends.cpu.executable import CpuExecutable
        from xlapy.backends.cpu.options import CpuOptions
        from xlapy.backends.cpu.pipeline import cpu_pipeline

        opts = CpuOptions.make(options)
        parallel_compile.prewarm(opts.target)  # once per process: LLVM's start-up, aside
        with recording() as rec, no_gc(), denormal.use(opts.denormal):  # folding flushes too
            with phase("verify"):
                module = module.clone()
                verify_module(module)
            with phase("passes"):
                cpu_pipeline(opts).run(module)
            with phase("emit"), once.collecting() as ahead, conv_compile.finishing(), \
                    loop_fused.finishing(), branch_loop.sharing():
                entry = module.entry_computation()
                with branch_loop.defer_thunks(entry, opts):
                    exe = CpuExecutable(entry, module, opts)
                if exe.runnable:
                    exe.trip = branch_loop.entry_trip(exe)
                if exe.trip is None:
                    exe.finish()  # (compiled now unless deferred for the trip)
        #: Where the compile's time went (xlapy.phases): `xlapy compile --explain` prints it.
        exe.phases = rec
        # The shape-independent native code its first run needs (once.py), built meanwhile.
        once.start(ahead if exe.runnable else [])
        return exe

    def compile_function(self, module: Module, comp: Any,
                         options: Mapping[str, Any] | None = None) -> Any:
        """One function of an already verified module (test files hold several, no entry).
        No backend pipeline: conformance chunks feed constants, which it would fold away,
        leaving the kernels untested; only chlo ops are lowered (to native kernels), calls,
        composites and element-wise maps inlined, rng_bit_generator expanded and splat
        constants become broadcasts (computed in kernels, never materialized); then the cpu
        fusion plans the function (its plans are handed to the executable, not stored on
        the caller's module)."""
        from xlapy.backends.cpu import elementwise, parallel_compile
        from xlapy.backends.cpu.executable import CpuExecutable
        from xlapy.backends.cpu.options import CpuOptions
        from xlapy.backends.cpu.pipeline import plan_all

        opts = CpuOptions.make(options)
        parallel_compile.prewarm(opts.target)
        with recording() as rec, no_gc():
            with phase("passes"):
                module, comp = rewrite_for_function(module, comp, elementwise.native_chlo)
            with phase("fusion plan"):
                plans = plan_all([comp], opts)
            with phase("emit"):
                exe = CpuExecutable(comp, module, opts, plans)
        exe.phases = rec
        return exe


def rewrite_for_function(module: Module, comp: Any,
                         native_chlo: Callable[[Instruction], bool] | None = None
                         ) -> tuple[Module, Any]:
    """compile_function's rewrites of `comp` (shared with the gpu backend): on a copy of
    the module (the caller's is not ours to rewrite), when it needs any; they only add ops,
    they fold nothing. `native_chlo`: the chlo ops the backend's kernels compute."""
    from xlapy.passes.chlo_lowering import ChloLowering
    from xlapy.passes.inliner import CallInliner
    from xlapy.passes.native_forms import native_form_passes
    from xlapy.passes.rng_bit_generator_expander import RngBitGeneratorExpander
    from xlapy.passes.splat_constants import SplatToBroadcast

    if _needs_rewrite(module):
        module = module.clone()
        ChloLowering(native=native_chlo).run(module)
        for p in native_form_passes():
            p.run(module)
        CallInliner().run(module)
        RngBitGeneratorExpander.for_cpu().run(module)
        SplatToBroadcast().run(module)
        comp = module.get(comp.name)
    return module, comp


def _needs_rewrite(module: Module) -> bool:
    """A chlo op, a map, a composite, a fusion, an rng_bit_generator or a splat constant
    anywhere (compile_function's rewrites)."""
    from xlapy.passes.complex_windows import splits
    from xlapy.passes.native_forms import REWRITTEN as native_forms

    return any(i.opcode.startswith("chlo.") or i.opcode in ("rng_bit_generator", "map",
                                                             "composite", "fusion")
               or i.opcode in native_forms or splits(i)
               or (i.opcode == "constant" and i.shape.is_array and i.attrs.literal.is_splat)
               for c in module.computations for i in c.instructions)


register_backend("cpu", CpuBackend)
