"""The entry function of conv_kernel.py's cold module, written as IR text (ir_text.py).

`name(x, w, out, begin, end, scratch, extra)` sets the denormal flush mode of the nest
(fp_env.set_ftz_daz's MXCSR sequence: FTZ on in the `ftz` mode, FTZ and DAZ off in
`ieee`, written only when not so already), marks the per-thread ring of rows empty (its
and the chained nest's: conv_kernel._init_ring), calls the rows function and restores
MXCSR. Through llvmlite's objects its building and printing was ~0.3 ms of the CNN's cold
compile. x86 and f32 / f64 only: elsewhere `entry_text` returns None and conv_kernel
builds it through llvmlite as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import target
from xlapy.backends.cpu.conv_rows_text import nbytes
from xlapy.backends.cpu.fp_env import MXCSR_DAZ, MXCSR_FTZ_DAZ
from xlapy.backends.cpu.ir_text import FunctionText
from xlapy.backends.cpu.llvm_util import F32, F64

if TYPE_CHECKING:
    from xlapy.backends.cpu.conv_kernel import Nest

STMXCSR = "llvm.x86.sse.stmxcsr"
LDMXCSR = "llvm.x86.sse.ldmxcsr"
#: The declarations an entry with a flush calls.
DECLARES = (f'declare void @"{STMXCSR}"(i8*)', f'declare void @"{LDMXCSR}"(i8*)')


def _i32(v: int) -> int:
    """An i32 constant as LLVM's text reads it (signed)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _init_ring(f: FunctionText, scratch: str, t: ir.Type, nest: Nest) -> None:
    """No ring slot holds a row; the zero row is zeros (conv_kernel._init_ring)."""
    ts = str(t)
    tags = f.cast(scratch, "i8*", "i64*")
    base = f.cast(f.gep("i8", scratch, nest.tag_bytes()), "i8*", f"{ts}*")
    with f.loop(0, nest.taps, "tag") as k:
        f.store("i64", -1, f.gep("i64", tags, k))
    with f.loop(0, nest.row_len, "z") as k:
        f.store(ts, "0.0", f.gep(ts, base, k))


def entry_text(name: str, t: ir.Type, nest: Nest, source: Nest | None, flush: bool
               ) -> str | None:
    """The definition of the entry `name` calling `name.rows`; `source`: the chained
    nest (its ring follows this one's scratch); `flush`: whether the nest sets the flush
    mode (it has an epilogue, a pooling or a chained nest). None off x86 or f32 / f64."""
    if t not in (F32, F64) or not target.current().is_x86:
        return None
    tp = f"{t}*"
    args = (f"{tp} %x, {tp} %w, {tp} %out, i64 %begin, i64 %end, i8* %scratch, "
            f"i8** %extra")
    f = FunctionText(f'define void @"{name}"({args})')
    need = saved = ""
    if flush:
        flushing = denormal.flushing()
        bits = MXCSR_FTZ_DAZ if flushing else MXCSR_FTZ_DAZ | MXCSR_DAZ
        saved = f.op("alloca i32", "mxcsr")
        cur = f.op("alloca i32", "mxcsr")
        f.do(f'call void @"{STMXCSR}"(i8* {f.cast(saved, "i32*", "i8*")})')
        old = f.op(f"load i32, i32* {saved}")
        masked = f.op(f"and i32 {old}, {_i32(bits)}")
        need = f.op(f"icmp {'eq' if flushing else 'ne'} i32 {masked}, 0")
        with f.if_then(need):
            new = f.op(f"or i32 {old}, {_i32(bits)}" if flushing else
                       f"and i32 {old}, {_i32(~bits)}")
            f.store("i32", new, cur)
            f.do(f'call void @"{LDMXCSR}"(i8* {f.cast(cur, "i32*", "i8*")})')
    if nest.rows:
        _init_ring(f, "%scratch", t, nest)
    if source is not None and source.rows:
        _init_ring(f, f.gep("i8", "%scratch", nest.scratch_bytes(nbytes(t))), t, source)
    f.do(f'call void @"{name}.rows"({args})')
    if flush:
        with f.if_then(need):
            f.do(f'call void @"{LDMXCSR}"(i8* {f.cast(saved, "i32*", "i8*")})')
    f.do("ret void")
    return f.text()


__all__ = ["DECLARES", "entry_text"]
