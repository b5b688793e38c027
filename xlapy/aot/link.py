"""One relocatable object from the driver module, the kernel modules and the runtime library.

Each kernel module (one per computation, planned by the cpu backend) defines `k0, k1, ...`;
its exported functions are renamed `{prefix}{name}` (the driver declares them so) and every
definition but the program's entry points becomes internal, so two programs' objects link
into one C program. rtlib's compiler-rt builtins (half / bfloat conversions, 128-bit
division), which LLVM's codegen may call by name, are defined weak in every object that
may need them; its fmod on bits, which kernels call from IR, is internal. The result is
optimized as one module (O3, vectorized) and emitted as PIC, so it links into
position-independent executables and shared libraries. `freestanding`: no libc / libm
symbol at all (freestanding.py rewrites the linked module before it is optimized; f32 fma
in software when the first object still needs libm's fmaf).
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm

from xlapy.aot import freestanding as fs
from xlapy.backends.cpu import objfile, rtlib, target
from xlapy.backends.cpu.llvm_util import optimize
from xlapy.backends.cpu.target import CpuTarget


def _parse(text: str, t: CpuTarget, data_layout: str) -> llvm.ModuleRef:
    ref = llvm.parse_assembly(text)
    ref.triple = t.triple
    ref.data_layout = data_layout
    return ref


def machine(t: CpuTarget) -> llvm.TargetMachine:
    """A TargetMachine for `t` emitting position-independent code."""
    target.resolve(None)  # every LLVM target initialized
    tgt = llvm.Target.from_triple(t.triple)
    return tgt.create_target_machine(cpu=t.cpu, features=t.llvm_features, opt=3,
                                     reloc="pic", codemodel="small")


def link_object(driver: str, kernels: list[tuple[str, str]], exports: set[str],
                t: CpuTarget, freestanding: bool = False) -> bytes:
    """The object file: `driver` (IR text) with the kernel modules `(prefix, text)` linked
    in, only `exports` visible, with the rtlib builtins its IR suggests it may need (all of
    them when that guess leaves one undefined)."""
    texts = [driver] + [text for _, text in kernels]
    guess = _builtins(texts)
    obj = _link(driver, kernels, exports, t, guess, freestanding)
    if (objfile.undefined(obj) & set(rtlib.DEFINED)) - guess:
        guess = set(rtlib.DEFINED)
        obj = _link(driver, kernels, exports, t, guess, freestanding)
    if freestanding and "fmaf" in objfile.undefined(obj):  # no FMA instruction
        obj = _link(driver, kernels, exports, t, guess, freestanding, soft_fma=True)
    return obj


def linked_text(driver: str, kernels: list[tuple[str, str]], t: CpuTarget) -> str:
    """The driver and kernel modules linked, unoptimized (function names as in the object):
    where freestanding.refuse looks for the op needing a libm function."""
    tm = machine(t)
    return str(_modules(driver, kernels, t, str(tm.target_data)))


def _modules(driver: str, kernels: list[tuple[str, str]], t: CpuTarget,
             layout: str) -> llvm.ModuleRef:
    main = _parse(driver, t, layout)
    for prefix, text in kernels:
        ref = _parse(text, t, layout)
        for fn in ref.functions:
            if not fn.is_declaration and fn.linkage == llvm.Linkage.external:
                fn.name = prefix + fn.name
        main.link_in(ref)
    return main


def _builtins(texts: list[str]) -> set[str]:
    """The rtlib functions a program's IR may call: those it declares, half / bfloat
    conversions when it has such values, 128-bit division when it has i128 values."""
    out = set()
    for name in rtlib.DEFINED:
        if any(f'@"{name}"' in t or f"@{name}(" in t for t in texts):
            out.add(name)
    if any("half" in t for t in texts):
        out |= {n for n, (a, b) in rtlib.CONVERSIONS.items() if "hf" in (a, b)}
    if any("bfloat" in t for t in texts):
        out |= {n for n, (a, b) in rtlib.CONVERSIONS.items() if "bf" in (a, b)}
    if any("i128" in t for t in texts):
        out |= set(rtlib.DIVISIONS)
    return out


@functools.cache
def _rtlib_text(triple: str) -> str:
    return str(rtlib.module(triple))


def _link(driver: str, kernels: list[tuple[str, str]], exports: set[str], t: CpuTarget,
          builtins: set[str], freestanding: bool = False, soft_fma: bool = False) -> bytes:
    tm = machine(t)
    layout = str(tm.target_data)
    main = _modules(driver, kernels, t, layout)
    if builtins:
        rt = _parse(_rtlib_text(t.triple), t, layout)
        for fn in rt.functions:
            if fn.is_declaration or fn.name in rtlib.FMODS and fn.name in builtins:
                continue  # called by name from the IR: internalized with the kernels below
            fn.linkage = llvm.Linkage.weak_odr if fn.name in builtins else \
                llvm.Linkage.internal  # dropped unless a kept one calls it
        main.link_in(rt)
    for fn in main.functions:
        if not fn.is_declaration and fn.name not in exports and \
                fn.linkage == llvm.Linkage.external:
            fn.linkage = llvm.Linkage.internal
    if freestanding:
        main = _parse(fs.rewrite(str(main), soft_fma), t, layout)
    main.verify()
    optimize(main, tm)
    if freestanding and fs.has_mem_intrinsics(str(main)):  # made by a pass after all
        main = _parse(fs.rewrite(str(main), soft_fma), t, layout)
        optimize(main, tm)
    return tm.emit_object(main)


__all__ = ["link_object", "machine"]
