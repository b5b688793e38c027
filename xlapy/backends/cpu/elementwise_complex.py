"""Complex (c64/c128) values in kernels: the IR of the element-wise, compare, select and
convert ops on them, exact to the interpreter (xlapy/ops/elementwise*.py).

A complex value travels as an LLVM struct of its two parts, {float, float} or
{double, double}, which is also its storage: numpy's complex64/complex128 layout, real part
first. Data movement (broadcast, transpose, slice, concatenate, gather, ...) only moves such
values, so the kernels move them unchanged; the ops here take them apart.

The interpreter flushes denormal parts of complex inputs (DAZ) and results (FTZ) for every
op but the bit-level ones (complex, real, imag, negate: `raw`); kernels run with FTZ set,
so results of arithmetic are flushed by the hardware and inputs are flushed explicitly;
the interpreter's XLA formulas (ops/complex_xla.py) flush their intermediates as well.

Complex kernels take the scalar path (lanes.LaneCheck rejects complex values). Ops not
listed in `UNARY`/`BINARY` stay interpreter fallbacks; reduce kernels take add and multiply
reducers (`REDUCERS`: in order, no partial split). multiply, divide, power, exp, expm1,
log, log1p, sqrt and tanh are XLA's formulas (complex_xla_emit.py, the twins of
ops/complex_xla.py: FMA contraction explicit, XLA's own exp / log / log1p, libm's real
functions in the part type); sin, cos and tan call glibc's C99 complex functions (what
numpy calls), sign XLA's formula, logistic 1 / (1 + exp(-z)) with glibc's cexp and numpy's
division; chlo.asin, acos, asinh, acosh, atanh and atan XLA's chlo decompositions
(complex_chlo_emit.py, twins of ops/complex_chlo.py); atan2, cbrt, rsqrt and remainder
follow the interpreter's formulas step by step (cbrt's sin/cos are libm's; numpy's own f32
sin/cos may differ from them by an ulp).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import complex_chlo_emit, target
from xlapy.backends.cpu import complex_xla_emit as cx
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.backends.cpu import flush_ftz as ftz
from xlapy.backends.cpu.llvm_util import F32, F64, I32, intrinsic
from xlapy.ir import Instruction
from xlapy.ops.attrs import ComparisonDirection
from xlapy.types import ElementType as ET

COMPLEX = frozenset({ET.C64, ET.C128})
#: The part types a complex value is built from (and `real`/`imag` give).
PARTS = frozenset({ET.F32, ET.F64})


def part_type(t: ET) -> ET:
    return ET.F32 if t is ET.C64 else ET.F64


def struct_type(t: ET) -> ir.LiteralStructType:
    """Storage and compute type of a complex element: {re, im}."""
    p = F32 if t is ET.C64 else F64
    return ir.LiteralStructType([p, p])


def constant(v: Any, t: ET) -> ir.Constant:
    c = complex(v)
    p = F32 if t is ET.C64 else F64
    return ir.Constant(struct_type(t), [ir.Constant(p, c.real), ir.Constant(p, c.imag)])


def parts(b: ir.IRBuilder, z: ir.Value) -> tuple[ir.Value, ir.Value]:
    """z's real and imaginary parts: the values a `pack` put in, where z is one (a part that
    is a constant stays one, unflushed: convert(|z|)'s zero imaginary part kept a complex
    divide's special cases foldable once flushes became multiplies by an opaque 1.0)."""
    return _part(b, z, 0), _part(b, z, 1)


def _part(b: ir.IRBuilder, z: ir.Value, k: int) -> ir.Value:
    v = z
    while isinstance(v, ir.InsertValue):
        if list(v.indices) == [k]:
            return v.value
        v = v.aggregate
    if isinstance(v, ir.Constant) and isinstance(v.constant, (list, tuple)) and \
            isinstance(v.constant[k], ir.Constant):
        return v.constant[k]
    return b.extract_value(z, k)


def pack(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> ir.Value:
    st = ir.LiteralStructType([re.type, re.type])
    return b.insert_value(b.insert_value(ir.Constant(st, None), re, 0), im, 1)


def _flushed(b: ir.IRBuilder, z: ir.Value, op: str = "") -> tuple[ir.Value, ir.Value]:
    """The parts of `z` with denormals flushed (the interpreter's DAZ of complex inputs): by
    a multiply (flush_ftz.operand) for the operands of `op` when it quiets a NaN part anyway
    (complex add, subtract, multiply, divide: every result part is arithmetic on them)."""
    re, im = parts(b, z)
    return ftz.operand(b, re, op, ew.flush), ftz.operand(b, im, op, ew.flush)


# ---- ops -----------------------------------------------------------------------------------------
Parts = tuple[ir.Value, ir.Value]


def _add(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    return b.fadd(x[0], y[0]), b.fadd(x[1], y[1])


def _sub(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    return b.fsub(x[0], y[0]), b.fsub(x[1], y[1])


def _np_mul(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    """numpy's textbook product (no FMA), which the interpreter's atan2 and remainder run."""
    (a, c), (d, e) = x, y
    return (b.fsub(b.fmul(a, d), b.fmul(c, e)), b.fadd(b.fmul(a, e), b.fmul(c, d)))


BinaryFn = Callable[[ir.IRBuilder, Parts, Parts], Parts]
#: Unary ops on complex operands.
UNARY = frozenset({"negate", "real", "imag", "abs", "sign", "exponential", "log", "sqrt",
                   "tanh", "rsqrt", "exponential_minus_one", "log_plus_one", "sine", "cosine",
                   "tan", "logistic", "cbrt"})
#: The C99 complex functions numpy calls for these ops (glibc's: bit-exact to it).
_CFUNCS = {"sine": "csin", "cosine": "ccos"}
#: Approximate ops (libm): compared with an ulp bound by convention, though bit-exact to
#: the interpreter on the same libm.
INEXACT = frozenset({"exponential", "log", "tanh", "exponential_minus_one", "log_plus_one",
                     "atan2", "cbrt"})


def _complex_call(b: ir.IRBuilder, name: str, *zs: Parts) -> Parts:
    """A C99 complex function of libm, called as clang lowers it. x86-64 SysV: a float
    complex is one <2 x float> (one SSE register), a double complex two doubles in,
    {double, double} out. AArch64 (AAPCS64): either is a homogeneous aggregate, [2 x T]
    in (two FP registers), {T, T} out."""
    if not target.current().is_x86:
        t = zs[0][0].type
        arr = ir.ArrayType(t, 2)
        args = [b.insert_value(b.insert_value(ir.Constant(arr, None), re, 0), im, 1)
                for re, im in zs]
        st = ir.LiteralStructType([t, t])
        out = b.call(cx.declare(b, name + ("f" if t == F32 else ""), st, [arr] * len(zs)), args)
        return b.extract_value(out, 0), b.extract_value(out, 1)
    if zs[0][0].type == F32:
        v2 = ir.VectorType(F32, 2)
        args = [b.insert_element(b.insert_element(ir.Constant(v2, None), re,
                                                  ir.Constant(I32, 0)), im, ir.Constant(I32, 1))
                for re, im in zs]
        out = b.call(cx.declare(b, name + "f", v2, [v2] * len(zs)), args)
        return (b.extract_element(out, ir.Constant(I32, 0)),
                b.extract_element(out, ir.Constant(I32, 1)))
    st = ir.LiteralStructType([F64, F64])
    out = b.call(cx.declare(b, name, st, [F64] * (2 * len(zs))), [v for z in zs for v in z])
    return b.extract_value(out, 0), b.extract_value(out, 1)


def _select(b: ir.IRBuilder, p: ir.Value, x: Parts, y: Parts) -> Parts:
    return b.select(p, x[0], y[0]), b.select(p, x[1], y[1])


def _np_div(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    """numpy's complex division (its scalar loop: Smith's algorithm with a reciprocal
    scale), which the interpreter's rsqrt runs (1 / sqrt(z))."""
    (a, c), (d, e) = x, y
    t = a.type
    one, zero = ir.Constant(t, 1.0), ir.Constant(t, 0.0)
    dr, di = cx.fabs(b, d), cx.fabs(b, e)
    first = b.fcmp_ordered(">=", dr, di)
    both0 = b.and_(b.fcmp_ordered("==", dr, zero), b.fcmp_ordered("==", di, zero))
    # |d| >= |e|, not both zero.
    rat1 = b.fdiv(e, d)
    scl1 = b.fdiv(one, b.fadd(d, b.fmul(e, rat1)))
    re1 = b.fmul(b.fadd(a, b.fmul(c, rat1)), scl1)
    im1 = b.fmul(b.fsub(c, b.fmul(a, rat1)), scl1)
    # both zero: a complex inf or NaN.
    re0, im0 = b.fdiv(a, dr), b.fdiv(c, dr)
    # |d| < |e| (or a NaN).
    rat2 = b.fdiv(d, e)
    scl2 = b.fdiv(one, b.fadd(e, b.fmul(d, rat2)))
    re2 = b.fmul(b.fadd(b.fmul(a, rat2), c), scl2)
    im2 = b.fmul(b.fsub(b.fmul(c, rat2), a), scl2)
    re = b.select(first, b.select(both0, re0, re1), re2)
    im = b.select(first, b.select(both0, im0, im1), im2)
    return re, im


def _atan2(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    """The interpreter's complex atan2(x, y) = -1j * log((y + 1j * x) / sqrt(y y + x x)),
    step by step as numpy computes it: Python's 1j is (0, 1) and -1j (-0, -1), products
    textbook, numpy's division, libm's csqrt and clog."""
    t = x[0].type
    i = (ir.Constant(t, 0.0), ir.Constant(t, 1.0))
    minus_i = (ir.Constant(t, -0.0), ir.Constant(t, -1.0))
    num = _add(b, y, _np_mul(b, i, x))
    den = _complex_call(b, "csqrt", _add(b, _np_mul(b, y, y), _np_mul(b, x, x)))
    return _np_mul(b, minus_i, _complex_call(b, "clog", _np_div(b, num, den)))


def _remainder(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    """The interpreter's complex remainder x - y * (trunc(q.re) + 1j * trunc(q.im)) with
    q = x / y by numpy's division; the real trunc(q.im) is made complex, (t, 0), before its
    product with 1j, and trunc(q.re) before the sum, as numpy casts them."""
    t = x[0].type
    zero = ir.Constant(t, 0.0)
    q_re, q_im = _np_div(b, x, y)
    tr, ti = (intrinsic(b, f"llvm.trunc.{cx.sfx(v)}", t, [v]) for v in (q_re, q_im))
    i_ti = _np_mul(b, (zero, ir.Constant(t, 1.0)), (ti, zero))
    w = _add(b, (tr, zero), i_ti)
    return _sub(b, x, _np_mul(b, y, w))


#: Binary ops on complex operands with a complex result (inputs flushed first).
BINARY: dict[str, BinaryFn] = {"add": _add, "subtract": _sub, "multiply": cx.mul,
                               "divide": cx.div, "power": cx.power, "atan2": _atan2,
                               "remainder": _remainder}
#: Binary ops whose results are flushed explicitly (libm computes some with integer
#: operations, which FTZ does not touch).
_FLUSHED = frozenset({"power", "atan2"})


#: Reducers a reduce kernel runs on complex values (reduce_emit.reducer_op).
REDUCERS = frozenset({"add", "multiply"})


def binary(b: ir.IRBuilder, op: str, args: Sequence[ir.Value]) -> ir.Value:
    """A binary op on complex struct values (a reduce kernel's combine)."""
    re, im = BINARY[op](b, _flushed(b, args[0], op), _flushed(b, args[1], op))
    return pack(b, re, im)


def _transcendental(b: ir.IRBuilder, op: str, re: ir.Value, im: ir.Value) -> Parts:
    """exp, log, sqrt, tanh (libm's C99 functions), rsqrt, expm1 and log1p as numpy
    computes them (nc_expm1, nc_log1p: real libm calls)."""
    t = re.type
    if op == "exponential":
        return cx.cexp(b, re, im)
    if op in complex_chlo_emit.OPS:
        return complex_chlo_emit.emit(b, op, re, im)
    if op == "tanh":
        return cx.ctanh(b, re, im)
    if op == "log":
        return cx.clog(b, re, im)
    if op == "sqrt":
        return cx.csqrt(b, re, im)
    if op in _CFUNCS:
        return _complex_call(b, _CFUNCS[op], (re, im))
    if op == "logistic":  # 1 / (1 + exp(-z)), numpy's division
        e_re, e_im = _complex_call(b, "cexp", (b.fneg(re), b.fneg(im)))
        one = ir.Constant(t, 1.0)
        den = (b.fadd(one, e_re), b.fadd(ir.Constant(t, 0.0), e_im))
        return _np_div(b, (one, ir.Constant(t, 0.0)), den)
    if op == "cbrt":  # the principal root: cbrt(|z|) (cos, sin)(arg(z) / 3), as numpy
        r = cx.real_call(b, "cbrt", _cabs(b, re, im))
        th = b.fdiv(cx.real_call(b, "atan2", im, re), ir.Constant(t, 3.0))
        return b.fmul(r, cx.real_call(b, "cos", th)), b.fmul(r, cx.real_call(b, "sin", th))
    if op == "rsqrt":
        return cx.crsqrt(b, re, im)
    if op == "tan":  # XLA's: -i tanh(i z)
        t_re, t_im = cx.ctanh(b, b.fneg(im), re)
        return t_im, b.fneg(t_re)
    if op == "exponential_minus_one":
        return cx.cexpm1(b, re, im)
    # log_plus_one
    return cx.clog1p(b, re, im)


def _unary(b: ir.IRBuilder, op: str, z: ir.Value) -> ir.Value:
    if op == "negate":  # on the stored bits (raw)
        re, im = parts(b, z)
        return pack(b, b.fneg(re), b.fneg(im))
    if op == "real":
        return b.extract_value(z, 0)
    if op == "imag":
        return b.extract_value(z, 1)
    re, im = _flushed(b, z)
    if op == "sign":
        return pack(b, *_sign(b, re, im))
    if op != "abs":
        out_re, out_im = _transcendental(b, op, re, im)
        return pack(b, ew.flush(b, out_re), ew.flush(b, out_im))
    return ew.flush(b, _cabs(b, re, im))


def _sign(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> Parts:
    """XLA's (and the interpreter's) sign: z where |z| is 0, else (re / |z|, im / |z|),
    each part divided by the real |z| (an infinite part gives NaN + 0i)."""
    m = _cabs(b, re, im)
    is_zero = b.fcmp_ordered("==", m, ir.Constant(re.type, 0.0))
    return b.select(is_zero, re, b.fdiv(re, m)), b.select(is_zero, im, b.fdiv(im, m))


def _cabs(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> ir.Value:
    """|re + i im| as numpy's complex absolute computes it (its SIMD loop, what the
    interpreter runs; XLA gives the same): larger * sqrt(fma(r, r, 1)), r = smaller /
    larger, no overflow for huge parts; an infinite part gives inf, else a NaN gives NaN."""
    t = re.type

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, v)

    inf, nan = k(float("inf")), k(float("nan"))
    re, im = cx.fabs(b, re), cx.fabs(b, im)
    re_inf, im_inf = b.fcmp_ordered("==", re, inf), b.fcmp_ordered("==", im, inf)
    im = b.select(re_inf, inf, im)
    re = b.select(im_inf, inf, re)
    re_ok, im_ok = b.fcmp_ordered("ord", re, re), b.fcmp_ordered("ord", im, im)
    im = b.select(re_ok, im, nan)
    re = b.select(im_ok, re, nan)
    larger = b.select(b.fcmp_ordered(">", re, im), re, im)
    smaller = b.select(b.fcmp_ordered("<", im, re), im, re)
    div_ok = b.not_(b.or_(b.fcmp_ordered("==", larger, k(0.0)),
                          b.fcmp_ordered("==", smaller, inf)))
    ratio = b.select(div_ok, b.fdiv(smaller, larger), k(0.0))
    root = intrinsic(b, f"llvm.sqrt.{cx.sfx(re)}", t,
                     [intrinsic(b, f"llvm.fma.{cx.sfx(re)}", t, [ratio, ratio, k(1.0)])])
    return b.fmul(root, larger)


# ---- the kernel hooks ----------------------------------------------------------------------------
def involved(instr: Instruction) -> bool:
    """Whether `instr` reads or writes complex values (this module emits it)."""
    return any(s.is_array and s.element_type in COMPLEX
               for s in [instr.shape] + [o.shape for o in instr.operands])


def fusible(instr: Instruction) -> bool:
    """Whether a kernel computes this instruction with complex operands or result; every
    other type must be one the kernels support."""
    shapes = [instr.shape] + [o.shape for o in instr.operands]
    if not all(s.is_array and (s.element_type in COMPLEX or s.element_type in ew.SUPPORTED)
               for s in shapes):
        return False
    op = instr.opcode
    if op in ("constant", "broadcast_in_dim", "reshape", "transpose", "slice", "reverse",
              "select", "compare"):
        return True
    if op in ("concatenate", "pad", "dynamic_slice", "dynamic_update_slice", "gather",
              "iota", "maximum", "minimum"):
        return True
    if op == "reduce":
        from xlapy.backends.cpu.reduce_emit import reducer_op  # (it builds on this module)
        return reducer_op(instr) in REDUCERS
    if op == "convert":
        s, t = instr.operands[0].shape.element_type, instr.shape.element_type
        if s in COMPLEX and t in COMPLEX:
            return True
        if s in COMPLEX:
            return t is part_type(s) or ewconv.convert_supported(part_type(s), t)
        return ewconv.convert_supported(s, part_type(t))
    if op == "complex":
        return True
    et = instr.operands[0].shape.element_type if instr.operands else None
    if et not in COMPLEX:
        return False
    # (_complex_call: the C99 ABI of x86-64 and aarch64)
    return op in BINARY or op in UNARY or op in complex_chlo_emit.OPS


def emit(b: ir.IRBuilder, instr: Instruction, args: Sequence[ir.Value]) -> ir.Value:
    """The value of `instr` (fusible) from its operands' values."""
    op = instr.opcode
    s = instr.operands[0].shape.element_type
    t = instr.shape.element_type
    if op == "complex":
        return pack(b, args[0], args[1])
    if op == "select":
        pred, x, y = args
        (xr, xi), (yr, yi) = parts(b, x), parts(b, y)
        return pack(b, ew.select(b, pred, xr, yr), ew.select(b, pred, xi, yi))
    if op == "compare":
        return _compare(b, args[0], args[1], instr.attrs.comparison_direction)
    if op in ("maximum", "minimum"):
        # XLA Max/Min: lexicographic on flushed values, selecting the unflushed operand.
        x, y = args if op == "maximum" else args[::-1]
        gt = _compare(b, x, y, ComparisonDirection.GT)
        (xr, xi), (yr, yi) = parts(b, args[0]), parts(b, args[1])
        return pack(b, ew.select(b, gt, xr, yr), ew.select(b, gt, xi, yi))
    if op == "convert":
        return convert(b, args[0], s, t)
    if op == "remainder":  # (no DAZ, no FTZ: the interpreter's remainder flushes nothing)
        return pack(b, *_remainder(b, parts(b, args[0]), parts(b, args[1])))
    if op in BINARY:
        re, im = BINARY[op](b, _flushed(b, args[0], op), _flushed(b, args[1], op))
        if op in _FLUSHED:
            re, im = ew.flush(b, re), ew.flush(b, im)
        return pack(b, re, im)
    return _unary(b, op, args[0])


def _compare(b: ir.IRBuilder, x: ir.Value, y: ir.Value, d: ComparisonDirection) -> ir.Value:
    """numpy's complex ==/!= on flushed parts; the other directions lexicographic on
    (real, imag), as the interpreter orders complex values."""
    (xr, xi), (yr, yi) = _flushed(b, x), _flushed(b, y)
    if d is ComparisonDirection.EQ:
        return b.and_(b.fcmp_ordered("==", xr, yr), b.fcmp_ordered("==", xi, yi))
    if d is ComparisonDirection.NE:
        return b.or_(b.fcmp_unordered("!=", xr, yr), b.fcmp_unordered("!=", xi, yi))
    same = b.fcmp_ordered("==", xr, yr)
    lt = b.or_(b.fcmp_ordered("<", xr, yr), b.and_(same, b.fcmp_ordered("<", xi, yi)))
    gt = b.or_(b.fcmp_ordered(">", xr, yr), b.and_(same, b.fcmp_ordered(">", xi, yi)))
    if d is ComparisonDirection.LT:
        return lt
    if d is ComparisonDirection.GT:
        return gt
    return b.not_(gt) if d is ComparisonDirection.LE else b.not_(lt)


def convert(b: ir.IRBuilder, x: ir.Value, s: ET, t: ET) -> ir.Value:
    """XLA CPU convert with a complex side (the interpreter's convert_array)."""
    if s in COMPLEX and t in COMPLEX:
        if s is t:
            return x
        re, im = _flushed(b, x)
        widen = t is ET.C128
        cv = b.fpext if widen else b.fptrunc
        p = F64 if widen else F32
        return pack(b, ew.flush(b, cv(re, p)), ew.flush(b, cv(im, p)))
    if s in COMPLEX:
        re = b.extract_value(x, 0)
        if t is part_type(s):
            return re  # a plain extraction: no flush
        return ewconv.convert(b, re, part_type(s), t)
    p = part_type(t)
    re = ewconv.convert(b, x, s, p)
    return pack(b, re, ir.Constant(re.type, 0.0))
