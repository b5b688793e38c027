"""The functions compiled code may call that are not in the code itself: every one is defined
here in LLVM IR or bound to an address xlapy looks up by name, never left to whatever the
process happens to have loaded.

LLVM lowers some operations to calls when the target has no instruction for them: half
conversions without F16C / AVX512-FP16 (`fptrunc double to half` is `__truncdfhf2` on every
x86 CPU without AVX512-FP16, e.g. AMD Zen), bfloat16 conversions without AVX512-BF16,
128-bit division, `frem` (fmod), `llvm.fma` without FMA (x86-64-v2), rounding without SSE4.1,
memcpy/memset for copy loops. The compiler-rt builtins are written here in IR, integer-only
(so MXCSR's flush modes never touch them) and exactly rounded; libc/libm functions are
bound to their addresses in libc/libm, looked up by name. One runtime library is linked per
target into the process's LLJIT; every kernel library links against it alone (no lookup in
the process). `SYMBOLS` is what the libcall test allows in an object's undefined symbols.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

from llvmlite import ir

I1 = ir.IntType(1)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I128 = ir.IntType(128)

class _BFloat(ir.types._BaseFloatType):  # llvmlite has no bfloat type
    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"


_BFloat._create_instance()


#: IEEE binary formats: (LLVM type, exponent bits, mantissa bits).
_FORMATS: dict[str, tuple[Callable[[], ir.Type], int, int]] = {
    "hf": (ir.HalfType, 5, 10),
    "bf": (_BFloat, 8, 7),
    "sf": (ir.FloatType, 8, 23),
    "df": (ir.DoubleType, 11, 52),
}
#: compiler-rt conversions defined here: name -> (from, to).
CONVERSIONS = {
    "__truncsfhf2": ("sf", "hf"), "__truncdfhf2": ("df", "hf"),
    "__truncsfbf2": ("sf", "bf"), "__truncdfbf2": ("df", "bf"),
    "__extendhfsf2": ("hf", "sf"), "__extendhfdf2": ("hf", "df"),
    "__extendbfsf2": ("bf", "sf"),
}
#: 128-bit division and remainder defined here.
DIVISIONS = ("__udivti3", "__umodti3", "__divti3", "__modti3")
#: fmod on the bits (integer-only, so exact whatever MXCSR's flush modes; glibc's fmod
#: multiplies a subnormal result by one, which FTZ flushes): name -> format.
FMODS = {"xlapy_fmodf": "sf", "xlapy_fmod": "df"}
#: libc / libm functions bound by address (LLVM's libcalls and what the drivers call).
#: sincos / sincosf: LLVM's x86 backend joins sin(x) and cos(x) into one call; glibc's give
#: the bits of sin and cos (all 2^32 floats compared, and 4e7 doubles).
LIBC = ("memcpy", "memmove", "memset", "syscall")
LIBM = tuple(f + s for f in ("fmod", "fma", "floor", "ceil", "trunc", "round", "rint",
                             "nearbyint", "roundeven", "sqrt", "exp", "exp2", "exp10", "log",
                             "log2", "log10", "pow", "sin", "cos", "sincos", "tan", "ldexp",
                             "frexp",
                             "fmin", "fmax", "cbrt", "atan2", "hypot", "expm1", "log1p",
                             "sinh", "cosh", "tanh", "asin", "acos", "atan", "erf")
             for s in ("", "f")) + \
    tuple(f + s for f in ("cexp", "clog", "csqrt", "ctanh", "cpow", "csin", "ccos",
                          "ctan") for s in ("", "f"))  # C99 complex
DEFINED = tuple(CONVERSIONS) + DIVISIONS + tuple(FMODS)
#: Every symbol the runtime library provides.
SYMBOLS = frozenset(DEFINED + LIBC + LIBM)


def module(triple: str) -> ir.Module:
    """The runtime library's IR for a target triple."""
    mod = ir.Module(name="xlapy_rt")
    mod.triple = triple
    for name, (src, dst) in CONVERSIONS.items():
        _conversion(mod, name, src, dst)
    _divisions(mod)
    for name, fmt in FMODS.items():
        _fmod(mod, name, fmt)
    return mod


# ---- float conversions -------------------------------------------------------------------------
def _conversion(mod: ir.Module, name: str, src: str, dst: str) -> None:
    st, ein, min_ = _FORMATS[src]
    dt, eout, mout = _FORMATS[dst]
    n, m = 1 + ein + min_, 1 + eout + mout
    fn = ir.Function(mod, ir.FunctionType(dt(), [st()]), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x = b.bitcast(fn.args[0], ir.IntType(n))
    if n > m:
        bits = narrow(b, x, ein, min_, eout, mout)
    else:
        bits = widen(b, x, ein, min_, eout, mout)
    b.ret(b.bitcast(bits, dt()))


def narrow(b: ir.IRBuilder, x: ir.Value, ein: int, min_: int, eout: int, mout: int
           ) -> ir.Value:
    """IEEE bits `x` (1 + ein + min_ bits) rounded to nearest even into 1 + eout + mout bits.
    NaN stays a quiet NaN with the top payload bits; overflow gives inf (the rounding carry
    runs into the exponent); tiny values round into the output's subnormals or to zero."""
    n, m = 1 + ein + min_, 1 + eout + mout
    it, ot = ir.IntType(n), ir.IntType(m)

    def c(v: int) -> ir.Constant:
        return ir.Constant(it, v)

    bias_in, bias_out = (1 << (ein - 1)) - 1, (1 << (eout - 1)) - 1
    shift = min_ - mout
    ax = b.and_(x, c((1 << (n - 1)) - 1))
    sign = b.shl(b.trunc(b.lshr(x, c(n - 1)), ot), ir.Constant(ot, m - 1))
    inf_out = ((1 << eout) - 1) << mout
    # NaN: quiet, top payload bits kept.
    nan = b.or_(b.trunc(b.and_(b.lshr(ax, c(shift)), c((1 << mout) - 1)), ot),
                ir.Constant(ot, inf_out | (1 << (mout - 1))))
    is_nan = b.icmp_unsigned(">", ax, c(((1 << ein) - 1) << min_))
    # Normal outputs: rebias, round the dropped bits to nearest even, clamp to inf.
    rebias = (bias_in - bias_out) << min_
    r = b.sub(ax, c(rebias))
    odd = b.and_(b.lshr(r, c(shift)), c(1))
    q = b.lshr(b.add(b.add(r, c((1 << (shift - 1)) - 1)), odd), c(shift))
    norm = b.trunc(_umin(b, q, c(inf_out)), ot)
    # Subnormal outputs (or zero): the significand shifted by the exponent gap, rounded.
    e = b.lshr(ax, c(min_))
    has_lead = b.icmp_unsigned("!=", e, c(0))
    mant = b.or_(b.and_(ax, c((1 << min_) - 1)), b.shl(b.zext(has_lead, it), c(min_)))
    e_eff = b.select(has_lead, e, c(1))
    s = b.sub(c(bias_in + min_ + 1 - bias_out - mout), e_eff)
    s = _umin(b, s, c(min_ + 2))  # past that everything rounds to zero alike
    q2 = b.lshr(mant, s)
    rem = b.and_(mant, b.sub(b.shl(c(1), s), c(1)))
    half = b.shl(c(1), b.sub(s, c(1)))
    up = b.or_(b.icmp_unsigned(">", rem, half),
               b.and_(b.icmp_unsigned("==", rem, half),
                      b.icmp_unsigned("!=", b.and_(q2, c(1)), c(0))))
    sub = b.trunc(b.add(q2, b.zext(up, it)), ot)
    min_normal = (bias_in - bias_out + 1) << min_
    mag = b.select(b.icmp_unsigned(">=", ax, c(min_normal)), norm, sub)
    return b.or_(sign, b.select(is_nan, nan, mag))


def widen(b: ir.IRBuilder, x: ir.Value, ein: int, min_: int, eout: int, mout: int
          ) -> ir.Value:
    """IEEE bits `x` widened exactly into 1 + eout + mout bits (subnormals normalized, NaN
    quieted with its payload kept)."""
    n, m = 1 + ein + min_, 1 + eout + mout
    ot = ir.IntType(m)

    def c(v: int) -> ir.Constant:
        return ir.Constant(ot, v)

    bias_in, bias_out = (1 << (ein - 1)) - 1, (1 << (eout - 1)) - 1
    shift = mout - min_
    w = b.zext(x, ot)
    sign = b.shl(b.lshr(w, c(n - 1)), c(m - 1))
    e = b.and_(b.lshr(w, c(min_)), c((1 << ein) - 1))
    f = b.and_(w, c((1 << min_) - 1))
    normal = b.or_(b.shl(b.add(e, c(bias_out - bias_in)), c(mout)), b.shl(f, c(shift)))
    special = b.or_(c(((1 << eout) - 1) << mout),
                    b.shl(b.or_(f, b.select(b.icmp_unsigned("!=", f, c(0)),
                                            c(1 << (min_ - 1)), c(0))), c(shift)))
    if eout == ein:  # same exponent range (bf16 -> f32): a subnormal stays one
        sub = b.shl(f, c(shift))
    else:  # normalize so the leading one lands on the implicit bit
        lz = b.call(_ctlz(b.module, ot), [f, ir.Constant(I1, 0)])
        k = b.sub(lz, c(m - 1 - min_))  # shifts to bring the leading one to bit min_
        sub_e = b.sub(c(bias_out - bias_in + 1), k)
        sub = b.or_(b.shl(sub_e, c(mout)),
                    b.shl(b.and_(b.shl(f, k), c((1 << min_) - 1)), c(shift)))
    is_zero_e = b.icmp_unsigned("==", e, c(0))
    mag = b.select(b.icmp_unsigned("==", e, c((1 << ein) - 1)), special,
                   b.select(is_zero_e, b.select(b.icmp_unsigned("==", f, c(0)), c(0), sub),
                            normal))
    return b.or_(sign, mag)


def _umin(b: ir.IRBuilder, a: ir.Value, v: ir.Value) -> ir.Value:
    return b.select(b.icmp_unsigned("<", a, v), a, v)


def _ctlz(mod: ir.Module, t: ir.IntType) -> ir.Function:
    name = f"llvm.ctlz.i{t.width}"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(t, [t, I1]), name=name)
    return fn


# ---- 128-bit division --------------------------------------------------------------------------
def _divisions(mod: ir.Module) -> None:
    """Restoring shift-subtract division, 128 steps (rare: nothing xlapy emits divides i128;
    here so that whatever LLVM lowers to these calls links). Division by zero gives all ones
    for the quotient and the dividend for the remainder (undefined behaviour in C)."""
    udivmod = ir.Function(mod, ir.FunctionType(ir.LiteralStructType([I128, I128]),
                                               [I128, I128]), name="xlapy_udivmodti4")
    udivmod.linkage = "internal"
    b = ir.IRBuilder(udivmod.append_basic_block("entry"))
    n, d = udivmod.args
    loop = udivmod.append_basic_block("loop")
    done = udivmod.append_basic_block("done")
    entry = b.block
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I32)
    q = b.phi(I128)
    r = b.phi(I128)
    i.add_incoming(ir.Constant(I32, 127), entry)
    q.add_incoming(ir.Constant(I128, 0), entry)
    r.add_incoming(ir.Constant(I128, 0), entry)
    bit = b.and_(b.lshr(n, b.zext(i, I128)), ir.Constant(I128, 1))
    r2 = b.or_(b.shl(r, ir.Constant(I128, 1)), bit)
    ge = b.icmp_unsigned(">=", r2, d)
    r3 = b.select(ge, b.sub(r2, d), r2)
    q2 = b.or_(q, b.shl(b.zext(ge, I128), b.zext(i, I128)))
    i2 = b.sub(i, ir.Constant(I32, 1))
    i.add_incoming(i2, loop)
    q.add_incoming(q2, loop)
    r.add_incoming(r3, loop)
    b.cbranch(b.icmp_signed(">=", i2, ir.Constant(I32, 0)), loop, done)
    b.position_at_end(done)
    out = b.insert_value(ir.Constant(ir.LiteralStructType([I128, I128]), None), q2, 0)
    b.ret(b.insert_value(out, r3, 1))

    for name in DIVISIONS:
        fn = ir.Function(mod, ir.FunctionType(I128, [I128, I128]), name=name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        a, d = fn.args
        signed = not name.startswith("__u")
        if signed:
            neg_a = b.icmp_signed("<", a, ir.Constant(I128, 0))
            neg_d = b.icmp_signed("<", d, ir.Constant(I128, 0))
            a = b.select(neg_a, b.neg(a), a)
            d = b.select(neg_d, b.neg(d), d)
        qr = b.call(udivmod, [a, d])
        is_div = "div" in name
        v = b.extract_value(qr, 0 if is_div else 1)
        if signed:  # C: the quotient truncates toward zero, the remainder takes a's sign
            flip = b.xor(neg_a, neg_d) if is_div else neg_a
            v = b.select(flip, b.neg(v), v)
        b.ret(v)


# ---- fmod -------------------------------------------------------------------------------------
def _fmod(mod: ir.Module, name: str, fmt: str) -> None:
    """C fmod on IEEE bits (musl's algorithm): the remainder of |x| by |y| by shift-subtract
    on the significands, one step per exponent difference, with x's sign; exact, subnormal
    inputs and results kept. NaN for a NaN input, x = +-inf or y = +-0."""
    ft, e_bits, m_bits = _FORMATS[fmt]
    n = 1 + e_bits + m_bits
    it = ir.IntType(n)
    fn = ir.Function(mod, ir.FunctionType(ft(), [ft(), ft()]), name=name)
    blocks = {k: fn.append_basic_block(k) for k in
              ("entry", "nan", "small", "prep", "loop", "body", "last", "norm", "done", "zero")}
    b = ir.IRBuilder(blocks["entry"])

    def c(v: int) -> ir.Constant:
        return ir.Constant(it, v)

    x, y = fn.args
    ux, uy = b.bitcast(x, it), b.bitcast(y, it)
    sx = b.and_(ux, c(1 << (n - 1)))
    ax, ay = b.and_(ux, c((1 << (n - 1)) - 1)), b.and_(uy, c((1 << (n - 1)) - 1))
    inf = ((1 << e_bits) - 1) << m_bits
    bad = b.or_(b.or_(b.icmp_unsigned("==", ay, c(0)), b.icmp_unsigned(">", ay, c(inf))),
                b.icmp_unsigned(">=", ax, c(inf)))
    b.cbranch(bad, blocks["nan"], blocks["small"])

    b.position_at_end(blocks["nan"])
    b.ret(b.bitcast(c(inf | (1 << (m_bits - 1))), ft()))

    b.position_at_end(blocks["small"])  # |x| < |y|: x itself
    b.cbranch(b.icmp_unsigned("<", ax, ay), blocks["done"], blocks["prep"])

    def split(a: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(significand with its leading one at bit m_bits, exponent; below 1: subnormal)."""
        e = b.lshr(a, c(m_bits))
        sub = b.icmp_unsigned("==", e, c(0))
        lz = b.call(_ctlz(mod, it), [a, ir.Constant(I1, 0)])
        k = b.sub(lz, c(e_bits))  # shifts bringing a subnormal's leading one to bit m_bits
        mant = b.select(sub, b.shl(a, k), b.or_(b.and_(a, c((1 << m_bits) - 1)),
                                                 c(1 << m_bits)))
        return mant, b.select(sub, b.sub(c(1), k), e)

    prep = blocks["prep"]
    b.position_at_end(prep)
    mx0, ex0 = split(ax)
    my, ey = split(ay)
    b.cbranch(b.icmp_unsigned("==", ax, ay), blocks["zero"], blocks["loop"])

    b.position_at_end(blocks["loop"])  # one shift-subtract step per exponent difference
    mx = b.phi(it)
    ex = b.phi(it)
    mx.add_incoming(mx0, prep)
    ex.add_incoming(ex0, prep)
    b.cbranch(b.icmp_signed(">", ex, ey), blocks["body"], blocks["last"])
    b.position_at_end(blocks["body"])
    d = b.sub(mx, my)
    ge = b.icmp_signed(">=", d, c(0))
    mx.add_incoming(b.shl(b.select(ge, d, mx), c(1)), blocks["body"])
    ex.add_incoming(b.sub(ex, c(1)), blocks["body"])
    b.cbranch(b.icmp_unsigned("==", d, c(0)), blocks["zero"], blocks["loop"])

    b.position_at_end(blocks["last"])
    d = b.sub(mx, my)
    r = b.select(b.icmp_signed(">=", d, c(0)), d, mx)
    b.cbranch(b.icmp_unsigned("==", r, c(0)), blocks["zero"], blocks["norm"])

    b.position_at_end(blocks["norm"])  # renormalize: the leading one back to bit m_bits
    lz = b.call(_ctlz(mod, it), [r, ir.Constant(I1, 0)])
    k = b.sub(lz, c(e_bits))
    mr = b.shl(r, k)
    er = b.sub(ex, k)
    normal = b.or_(b.shl(er, c(m_bits)), b.and_(mr, c((1 << m_bits) - 1)))
    tiny = b.lshr(mr, b.sub(c(1), er))  # a subnormal result is exact: the bits dropped are 0
    mag = b.select(b.icmp_signed(">", er, c(0)), normal, tiny)
    b.ret(b.bitcast(b.or_(mag, sx), ft()))

    b.position_at_end(blocks["done"])
    b.ret(x)
    b.position_at_end(blocks["zero"])
    b.ret(b.bitcast(sx, ft()))


# ---- libc / libm -------------------------------------------------------------------------------
@functools.cache
def bound_addresses() -> dict[str, int]:
    """Addresses of the libc/libm functions, looked up by name in libc and libm."""
    libs = [_load("c", "libc.so.6"), _load("m", "libm.so.6")]
    out: dict[str, int] = {}
    for name in LIBC + LIBM:
        for lib in libs:
            if lib is None:
                continue
            try:
                out[name] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0
            except AttributeError:
                continue
            break
    return {k: v for k, v in out.items() if v}


def _load(short: str, soname: str) -> ctypes.CDLL | None:
    for name in (soname, ctypes.util.find_library(short)):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    return None
