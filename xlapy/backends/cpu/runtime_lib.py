"""The process's LLJIT and the runtime library every kernel links against: rtlib's IR
functions compiled once per target (disk-cached like a kernel) and the libc/libm addresses
they bind. Kernels resolve their calls in this library, never in the process's symbols, so
an object compiled here (or cached) needs nothing the machine might lack."""

from __future__ import annotations

import functools
import itertools
import struct
from typing import Any

import llvmlite.binding as llvm

from xlapy.backends.cpu import llvm_util, objfile, rtlib, target
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.target import CpuTarget
from xlapy.errors import XlapyError

#: Names of the libraries linked into the LLJIT (kernels' and runtimes').
LIBRARIES = itertools.count()


@functools.cache
def runtime_object(t: CpuTarget) -> bytes:
    """rtlib's functions compiled for `t` (cached on disk like any kernel)."""
    from xlapy.backends.cpu import cache

    text = str(rtlib.module(t.triple))
    with target.use(t):
        k = cache.key(text, "rtlib")
    obj = cache.get(k)
    if obj is not None and not _runtime_object_ok(obj, t):
        cache.reject(obj)
        obj = None
    if obj is None:
        ctm = llvm_util._codegen_machine(t)
        with llvm_util._LOCK:
            ref = llvm.parse_assembly(text)
            ref.verify()
            ref.data_layout = str(ctm.target_data)
            llvm_util.optimize(ref, ctm)
            obj = ctm.emit_object(ref)
        cache.put(k, obj)
    return obj


def _runtime_object_ok(obj: bytes, t: CpuTarget) -> bool:
    """Whether a cached runtime object is one for `t` that defines rtlib's functions and
    needs nothing rtlib does not bind."""
    try:
        syms = objfile.symbols(obj)
        arch = objfile.machine(obj)
    except (XlapyError, struct.error, IndexError, ValueError):
        return False
    defined = {s.name for s in syms if s.defined}
    needed = {s.name for s in syms if not s.defined and s.binding != 0}
    return arch == t.arch and set(rtlib.DEFINED) <= defined and needed <= rtlib.SYMBOLS


@once
def runtime_library(t: CpuTarget) -> str:
    """The name of `t`'s runtime library in the LLJIT (linked once per process and target):
    rtlib's IR functions and the libc/libm addresses it binds."""
    obj = runtime_object(t)
    name = f"xlapy_rt{next(LIBRARIES)}"
    with llvm_util._LOCK:
        builder = llvm.JITLibraryBuilder().add_object_img(obj)
        for sym, addr in rtlib.bound_addresses().items():
            builder.import_symbol(sym, addr)
        for sym in rtlib.DEFINED:
            builder.export_symbol(sym)
        _RUNTIMES.append(builder.link(lljit(), name))
    return name


_RUNTIMES: list[Any] = []  # the runtime libraries' trackers, alive for the process


@once
def lljit() -> llvm.LLJIT:
    """The process's LLJIT, never disposed (marked owned): a library of an engine collected
    late at interpreter exit is then still unloaded from a live JIT."""
    jit = llvm.create_lljit_compiler()
    jit._owned = True
    return jit


__all__ = ["LIBRARIES", "lljit", "runtime_library", "runtime_object"]
