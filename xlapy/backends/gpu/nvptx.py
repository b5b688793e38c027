"""LLVM IR for the NVPTX target turned into PTX, and the CUDA tools it needs.

Kernels are LLVM IR modules for `nvptx64-nvidia-cuda`. Math functions are libdevice's
(`__nv_expf`, ...): the bitcode is linked into the module, everything but the kernels is
internalized and the O3 pipeline drops what no kernel calls (NVVMReflect, registered by the
NVPTX target machine, resolves libdevice's `__nvvm_reflect("__CUDA_FTZ")` from the module
flag `nvvm-reflect-ftz`, set in the ftz denormal mode). PTX comes from llvmlite's NVPTX
target machine for one architecture (`sm_80`, `sm_90`, ...).

Tools are found, in order: `$XLAPY_CUDA_HOME` / `$CUDA_HOME`, `ptxas` on PATH (its CUDA
tree holds libdevice), then the `nvidia-cuda-nvcc-cu12` wheel (`pip install xlapy[gpu]`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import llvmlite.binding as llvm

from xlapy.errors import CompileError

TRIPLE = "nvptx64-nvidia-cuda"
#: The architectures PTX is made for by default (A100, H100) and the PTX ISA version.
ARCHS = ("sm_80", "sm_90")
DEFAULT_ARCH = "sm_80"
#: PTX ISA 8.0 (CUDA 12.0 drivers and later) through sm_90; 8.6 for sm_100 and later.
PTX_ISA = "+ptx80"
PTX_ISA_SM100 = "+ptx86"
_LOCK = threading.Lock()
_LIBDEVICE_REL = Path("nvvm") / "libdevice" / "libdevice.10.bc"
MISSING = ("install the CUDA toolkit (ptxas on PATH) or the nvidia-cuda-nvcc-cu12 wheel "
           "(pip install 'xlapy[gpu]')")


@functools.cache
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.cache
def target_machine(arch: str = DEFAULT_ARCH) -> llvm.TargetMachine:
    _init()
    newer = int(re.sub(r"\D", "", arch) or 0) >= 100
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=arch, features=PTX_ISA_SM100 if newer else PTX_ISA, opt=3)


def data_layout() -> str:
    return str(target_machine().target_data)


# ---- the CUDA tools ---------------------------------------------------------------------------
def _cuda_roots() -> list[Path]:
    """CUDA trees to look in, in order of preference."""
    roots = [Path(os.environ[v]) for v in ("XLAPY_CUDA_HOME", "CUDA_HOME", "CUDA_PATH")
             if os.environ.get(v)]
    exe = shutil.which("ptxas")
    if exe is not None:
        roots.append(Path(exe).resolve().parent.parent)
    roots.append(Path("/usr/local/cuda"))
    try:
        import nvidia.cuda_nvcc as wheel  # the nvidia-cuda-nvcc-cu12 wheel

        roots.extend(Path(p) for p in wheel.__path__)
    except ImportError:
        pass
    return roots


@functools.cache
def ptxas_path() -> str | None:
    """The ptxas executable: on PATH, else in a CUDA tree or the nvcc wheel."""
    exe = shutil.which("ptxas")
    if exe is not None:
        return exe
    for root in _cuda_roots():
        p = root / "bin" / "ptxas"
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


@functools.cache
def libdevice_path() -> str | None:
    env = os.environ.get("XLAPY_LIBDEVICE")
    if env:
        return env
    for root in _cuda_roots():
        p = root / _LIBDEVICE_REL
        if p.is_file():
            return str(p)
    return None


@functools.cache
def _libdevice() -> llvm.ModuleRef:
    path = libdevice_path()
    if path is None:
        raise CompileError(f"gpu backend: libdevice (libdevice.10.bc, the CUDA math "
                           f"functions) not found; {MISSING}")
    _init()
    return llvm.parse_bitcode(Path(path).read_bytes())


# ---- IR -> PTX --------------------------------------------------------------------------------
def link(texts: Sequence[str], kernels: Sequence[str], ftz: bool) -> llvm.ModuleRef:
    """Parse and link the IR modules `texts` (kernels named apart), libdevice if a kernel
    calls it; everything but `kernels` internal, then optimized (O3 for sm_80: the IR is
    the same for every architecture)."""
    _init()
    with _LOCK:
        ref = llvm.parse_assembly(texts[0])
        for t in texts[1:]:
            ref.link_in(llvm.parse_assembly(t))
        ref.verify()
        if any(f.is_declaration and f.name.startswith("__nv_") for f in ref.functions):
            ref.link_in(_libdevice(), preserve=True)
        keep = set(kernels)
        for f in ref.functions:
            if not f.is_declaration and f.name not in keep:
                f.linkage = "internal"
        for g in ref.global_variables:
            if not g.is_declaration and g.name not in keep:
                g.linkage = "internal"
        tm = target_machine()
        # O0 first: its always-inliner inlines libdevice's alwaysinline functions and drops
        # the unused ones, so O3 works on half the functions (a 100-executable batch of the
        # conformance corpus: 5.7 s -> 3.1 s).
        for level in (0, 3):
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(
                speed_level=level))
            pb.getModulePassManager().run(ref, pb)
        unresolved = sorted(f.name for f in ref.functions
                            if f.is_declaration and not f.name.startswith("llvm.")
                            and f.name != "__nvvm_reflect")
        if unresolved:
            raise CompileError(f"gpu backend: kernels call functions no GPU library defines: "
                               f"{', '.join(unresolved)}")
        return ref


def emit_ptx(ref: llvm.ModuleRef, arch: str = DEFAULT_ARCH) -> str:
    """The PTX text of a linked module for `arch`."""
    with _LOCK:
        return target_machine(arch).emit_assembly(ref)


def ftz_flag(ftz: bool) -> str:
    """The module flag libdevice's __nvvm_reflect("__CUDA_FTZ") reads."""
    return (f'!llvm.module.flags = !{{!9000}}\n'
            f'!9000 = !{{i32 4, !"nvvm-reflect-ftz", i32 {int(ftz)}}}\n')


def ptxas(ptx: str, arch: str) -> str:
    """Assemble PTX with ptxas for `arch` (raises CompileError with its messages); returns
    its warnings. Raises CompileError naming what is missing when no ptxas is found."""
    exe = ptxas_path()
    if exe is None:
        raise CompileError(f"gpu backend: ptxas not found; {MISSING}")
    with tempfile.TemporaryDirectory(prefix="xlapy-ptx") as d:
        src = Path(d) / "kernels.ptx"
        src.write_text(ptx)
        r = subprocess.run([exe, f"-arch={arch}", "-o", str(Path(d) / "kernels.cubin"),
                            str(src)], capture_output=True, text=True)
    if r.returncode != 0:
        raise CompileError(f"ptxas -arch={arch} failed:\n{r.stderr.strip()}")
    return r.stderr
