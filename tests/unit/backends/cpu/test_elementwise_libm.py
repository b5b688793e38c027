"""power, atan2, cbrt and remainder compiled in kernels (elementwise_libm.py) against the
interpreter: bit for bit (the kernels call the libm functions NumPy calls; fmod and
integer power are exact), and never through the interpreter fallback. Also the chlo ops
the cpu backend lowers (ChloLowering in both compile paths) end up native."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
import xlapy.stablehlo  # noqa: F401  (registers the chlo.* ops)
from tests.unit.backends.cpu.util import module, op, run_both, values
from xlapy.backends import get_backend
from xlapy.ir import Module
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.types import ElementType as ET
from xlapy.types import Shape

FLOATS = [ET.F32, ET.F64, ET.BF16, ET.F16]
INTS = [ET.S8, ET.S16, ET.S32, ET.S64, ET.U8, ET.U16, ET.U32, ET.U64]
N = 1024


def _same(got: np.ndarray, ref: np.ndarray, what: str, *inputs: np.ndarray) -> None:
    """Bit-identical values (any NaN matches any NaN; signed zeros must match)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    if ref.dtype.kind in "biu":
        bad = got != ref
    else:
        a, b = got.astype(np.float64), ref.astype(np.float64)
        bad = ~((np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b))))
    if np.any(bad):
        i = int(np.argmax(bad))
        raise AssertionError(f"{what}: {int(bad.sum())} differ; first at {i}: inputs "
                             f"{[x[i] for x in inputs]} ours={got[i]!r} interpreter={ref[i]!r}")


def _no_fallback(exe: object, ops: list[str]) -> None:
    fb = {o for _, o in exe.fallbacks()}  # type: ignore[attr-defined]
    assert not fb & set(ops), f"fell back: {fb}"


@pytest.mark.parametrize("t", FLOATS, ids=str)
def test_float_ops_bit_exact(t: ET) -> None:
    rng = np.random.default_rng(11)
    with np.errstate(over="ignore"):
        x, y = values(t, N, rng), values(t, N, rng)
    y[N // 2:] = np.trunc(y[N // 2:].astype(np.float32)).astype(t.dtype)  # integral exponents
    x[N // 2: N // 2 + 64] = -np.abs(x[N // 2: N // 2 + 64])  # negative bases
    names = ["power", "atan2", "remainder"]
    mod = module([Shape.array(t, (N,))] * 2,
                 lambda c, p: [op(c, n, p) for n in names] + [op(c, "cbrt", [p[0]])])
    ref, got, exe = run_both(mod, [x, y])
    _no_fallback(exe, names + ["cbrt"])
    for n, r, g in zip(names + ["cbrt"], ref, got):
        _same(g, r, f"{n} {t}", x, y)


@pytest.mark.parametrize("t", INTS, ids=str)
def test_integer_power_bit_exact(t: ET) -> None:
    """Every exponent step of XLA's squaring loop: 0..70, the top bits, negatives."""
    rng = np.random.default_rng(12)
    base = values(t, N, rng)
    base[:8] = [0, 1, 2, 3, 4, 5, 7, 9]
    if t.is_signed:
        base[8:12] = [-1, -2, -3, -1]
    with np.errstate(invalid="ignore"):
        e = np.concatenate([np.arange(71), values(t, N - 71, rng)]).astype(t.dtype)
    mod = module([Shape.array(t, (N,))] * 2, lambda c, p: op(c, "power", p))
    for b in (base, np.roll(base, 3), np.full(N, -1 if t.is_signed else 3, t.dtype)):
        ref, got, exe = run_both(mod, [b, e])
        _no_fallback(exe, ["power"])
        _same(got, ref, f"power {t}", b, e)


@pytest.mark.parametrize("t,it", [(ET.F32, np.uint32), (ET.F64, np.uint64)], ids=str)
def test_fmod_random_bit_patterns(t: ET, it: type) -> None:
    """fmod on every kind of bit pattern (subnormals, huge exponent gaps, NaN, inf, zeros)
    against NumPy's fmod: exact. Only the divisor is flushed (XLA CPU)."""
    rng = np.random.default_rng(13)
    nb = 32 if t is ET.F32 else 64
    bits = rng.integers(0, 1 << 62, size=(2, 4 * N), dtype=np.int64).astype(np.uint64)
    bits = bits % np.uint64(1 << nb) if nb == 32 else bits * np.uint64(5)
    raw = bits.astype(it)
    # Small exponent gaps are the common case; mix in close magnitudes and subnormals.
    x, y = raw[0].view(t.dtype).copy(), raw[1].view(t.dtype).copy()
    with np.errstate(all="ignore"):
        y[: N] = (x[: N].astype(np.float64) / rng.uniform(0.5, 4096, N)).astype(t.dtype)
    x[N: 2 * N] = (raw[0][N: 2 * N] >> it(9)).view(t.dtype)  # subnormal dividends
    y[2 * N: 2 * N + 16] = 0
    mod = module([Shape.array(t, (4 * N,))] * 2, lambda c, p: op(c, "remainder", p))
    ref, got, exe = run_both(mod, [x, y])
    _no_fallback(exe, ["remainder"])
    _same(got, ref, f"remainder {t}", x, y)


#: chlo op -> operand count: the ops the cpu backend compiles natively.
CHLO = {
    "chlo.sinh": 1, "chlo.cosh": 1, "chlo.asinh": 1, "chlo.acosh": 1, "chlo.atanh": 1,
    "chlo.asin": 1, "chlo.acos": 1, "chlo.atan": 1, "chlo.erfc": 1, "chlo.erf_inv": 1,
    "chlo.square": 1, "chlo.is_inf": 1, "chlo.is_pos_inf": 1, "chlo.is_neg_inf": 1,
    "chlo.conj": 1, "chlo.next_after": 2, "chlo.lgamma": 1, "chlo.digamma": 1,
}


def _chlo_module(name: str, et: str, n: int) -> Module:
    g = HloBuilder()
    xs = [g.param(f"{et}[{n}]") for _ in range(CHLO[name])]
    return g.build(g.op(name, *xs))


def _chlo_args(name: str, t: ET, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(14)
    lo, hi = {"chlo.acosh": (1, 50), "chlo.atanh": (-0.99, 0.99), "chlo.asin": (-1, 1),
              "chlo.acos": (-1, 1), "chlo.erf_inv": (-0.999, 0.999), "chlo.lgamma": (0.1, 9),
              "chlo.digamma": (0.1, 9)}.get(name, (-5, 5))
    return [rng.uniform(lo, hi, n).astype(t.dtype) for _ in range(CHLO[name])]


@pytest.mark.parametrize("name", sorted(CHLO))
@pytest.mark.parametrize("et", ["f32", "bf16"])
def test_chlo_ops_compile_native(name: str, et: str) -> None:
    """Both compile paths (xlapy.compile, compile_function) lower the chlo op: nothing runs
    on the interpreter, and the result stays within the lowering tests' tolerance."""
    t = ET.F32 if et == "f32" else ET.BF16
    m = _chlo_module(name, et, 64)
    args = _chlo_args(name, t, 64)
    ref = xlapy.compile(m, backend="interpreter")(*args)
    exe = xlapy.compile(m, backend="cpu")
    assert not exe._exe.fallbacks(), exe._exe.explain()
    fn = get_backend("cpu").compile_function(m, m.entry_computation())
    assert not fn.fallbacks(), fn.explain()
    assert any(i.opcode.startswith("chlo.") for i in m.entry_computation().instructions), \
        "compile_function lowered the caller's module in place"
    eps = 1e-5 if et == "f32" else 1e-2
    for got in (exe(*args), fn.run(list(args))):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(ref, np.float64),
                                   rtol=eps, atol=eps, err_msg=name)


@pytest.mark.parametrize("et", ["s64", "u64", "s32"])
def test_chlo_mulhi_compiles_native(et: str) -> None:
    from xlapy.types import from_hlo_name

    t = from_hlo_name(et)
    info = np.iinfo(t.dtype)
    rng = np.random.default_rng(15)
    x, y = (rng.integers(info.min, info.max, 256, endpoint=True, dtype=t.dtype)
            for _ in range(2))
    x[:4], y[:4] = [info.min, info.max, info.min, 0], [info.min, info.max, info.max, 1]
    g = HloBuilder()
    m = g.build(g.op("chlo.mulhi", g.param(f"{et}[256]"), g.param(f"{et}[256]")))
    ref = xlapy.compile(m, backend="interpreter")(x, y)
    exe = xlapy.compile(m, backend="cpu")
    assert not exe._exe.fallbacks(), exe._exe.explain()
    np.testing.assert_array_equal(exe(x, y), ref)
