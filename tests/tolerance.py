"""Tolerances that follow from the computation, never from one machine's numbers.

The suite runs on any x86-64 CPU (AVX2 or AVX-512, Intel or AMD) with whatever GEMM kernel
OpenBLAS picks there, and the interpreter computes with NumPy, whose f32 transcendental
kernels are dispatched on the CPU too. So a float result may differ between machines by
(a) the summation order of a dot, convolution or reduction (BLAS kernel, vector width,
threads, FMA contraction) and (b) which of several documented-accuracy polynomial paths ran.
Every bound below is a worst case over all of those, derived from standard error analysis
(Higham, "Accuracy and Stability of Numerical Algorithms", ch. 2-3), with u = eps / 2 the
unit roundoff of the type that rounds:

* A sum of n terms in any order (any tree, blocked, pairwise, FMA or not) is within
  gamma_{n-1} * sum|terms| of the exact sum, gamma_n = n u / (1 - n u). A dot of length K:
  gamma_K * sum|products| (K multiplications folded into K - 1 additions; an FMA rounds
  less). The bound is relative to the sum of |products|, not to the result: with
  cancellation the result can be far smaller than its rounding error.
* An op correctly rounded (add, multiply, divide, sqrt; conversions) errs by <= u |result|;
  a function documented to within N ulp of the correctly rounded result, by <= (N + 0.5)
  ulp <= (N + 0.5) eps |result|.
* Denormal results are flushed (XLA CPU's FTZ/DAZ): each rounding may lose up to the
  smallest normal `tiny` in absolute terms, so bounds carry a tiny * (number of roundings).

API:

* `dot_bound(lhs, rhs, dtype, k)` / `sum_bound(x, axis, dtype)`: how far two float
  computations of one dot (or one sum) may differ, or one from the exact float64 value;
  `magnitude_bound(mag, k, dtype)` the same from a sum of |products| computed elsewhere
  (e.g. the program itself run on |inputs|: for dots, convolutions and sums, and any
  composition of them with nonnegative coefficients, that is exactly the sum of |products|).
* `assert_close_to_bound(got, ref, bound)`, `assert_dot_close(got, lhs, rhs, dtype)`.
* `ulp_distance` / `assert_ulp_close(got, ref, max_ulp)`: elementwise chains, in units of the
  last place of the result type.
* `Bounded`: a float64 value with a running error bound, for whole programs (MLP, attention,
  chains of GEMMs and kernels): evaluate the program on it in NumPy, then compare the backend's
  result with `b.check(got)` (`assert_close_to_bound(got, b.val, b.err)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

#: Constant of `dot_bound` / `sum_bound`, in units of K * eps = 2 K u. One float computation
#: of a length-K dot errs by at most gamma_K sum|products| <= 1.01 K u sum|products| (for
#: K u < 0.01), its last rounding included. Two independent computations (the backend and
#: the interpreter, or the backend and XLA, each with its own kernel and order) differ by at
#: most twice that, 2.02 K u, within c K eps = 4 K u for c = 2; the bound then holds against
#: the exact float64 value a fortiori. A result rounded once more to a narrower type (bf16
#: dots accumulate in f32) adds eps(out) sum|products| (`magnitude_bound`).
DOT_C = 2.0


def _finfo(dtype: Any) -> Any:
    dt = np.dtype(dtype)
    if dt.kind == "c":
        dt = np.dtype(np.float32 if dt.itemsize == 8 else np.float64)
    return np.finfo(dt) if dt.kind == "f" else ml_dtypes.finfo(dt)


def eps(dtype: Any) -> float:
    """Machine epsilon of `dtype` (the spacing of 1.0: 2^-23 for f32; complex: its parts)."""
    return float(_finfo(dtype).eps)


def tiny(dtype: Any) -> float:
    """The smallest normal of `dtype`: the most a flushed denormal loses."""
    return float(_finfo(dtype).smallest_normal)


def gamma(n: int | np.ndarray, dtype: Any) -> Any:
    """gamma_n = n u / (1 - n u): the relative error of n roundings in `dtype`."""
    u = eps(dtype) / 2
    n = np.asarray(n, np.float64)
    assert np.all(n * u < 0.5), "too long for a first-order bound"
    return n * u / (1 - n * u)


def accumulation_dtype(dtype: Any) -> np.dtype:
    """The type dots and reductions of `dtype` accumulate in (f32 for narrower floats)."""
    dt = np.dtype(dtype)
    if dt.kind in "fV" and dt.itemsize < 4:
        return np.dtype(np.float32)
    return dt


def _wide(x: Any) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


# ---- dots and sums ------------------------------------------------------------------------------
def magnitude_bound(mag: Any, k: int, dtype: Any, *, acc_dtype: Any = None,
                    out_dtype: Any = None, complex_: bool | None = None,
                    c: float = DOT_C) -> np.ndarray:
    """c K eps(acc) mag (+ flushing and output rounding): how far two float computations of
    sums of at most `k` products each may differ, `mag` being each result's sum of
    |products| (float64). `acc_dtype` defaults to `accumulation_dtype(dtype)`; `out_dtype`
    (default `dtype`) is rounded to once more by each side when narrower. A complex product
    rounds twice more (a*b - c*d), and its |.| is within sqrt 2 of |a||b|."""
    acc = accumulation_dtype(dtype) if acc_dtype is None else np.dtype(acc_dtype)
    out = np.dtype(dtype if out_dtype is None else out_dtype)
    if complex_ is None:
        complex_ = np.dtype(dtype).kind == "c"
    mag = np.asarray(mag, np.float64)
    terms = k + 2 if complex_ else k
    bound = c * terms * (eps(acc) * mag * (np.sqrt(2) if complex_ else 1.0) + tiny(acc))
    if eps(out) > eps(acc):
        bound = bound + eps(out) * mag + 2 * tiny(out)  # both sides round once more
    return np.asarray(bound)


def dot_bound(lhs: Any, rhs: Any, dtype: Any, k: int | None = None, *,
              product: Callable[[np.ndarray, np.ndarray], np.ndarray] = np.matmul,
              out_dtype: Any = None, c: float = DOT_C) -> np.ndarray:
    """The elementwise bound c K eps(acc) (|lhs| . |rhs|) (+ flushing and output rounding) on
    how far two float computations of `product(lhs, rhs)` may differ (`magnitude_bound`).

    `product` contracts its operands (np.matmul, an einsum, a convolution in float64); it is
    applied to |lhs| and |rhs| in float64, which gives the sum of |products| of each result
    element. `k` is the contraction length (default: lhs.shape[-1]); `dtype` the operands'
    type, which fixes the accumulation type (f32 for bf16/f16, as XLA's dots); `out_dtype`
    the result type when it differs."""
    k = int(np.shape(lhs)[-1]) if k is None else int(k)
    mag = product(np.abs(_wide(lhs)), np.abs(_wide(rhs)))
    return magnitude_bound(mag, k, dtype, out_dtype=out_dtype, c=c)


def sum_bound(x: Any, axis: int | tuple[int, ...] | None, dtype: Any, init: Any = 0.0, *,
              acc_dtype: Any = None, c: float = DOT_C) -> np.ndarray:
    """`dot_bound` for a float reduce-add over `axis` of `x` (plus `init`): the sum of n + 1
    terms in any order, with the ones as the other factors. `acc_dtype`: as
    `magnitude_bound` (XLA sums bf16/f16 in the narrow type itself)."""
    a = np.abs(_wide(x))
    axes = range(a.ndim) if axis is None else np.atleast_1d(axis)
    n = int(np.prod([a.shape[d] for d in axes]))
    mag = a.sum(axis=None if axis is None else tuple(np.atleast_1d(axis)))
    return magnitude_bound(mag + np.abs(_wide(init)), n + 1, dtype, acc_dtype=acc_dtype, c=c)


def assert_close_to_bound(got: Any, ref: Any, bound: Any, what: str = "") -> None:
    """|got - ref| <= bound elementwise (in float64); NaN only where ref is NaN, infinities
    equal. The message names the worst element and its error in units of its bound."""
    g, r = _wide(got), _wide(ref)
    b = np.broadcast_to(np.asarray(bound, np.float64), r.shape)
    assert g.shape == r.shape, f"{what}: shape {g.shape} vs {r.shape}"
    nan = np.isnan(g) | np.isnan(r)
    inf = ~nan & (np.isinf(g) | np.isinf(r))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(nan | inf, 0.0, np.abs(g - r))
        bad = ((np.isnan(g) != np.isnan(r)) | (inf & (g != r)) | ~(err <= b))
    if np.any(bad):
        ratio = np.where(bad, np.where(b > 0, err / np.where(b > 0, b, 1), np.inf), -1.0)
        i = np.unravel_index(int(np.argmax(ratio)), r.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {r.size} elements outside the bound; worst at "
            f"{tuple(int(j) for j in i)}: got {g[i]!r}, ref {r[i]!r}, |diff| {err[i]:.3g} > "
            f"bound {b[i]:.3g} ({ratio[i]:.3g}x)")


def assert_dot_close(got: Any, lhs: Any, rhs: Any, dtype: Any = None, *,
                     product: Callable[[np.ndarray, np.ndarray], np.ndarray] = np.matmul,
                     k: int | None = None, ref: Any = None, out_dtype: Any = None,
                     what: str = "") -> None:
    """`got` is a float computation of product(lhs, rhs): within `dot_bound` of `ref`
    (default: the product of the operands in float64, i.e. exact up to a final rounding)."""
    dtype = np.asarray(lhs).dtype if dtype is None else dtype
    if ref is None:
        ref = product(_wide(lhs), _wide(rhs))
    assert_close_to_bound(got, ref, dot_bound(lhs, rhs, dtype, k, product=product,
                                              out_dtype=out_dtype), what)


# ---- ulps -------------------------------------------------------------------------------------
def ulp(x: Any, dtype: Any) -> np.ndarray:
    """The unit in the last place of `dtype` at the values `x` (float64): 2^floor(log2|x|) eps,
    at least the spacing at the smallest normal."""
    a = np.maximum(np.abs(np.asarray(x, np.float64)), tiny(dtype))
    return np.asarray(2.0 ** np.floor(np.log2(a)) * eps(dtype))


def ulp_distance(got: Any, ref: Any, dtype: Any = None) -> np.ndarray:
    """|got - ref| in ulps of `dtype` (default got's) at ref, elementwise: 0 where both are
    NaN or equal (infinities included), inf where only one is NaN or infinite."""
    dtype = np.asarray(got).dtype if dtype is None else dtype
    g = np.asarray(got).astype(np.float64)
    r = np.asarray(ref).astype(np.float64)
    same = (np.isnan(g) & np.isnan(r)) | (g == r)
    finite = np.isfinite(g) & np.isfinite(r)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.where(finite, np.abs(g - r) / ulp(np.where(finite, r, 1.0), dtype), np.inf)
    return np.where(same, 0.0, d)


def assert_ulp_close(got: Any, ref: Any, max_ulp: float, dtype: Any = None,
                     what: str = "") -> None:
    """Every element of `got` within `max_ulp` ulps (of `dtype`, default got's) of `ref`
    (which may be a float64 reference: the exact value, not its rounding)."""
    d = ulp_distance(got, ref, dtype)
    if np.any(d > max_ulp):
        i = np.unravel_index(int(np.argmax(d)), d.shape)
        raise AssertionError(f"{what}: {int((d > max_ulp).sum())} of {d.size} elements over "
                             f"{max_ulp} ulp; worst {d[i]:.3g} ulp at {tuple(map(int, i))}: "
                             f"got {np.asarray(got)[i]!r}, ref {np.asarray(ref)[i]!r}")


# ---- documented accuracy of elementwise functions ----------------------------------------------
#: Max ulp error vs the correctly rounded result. cpu: xlapy/backends/cpu/math_poly.py's table
#: (measured by tests/unit/backends/cpu/test_math_poly.py). numpy: what NumPy validates for its
#: SIMD kernels on every dispatch target (numpy/_core/tests/data/umath-validation-set-*.csv);
#: the interpreter computes f32 with those. f64 NumPy calls libm (<= 1 ulp; tanh 2).
#: rsqrt is 1 / sqrt in both (two correct roundings: 2u = (0.5 + 0.5) eps of the result).
ULP_CPU = {"f32": {"exp": 1, "log": 2, "log1p": 3, "expm1": 3, "tanh": 5, "logistic": 3,
                   "erf": 3, "erfc": 5, "erf_inv": 1, "sin": 2, "cos": 2, "tan": 2, "rsqrt": 0.5},
           "f64": {"exp": 1, "log": 2, "log1p": 3, "expm1": 3, "tanh": 2, "logistic": 3,
                   "erf": 13, "sin": 2, "cos": 2, "tan": 2, "rsqrt": 0.5}}
ULP_NUMPY = {"f32": {"exp": 3, "log": 4, "log1p": 2, "expm1": 3, "tanh": 2, "sin": 2,
                     "cos": 2, "tan": 4, "rsqrt": 0.5},
             "f64": {"exp": 1, "log": 1, "log1p": 1, "expm1": 1, "tanh": 2, "sin": 1,
                     "cos": 1, "tan": 1, "rsqrt": 0.5}}


def ulp_bound(fn: str, dtype: Any, impl: str = "any") -> float:
    """The documented ulp bound of `fn` in `dtype` for `impl` ("cpu", "numpy" or "any": the
    larger, for a check that either backend must pass). Narrower floats compute in f32 and
    round once: 0.5 ulp of their own type on top, far less than 1."""
    key = "f64" if np.dtype(dtype) == np.float64 else "f32"
    tables = {"cpu": [ULP_CPU], "numpy": [ULP_NUMPY], "any": [ULP_CPU, ULP_NUMPY]}[impl]
    return float(max(t[key].get(fn, 0) for t in tables))


# ---- error propagation through whole programs ------------------------------------------------
def _lip_exp(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.exp(hi)


def _lip_one(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.ones_like(lo)


def _lip_rsqrt(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    assert np.all(lo > 0), "rsqrt of a value not bounded away from 0"
    return 0.5 * lo ** -1.5


#: name -> (float64 function, max |f'| over [lo, hi]).
FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray],
                           Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "exp": (np.exp, _lip_exp),
    "tanh": (np.tanh, _lip_one),
    "sin": (np.sin, _lip_one),
    "cos": (np.cos, _lip_one),
    "rsqrt": (lambda x: 1 / np.sqrt(x), _lip_rsqrt),
}


@dataclass
class Bounded:
    """`val`: a program's exact result (float64, from exact inputs); `err`: a bound on how far
    any conforming float computation of it in `dtype` may be, elementwise.

    First-order forward error analysis, op by op: an op's error is what it inherits (the
    operands' errors through its derivative) plus what it adds (its own rounding: a dot
    gamma_K sum|products|, an add u |result|, a function its documented ulps), each taken at
    the largest magnitude the computed operands can have (|val| + err). `impl` picks the ulp
    table ("cpu", "numpy", "any"). Compare with `b.check(got)`."""

    val: np.ndarray
    err: np.ndarray
    dtype: np.dtype
    impl: str = "any"

    @classmethod
    def exact(cls, x: Any, dtype: Any = None, impl: str = "any") -> Bounded:
        """An input: exact, its denormals flushed as the backends read them (DAZ)."""
        x = np.asarray(x)
        dt = np.dtype(x.dtype if dtype is None else dtype)
        v = x.astype(np.float64)
        v = np.where(np.abs(v) < tiny(dt), 0.0 * v, v)
        return cls(v, np.zeros_like(v), dt, impl)

    def _new(self, val: np.ndarray, err: np.ndarray) -> Bounded:
        return Bounded(np.asarray(val, np.float64), np.asarray(err, np.float64), self.dtype,
                       self.impl)

    def _rounded(self, val: np.ndarray, err: np.ndarray, ulps: float = 0.5) -> Bounded:
        """A result within `ulps` ulp of its inputs' exact image: ulps eps |computed|."""
        return self._new(val, err + ulps * eps(self.dtype) * (np.abs(val) + err)
                         + tiny(self.dtype))

    def _other(self, other: Any) -> Bounded:
        if isinstance(other, Bounded):
            return other
        v = np.asarray(other, np.float64)
        return self._new(v, np.zeros_like(v))

    def check(self, got: Any, what: str = "") -> None:
        """`got` within `err` of `val`. `val` is itself a float64 computation: exact enough
        for narrower types (its own error is eps(f64) / eps(dtype) of theirs), for f64 one
        more conforming computation, so the bound doubles."""
        scale = 1.0 + eps(np.float64) / eps(self.dtype)
        assert_close_to_bound(got, self.val, self.err * scale, what)

    @property
    def mag(self) -> np.ndarray:
        """The largest magnitude a computed value can have."""
        return np.abs(self.val) + self.err

    # structure (exact): views and copies move values and errors together
    def apply(self, fn: Callable[[np.ndarray], np.ndarray]) -> Bounded:
        """A data movement op (transpose, reshape, slice, broadcast): exact."""
        return self._new(fn(self.val), fn(self.err))

    @property
    def T(self) -> Bounded:  # noqa: N802 - numpy's spelling
        return self.apply(np.transpose)

    # arithmetic (correctly rounded)
    def __add__(self, other: Any) -> Bounded:
        o = self._other(other)
        return self._rounded(self.val + o.val, self.err + o.err)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Bounded:
        o = self._other(other)
        return self._rounded(self.val - o.val, self.err + o.err)

    def __neg__(self) -> Bounded:
        return self._new(-self.val, self.err)

    def __mul__(self, other: Any) -> Bounded:
        o = self._other(other)
        err = np.abs(self.val) * o.err + np.abs(o.val) * self.err + self.err * o.err
        return self._rounded(self.val * o.val, err)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Bounded:
        """(a + da) / (b + db) - a / b = (da - (a/b) db) / (b + db): |b| > |db| needed."""
        o = self._other(other)
        assert np.all(np.abs(o.val) > o.err), "divisor not bounded away from 0"
        q = self.val / o.val
        err = (self.err + np.abs(q) * o.err) / (np.abs(o.val) - o.err)
        return self._rounded(q, err)

    def maximum(self, other: Any) -> Bounded:
        """max is exact and 1-Lipschitz in each operand (relu: `x.maximum(0)`)."""
        o = self._other(other)
        return self._new(np.maximum(self.val, o.val), np.maximum(self.err, o.err))

    # reductions and dots
    def max(self, axis: int, keepdims: bool = False) -> Bounded:
        """max over an axis: exact; moves by at most the largest error along the axis."""
        return self._new(self.val.max(axis, keepdims=keepdims),
                         self.err.max(axis, keepdims=keepdims))

    def sort(self, axis: int = -1) -> Bounded:
        """Sorting is 1-Lipschitz in the max norm: the i-th smallest moves by at most the
        largest error along the axis."""
        return self._new(np.sort(self.val, axis),
                         np.broadcast_to(self.err.max(axis, keepdims=True), self.val.shape))

    def sum(self, axis: int, keepdims: bool = False) -> Bounded:
        """A sum of n terms in any order: the terms' errors plus gamma_{n-1} sum|terms|."""
        n = self.val.shape[axis]
        acc = accumulation_dtype(self.dtype)
        err = (self.err.sum(axis, keepdims=keepdims)
               + gamma(max(n - 1, 0), acc) * self.mag.sum(axis, keepdims=keepdims)
               + n * tiny(acc))
        return self._rounded(self.val.sum(axis, keepdims=keepdims), err, 0.0)

    def dot(self, other: Any, product: Callable[[np.ndarray, np.ndarray], np.ndarray]
            = np.matmul, k: int | None = None) -> Bounded:
        """product(a, b) contracting K terms: |a| db + da |b| + da db inherited, gamma_K
        sum|products| (at the computed operands' magnitudes) added."""
        o = self._other(other)
        k = self.val.shape[-1] if k is None else k
        acc = accumulation_dtype(self.dtype)
        err = (product(np.abs(self.val), o.err) + product(self.err, np.abs(o.val))
               + product(self.err, o.err)
               + gamma(k, acc) * product(self.mag, o.mag) + k * tiny(acc))
        out = self._new(product(self.val, o.val), err)
        if eps(self.dtype) > eps(acc):  # rounded once more to the narrower result type
            return out._rounded(out.val, out.err)
        return out

    def __matmul__(self, other: Any) -> Bounded:
        return self.dot(other)

    # elementwise functions (documented ulps)
    def fn(self, name: str, ulps: float | None = None) -> Bounded:
        """f(x) for a FUNCTIONS entry: the error of x through max |f'| near x, plus f's
        documented ulps (`ulp_bound` for this Bounded's impl unless given) and the rounding
        to the correctly rounded value it is measured from."""
        f, lip = FUNCTIONS[name]
        val = f(self.val)
        inherited = lip(self.val - self.err, self.val + self.err) * self.err
        u = ulp_bound(name, self.dtype, self.impl) if ulps is None else ulps
        return self._rounded(val, inherited, u + 0.5)

    def exp(self) -> Bounded:
        return self.fn("exp")

    def tanh(self) -> Bounded:
        return self.fn("tanh")

    def sin(self) -> Bounded:
        return self.fn("sin")

    def cos(self) -> Bounded:
        return self.fn("cos")

    def rsqrt(self) -> Bounded:
        return self.fn("rsqrt")
