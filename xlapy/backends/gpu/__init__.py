"""The `gpu` backend: fused kernels through LLVM's NVPTX target (PTX, libdevice math),
dot_general through cuBLAS, the CUDA driver API by ctypes (executable.py says what runs
where; kernel_emit.py how kernels map to threads).

Compiling (planning, NVPTX IR, PTX) needs no GPU; running needs one and its driver, and says
so (Unimplemented) where there is none. Options: `denormal` (`ftz`, the default, or `ieee`),
`arch` (the PTX architecture compiled at compile time; default sm_80, or the device's)."""

from __future__ import annotations

from typing import Any

from xlapy import denormal
from xlapy.backends import register_backend
from xlapy.ir import Module
from xlapy.verify import verify_module


class GpuBackend:
    name = "gpu"

    def compile(self, module: Module, options: dict[str, Any] | None = None) -> Any:
        from xlapy.backends.gpu.executable import GpuExecutable
        from xlapy.passes.pipelines import backend_pipeline

        options = {**(options or {}), denormal.OPTION: denormal.from_options(options)}
        with denormal.use(options[denormal.OPTION]):
            module = module.clone()
            verify_module(module)
            backend_pipeline().run(module)
            return GpuExecutable(module.entry_computation(), module, options)

    def compile_function(self, module: Module, comp: Any,
                         options: dict[str, Any] | None = None, eager_ptx: bool = True) -> Any:
        """One function of a verified module (conformance files hold several): the cpu
        backend's rewrites for it (no folding pipeline: chunks feed constants), then
        planned for the GPU. `eager_ptx=False` stops at the NVPTX IR (`.ir`)."""
        from xlapy.backends.cpu import rewrite_for_function
        from xlapy.backends.gpu.executable import GpuExecutable

        module, comp = rewrite_for_function(module, comp)
        return GpuExecutable(comp, module, options, eager_ptx=eager_ptx)


register_backend("gpu", GpuBackend)
