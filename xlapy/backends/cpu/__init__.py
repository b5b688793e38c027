"""The `cpu` backend: LLVM-compiled fused kernels, BLAS/LAPACK/FFT library thunks, and
interpreter fallback for the rest (see executable.py; `explain()` lists what runs where)."""

from __future__ import annotations

from typing import Any

from xlapy.backends import register_backend
from xlapy.ir import Module
from xlapy.verify import verify_module


class CpuBackend:
    name = "cpu"

    def compile(self, module: Module, options: dict[str, Any] | None = None) -> Any:
        from xlapy.backends.cpu.executable import CpuExecutable

        module = module.clone()
        verify_module(module)
        return CpuExecutable(module.entry_computation(), module, options)

    def compile_function(self, module: Module, comp: Any,
                         options: dict[str, Any] | None = None) -> Any:
        """One function of an already verified module (test files hold several, no entry)."""
        from xlapy.backends.cpu.executable import CpuExecutable

        return CpuExecutable(comp, module, options)


register_backend("cpu", CpuBackend)
