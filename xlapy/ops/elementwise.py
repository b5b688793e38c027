"""Element-wise ops as table rows: `unary(...)`, `binary(...)`, plus compare, select, clamp.

Each row names the op, the element types it accepts and its numpy evaluation. Evaluation
follows XLA's CPU backend:

* bf16/f16/f8 compute in f32 and round once; sub-byte integers compute in 8 bits and wrap.
* f32/f64 (and complex parts) run with denormals flushed to zero, inputs (DAZ) and results
  (FTZ), as the CPU backend sets MXCSR; bit-level ops (negate, abs, select...) do not flush.
  In the `ieee` denormal mode (xlapy.denormal) nothing is flushed.
* Integer arithmetic wraps; x / 0 is all ones, x % 0 is x, INT_MIN / -1 is INT_MIN.

Unary rows live in `elementwise_unary`, conversions in `elementwise_convert`; both are
imported at the end of this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy import denormal
from xlapy.ops import libm
from xlapy.ops.base import EvalContext, OpDef, Region, add_op, fail
from xlapy.types import ElementType, Shape

# ---- type classes ---------------------------------------------------------------------------
BOOL = frozenset({ElementType.PRED})
SINT = frozenset(t for t in ElementType if t.is_signed)
UINT = frozenset(t for t in ElementType if t.is_unsigned)
INT = SINT | UINT
FLOAT = frozenset(t for t in ElementType if t.is_float)
COMPLEX = frozenset(t for t in ElementType if t.is_complex)
NUMERIC = INT | FLOAT | COMPLEX
ANY = BOOL | NUMERIC

_TYPE_CLASS_NAMES = {BOOL: "boolean", INT: "integer", SINT: "signed integer",
                     FLOAT: "floating-point", COMPLEX: "complex"}


def _describe(types: frozenset[ElementType]) -> str:
    parts = [n for cls, n in _TYPE_CLASS_NAMES.items() if cls <= types
             and not (cls is SINT and INT <= types)]
    return " or ".join(parts) if parts else ", ".join(sorted(t.value for t in types))


_DTYPE_TO_ET = {t.dtype: t for t in ElementType if t.is_array}


def etype(x: np.ndarray) -> ElementType:
    """The element type of a value."""
    return _DTYPE_TO_ET[x.dtype]


# ---- compute types, wrapping and flushing -----------------------------------------------------
def compute_dtype(t: ElementType) -> np.dtype:
    """The dtype arithmetic runs in: f32 for sub-32-bit floats, 8 bits for sub-byte ints."""
    if t.is_float and t.bits < 32:
        return np.dtype(np.float32)
    if t.is_integer and t.bits < 8:
        return np.dtype(np.int8 if t.is_signed else np.uint8)
    return t.dtype


# Per float dtype: the same-width signed/unsigned ints and the bits of the smallest normal.
_FLOAT_BITS = {np.dtype(np.float32): (np.dtype(np.int32), np.dtype(np.uint32), 1 << 23),
               np.dtype(np.float64): (np.dtype(np.int64), np.dtype(np.uint64), 1 << 52)}


#: Bytes per slice of a large array that `has_denormal` tests at a time: the slice stays in
#: cache between its reductions, so a mixed-sign array is read from memory once.
_CHUNK_BYTES = 1 << 19


def has_denormal(x: np.ndarray) -> bool:
    """Whether f32/f64 `x` holds a denormal, without array-sized temporaries."""
    if x.size == 0:
        return False
    step = _CHUNK_BYTES // x.itemsize
    if x.size <= 2 * step or not x.flags.c_contiguous:
        return _has_denormal(x)
    flat = x.reshape(-1)
    return any(_has_denormal(flat[i:i + step]) for i in range(0, flat.size, step))


def _has_denormal(x: np.ndarray) -> bool:
    """One or two min-reductions over integer views of `x`.

    The signed view's minimum is the smallest magnitude of the non-negatives when there
    are no negatives, else INT_MIN + the smallest negative magnitude; the unsigned view's
    minimum is the smallest non-negative magnitude. Only a zero among them needs the exact
    (three-pass) test, as zeros hide smaller non-zero magnitudes.
    """
    sint, uint, normal = _FLOAT_BITS[x.dtype]
    int_min = int(np.iinfo(sint).min)
    lo = int(x.view(sint).min())
    if lo >= 0:
        found = lo if lo < normal else None
    elif lo < int_min + normal:
        found = lo - int_min
    else:
        umin = int(x.view(uint).min())
        found = umin if umin < normal else None
    if found is None:
        return False
    if found > 0:
        return True
    # A zero: shift the sign out and subtract 2 so that +-0 wrap to the top.
    v = np.atleast_1d(np.left_shift(x.view(uint), 1))  # an array: wraps without warnings
    v -= uint.type(2)
    return int(v.min()) < 2 * normal - 2


def flush(x: Any, inplace: bool = False) -> np.ndarray:
    """Denormal f32/f64 (and complex parts) to signed zero: the CPU backend's DAZ/FTZ.

    Returns `x` itself when it has no denormals (the common case, found without
    temporaries); otherwise a flushed copy, or `x` flushed in place when `inplace`.
    Nothing is flushed in the `ieee` denormal mode (xlapy.denormal).
    """
    x = np.asarray(x)
    if not denormal.flushing():
        return x
    if x.dtype.kind == "c":
        part = np.dtype(np.float32 if x.dtype == np.complex64 else np.float64)
        if not has_denormal(np.ascontiguousarray(x).reshape(-1).view(part)):
            return x
        y = x if inplace and x.flags.c_contiguous and x.flags.writeable else \
            np.array(x, order="C")
        flush(y.reshape(-1).view(part), inplace=True)
        return y
    if x.dtype not in _FLOAT_BITS or not has_denormal(x):
        return x
    y = x if inplace and x.flags.writeable else x.copy()
    with np.errstate(invalid="ignore"):
        np.multiply(y, 0, out=y, where=np.abs(y) < np.finfo(y.dtype).tiny)
    return y


def make_complex(re: Any, im: Any, dtype: np.dtype) -> np.ndarray:
    """A complex array from its parts (no `re + 1j * im`: 1j * inf would make a NaN)."""
    re, im = np.broadcast_arrays(np.asarray(re), np.asarray(im))
    out = np.empty(re.shape, dtype)
    out.real, out.imag = re, im
    return out


# Types whose values never become f32 denormals in their compute dtype (f16, f8: no DAZ).
_NO_F32_DENORMALS = frozenset(t for t in ElementType if t.is_float and t.bits < 32
                              and t is not ElementType.BF16)


def to_compute(x: np.ndarray, t: ElementType, daz: bool = True) -> np.ndarray:
    """`x` in its compute dtype, denormals flushed (DAZ) unless `daz` is false.

    No copy when `x` already has the compute dtype and no denormals."""
    dt = compute_dtype(t)
    if x.dtype == dt:
        return flush(x) if daz else x
    x = x.astype(dt)
    return flush(x, inplace=True) if daz and t not in _NO_F32_DENORMALS else x


def bits_mask(t: ElementType) -> np.uint64:
    return np.uint64((1 << t.bits) - 1) if t.bits < 64 else np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def to_bits(x: np.ndarray, t: ElementType) -> np.ndarray:
    """The raw bit pattern of each element as uint64 (non-complex types)."""
    if t.is_pred:
        return x.astype(np.uint64)
    if t.bits < 8:
        return x.view(np.uint8).astype(np.uint64) & bits_mask(t)
    return x.view(np.dtype(f"uint{t.bits}")).astype(np.uint64)


def from_bits(u: np.ndarray, t: ElementType) -> np.ndarray:
    """Elements of type `t` from uint64 bit patterns (only the low `t.bits` bits are used)."""
    u = np.asarray(u, np.uint64) & bits_mask(t)
    if t.is_pred:
        return u != 0
    if t.bits < 8:
        b = u.astype(np.uint8)
        if t.is_signed:
            sign = np.uint8(1 << (t.bits - 1))
            return ((b ^ sign).astype(np.int16) - int(sign)).astype(t.dtype)
        if t.is_unsigned:
            return b.astype(t.dtype)
        return b.view(t.dtype)
    return u.astype(np.dtype(f"uint{t.bits}")).view(t.dtype)


def wrap_int(x: Any, t: ElementType) -> np.ndarray:
    """Integer values wrapped to `t`'s width (two's complement)."""
    x = np.asarray(x)
    return from_bits(x.astype(np.int64).view(np.uint64), t)


def from_compute(x: Any, t: ElementType, ftz: bool = True,
                 inplace: bool = False) -> np.ndarray:
    """A compute-dtype result as type `t`: FTZ for f32/f64, one rounding, integer wrap.

    `inplace` lets the flush write into `x` (a fresh result nobody else holds)."""
    x = np.asarray(x)
    if t.is_integer and t.bits < 8:
        return wrap_int(x, t)
    # f32 denormals round to signed zero in f16/f8 anyway: only f32/f64/bf16 need the flush.
    if ftz and x.dtype.kind in "fc" and t not in _NO_F32_DENORMALS:
        x = flush(x, inplace=inplace)
    return to_saturating(x, t) if t in SATURATING else x.astype(t.dtype, copy=False)


#: The MX floats with neither inf nor NaN: out-of-range values saturate (ml_dtypes, XLA).
SATURATING = frozenset({ElementType.F4E2M1FN, ElementType.F6E2M3FN, ElementType.F6E3M2FN})


def to_saturating(x: np.ndarray, t: ElementType) -> np.ndarray:
    """A float array as a SATURATING type: a NaN becomes -0, whatever its sign, as XLA CPU
    stores it (jax.jit: sqrt(-1) and log(-1) in f4e2m1fn are -0; ml_dtypes' astype puts
    the NaN's opposite sign on the zero, which would make results depend on NaN signs)."""
    x = np.where(np.isnan(x), x.dtype.type(-0.0), x) if x.dtype.kind == "f" else x
    return x.astype(t.dtype)


# ---- unary and binary table rows -------------------------------------------------------------
class ElementwiseOp(OpDef):
    """An element-wise op given by a table row.

    `fn` receives operands in their compute dtype (or the stored values when `raw`); when
    `typed`, it also receives the element type as `et=`.
    """

    family = "elementwise"
    #: Flush denormal inputs and results (false where XLA CPU calls libm, e.g. fmod, or
    #: where `fn` flushes itself).
    ftz = True
    #: For real floats: whether flushing denormal inputs can change the (flushed) result;
    #: false where f(denormal) and f(+-0) agree after FTZ (exp, cos, rounding...).
    daz_real = True
    #: For real floats: whether a result can be denormal when no input is (false for sqrt,
    #: log, floor, sin...: their results on normal inputs are normal or zero).
    ftz_real = True

    def __init__(self, name: str, arity: int, types: frozenset[ElementType],
                 fn: Callable[..., Any], result_type: Callable[[ElementType], ElementType] | None,
                 raw: bool, typed: bool, hlo_name: str | None, doc: str) -> None:
        self.name = name  # type: ignore[misc]
        self.arity = arity  # type: ignore[misc]
        self.types = types
        self.fn = fn
        self.result_type = result_type
        self.raw = raw
        self.typed = typed
        # HLO text spells multi-word opcodes with hyphens (`shift-left`).
        self.hlo_name = hlo_name or (name.replace("_", "-") if "_" in name else None)  # type: ignore[misc]
        self.__doc__ = doc or f"stablehlo.{name}: spec §{name}."

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        # Messages are built only on failure: this runs for every element-wise op twice per
        # compile (import, verify), and formatting them eagerly was most of its time.
        first = operands[0]
        et, dims = first.element_type, first.dimensions
        for i, s in enumerate(operands):
            if not s.is_array:
                fail(f"{self.name}_c1", f"operand {i} is {s}, not a tensor")
            if s.element_type not in self.types:
                fail(f"{self.name}_c1", f"operand {i} has element type {s.element_type}; "
                                        f"expected {_describe(self.types)}")
            if s.dimensions != dims or s.element_type is not et:
                fail(f"{self.name}_c1", "operands must have the same shape and element type")
        if self.result_type:
            et = self.result_type(et)
        return Shape.array(et, dims)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        t = etype(operands[0])
        kw = {"et": t} if self.typed else {}
        with np.errstate(all="ignore"):
            if self.raw:
                return np.asarray(self.fn(*operands, **kw)).astype(result.element_type.dtype,
                                                                   copy=False)
            return self._compute(operands, t, result.element_type, kw)

    def _compute(self, operands: Sequence[np.ndarray], t: ElementType, rt: ElementType,
                 kw: dict[str, Any]) -> np.ndarray:
        """The row on (a slice of) the operands: compute dtype, DAZ, fn, FTZ, rounding."""
        real = t.is_float
        scalar = operands[0].ndim == 0
        if scalar:  # ufuncs turn 0-d arrays into numpy scalars, which `out=` cannot write into
            operands = [x.reshape(1) for x in operands]
        args = [to_compute(x, t, self.ftz and (self.daz_real or not real)) for x in operands]
        # XLA's complex formulas of the unary rows live with the complex arithmetic.
        fn = complex_xla.UNARY.get(self.name, self.fn) if t.is_complex else self.fn
        out = np.asarray(fn(*args, **kw))
        if scalar:
            out = out.reshape(())
        # The flush may write into `out` when it is fresh (not an operand or a view).
        fresh = out.flags.owndata and not any(out is a for a in args)
        return from_compute(out, rt, self.ftz and (self.ftz_real or not real), inplace=fresh)


def unary(name: str, types: frozenset[ElementType], fn: Callable[..., Any], *,
          result_type: Callable[[ElementType], ElementType] | None = None, raw: bool = False,
          typed: bool = False, hlo_name: str | None = None, doc: str = "",
          daz_real: bool = True, ftz_real: bool = True) -> OpDef:
    """Table row for a unary op; `raw` evaluates on the stored values (no compute/flush).

    `daz_real`/`ftz_real` false skip the denormal check of real-float inputs/results where
    it cannot change the result (see `ElementwiseOp`); complex values are always flushed."""
    op = ElementwiseOp(name, 1, types, fn, result_type, raw, typed, hlo_name, doc)
    op.daz_real, op.ftz_real = daz_real, ftz_real
    return add_op(op)


def binary(name: str, types: frozenset[ElementType], fn: Callable[..., Any], *,
           result_type: Callable[[ElementType], ElementType] | None = None, raw: bool = False,
           typed: bool = False, hlo_name: str | None = None, doc: str = "") -> OpDef:
    """Table row for a binary op (operands of one shape and element type)."""
    return add_op(ElementwiseOp(name, 2, types, fn, result_type, raw, typed, hlo_name, doc))


# ---- binary evaluation helpers ---------------------------------------------------------------
def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncating integer division with XLA's x/0 = -1 and INT_MIN/-1 = INT_MIN."""
    if a.dtype.kind == "c":
        return complex_xla.divide(a, b)
    if not _is_int(a):
        return np.divide(a, b)
    zero = b == 0
    ovf = (a == np.iinfo(a.dtype).min) & (b == -1) if a.dtype.kind == "i" else zero & False
    sb = np.where(zero | ovf, 1, b).astype(a.dtype)
    r = np.fmod(a, sb)
    q = (a - r) // sb
    return np.where(zero, ~np.zeros_like(a), np.where(ovf, a, q))


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Remainder with the dividend's sign; integer x % 0 = x, INT_MIN % -1 = 0."""
    if a.dtype.kind == "c":
        q = a / b
        return a - b * (np.trunc(q.real) + 1j * np.trunc(q.imag))  # type: ignore[no-any-return]
    if not _is_int(a):
        return np.fmod(a, flush(b))  # XLA CPU: divisor DAZ, dividend and result not
    zero = b == 0
    sb = np.where(zero, 1, b).astype(a.dtype)
    if a.dtype.kind == "i":
        sb = np.where(sb == -1, 1, sb).astype(a.dtype)
    return np.where(zero, a, np.fmod(a, sb))


def _complex_gt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.real > b.real) | ((a.real == b.real) & (a.imag > b.imag))  # type: ignore[no-any-return]


def _signed_zeros(out: np.ndarray, a: np.ndarray, b: np.ndarray,
                  negative_wins: bool) -> np.ndarray:
    """Where max/min met two zeros, the sign XLA gives (+0 beats -0 in max, -0 in min)."""
    out = np.asarray(out)  # a 0-d maximum is a numpy scalar, which cannot be assigned into
    z = out == 0
    if not z.any():
        return out
    a0, b0 = np.broadcast_to(a, out.shape)[z], np.broadcast_to(b, out.shape)[z]
    sa, sb = np.signbit(a0), np.signbit(b0)
    neg = (sa | sb) if negative_wins else (sa & sb)
    zero = np.where(neg, -0.0, 0.0).astype(out.dtype)
    out[z] = np.where((a0 == 0) & (b0 == 0), zero, out[z])
    return out


def max_flushed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN-propagating maximum of flushed operands; +0 beats -0; complex lexicographic;
    pred is or. Operands may broadcast."""
    if a.dtype == np.bool_:
        return a | b
    if a.dtype.kind == "c":
        return np.where(_complex_gt(a, b), a, b)  # type: ignore[no-any-return]
    out = np.maximum(a, b)
    return _signed_zeros(out, a, b, False) if a.dtype.kind == "f" else out


def min_flushed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN-propagating minimum of flushed operands; -0 beats +0; complex lexicographic;
    pred is and. Operands may broadcast."""
    if a.dtype == np.bool_:
        return a & b
    if a.dtype.kind == "c":
        return np.where(_complex_gt(b, a), a, b)  # type: ignore[no-any-return]
    out = np.minimum(a, b)
    return _signed_zeros(out, a, b, True) if a.dtype.kind == "f" else out


def _max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA Max: compares on flushed values; a complex select returns the unflushed one."""
    if a.dtype.kind == "c":
        return np.where(_complex_gt(flush(a), flush(b)), a, b)  # type: ignore[no-any-return]
    return max_flushed(flush(a), flush(b))


def _min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA Min: compares on flushed values; a complex select returns the unflushed one."""
    if a.dtype.kind == "c":
        return np.where(_complex_gt(flush(b), flush(a)), a, b)  # type: ignore[no-any-return]
    return min_flushed(flush(a), flush(b))


def _power(a: np.ndarray, b: np.ndarray, et: ElementType) -> np.ndarray:
    """Float/complex pow; integer pow as XLA CPU emits it (jaxlib >= 0.12): 6 squaring steps
    (exponent bits 0..5); an exponent >= 64 with an even base gives 0 (the exact result mod
    2^bits); a negative exponent (signed types only) gives 1 for base 1, +-1 for base -1, else
    0. (XLA before jaxlib 0.12 compared unsigned exponents as signed, so those >= 2^(bits-1)
    took the negative-exponent path, and kept the 6-bit result for even bases too.)"""
    if a.dtype.kind == "c":
        return complex_xla.power(a, b)
    if not _is_int(a):
        return libm.wide("power", a, b)  # the C library's, as the cpu kernels (not NumPy's)
    one = np.ones_like(a)
    u = to_bits(b, et)
    out, base = one, a.copy()
    for i in range(6):
        out = np.where(((u >> np.uint64(i)) & np.uint64(1)) != 0, out * base, out)
        base = base * base
    neg = ((u >> np.uint64(et.bits - 1)) != 0) & et.is_signed
    even = (to_bits(a, et) & np.uint64(1)) == 0
    out = np.where(~neg & (u >= np.uint64(64)) & even, np.zeros_like(a), out)
    minus_one = from_bits(np.full(a.shape, ~np.uint64(0)), et).astype(a.dtype)
    odd = (u & np.uint64(1)) != 0
    neg_pow = np.where(a == 1, one, np.where((a == minus_one) & (a.dtype.kind == "i"),
                                             np.where(odd, minus_one, one), 0))
    return np.where(neg, neg_pow, out)  # type: ignore[no-any-return]


def _atan2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        # atan2(y, x) = -i log((x + i y) / sqrt(x^2 + y^2)), the complex extension.
        return -1j * np.log((b + 1j * a) / np.sqrt(b * b + a * a))  # type: ignore  # type: ignore[no-any-return]
    return libm.wide("atan2", a, b)  # the C library's, as the cpu kernels


def _shift(kind: str) -> Callable[..., np.ndarray]:
    """Shifts on raw bits; amounts are unsigned, >= width gives 0 (or the sign for sra)."""

    def fn(a: np.ndarray, b: np.ndarray, et: ElementType) -> np.ndarray:
        n = et.bits
        u, s = to_bits(a, et), to_bits(b, et)
        big = s >= np.uint64(n)
        s = np.where(big, np.uint64(0), s)
        if kind == "shl":
            r = np.where(big, np.uint64(0), u << s)
        elif kind == "srl":
            r = np.where(big, np.uint64(0), u >> s)
        else:
            sign = np.uint64(1 << (n - 1))
            v = (u ^ sign).view(np.int64) - np.int64(sign) if n < 64 else u.view(np.int64)
            r = (v >> np.where(big, np.uint64(n - 1), s).astype(np.int64)).view(np.uint64)
        return from_bits(r, et)

    return fn


def _bitwise(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def op(a: np.ndarray, b: np.ndarray, et: ElementType) -> np.ndarray:
        if et.is_pred:
            return fn(a, b)
        return from_bits(fn(to_bits(a, et), to_bits(b, et)), et)

    return op


def _complex_type(t: ElementType) -> ElementType:
    return ElementType.C64 if t is ElementType.F32 else ElementType.C128


# ---- binary rows -------------------------------------------------------------------------------
binary("add", ANY, lambda a, b: (a | b) if a.dtype == np.bool_ else a + b,
       doc="stablehlo.add: spec §add; XLA Add (pred: or).")
binary("subtract", NUMERIC, np.subtract, doc="stablehlo.subtract: spec §subtract; XLA Sub.")
def _multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Products; complex as XLA CPU computes it (complex_xla.multiply: fused)."""
    if a.dtype == np.bool_:
        return a & b
    if a.dtype.kind == "c":
        return complex_xla.multiply(a, b)
    return a * b  # type: ignore[no-any-return]


binary("multiply", ANY, _multiply,
       doc="stablehlo.multiply: spec §multiply; XLA Mul (pred: and).")
binary("divide", NUMERIC, _divide, doc="stablehlo.divide: spec §divide; XLA Div.")
OPS_REMAINDER = binary("remainder", NUMERIC, _remainder,
                       doc="stablehlo.remainder: spec §remainder; XLA Rem (fmod: no FTZ).")
OPS_REMAINDER.ftz = False  # type: ignore[attr-defined]
for _op in (binary("maximum", ANY, _max, doc="stablehlo.maximum: spec §maximum; XLA Max."),
            binary("minimum", ANY, _min, doc="stablehlo.minimum: spec §minimum; XLA Min.")):
    _op.ftz = False  # type: ignore[attr-defined]  # _max/_min flush what XLA flushes
binary("power", NUMERIC, _power, typed=True, doc="stablehlo.power: spec §power; XLA Pow.")
binary("atan2", FLOAT | COMPLEX, _atan2, doc="stablehlo.atan2: spec §atan2; XLA Atan2.")
binary("complex", frozenset({ElementType.F32, ElementType.F64}),
       lambda a, b: make_complex(a, b, np.result_type(a.dtype, np.complex64)),
       result_type=_complex_type, raw=True,
       doc="stablehlo.complex: spec §complex; XLA Complex (no flush: a bit-level op).")
binary("shift_left", INT, _shift("shl"), raw=True, typed=True,
       doc="stablehlo.shift_left: spec §shift_left; XLA ShiftLeft.")
binary("shift_right_arithmetic", INT, _shift("sra"), raw=True, typed=True,
       doc="stablehlo.shift_right_arithmetic: spec §shift_right_arithmetic.")
binary("shift_right_logical", INT, _shift("srl"), raw=True, typed=True,
       doc="stablehlo.shift_right_logical: spec §shift_right_logical.")
binary("and", BOOL | INT, _bitwise(np.bitwise_and), raw=True, typed=True,
       doc="stablehlo.and: spec §and; XLA And.")
binary("or", BOOL | INT, _bitwise(np.bitwise_or), raw=True, typed=True,
       doc="stablehlo.or: spec §or; XLA Or.")
binary("xor", BOOL | INT, _bitwise(np.bitwise_xor), raw=True, typed=True,
       doc="stablehlo.xor: spec §xor; XLA Xor.")


from xlapy.ops import elementwise_compare, elementwise_convert, elementwise_unary  # noqa: E402,F401,I001
from xlapy.ops import complex_xla  # noqa: E402  (it builds on this module)
from xlapy.ops.elementwise_compare import CompareAttrs, total_order_key  # noqa: E402,F401
