"""A row's last few columns as one masked vector, not a scalar loop (KernelEmitter's
`masked`).

Why: a row kernel over 10 classes (softmax of [N, 10] logits) ran each row as one 8-lane
vector and two scalar columns - a scalar exp and its horizontal sum per column - at 1.5-2x
XLA's time. With masked loads and stores (AVX-512's k-masks; AVX's vmaskmov for 4- and
8-byte elements) the last `live` < W columns are one vector whose dead lanes read nothing
and store nothing; what they compute is never seen: a row reduction takes the reducer's
identity there. Every op the kernels emit is total on any bits (integer division selects a
divisor of 1 for 0, float ops do not trap), so garbage in dead lanes is harmless.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import bf16_exact, target
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import has_lane, live_lanes
from xlapy.backends.cpu.llvm_util import I32, broadcast, intrinsic, sfx, type_bytes, zeros
from xlapy.ir import Instruction

I1 = ir.IntType(1)


def kernel_values(root: Instruction, leaves: dict[int, int]) -> Iterator[Instruction]:
    """The kernel's values: root's expression down to its leaves (those included)."""
    stack, seen = [root], set()
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        yield i
        if id(i) not in leaves:
            stack.extend(i.operands)


def masked_ok(root: Instruction, leaves: dict[int, int]) -> bool:
    """Whether the target has masked vector loads and stores of every element type the
    kernel's values hold: AVX2 for 4 and 8 bytes, AVX-512BW for narrower ones (AVX2 would
    split them into one branch per lane)."""
    t = target.current()
    for i in kernel_values(root, leaves):
        et = i.shape.element_type if i.shape.is_array else None
        if et is None or et.is_complex:
            return False
        size = type_bytes(ew.storage_type(et))
        if not (t.has("avx512bw") or (size in (4, 8) and t.has("avx2"))):
            return False
    return True


def row_width(cols: int, width: int, masked: bool) -> int:
    """The lanes of a row kernel whose rows (`cols` long) are shorter than a vector: the
    narrowest power of two that holds a row (masked), else the widest that fits in one."""
    if not width or cols >= width or cols < 3 or (cols < 4 and not masked):
        return width
    if masked:
        return 1 << (cols - 1).bit_length()
    return 1 << (cols.bit_length() - 1)


def mask(width: int, live: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(I1, width), [1] * live + [0] * (width - live))


def access(b: ir.IRBuilder, vp: ir.Value, align: int, live: int,
           value: ir.Value | None = None) -> ir.Value | None:
    """A masked load from (store to) vector pointer vp: lanes [0, live) only. Without
    AVX-512 a store is power-of-two pieces: AVX's vmaskmov store is microcode on AMD
    (layer norm over 5 columns, x86-64-v3 code on Zen 4: 1.09 ms masked, 0.79 without)."""
    vt = vp.type.pointee
    m = mask(vt.count, live)
    name = f"{sfx(vt)}.p0{sfx(vt)}"
    if value is None:
        return intrinsic(b, f"llvm.masked.load.{name}", vt, [vp, I32(align), m, zeros(vt)])
    if target.current().has("avx512f"):
        return intrinsic(b, f"llvm.masked.store.{name}", ir.VoidType(),
                         [value, vp, I32(align), m])
    p = b.bitcast(vp, vt.element.as_pointer())
    done = 0
    for k in reversed(range(live.bit_length())):
        n = 1 << k
        if live & n:
            q = b.gep(p, [ir.Constant(I32, done)], inbounds=True)
            if n == 1:
                b.store(b.extract_element(value, ir.Constant(I32, done)), q, align=align)
            else:
                part = b.shuffle_vector(value, value, ir.Constant(
                    ir.VectorType(I32, n), list(range(done, done + n))))
                b.store(part, b.bitcast(q, part.type.as_pointer()), align=align)
            done += n
    return None


def lane_access(b: ir.IRBuilder, p: ir.Value, idx: Sequence[Any], width: int,
                value: ir.Value | None = None) -> ir.Value:
    """Load from (or store `value` to) element pointer p: `width` lanes if idx holds a Lane
    (a masked tail's live ones only)."""
    if has_lane(idx):
        vt = ir.VectorType(p.type.pointee, width)
        align = type_bytes(p.type.pointee)
        vp = b.bitcast(p, vt.as_pointer())
        if live := live_lanes(idx):
            return access(b, vp, align, live, None if value is None else
                          broadcast(b, value, width))
        if value is None:
            return b.load(vp, align=align)
        return b.store(broadcast(b, value, width), vp, align=align)
    if isinstance(p.type.pointee, ir.LiteralStructType):  # a complex value: part by part
        return _parts_access(b, p, value)
    return b.load(p) if value is None else b.store(value, p)


def _parts_access(b: ir.IRBuilder, p: ir.Value, value: ir.Value | None) -> ir.Value:
    """A complex {re, im} element loaded (stored) as its two parts: instcombine splits a
    load of the struct into part loads without its llvm.access.group, which then kept the
    vectorizer checking a parallel loop's pointers for overlap (llvm_util.for_range)."""
    st = p.type.pointee
    q = b.bitcast(p, st.elements[0].as_pointer())
    at = [q, b.gep(q, [ir.Constant(I32, 1)], inbounds=True)]
    if value is None:
        out = ir.Constant(st, None)
        for k, r in enumerate(at):
            out = b.insert_value(out, b.load(r), k)
        return out
    for k, r in enumerate(at):
        last = b.store(b.extract_value(value, k), r)
    return last


def live_only(b: ir.IRBuilder, v: ir.Value, live: int, ident: ir.Constant) -> ir.Value:
    """v in lanes [0, live), `ident` (a reducer's identity) in the rest; v's marks kept
    (the identity is flushed and a bf16)."""
    out = b.select(mask(v.type.count, live), v, ident)
    if ew._isfloat(v) and ew.is_flushed(v):
        ew.mark_flushed(out)
    if bf16_exact.is_bf16(v):
        bf16_exact.mark(out)
    return out


__all__ = ["access", "kernel_values", "live_only", "masked_ok", "row_width"]
