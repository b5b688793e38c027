"""The element-wise emission table: (opcode, element type) -> LLVM IR, parallel to
xlapy/ops/elementwise.py and exact to it (the interpreter is XLA CPU's semantics).

Values travel in their compute type: f32 for bf16/f16 (rounded back to the storage type after
every op, as the interpreter rounds each op's result), i1 for pred, iN for integers. Kernels
run with MXCSR FTZ set (fp_env.set_ftz_daz), so results flush as on XLA CPU; float inputs
of every non-bit-level op are flushed explicitly (`flush`), which is XLA CPU's DAZ without
letting DAZ touch selects and copies. In the `ieee` denormal mode (xlapy.denormal) kernels
clear FTZ/DAZ and `flush` is the identity.

f8 types (and the MX f4e2m1fn, f6e2m3fn, f6e3m2fn: `F8`) compute in f32 like bf16/f16 and
s2/s4/u2/u4 as i2/i4, each stored in one byte (elementwise_bits.py). Complex values
(c64/c128, not in `SUPPORTED`) are {re, im} structs whose ops elementwise_complex.py emits
(the hooks here give their types and constants). f8e8m0fnu and (op, type) pairs missing from
the tables are not compiled: the backend runs those instructions through the interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import bf16_convert as _bf16
from xlapy.backends.cpu import bf16_exact as _exact
from xlapy.backends.cpu import flush_ftz as _ftz
from xlapy.backends.cpu import int_division as _idiv
from xlapy.backends.cpu import native_half as _half
from xlapy.backends.cpu import stored_bits as _stored
from xlapy.backends.cpu.flush_avx512 import is_denormal
from xlapy.backends.cpu.llvm_util import (
    F16,
    F32,
    F64,
    I1,
    I8,
    I16,
    I32,
    I64,
    elem,
    intrinsic,
    like,
    scalar_maximum,
    sfx,
    splat,
)
from xlapy.backends.cpu.math_poly import Math
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.types import ElementType as ET

#: 8-bit and MX floats (f32 compute, one byte stored; elementwise_bits.py) and sub-byte ints
#: (iN compute, one byte stored).
F8 = frozenset({ET.F8E4M3FN, ET.F8E5M2, ET.F8E4M3FNUZ, ET.F8E5M2FNUZ, ET.F8E4M3B11FNUZ,
                ET.F8E4M3, ET.F8E3M4, ET.F4E2M1FN, ET.F6E2M3FN, ET.F6E3M2FN})
SMALL_INTS = frozenset({ET.S2, ET.S4, ET.U2, ET.U4})
FLOATS = frozenset({ET.BF16, ET.F16, ET.F32, ET.F64}) | F8
INTS = frozenset({ET.S8, ET.S16, ET.S32, ET.S64, ET.U8, ET.U16, ET.U32, ET.U64}) | SMALL_INTS
SUPPORTED = FLOATS | INTS | {ET.PRED}
#: Types computed in f32 and rounded back to their storage after every op.
_NARROW = frozenset({ET.BF16, ET.F16}) | F8


def storage_type(t: ET) -> ir.Type:
    """The IR type of one element in memory."""
    if t in _cx.COMPLEX:
        return _cx.struct_type(t)
    if t is ET.PRED or t in F8 or t in SMALL_INTS:
        return I8
    if t is ET.BF16:
        return I16
    if t is ET.F16:
        return F16
    if t is ET.F32:
        return F32
    if t is ET.F64:
        return F64
    return ir.IntType(t.bits)


def compute_type(t: ET) -> ir.Type:
    if t in _cx.COMPLEX:
        return _cx.struct_type(t)
    if t is ET.PRED:
        return I1
    if t in _NARROW or t is ET.F32:
        return F32
    if t is ET.F64:
        return F64
    return ir.IntType(t.bits)


def from_storage(b: ir.IRBuilder, v: ir.Value, t: ET) -> ir.Value:
    if t is ET.PRED:
        return b.icmp_unsigned("!=", v, splat(v.type, 0))
    if t in F8:
        return _stored.tag(_bits.f8_decode(b, v, t), v, t)
    if t in SMALL_INTS:
        return b.trunc(v, like(v.type, ir.IntType(t.bits)))
    if t is ET.BF16:
        wide = like(v.type, I32)
        return _stored.tag(b.bitcast(b.shl(b.zext(v, wide), splat(wide, 16)),
                                     like(v.type, F32)), v, t)
    if t is ET.F16:
        return b.fpext(v, like(v.type, F32))
    return v


def to_storage(b: ir.IRBuilder, v: ir.Value, t: ET) -> ir.Value:
    if t is ET.PRED or t in SMALL_INTS:
        return b.zext(v, like(v.type, I8))
    if t is ET.BF16 or t in F8:  # (a move stores the bits it loaded: stored_bits.py)
        moved = _stored.bits(b, v, t)
        return moved if moved is not None else _bits.f8_encode(b, v, t) if t in F8 else \
            _bf16_bits(b, v)
    if t is ET.F16:
        return b.fptrunc(v, like(v.type, F16))
    return v


def _bf16_bits(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """f32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN (ml_dtypes' rule)."""
    if not _exact.is_bf16(v):
        if _bf16.usable(v, is_flushed(v)):  # one vcvtneps2bf16, same bits (bf16_convert.py)
            return _bf16.bits(b, v)
        if _exact.is_bf16(v, signaling=True):  # a bf16 once a NaN is quiet
            v = _exact.quiet(b, v)
    it = like(v.type, I32)
    out = bits = b.bitcast(v, it)
    if not _exact.is_bf16(v):  # (else a bf16: its upper half, bf16_exact.py)
        lsb = b.and_(b.lshr(bits, splat(it, 16)), splat(it, 1))
        out = b.add(b.add(bits, splat(it, 0x7FFF)), lsb)
        if not _exact.quiet_clean(v):  # (else a NaN is quiet, its low half zero: as it is)
            out = b.select(b.fcmp_unordered("uno", v, v), b.or_(bits, splat(it, 0x400000)),
                           out)
    return b.trunc(b.lshr(out, splat(it, 16)), like(v.type, I16))


def round_to(b: ir.IRBuilder, v: ir.Value, t: ET) -> ir.Value:
    """A compute value rounded to `t` and back (the per-op rounding of bf16/f16/f8)."""
    if t is ET.BF16:
        return _bf16_round(b, v)
    if t in _NARROW:
        return from_storage(b, to_storage(b, v, t), t)
    return v


def _bf16_round(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """from_storage(to_storage(v)) for bf16 in 32-bit lanes: the rounded bits masked in
    place, not narrowed and widened back (lanes.py: a bf16 softmax rounds 4 times a value)."""
    if _exact.is_bf16(v):  # a bf16 already: rounding is the identity (bf16_exact.py)
        return _exact.mark(v)  # (known at once by the next op: chains outgrow the search)
    if _exact.is_bf16(v, signaling=True):  # ... but for a NaN's quiet bit
        return mark_flushed(_exact.quiet(b, v)) if is_flushed(v) else _exact.quiet(b, v)
    it = like(v.type, I32)
    if _bf16.usable(v, is_flushed(v)):  # one vcvtneps2bf16, widened back (bf16_convert.py)
        wide = b.shl(b.zext(_bf16.bits(b, v), it), splat(it, 16))
        return _exact.mark(mark_flushed(b.bitcast(wide, v.type)))
    bits = b.bitcast(v, it)
    lsb = b.and_(b.lshr(bits, splat(it, 16)), splat(it, 1))
    rounded = b.add(b.add(bits, splat(it, 0x7FFF)), lsb)
    out = rounded if _exact.quiet_clean(v) else b.select(  # (quiet_clean: bf16_exact.py)
        b.fcmp_unordered("uno", v, v), b.or_(bits, splat(it, 0x400000)), rounded)
    res = _exact.mark(b.bitcast(b.and_(out, splat(it, -65536)), v.type))
    # (Rounding makes no denormal of a normal, 2^-126 being a bf16: no flush needed after.)
    return mark_flushed(res) if is_flushed(v) else res


def constant(v: Any, t: ET) -> ir.Constant:
    """A compute-type IR constant for a Python/numpy scalar of element type `t`."""
    if t in _cx.COMPLEX:
        return _cx.constant(v, t)
    ct = compute_type(t)
    if t is ET.PRED:
        return ir.Constant(I1, int(bool(v)))
    if t.is_float:
        return ir.Constant(ct, float(v))
    return ir.Constant(ct, int(v) & ((1 << t.bits) - 1))


# ---- helpers -----------------------------------------------------------------------------------
#: Instructions whose float result is never denormal inside a kernel (FTZ is set, and the
#: functions' "denormal-fp-math" output mode makes LLVM's constant folding flush alike).
_FTZ_OPS = frozenset({"fadd", "fsub", "fmul", "fdiv", "frem", "sitofp", "uitofp", "fpext",
                      "fptrunc"})
_FTZ_CALLS = ("llvm.fma.", "llvm.sqrt.", "llvm.floor.", "llvm.ceil.", "llvm.rint.",
              "llvm.roundeven.", "llvm.round.", "llvm.trunc.", "llvm.nearbyint.",
              "llvm.x86.avx512.mask.scalef.")  # vscalefps flushes tiny results under FTZ
#: Calls whose result is one of their float arguments (or its magnitude, or +-0).
_PASS_CALLS = ("llvm.maximum.", "llvm.minimum.", "llvm.maxnum.", "llvm.minnum.", "llvm.fabs.")


def is_flushed(x: ir.Value, depth: int = 6) -> bool:
    """Whether `x` is known not to be a denormal, so `flush(x)` would be a no-op.

    Results of float arithmetic inside a kernel are flushed by FTZ, so only loaded values,
    bit-level ops on them (negate, abs, bitcasts) and selects of such need an explicit flush:
    skipping the rest halves the work of element-wise chains (every op flushed its inputs)."""
    if isinstance(x, ir.Constant):
        if x.constant is None or x.constant is ir.Undefined:
            return True  # zeroinitializer, undef
        vs = x.constant if isinstance(x.type, ir.VectorType) else [x]
        tiny = 2.0 ** -1022 if elem(x.type) == F64 else 2.0 ** -126
        for c in vs:
            v = c.constant if isinstance(c, ir.Constant) else c
            if v is None or v is ir.Undefined:
                continue
            if not isinstance(v, float) or 0.0 < abs(v) < tiny:
                return False
        return True
    if getattr(x, "_xlapy_flushed", False):
        return True
    if depth <= 0 or not isinstance(x, ir.Instruction):
        return False
    op = x.opname
    if op in _FTZ_OPS:
        return True
    if op in ("fneg", "extractelement"):
        return is_flushed(x.operands[0], depth - 1)
    if op in ("shufflevector", "insertelement"):  # lanes moved or broadcast
        return is_flushed(x.operands[0], depth - 1) and is_flushed(x.operands[1], depth - 1)
    if op == "select":
        return is_flushed(x.operands[1], depth - 1) and is_flushed(x.operands[2], depth - 1)
    if op == "bitcast":
        # select() on integer bit patterns: bitcast(select(p, bitcast(a), bitcast(b))).
        src = x.operands[0]
        if elem(x.type) not in (F32, F64) or not isinstance(src, ir.Instruction) or \
                src.opname != "select":
            return False
        return all(isinstance(v, ir.Instruction) and v.opname == "bitcast"
                   and v.operands[0].type == x.type and is_flushed(v.operands[0], depth - 1)
                   for v in src.operands[1:])
    if op == "call":
        name = getattr(x.callee, "name", "")
        if name.startswith(_FTZ_CALLS):
            return True
        if name.startswith(_PASS_CALLS):
            return all(is_flushed(a, depth - 1) for a in x.args if a.type == x.type)
        if name.startswith("llvm.copysign."):
            return is_flushed(x.args[0], depth - 1)
    return False


def mark_flushed(x: ir.Value) -> ir.Value:
    """Record that `x` holds no denormal (a load of values stored flushed, a flush)."""
    x._xlapy_flushed = True  # type: ignore[attr-defined]
    return x


def flush(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Denormal to signed zero, whatever the MXCSR state (compare on |x|, keep the sign);
    `x` itself in the `ieee` denormal mode (xlapy.denormal)."""
    if is_flushed(x) or not denormal.flushing():
        return x
    # Once per value and basic block (a leaf read by many ops of a chain, or a flushed value
    # flushed again): smaller IR, less compile time (200 tiny ops: 4 ops per use before).
    blk = b.block
    memo = blk.__dict__.setdefault("_xlapy_flushed", {})
    hit = memo.get(id(x))
    if hit is not None and hit[0] is x:
        return hit[1]
    t = x.type
    tiny = 2.0 ** -1022 if elem(t) == F64 else 2.0 ** -126
    zero = intrinsic(b, f"llvm.copysign.{sfx(t)}", t, [splat(t, 0.0), x])
    tiny_lanes = is_denormal(b, x)  # (AVX-512: one vfpclass, flush_avx512.py)
    if tiny_lanes is None:
        ax = intrinsic(b, f"llvm.fabs.{sfx(t)}", t, [x])
        tiny_lanes = b.fcmp_ordered("<", ax, splat(t, tiny))
    out = mark_flushed(b.select(tiny_lanes, zero, x))
    if b.block is blk:
        memo[id(x)] = (x, out)
        memo[id(out)] = (out, out)
    return out


def _fsfx(x: ir.Value) -> str:
    return sfx(x.type)


def _isfloat(x: ir.Value) -> bool:
    return elem(x.type) in (F32, F64)


def _ones(x: ir.Value) -> ir.Constant:
    return splat(x.type, -1)


def _smin(t: ET) -> int:
    return 1 << (t.bits - 1)


# ---- binary ops ----------------------------------------------------------------------------------
Emit = Callable[[ir.IRBuilder, Sequence[ir.Value], ET], ir.Value]


def _add(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x, y = a
    if t is ET.PRED:
        return b.or_(x, y)
    return b.fadd(x, y) if _isfloat(x) else b.add(x, y)


def _sub(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x, y = a
    return b.fsub(x, y) if _isfloat(x) else b.sub(x, y)


def _mul(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x, y = a
    if t is ET.PRED:
        return b.and_(x, y)
    return b.fmul(x, y) if _isfloat(x) else b.mul(x, y)


def _div(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x, y = a
    if _isfloat(x):
        return b.fdiv(x, y)
    zero = b.icmp_unsigned("==", y, splat(y.type, 0))
    if t.is_signed:
        ovf = b.and_(b.icmp_signed("==", x, splat(x.type, _smin(t))),
                     b.icmp_signed("==", y, _ones(y)))
        safe = b.select(b.or_(zero, ovf), splat(y.type, 1), y)
        q = _idiv.quotient(b, x, safe, True, y)
        return b.select(zero, _ones(x), b.select(ovf, x, q))
    safe = b.select(zero, splat(y.type, 1), y)
    return b.select(zero, _ones(x), _idiv.quotient(b, x, safe, False, y))


def _rem(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x, y = a
    zero = b.icmp_unsigned("==", y, splat(y.type, 0))
    if t.is_signed:
        m1 = b.icmp_signed("==", y, _ones(y))
        safe = b.select(b.or_(zero, m1), splat(y.type, 1), y)
        return b.select(zero, x, _idiv.remainder(b, x, safe, True, y))
    safe = b.select(zero, splat(y.type, 1), y)
    return b.select(zero, x, _idiv.remainder(b, x, safe, False, y))


def constant_lanes(c: ir.Value) -> list[Any] | None:
    """The Python values of constant `c`'s lanes (one for a scalar); None where `c` is no
    constant or has no values (zeroinitializer, undef)."""
    if not isinstance(c, ir.Constant) or c.constant is None or c.constant is ir.Undefined:
        return None
    vs = c.constant if isinstance(c.type, ir.VectorType) else [c.constant]
    return [e.constant if isinstance(e, ir.Constant) else e for e in vs]


def _all_lanes(c: ir.Value, v: float) -> bool:
    """`c` is a constant holding `v` in every lane."""
    vs = constant_lanes(c)
    return vs is not None and all(e == v for e in vs)


def _maxmin(is_max: bool) -> Emit:
    def emit(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
        x, y = a
        if t is ET.PRED:
            return b.or_(x, y) if is_max else b.and_(x, y)
        if _isfloat(x):
            for c, v in ((x, y), (y, x)):  # max(-inf, v) = v (jax's softmax: max(-inf, row max))
                if is_flushed(v) and _all_lanes(c, float("-inf") if is_max else float("inf")):
                    return v
            if x.type in (F32, F64):  # (a scalar)
                return scalar_maximum(b, flush(b, x), flush(b, y), is_max)
            name = "maximum" if is_max else "minimum"
            return intrinsic(b, f"llvm.{name}.{_fsfx(x)}", x.type, [flush(b, x), flush(b, y)])
        op = ">" if is_max else "<"
        cmp = b.icmp_signed(op, x, y) if t.is_signed else b.icmp_unsigned(op, x, y)
        return b.select(cmp, x, y)

    return emit


def _shift(kind: str) -> Emit:
    def emit(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
        x, s = a
        n = splat(x.type, t.bits)
        big = b.icmp_unsigned(">=", s, n)
        safe = b.select(big, splat(x.type, 0), s)
        if kind == "shl":
            return b.select(big, splat(x.type, 0), b.shl(x, safe))
        if kind == "srl":
            return b.select(big, splat(x.type, 0), b.lshr(x, safe))
        return b.ashr(x, b.select(big, splat(x.type, t.bits - 1), s))

    return emit


def _bitwise(name: str) -> Emit:
    def emit(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
        return getattr(b, name)(a[0], a[1])

    return emit


# ---- unary ops -----------------------------------------------------------------------------------
def _math(fn: str) -> Emit:
    def emit(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
        return getattr(Math(b, a[0].type), fn)(flush(b, a[0]))

    return emit


def _fintr(name: str, flush_in: bool = True) -> Emit:
    def emit(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
        x = flush(b, a[0]) if flush_in else a[0]
        return intrinsic(b, f"llvm.{name}.{_fsfx(x)}", x.type, [x])

    return emit


def _abs(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x = a[0]
    if _isfloat(x):
        return intrinsic(b, f"llvm.fabs.{_fsfx(x)}", x.type, [x])
    neg = b.icmp_signed("<", x, splat(x.type, 0))
    return b.select(neg, b.sub(splat(x.type, 0), x), x)


def _neg(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x = a[0]
    return b.fneg(x) if _isfloat(x) else b.sub(splat(x.type, 0), x)


def _sign(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x = a[0]
    if _isfloat(x):
        x = flush(b, x)
        one = intrinsic(b, f"llvm.copysign.{_fsfx(x)}", x.type, [splat(x.type, 1.0), x])
        keep = b.fcmp_unordered("ueq", x, splat(x.type, 0.0))  # zero or NaN
        return b.select(keep, x, one)
    pos = b.icmp_signed(">", x, splat(x.type, 0))
    neg = b.icmp_signed("<", x, splat(x.type, 0))
    return b.select(pos, splat(x.type, 1), b.select(neg, _ones(x), splat(x.type, 0)))


def _rsqrt(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x = a[0]
    s = intrinsic(b, f"llvm.sqrt.{_fsfx(x)}", x.type, [x])
    return b.fdiv(splat(x.type, 1.0), s)


def _is_finite(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x = a[0]
    ax = intrinsic(b, f"llvm.fabs.{_fsfx(x)}", x.type, [x])
    return b.fcmp_ordered("<", ax, splat(x.type, math.inf))


def _not(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    return b.xor(a[0], splat(a[0].type, -1 if t is not ET.PRED else 1))


def _popcnt(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    """s2/s4: the bits of the 8-bit sign extension, wrapped (XLA CPU's, the interpreter's)."""
    v = a[0]
    if t in (ET.S2, ET.S4):
        w = b.sext(v, like(v.type, I8))
        return b.trunc(intrinsic(b, f"llvm.ctpop.{sfx(w.type)}", w.type, [w]), v.type)
    return intrinsic(b, f"llvm.ctpop.{sfx(v.type)}", v.type, [v])


def _clz(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    return intrinsic(b, f"llvm.ctlz.{sfx(a[0].type)}", a[0].type, [a[0], ir.Constant(I1, 0)])


_F = FLOATS
_F32 = frozenset({ET.F32, ET.F16, ET.BF16})  # (computed in f32)
_I = INTS
_SI = frozenset(t for t in INTS if t.is_signed)
_P = frozenset({ET.PRED})

#: opcode -> (element types compiled, emitter). The result type is the op's inferred type.
TABLE: dict[str, tuple[frozenset[ET], Emit]] = {
    "add": (_F | _I | _P, _add),
    "subtract": (_F | _I, _sub),
    "multiply": (_F | _I | _P, _mul),
    "divide": (_F | _I, _div),
    "remainder": (_I, _rem),
    "maximum": (_F | _I | _P, _maxmin(True)),
    "minimum": (_F | _I | _P, _maxmin(False)),
    "shift_left": (_I, _shift("shl")),
    "shift_right_logical": (_I, _shift("srl")),
    "shift_right_arithmetic": (_I, _shift("sra")),
    "and": (_I | _P, _bitwise("and_")),
    "or": (_I | _P, _bitwise("or_")),
    "xor": (_I | _P, _bitwise("xor")),
    "abs": (_F | _SI, _abs),
    "negate": (_F | _I, _neg),
    "sign": (_F | _SI, _sign),
    "sqrt": (_F, _fintr("sqrt", flush_in=False)),
    "rsqrt": (_F, _rsqrt),
    "floor": (_F, _fintr("floor")),
    "ceil": (_F, _fintr("ceil")),
    "round_nearest_even": (_F, _fintr("roundeven")),
    "round_nearest_afz": (_F, _fintr("round")),
    "is_finite": (_F, _is_finite),
    "not": (_I | _P, _not),
    # s2/s4: the interpreter counts the bits of the 8-bit sign extension (XLA: of the 4
    # bits); left to it until the two agree.
    "popcnt": (_I, _popcnt),
    "count_leading_zeros": (_I, _clz),
    "exponential": (_F, _math("exp")),
    "log": (_F, _math("log")),
    "log_plus_one": (_F, _math("log1p")),
    "exponential_minus_one": (_F, _math("expm1")),
    "tanh": (_F, _math("tanh")),
    "logistic": (_F, _math("logistic")),
    "erf": (_F, _math("erf")),
    "chlo.erfc": (_F32, _math("erfc")),  # (f64: chlo_special.py's HLO)
    "chlo.erf_inv": (_F32, _math("erf_inv")),  # (f64: chlo_lowering.py's HLO)
    "sine": (_F, _math("sin")),
    "cosine": (_F, _math("cos")),
    "tan": (_F, _math("tan")),
    "real": (_F, lambda b, a, t: a[0]),  # of a real value: itself
    "imag": (_F, lambda b, a, t: splat(a[0].type, 0.0)),  # of a real value: +0
}

#: Ops on the stored bits: their float inputs are not flushed (the interpreter's `raw` rows).
RAW = frozenset({"abs", "negate", "is_finite", "real", "imag"})

#: Ops whose result is approximate (polynomials): compared with an ulp bound, not bit-exact.
INEXACT = frozenset({"exponential", "log", "log_plus_one", "exponential_minus_one", "tanh",
                     "logistic", "erf", "chlo.erfc", "chlo.erf_inv", "sine", "cosine",
                     "tan"})


def native_chlo(i: Any) -> bool:
    """A chlo op the kernels compute themselves, which the chlo lowering leaves as it is
    (passes/chlo_lowering.py: its HLO for erfc ran exact GELU at 1.4x XLA's time)."""
    return i.opcode.startswith("chlo.") and bool(i.operands) and \
        supports(i.opcode, i.operands[0].shape.element_type)


def supports(opcode: str, t: ET) -> bool:
    if t in _cx.COMPLEX:
        return opcode in _cx.REDUCERS  # (other complex ops: elementwise_complex.fusible)
    row = TABLE.get(opcode)
    return row is not None and t in row[0] or _libm.supports(opcode, t)


def emit(b: ir.IRBuilder, opcode: str, args: Sequence[ir.Value], t: ET, out: ET) -> ir.Value:
    """The op on compute values of operand type `t`, rounded to the result type `out`."""
    if t in _cx.COMPLEX:
        return _cx.binary(b, opcode, args)
    row = TABLE.get(opcode)
    if row is None or t not in row[0]:
        return _libm.emit(b, opcode, args, t, out)
    _, fn = row
    if opcode not in RAW and t.is_float:
        args = [a if _ftz.scaled_by_small(opcode, list(args), k) else  # (kernels:
                _ftz.operand(b, a, opcode, flush) for k, a in enumerate(args)]  # one multiply)
    half = _half.emit(b, opcode, args, t, out, fn)
    return half if half is not None else round_to(b, fn(b, args, t), out)


# ---- compare, select (convert: elementwise_convert.py) ----------------------------------------
_FCMP = {ComparisonDirection.EQ: ("oeq", "=="), ComparisonDirection.NE: ("une", "!="),
         ComparisonDirection.GE: ("oge", ">="), ComparisonDirection.GT: ("ogt", ">"),
         ComparisonDirection.LE: ("ole", "<="), ComparisonDirection.LT: ("olt", "<")}


def select(b: ir.IRBuilder, pred: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    """A bit-level select: on integer bit patterns so LLVM cannot turn `select(x < y, x, y)`
    into minps/maxps, which flush denormals under DAZ (the interpreter's select does not)."""
    if not _isfloat(x):
        return b.select(pred, x, y)
    it = like(x.type, I64 if elem(x.type) == F64 else I32)
    return b.bitcast(b.select(pred, b.bitcast(x, it), b.bitcast(y, it)), x.type)


def compare(b: ir.IRBuilder, x: ir.Value, y: ir.Value, t: ET, attrs: Any) -> ir.Value:
    d = attrs.comparison_direction
    fop, iop = _FCMP[d]
    if t.is_float and attrs.compare_type is ComparisonType.TOTALORDER:
        return b.icmp_signed(iop, _total_key(b, x, t), _total_key(b, y, t))
    if _isfloat(x):
        x, y = flush(b, x), flush(b, y)
        if fop == "une":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(iop, x, y)
    if t.is_signed:
        return b.icmp_signed(iop, x, y)
    return b.icmp_unsigned(iop, x, y)


def _total_key(b: ir.IRBuilder, x: ir.Value, t: ET) -> ir.Value:
    """Signed keys ordered as IEEE totalOrder (on the stored bits, so no flushing)."""
    st = like(x.type, ir.IntType(t.bits))
    bits = b.bitcast(to_storage(b, x, t), st) if t is not ET.BF16 else to_storage(b, x, t)
    sign = b.ashr(bits, splat(st, t.bits - 1))
    return b.xor(bits, b.and_(sign, splat(st, (1 << (t.bits - 1)) - 1)))


from xlapy.backends.cpu import elementwise_bits as _bits  # noqa: E402  (they build on this module)
from xlapy.backends.cpu import elementwise_complex as _cx  # noqa: E402
from xlapy.backends.cpu import elementwise_libm as _libm  # noqa: E402
