"""fft as loops in the object: the JIT calls numpy's pocketfft for it.

`void fft(i8* x, i8* unused, i8* out, i8* scratch)`, all four types (FFT, IFFT, RFFT,
IRFFT) over the last len(fft_length) dimensions, computed as the interpreter does
(ops/linalg.py: in f64 / c128, rounded once to the result type): one direct DFT per line
and transformed axis, X_k = sum_j x_j w[(j k) mod n] with an embedded twiddle table
w[t] = exp(-2 pi i t / n) (exact at multiples of a quarter turn); inverse transforms use the
conjugate and scale each axis by 1/n; RFFT computes the n // 2 + 1 nonredundant outputs of
the last axis first, IRFFT ends with the Hermitian sum over the last axis (the imaginary
parts of the zero and Nyquist terms ignored, as pocketfft). O(n^2) per line: meant for the
modest lengths of inference programs. Scratch: the c128 work array and one line.
"""

from __future__ import annotations

from math import prod

import numpy as np
from llvmlite import ir

from xlapy.aot.errors import Unimplemented
from xlapy.aot.gemm import DOT_TYPE
from xlapy.backends.cpu.llvm_util import F32, F64, I8, for_range, i64
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: The float type of an element type's (real and imaginary) parts.
_PARTS = {ET.F32: F32, ET.F64: F64, ET.C64: F32, ET.C128: F64}


def twiddles(n: int) -> np.ndarray:
    """(cos, sin) of -2 pi t / n for t in [0, n), interleaved; exact at quarter turns."""
    t = np.arange(n)
    ang = -2.0 * np.pi * t / n
    w = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    exact = {0: (1.0, 0.0), 1: (0.0, -1.0), 2: (-1.0, 0.0), 3: (0.0, 1.0)}
    for k in range(n):
        if (4 * k) % n == 0:
            w[k] = exact[(4 * k) // n]
    return w.reshape(-1)


def emit_fft(mod: ir.Module, name: str, instr: Instruction) -> tuple[ir.Function, int]:
    """The transform's function and the bytes of scratch it needs."""
    attrs = instr.attrs
    kind = attrs.fft_type.value
    x_shape, out_shape = instr.operands[0].shape, instr.shape
    lengths = list(attrs.fft_length)
    nl = len(lengths)
    work = list(x_shape.dimensions) if kind in ("FFT", "IFFT", "IRFFT") else \
        list(out_shape.dimensions)
    rank = len(work)
    if not all(t in _PARTS for t in (x_shape.element_type, out_shape.element_type)):
        raise Unimplemented("fft", f"{x_shape.element_type} -> {out_shape.element_type}")
    in_part, out_part = _PARTS[x_shape.element_type], _PARTS[out_shape.element_type]
    fn = ir.Function(mod, DOT_TYPE, name=name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    px = b.bitcast(fn.args[0], in_part.as_pointer())
    po = b.bitcast(fn.args[2], out_part.as_pointer())
    if prod(out_shape.dimensions) == 0 or prod(x_shape.dimensions) == 0:
        if prod(out_shape.dimensions):  # zeros, as the interpreter
            size = prod(out_shape.dimensions) * out_shape.dtype.itemsize
            with for_range(b, i64(0), i64(size), name="z") as i:
                b.store(ir.Constant(I8, 0), b.gep(fn.args[2], [i]))
        b.ret_void()
        return fn, 0
    pw = b.bitcast(fn.args[3], F64.as_pointer())
    nwork = prod(work)
    maxn = max(lengths)
    line = b.gep(pw, [i64(2 * nwork)])
    tables: dict[int, ir.Value] = {}

    def table(n: int) -> ir.Value:
        if n not in tables:
            data = twiddles(n)
            g = ir.GlobalVariable(mod, ir.ArrayType(F64, 2 * n), name=f"{name}_w{n}")
            g.linkage = "internal"
            g.global_constant = True
            g.initializer = ir.Constant(ir.ArrayType(F64, 2 * n), [float(v) for v in data])
            tables[n] = g.bitcast(F64.as_pointer())
        return tables[n]

    def ld(p: ir.Value, i: ir.Value) -> ir.Value:
        v = b.load(b.gep(p, [i]))
        return b.fpext(v, F64) if v.type == F32 else v

    def wrap(i: ir.Value, n: int) -> ir.Value:
        return b.urem(i, i64(n))

    def axis_pass(axis: int, inverse: bool) -> None:
        """An in-place complex DFT of the work array along `axis`."""
        n = work[axis]
        outer, inner = prod(work[:axis]), prod(work[axis + 1:])
        tw = table(n)
        scale = ir.Constant(F64, 1.0 / n)
        with for_range(b, i64(0), i64(outer), name=f"o{axis}") as o, \
                for_range(b, i64(0), i64(inner), name=f"q{axis}") as q:
            base = b.add(b.mul(o, i64(n * inner)), q)
            with for_range(b, i64(0), i64(n), name="cp") as j:
                at = b.mul(b.add(base, b.mul(j, i64(inner))), i64(2))
                for part in (0, 1):
                    b.store(b.load(b.gep(pw, [b.add(at, i64(part))])),
                            b.gep(line, [b.add(b.mul(j, i64(2)), i64(part))]))
            with for_range(b, i64(0), i64(n), name="k") as k:
                sr, si = b.alloca(F64), b.alloca(F64)
                b.store(ir.Constant(F64, 0.0), sr)
                b.store(ir.Constant(F64, 0.0), si)
                with for_range(b, i64(0), i64(n), name="j") as j:
                    t = b.mul(wrap(b.mul(j, k), n), i64(2))
                    wr, wi = ld(tw, t), ld(tw, b.add(t, i64(1)))
                    if inverse:
                        wi = b.fneg(wi)
                    xr = ld(line, b.mul(j, i64(2)))
                    xi = ld(line, b.add(b.mul(j, i64(2)), i64(1)))
                    b.store(b.fadd(b.load(sr), b.fsub(b.fmul(xr, wr), b.fmul(xi, wi))), sr)
                    b.store(b.fadd(b.load(si), b.fadd(b.fmul(xr, wi), b.fmul(xi, wr))), si)
                at = b.mul(b.add(base, b.mul(k, i64(inner))), i64(2))
                vr, vi = b.load(sr), b.load(si)
                if inverse:
                    vr, vi = b.fmul(vr, scale), b.fmul(vi, scale)
                b.store(vr, b.gep(pw, [at]))
                b.store(vi, b.gep(pw, [b.add(at, i64(1))]))

    first = rank - nl
    if kind in ("FFT", "IFFT", "IRFFT"):
        with for_range(b, i64(0), i64(2 * nwork), name="in") as i:
            b.store(ld(px, i), b.gep(pw, [i]))
        axes = range(first, rank) if kind != "IRFFT" else range(first, rank - 1)
        for ax in axes:
            axis_pass(ax, kind != "FFT")
    else:  # RFFT: the real transform of the last axis into the work array, then the rest
        n = lengths[-1]
        half = work[-1]
        tw = table(n)
        with for_range(b, i64(0), i64(nwork // half), name="line") as r, \
                for_range(b, i64(0), i64(half), name="k") as k:
            sr, si = b.alloca(F64), b.alloca(F64)
            b.store(ir.Constant(F64, 0.0), sr)
            b.store(ir.Constant(F64, 0.0), si)
            with for_range(b, i64(0), i64(n), name="j") as j:
                t = b.mul(wrap(b.mul(j, k), n), i64(2))
                xv = ld(px, b.add(b.mul(r, i64(n)), j))
                b.store(b.fadd(b.load(sr), b.fmul(xv, ld(tw, t))), sr)
                b.store(b.fadd(b.load(si), b.fmul(xv, ld(tw, b.add(t, i64(1))))), si)
            at = b.mul(b.add(b.mul(r, i64(half)), k), i64(2))
            b.store(b.load(sr), b.gep(pw, [at]))
            b.store(b.load(si), b.gep(pw, [b.add(at, i64(1))]))
        for ax in range(first, rank - 1):
            axis_pass(ax, False)
    if kind == "IRFFT":  # the Hermitian sum along the last axis, scaled by 1/n
        n = lengths[-1]
        half = work[-1]
        tw = table(n)
        with for_range(b, i64(0), i64(nwork // half), name="line") as r, \
                for_range(b, i64(0), i64(n), name="j") as j:
            s = b.alloca(F64)
            b.store(ir.Constant(F64, 0.0), s)
            with for_range(b, i64(0), i64(min(half, n // 2 + 1)), name="k") as k:
                t = b.mul(wrap(b.mul(j, k), n), i64(2))
                at = b.mul(b.add(b.mul(r, i64(half)), k), i64(2))
                xr, xi = ld(pw, at), ld(pw, b.add(at, i64(1)))
                term = b.fadd(b.fmul(xr, ld(tw, t)), b.fmul(xi, ld(tw, b.add(t, i64(1)))))
                edge = b.or_(b.icmp_signed("==", k, i64(0)),
                             b.icmp_signed("==", b.mul(k, i64(2)), i64(n)))
                w = b.select(edge, ir.Constant(F64, 1.0), ir.Constant(F64, 2.0))
                b.store(b.fadd(b.load(s), b.fmul(w, term)), s)
            v = b.fmul(b.load(s), ir.Constant(F64, 1.0 / n))
            v = b.fptrunc(v, out_part) if out_part == F32 else v
            b.store(v, b.gep(po, [b.add(b.mul(r, i64(n)), j)]))
    else:
        with for_range(b, i64(0), i64(2 * nwork), name="out") as i:
            v = b.load(b.gep(pw, [i]))
            b.store(b.fptrunc(v, out_part) if out_part == F32 else v, b.gep(po, [i]))
    b.ret_void()
    _hoist_allocas(fn)
    return fn, 16 * (nwork + maxn)


def _hoist_allocas(fn: ir.Function) -> None:
    """Allocas emitted inside loops moved to the entry block (one slot each, not one per
    trip), where SROA turns them into registers."""
    entry = fn.entry_basic_block
    for block in fn.blocks[1:]:
        for ins in [i for i in block.instructions if i.opname == "alloca"]:
            block.instructions.remove(ins)
            entry.instructions.insert(0, ins)
            ins.parent = entry


__all__ = ["emit_fft", "twiddles"]
