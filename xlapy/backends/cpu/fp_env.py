"""The floating-point environment a kernel runs in: MXCSR's flush bits on x86 (FPCR's FZ on
aarch64) set at a kernel's entry for the denormal mode it was compiled for
(xlapy.denormal) and the caller's restored at its exit."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import I8P, I32, I64, VOID, declared

#: MXCSR flush-to-zero (bit 15). Denormal *inputs* are flushed explicitly by the emitters
#: (elementwise.flush) instead of by DAZ: under DAZ, LLVM's lowering of a plain
#: `select(x < y, x, y)` to minps would flush the selected value, which a select must not.
MXCSR_FTZ_DAZ = 0x8000
#: MXCSR denormals-are-zero (bit 6): never set by xlapy, cleared in the `ieee` denormal mode.
MXCSR_DAZ = 0x40
#: aarch64 FPCR flush-to-zero (bit 24).
FPCR_FZ = 1 << 24
#: Bit 63 of a loop body kernel's `hi` (its outer range's end; `Kernel.env_arg`): its caller
#: set the floating-point environment for the denormal mode the kernel was compiled in, so
#: the kernel neither reads nor writes it. The native while driver sets it once for all its
#: iterations and passes this bit to the kernel steps it runs on its own thread (native_loop.py,
#: kernel_sequence.py): reading MXCSR alone costs ~4.6 ns (stmxcsr, ~17 cycles on Zen 4), which
#: was half of a tiny scan step's ~40 ns over five kernels. Chunks the worker pool runs and the
#: Python path's calls leave it clear.
ENV_SET = -(1 << 63)


#: Whether the kernels emitted now run once per call of their executable (a top-level
#: one's: `mxcsr_once`), not per iteration of a native loop.
_ONCE_PER_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "xlapy_kernels_once_per_call", default=False)


@contextlib.contextmanager
def mxcsr_once(on: bool) -> Iterator[None]:
    """Kernels emitted inside set MXCSR without a branch when `on` (kernel_mxcsr)."""
    token = _ONCE_PER_CALL.set(on)
    try:
        yield
    finally:
        _ONCE_PER_CALL.reset(token)


def driven(outer: int, env_arg: bool) -> int:
    """The `hi` the native while driver passes a kernel over its whole outer range: ENV_SET
    or'ed in where the kernel reads it (`Kernel.env_arg`)."""
    return outer | ENV_SET if env_arg else outer


def kernel_mxcsr(b: ir.IRBuilder, hi: ir.Value) -> tuple[tuple[ir.Value, ir.Value | None],
                                                       ir.Value, bool]:
    """set_ftz_daz for a fused kernel's function whose outer range ends at `hi`; returns the
    saved state, the end to use and whether the kernel reads `ENV_SET` in `hi`. One a
    top-level executable calls (once per call and thread chunk, `mxcsr_once`) loads MXCSR
    unconditionally, the flush bits or'ed in, and restores it at the end: two basic blocks
    fewer on each side, which LLVM's instruction selection charges ~0.35 ms of a softmax
    kernel's ~6 ms code generation, for ~2-4 ns a call (ldmxcsr measured 1.1 ns rewriting the
    same value on Zen 4, 1.8 changing it). A loop body's kernels keep the test, and skip it
    when the caller says it set the environment (`ENV_SET`)."""
    if _ONCE_PER_CALL.get() and target.current().is_x86:
        return set_ftz_daz(b, branch=False), hi, False
    given = b.icmp_signed("<", hi, ir.Constant(I64, 0))
    return set_ftz_daz(b, skip=given), b.and_(hi, ir.Constant(I64, ~ENV_SET)), True


def set_ftz_daz(b: ir.IRBuilder, branch: bool = True, skip: ir.Value | None = None
                ) -> tuple[ir.Value, ir.Value | None]:
    """Flush denormal results to zero (as on XLA CPU) unless that is already set (the native
    while driver sets it once for a whole loop: ldmxcsr is slow): MXCSR FTZ on x86, FPCR FZ
    on aarch64; returns (saved state, whether it was changed) for `restore_mxcsr`. In the
    `ieee` denormal mode (xlapy.denormal) it clears the flush bits instead (MXCSR FTZ and DAZ:
    the calling thread may have set them). `branch=False` (x86): loaded whatever it held,
    and restored the same way (kernel_mxcsr). `skip` (an i1): when true the environment is
    not even read (the caller set it: `ENV_SET`)."""
    flushing = denormal.flushing()
    x86 = target.current().is_x86
    if x86:
        saved = b.alloca(I32, name="mxcsr.saved")
        cur = b.alloca(I32, name="mxcsr.new")
        if not branch:
            b.call(declared(b.module, "llvm.x86.sse.stmxcsr", VOID, [I8P]),
                   [b.bitcast(saved, I8P)])
            _load_mxcsr(b, b.load(saved), cur, flushing)
            return saved, None

    def check() -> tuple[ir.Value, ir.Value]:
        return _mxcsr_check(b, saved, cur, flushing) if x86 else _fpcr_check(b, flushing)

    if skip is None:
        return check()
    before = b.block
    with b.if_then(b.not_(skip)):
        state, need = check()
        checked = b.block
    changed = b.phi(need.type, name="env.changed")
    changed.add_incoming(ir.Constant(need.type, 0), before)
    changed.add_incoming(need, checked)
    if not x86:  # (the saved FPCR is a value: a phi too)
        old = b.phi(I64, name="env.saved")
        old.add_incoming(ir.Constant(I64, 0), before)
        old.add_incoming(state, checked)
        state = old
    return state, changed


def _bits(flushing: bool) -> int:
    return MXCSR_FTZ_DAZ if flushing else MXCSR_FTZ_DAZ | MXCSR_DAZ


def _load_mxcsr(b: ir.IRBuilder, old: ir.Value, cur: ir.Value, flushing: bool) -> None:
    """MXCSR = `old` with the mode's flush bits set (ftz) or cleared (ieee), through the
    stack slot `cur`."""
    bits = _bits(flushing)
    b.store(b.or_(old, ir.Constant(I32, bits)) if flushing else
            b.and_(old, ir.Constant(I32, ~bits & 0xFFFFFFFF)), cur)
    b.call(declared(b.module, "llvm.x86.sse.ldmxcsr", VOID, [I8P]), [b.bitcast(cur, I8P)])


def _mxcsr_check(b: ir.IRBuilder, saved: ir.Value, cur: ir.Value, flushing: bool
                 ) -> tuple[ir.Value, ir.Value]:
    """MXCSR saved in `saved`, loaded with the mode's bits where they differ: (saved,
    whether it was)."""
    b.call(declared(b.module, "llvm.x86.sse.stmxcsr", VOID, [I8P]), [b.bitcast(saved, I8P)])
    old = b.load(saved)
    need = b.icmp_unsigned("==" if flushing else "!=",
                           b.and_(old, ir.Constant(I32, _bits(flushing))), ir.Constant(I32, 0))
    with b.if_then(need, likely=True):
        _load_mxcsr(b, old, cur, flushing)
    return saved, need


def _fpcr_check(b: ir.IRBuilder, flushing: bool) -> tuple[ir.Value, ir.Value]:
    """aarch64's FPCR FZ set (ftz) or cleared (ieee) where it differs: (the old FPCR,
    whether it did)."""
    old = b.call(declared(b.module, "llvm.aarch64.get.fpcr", I64, []), [])
    bit = ir.Constant(I64, FPCR_FZ)
    need = b.icmp_unsigned("==" if flushing else "!=", b.and_(old, bit), ir.Constant(I64, 0))
    with b.if_then(need, likely=True):
        new = b.or_(old, bit) if flushing else b.and_(old, ir.Constant(I64, ~FPCR_FZ))
        b.call(declared(b.module, "llvm.aarch64.set.fpcr", VOID, [I64]), [new])
    return old, need


def restore_mxcsr(b: ir.IRBuilder, saved: tuple[ir.Value, ir.Value | None]) -> None:
    state, need = saved

    def load_saved() -> None:
        if target.current().is_x86:
            b.call(declared(b.module, "llvm.x86.sse.ldmxcsr", VOID, [I8P]),
                   [b.bitcast(state, I8P)])
        else:
            b.call(declared(b.module, "llvm.aarch64.set.fpcr", VOID, [I64]), [state])

    if need is None:  # (set without a branch)
        load_saved()
        return
    with b.if_then(need, likely=True):
        load_saved()


__all__ = ["ENV_SET", "FPCR_FZ", "MXCSR_DAZ", "MXCSR_FTZ_DAZ", "driven", "kernel_mxcsr",
           "mxcsr_once",
           "restore_mxcsr", "set_ftz_daz"]
