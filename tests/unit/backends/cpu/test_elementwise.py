"""Per-op, per-dtype emitters of the cpu backend against the interpreter (XLA CPU semantics).

Each element type gets one module holding every compiled unary op and one with every binary
op (a tuple of results), so compile time stays small. IEEE-exact and integer ops must match
bit for bit (NaN payloads aside); polynomial ops are bounded in ulps of the correctly rounded
value (not of the interpreter's: NumPy's f32 kernels differ by a few ulps between machines).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from tests.tolerance import ulp_bound
from tests.unit.backends.cpu.util import module, op, run_both, ulp_error, values
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.base import OPS
from xlapy.ops.elementwise import CompareAttrs
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

TYPES = [ET.PRED, ET.S8, ET.S16, ET.S32, ET.S64, ET.U8, ET.U16, ET.U32, ET.U64, ET.BF16,
         ET.F16, ET.F32, ET.F64]
N = 512
#: Polynomial ops: the float64 function they approximate (long double for f64 where NumPy
#: has one) and their name in tests/tolerance.py's table of documented ulp bounds.
INEXACT_REF = {"exponential": (np.exp, "exp"), "log": (np.log, "log"),
               "log_plus_one": (np.log1p, "log1p"),
               "exponential_minus_one": (np.expm1, "expm1"), "tanh": (np.tanh, "tanh"),
               "logistic": (lambda x: 1 / (1 + np.exp(-x)), "logistic"),
               "erf": (scipy.special.erf, "erf"), "chlo.erfc": (scipy.special.erfc, "erfc"),
               "chlo.erf_inv": (scipy.special.erfinv, "erf_inv"),
               "sine": (np.sin, "sin"),
               "cosine": (np.cos, "cos"), "tan": (np.tan, "tan")}


def _ulp_bound(name: str, t: ET) -> float:
    """f32/f64: math_poly's documented bound, against the correctly rounded value. bf16/f16
    compute in f32 (a few f32 ulps) and round once: the correctly rounded value, or its
    neighbour when the exact one lies within those f32 ulps of a rounding boundary."""
    if t in (ET.BF16, ET.F16):
        return 1.0
    return ulp_bound(INEXACT_REF[name][1], t.dtype, "cpu")


def _correctly_rounded(name: str, t: ET, x: np.ndarray) -> np.ndarray:
    """The op on the flushed input in float64 (long double for f64), rounded to t, its
    denormal results flushed as XLA CPU does."""
    fn = INEXACT_REF[name][0]
    xf = x.astype(np.float64)
    tiny = float(np.finfo(np.float64 if t is ET.F64 else np.float32).tiny)
    xf = np.where(np.abs(xf) < tiny, 0.0 * xf, xf)
    wide = t is ET.F64 and name not in ("erf", "logistic")
    with np.errstate(all="ignore"):
        r = np.asarray(fn(xf.astype(np.longdouble) if wide else xf)).astype(np.float64)
        r = np.where(np.abs(r) < tiny, 0.0 * r, r)
        return r.astype(t.dtype)


def _ops(arity: int, t: ET) -> list[str]:
    return [name for name, (types, _) in sorted(ew.TABLE.items())
            if t in types and OPS[name].arity == arity]


def _check(name: str, t: ET, ref: np.ndarray, got: np.ndarray, x: np.ndarray) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape, name
    if name in ew.INEXACT:
        fin = np.isfinite(x.astype(np.float64)) & (np.abs(x.astype(np.float64)) < 1e4)
        err = ulp_error(got[fin], _correctly_rounded(name, t, x[fin]))
        assert err <= _ulp_bound(name, t), f"{name} {t}: {err} ulp"
        nonfin = ~fin & ~np.isfinite(x.astype(np.float64))
        np.testing.assert_array_equal(got[nonfin].astype(np.float64),
                                      ref[nonfin].astype(np.float64), err_msg=f"{name} {t}")
        return
    if ref.dtype.kind == "f" or "float" in str(ref.dtype):
        a, b = got.astype(np.float64), ref.astype(np.float64)
        bad = ~((np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b))))
    else:
        bad = got != ref
    if np.any(bad):
        i = int(np.argmax(bad))
        raise AssertionError(f"{name} {t}: {int(bad.sum())} differ; first at {i}: "
                             f"x={x[i]!r} ours={got[i]!r} interpreter={ref[i]!r}")


@pytest.mark.parametrize("t", [t for t in TYPES if _ops(1, t)], ids=str)
def test_unary_ops(t: ET) -> None:
    names = _ops(1, t)
    rng = np.random.default_rng(1)
    x = values(t, N, rng)
    mod = module([Shape.array(t, (N,))], lambda c, p: [op(c, n, p) for n in names])
    ref, got, exe = run_both(mod, [x])
    assert "fallback" not in exe.explain().split("--")[0]
    for name, r, g in zip(names, ref, got):
        _check(name, t, r, g, x)


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_binary_ops(t: ET) -> None:
    names = _ops(2, t)
    rng = np.random.default_rng(2)
    x, y = values(t, N, rng), values(t, N, rng)
    ys = values(t, N, rng, small=True)

    def body(c, p):  # type: ignore[no-untyped-def]
        out = [op(c, n, [p[0], p[2] if n.startswith("shift") else p[1]]) for n in names]
        for d in ComparisonDirection:
            out.append(op(c, "compare", [p[0], p[1]], CompareAttrs(d)))
            labels.append(f"compare {d.value}")
            if t.is_float:
                out.append(op(c, "compare", [p[0], p[1]],
                              CompareAttrs(d, ComparisonType.TOTALORDER)))
                labels.append(f"compare {d.value} totalorder")
        pred = op(c, "compare", [p[0], p[1]], CompareAttrs(ComparisonDirection.LT))
        out.append(op(c, "select", [pred, p[0], p[1]]))
        labels.append("select")
        if t is not ET.PRED:
            out.append(op(c, "clamp", [p[1], p[0], p[2]]))
            labels.append("clamp")
        return out

    labels = list(names)

    mod = module([Shape.array(t, (N,))] * 3, body)
    ref, got, exe = run_both(mod, [x, y, ys])
    assert "fallback" not in exe.explain().split("--")[0]
    for name, r, g in zip(labels, ref, got):
        _check(name, t, r, g, x)


@pytest.mark.parametrize("s", TYPES, ids=str)
def test_convert_from(s: ET) -> None:
    targets = [t for t in TYPES if ewconv.convert_supported(s, t) and t != s]
    rng = np.random.default_rng(3)
    x = values(s, N, rng)
    mod = module([Shape.array(s, (N,))],
                 lambda c, p: [op(c, "convert", p, ConvertAttrs(t)) for t in targets])
    ref, got, _ = run_both(mod, [x])
    for t, r, g in zip(targets, ref, got):
        _check(f"convert {s}->{t}", t, r, g, x)


def test_unsupported_type_falls_back() -> None:
    mod = module([Shape.array(ET.C64, (4,))], lambda c, p: op(c, "exponential", p))
    x = np.array([1 + 1j, 0, -1j, 2], np.complex64)
    ref, got, exe = run_both(mod, [x])
    np.testing.assert_array_equal(got, ref)
    assert "interpreter fallback" in exe.explain()


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16, ET.F16], ids=str)
def test_chain_denormals_bit_exact(t: ET) -> None:
    """Fused chains skip input flushes of values FTZ already flushed: intermediate results
    that land in the denormal range (x * 0.5 at the smallest normal), negated/abs'd/selected
    leaves and constant operands must still flush exactly where the interpreter does."""
    from xlapy.ops.core import ConstantAttrs
    from xlapy.types import Literal

    rng = np.random.default_rng(4)
    x, y = values(t, N, rng), values(t, N, rng)
    tiny = float(ml_finfo(t).smallest_normal)
    x[:8] = [tiny, -tiny, tiny * 1.5, tiny / 4, -tiny / 4, 0.0, tiny * 2, 1.0]
    y[:8] = [tiny / 8, tiny, -tiny / 2, tiny, 1.0, -tiny / 4, 0.5, tiny / 2]
    sh = Shape.array(t, (N,))

    def const(c, v):  # type: ignore[no-untyped-def]
        lit = Literal.from_numpy(np.full((N,), v, t.dtype))
        return op(c, "constant", [], ConstantAttrs(lit))

    def body(c, p):  # type: ignore[no-untyped-def]
        half = op(c, "multiply", [p[0], const(c, 0.5)])           # denormal -> 0 by FTZ
        s = op(c, "add", [half, op(c, "negate", [p[1]])])         # negated denormal leaf
        m = op(c, "maximum", [s, op(c, "abs", [p[1]])])
        pred = op(c, "compare", [p[0], p[1]], CompareAttrs(ComparisonDirection.LT))
        sel = op(c, "select", [pred, p[1], half])                 # raw leaf through select
        one = op(c, "multiply", [sel, const(c, 1.0)])             # x * 1 must still flush
        d = op(c, "subtract", [one, op(c, "multiply", [m, const(c, 0.25)])])
        return [half, s, m, one, d, op(c, "add", [d, sel])]

    mod = module([sh, sh], body)
    ref, got, exe = run_both(mod, [x, y])
    assert "fallback" not in exe.explain().split("--")[0]
    for k, (r, g) in enumerate(zip(ref, got)):
        _check(f"chain result {k}", t, r, g, x)


def ml_finfo(t: ET) -> object:
    import ml_dtypes

    return ml_dtypes.finfo(t.dtype)
