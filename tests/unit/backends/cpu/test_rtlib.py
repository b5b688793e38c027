"""The runtime library's compiler-rt functions (rtlib.py), called the way LLVM's libcalls
call them, against numpy / ml_dtypes / exact Python arithmetic: exhaustive where the input
type has 16 bits, edge cases and random bit patterns otherwise."""

from __future__ import annotations

import ctypes
import functools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

from xlapy.backends.cpu import rtlib
from xlapy.backends.cpu.llvm_util import I8P, I64, Engine, new_module

_INT = {"hf": (ir.IntType(16), np.uint16), "bf": (ir.IntType(16), np.uint16),
        "sf": (ir.IntType(32), np.uint32), "df": (ir.IntType(64), np.uint64)}
_FLOAT = {"hf": np.float16, "bf": ml_dtypes.bfloat16, "sf": np.float32, "df": np.float64}
_RUN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


@functools.cache
def _caller(name: str) -> tuple[Engine, object]:
    """run(src, dst, n): dst[i] = name(src[i]), through a call to the runtime's symbol."""
    src, dst = rtlib.CONVERSIONS[name]
    st, dt = rtlib._FORMATS[src][0](), rtlib._FORMATS[dst][0]()
    si, di = _INT[src][0], _INT[dst][0]
    mod = new_module(f"call_{name}")
    callee = ir.Function(mod, ir.FunctionType(dt, [st]), name=name)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I8P, I8P, I64]), name="run")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    loop, done = fn.append_basic_block("loop"), fn.append_basic_block("done")
    entry = b.block
    b.cbranch(b.icmp_signed(">", fn.args[2], I64(0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(I64)
    i.add_incoming(I64(0), entry)
    x = b.load(b.gep(b.bitcast(fn.args[0], si.as_pointer()), [i]))
    y = b.call(callee, [b.bitcast(x, st)])
    b.store(b.bitcast(y, di), b.gep(b.bitcast(fn.args[1], di.as_pointer()), [i]))
    nxt = b.add(i, I64(1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[2]), loop, done)
    b.position_at_end(done)
    b.ret_void()
    eng = Engine(mod, exports=["run"])
    return eng, _RUN(eng.address("run"))


def convert(name: str, bits: np.ndarray) -> np.ndarray:
    src, dst = rtlib.CONVERSIONS[name]
    x = np.ascontiguousarray(bits.astype(_INT[src][1]))
    out = np.zeros(x.shape, _INT[dst][1])
    _caller(name)[1](x.ctypes.data, out.ctypes.data, x.size)
    return out


def _same(got_bits: np.ndarray, want: np.ndarray, dst: str, x: np.ndarray) -> None:
    """Bit-identical, except that any NaN matches any NaN (payload rules differ by library)."""
    want_bits = want.view(_INT[dst][1])
    with np.errstate(invalid="ignore"):  # NaN payloads widen with a warning
        got = got_bits.view(_FLOAT[dst]).astype(np.float64)
        nan = np.isnan(want.astype(np.float64))
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero((got_bits != want_bits) & ~nan)
    if bad.size:
        k = bad[0]
        raise AssertionError(f"{bad.size} differ; first: input {x.flat[k]!r} -> "
                             f"{got_bits[k]:#x}, want {want_bits[k]:#x}")


def _edge_bits(nbits: int, mant: int, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random bit patterns, plus every exponent with mantissas at rounding boundaries."""
    dt = _INT["sf" if nbits == 32 else "df"][1]
    rand = rng.integers(0, 1 << nbits, size=n, dtype=np.uint64 if nbits == 64 else np.int64)
    exps = np.arange(1 << (nbits - 1 - mant), dtype=np.uint64) << np.uint64(mant)
    low = np.array([0, 1, 2, (1 << (mant - 13)) - 1, 1 << (mant - 11), (1 << mant) - 1,
                    (1 << (mant - 1)) + 1, 1 << (mant - 1), 1 << (mant - 14),
                    (1 << (mant - 14)) | 1, 3 << (mant - 12)], dtype=np.uint64)
    edges = (exps[:, None] | (low[None, :] & np.uint64((1 << mant) - 1))).ravel()
    both = np.concatenate([rand.astype(np.uint64), edges])
    sign = np.uint64(1) << np.uint64(nbits - 1)
    return np.concatenate([both, both | sign]).astype(dt)


@pytest.mark.parametrize("name", ["__extendhfsf2", "__extendhfdf2", "__extendbfsf2"])
def test_widening_is_exact_for_every_input(name: str) -> None:
    src, dst = rtlib.CONVERSIONS[name]
    bits = np.arange(1 << 16, dtype=np.uint16)
    x = bits.view(_FLOAT[src])
    _same(convert(name, bits), x.astype(_FLOAT[dst]), dst, x)


@pytest.mark.parametrize("name", ["__truncsfhf2", "__truncdfhf2", "__truncsfbf2"])
def test_narrowing_rounds_to_nearest_even(name: str) -> None:
    src, dst = rtlib.CONVERSIONS[name]
    nbits, mant = (32, 23) if src == "sf" else (64, 52)
    bits = _edge_bits(nbits, mant, np.random.default_rng(3), 200_000)
    x = bits.view(_FLOAT[src])
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(_FLOAT[dst])  # numpy and ml_dtypes round these directly
    _same(convert(name, bits), want, dst, x)


def test_narrowing_covers_every_half_and_bfloat_result() -> None:
    """Every f16 / bf16 value, and the midpoints between neighbours (ties to even), from
    f32 and f64."""
    for dst in ("hf", "bf"):
        with np.errstate(invalid="ignore"):
            vals = np.arange(1 << 16, dtype=np.uint16).view(_FLOAT[dst]).astype(np.float64)
        vals = np.sort(vals[np.isfinite(vals)])
        mids = (vals[:-1] + vals[1:]) / 2  # exact in f64
        for src in ("sf", "df"):
            name = f"__trunc{src}{dst}2"
            if name not in rtlib.CONVERSIONS:
                continue
            x = np.concatenate([vals, mids]).astype(_FLOAT[src])
            with np.errstate(over="ignore"):
                want = x.astype(_FLOAT[dst])
            _same(convert(name, x.view(_INT[src][1])), want, dst, x)


def _exact_bf16(v: float) -> np.uint16:
    """f64 -> bf16 rounded once to nearest even, in exact arithmetic."""
    sign = 0x8000 if np.signbit(v) else 0
    if v != v:
        return np.uint16(sign | 0x7FC0)  # quiet, sign kept
    a = Fraction(abs(v)) if np.isfinite(v) else None
    if a is None or a >= Fraction(2) ** 128 * (1 - Fraction(1, 2 ** 9)):
        return np.uint16(sign | 0x7F80)
    if a == 0:
        return np.uint16(sign)
    e = max(a.numerator.bit_length() - a.denominator.bit_length() + 1, -125)
    while Fraction(2) ** (e - 1) > a:
        e -= 1
    while Fraction(2) ** e <= a:
        e += 1
    e = max(e, -125)  # below 2^-126: the subnormal spacing 2^-133
    unit = Fraction(2) ** (e - 8)
    q, r = divmod(a, unit)
    q = int(q) + (1 if r > unit / 2 or (r == unit / 2 and int(q) % 2) else 0)
    return np.uint16(sign | int(np.float64(q * unit).astype(np.float32).astype(
        ml_dtypes.bfloat16).view(np.uint16)))


def test_f64_to_bf16_rounds_once() -> None:
    """Direct rounding, not through f32 (double rounding would differ on these)."""
    rng = np.random.default_rng(5)
    base = rng.standard_normal(400) * np.exp2(rng.integers(-140, 130, 400))
    # values just past a bf16 midpoint by less than an f32 ulp: f32 would round them to it
    mid = np.float64(1 + 2 ** -8)
    tricky = np.array([mid + 2 ** -40, mid - 2 ** -40, 1 + 3 * 2 ** -8 + 2 ** -45, 1e-40,
                       3e38, 3.4e38, 2.0 ** -133, 2.0 ** -134, 2.0 ** -134 * 1.5, np.inf,
                       -np.inf, np.nan, 0.0, -0.0])
    x = np.concatenate([base, tricky, -tricky])
    got = convert("__truncdfbf2", x.view(np.uint64))
    want = np.array([_exact_bf16(float(v)) for v in x], np.uint16)
    assert np.array_equal(got, want), [(v, g, w) for v, g, w in zip(x, got, want) if g != w]


@functools.cache
def _divider(name: str) -> object:
    i128 = ir.IntType(128)
    mod = new_module(f"call_{name}")
    callee = ir.Function(mod, ir.FunctionType(i128, [i128, i128]), name=name)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I8P, I8P, I8P]), name="run")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    p = [b.bitcast(a, i128.as_pointer()) for a in fn.args]
    b.store(b.call(callee, [b.load(p[0], align=8), b.load(p[1], align=8)]), p[2], align=8)
    b.ret_void()
    eng = Engine(mod, exports=["run"])
    return eng, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p)(eng.address("run"))


def _i128(v: int) -> ctypes.Array:
    return (ctypes.c_uint8 * 16).from_buffer_copy((v % (1 << 128)).to_bytes(16, "little"))


@pytest.mark.parametrize("name", rtlib.DIVISIONS)
def test_128_bit_division(name: str) -> None:
    rng = np.random.default_rng(11)
    signed = not name.startswith("__u")
    run = _divider(name)[1]
    cases = [(7, 2), (-7, 2), (7, -2), (-7, -2), (1 << 127, 3), ((1 << 127) - 1, 1),
             (5, 7), (0, 9), ((1 << 100) + 12345, (1 << 64) + 1)]
    for _ in range(300):
        a = int.from_bytes(rng.bytes(16), "little") >> int(rng.integers(0, 127))
        d = int.from_bytes(rng.bytes(16), "little") >> int(rng.integers(1, 127))
        cases.append((a, d or 1))
    for a, d in cases:
        if signed:
            a = (a + (1 << 127)) % (1 << 128) - (1 << 127)
            d = (d + (1 << 127)) % (1 << 128) - (1 << 127)
            q = abs(a) // abs(d) * (1 if (a < 0) == (d < 0) else -1)
            want = q if "div" in name else a - q * d
        else:
            a, d = a % (1 << 128), d % (1 << 128)
            want = a // d if "div" in name else a % d
        out = _i128(0)
        run(_i128(a), _i128(d), out)
        assert int.from_bytes(bytes(out), "little") == want % (1 << 128), (name, a, d)


def test_libc_and_libm_are_bound_by_name() -> None:
    addrs = rtlib.bound_addresses()
    for name in ("memcpy", "memset", "fmod", "fmodf", "fma", "fmaf", "syscall"):
        assert addrs.get(name), name
