"""Division by a value fixed per row (row_divide.py) has the division's bits: millions of
quotients over the whole exponent range where the product form runs (and around its
bounds), special values and rows that must take the division (negative, zero, tiny, huge,
inf and NaN divisors; vectors holding denormals, infinities, NaN, tiny or huge values),
f32 and f64, FTZ and IEEE denormal modes; compared with the same kernel dividing (bits
equal), with NumPy's correctly rounded division in the IEEE mode, and with the
interpreter. Softmax's divide takes the product form, an element-wise divide does not."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, row_divide, target

DIVIDE = """
func.func public @main(%x: tensor<{r}x{c}x{t}>, %d: tensor<{r}x{t}>) -> tensor<{r}x{c}x{t}> {{
  %b = stablehlo.broadcast_in_dim %d, dims = [0] : (tensor<{r}x{t}>) -> tensor<{r}x{c}x{t}>
  %q = stablehlo.divide %x, %b : tensor<{r}x{c}x{t}>
  return %q : tensor<{r}x{c}x{t}>
}}
"""


def _log_uniform(rng: np.random.Generator, n: int, lo: float, hi: float,
                 dt: type) -> np.ndarray:
    """Random signs, exponents uniform in [lo, hi] (base 2), random mantissas."""
    v = np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    return v.astype(dt)


def _case(dt: type, rows: int, cols: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Dividends and divisors: most rows in the product form's range, some at its edges
    and beyond, special values in every row and whole rows of specials."""
    rng = np.random.default_rng(seed)
    e = 60 if dt is np.float32 else 450
    tiny = np.finfo(dt).tiny
    x = _log_uniform(rng, rows * cols, -e, e, dt).reshape(rows, cols)
    d = np.abs(_log_uniform(rng, rows, -e, e, dt))
    edge = np.array([2.0 ** -e, 2.0 ** e, np.nextafter(dt(2.0 ** -e), dt(0)),
                     np.nextafter(dt(2.0 ** e), dt(np.inf)), 1.0, 3.0], dt)
    d[:len(edge)] = edge
    bad_d = np.array([-3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, tiny / 4, tiny,
                      2.0 ** (-e - 3), 2.0 ** (e + 3)], dt)
    d[len(edge):len(edge) + len(bad_d)] = bad_d
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny / 8, -tiny / 8, tiny,
                         2.0 ** -e, -(2.0 ** e), np.nextafter(dt(2.0 ** -e), dt(0)),
                         np.nextafter(dt(2.0 ** e), dt(np.inf)), np.finfo(dt).max,
                         2.0 ** (-e - 20), 2.0 ** (e + 20)], dt)
    for i in range(rows):  # one special per row, at a varying column
        x[i, (7 * i) % cols] = specials[i % len(specials)]
    x[-1, :] = 0.0  # whole vectors of zeros take the product form
    x[-2, ::2] = -0.0
    x[-3] = _log_uniform(rng, cols, -e - 30, -e, dt)  # tiny: the division
    return x, d


def _compile(dt: type, rows: int, cols: int, mode: str) -> xlapy.CompiledProgram:
    t = "f32" if dt is np.float32 else "f64"
    cache.clear_memory()
    return xlapy.compile(DIVIDE.format(r=rows, c=cols, t=t), backend="cpu",
                         options={"num_threads": 2, "denormal": mode})


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bits_of_the_division(dt: type, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(row_divide, "general", lambda t, f64: True)  # (Zen: f32 divides)
    rows, cols = 600, 2048 if dt is np.float32 else 1024
    x, d = _case(dt, rows, cols, seed=5)
    got = np.asarray(_compile(dt, rows, cols, mode)(x, d))
    with monkeypatch.context() as m:
        m.setattr(row_divide, "applies", lambda *a: False)
        plain = np.asarray(_compile(dt, rows, cols, mode)(x, d))
    np.testing.assert_array_equal(got, plain)
    if mode == "ieee":
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(got, x / d[:, None])
    else:
        ref = np.asarray(xlapy.compile(DIVIDE.format(
            r=rows, c=cols, t="f32" if dt is np.float32 else "f64"), backend="interpreter")(x, d))
        np.testing.assert_array_equal(got, ref)


def test_division_between_binade_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dividends and divisors with mantissas near 1 and 2 (quotients near the rounding
    boundaries of every binade), f32, against NumPy."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(row_divide, "general", lambda t, f64: True)
    rng = np.random.default_rng(9)
    rows, cols = 512, 4096
    m = np.concatenate([1 + rng.integers(0, 64, cols // 2) * 2.0 ** -23,
                        2 - rng.integers(1, 64, cols // 2) * 2.0 ** -23])
    x = (m * np.exp2(rng.integers(-59, 59, cols))).astype(np.float32)
    x = np.tile(x, (rows, 1))
    d = np.concatenate([1 + rng.integers(0, 64, rows // 2) * 2.0 ** -23,
                        2 - rng.integers(1, 64, rows // 2) * 2.0 ** -23]).astype(np.float32)
    got = np.asarray(_compile(np.float32, rows, cols, "ftz")(x, d))
    np.testing.assert_array_equal(got, x / d[:, None])


def test_softmax_divides_by_its_sum_as_a_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product form runs on AVX-512 targets (x86-64-v3: for an exp numerator, softmax's;
    not v2), for the row-invariant
    divisor only."""
    calls: list[bool] = []
    real = row_divide.applies

    def spy(a, d, hoisted, nonneg=False):  # type: ignore[no-untyped-def]
        calls.append(real(a, d, hoisted, nonneg))
        return calls[-1]

    monkeypatch.setattr(row_divide, "applies", spy)
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    from tests.unit.backends.cpu.test_row_prefetch import softmax_text
    x = np.random.default_rng(4).standard_normal((64, 256)).astype(np.float32)
    cache.clear_memory()
    got = np.asarray(xlapy.compile(softmax_text((64, 256)), backend="cpu")(x))
    t = target.current()  # (AVX2: for softmax's exp numerator)
    assert any(calls) == (t.has("avx512f") or t.has("avx2") and t.has("fma"))
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=2e-6)
    calls.clear()
    cache.clear_memory()
    text = DIVIDE.format(r=4, c=64, t="f32")
    xlapy.compile(text.replace("divide %x, %b", "divide %x, %x"), backend="cpu")
    assert not any(calls)  # x / x: nothing fixed per row


def test_signed_f32_numerators_divide_on_zen() -> None:
    """A signed f32 numerator over a row's value divides on AMD Zen (its divider keeps up;
    the product form's test and branch cost more) and takes the product form on other
    AVX-512 CPUs; f64 and softmax's exp numerator take it on both."""
    from llvmlite import ir

    from xlapy.backends.cpu.llvm_util import F32, F64

    d32, d64 = ir.Constant(F32, 3.0), ir.Constant(F64, 3.0)
    a32 = ir.Constant(ir.VectorType(F32, 16), [ir.Constant(F32, 1.0)] * 16)
    a64 = ir.Constant(ir.VectorType(F64, 8), [ir.Constant(F64, 1.0)] * 8)
    for name, signed32 in (("znver4", False), ("znver5", False), ("cooperlake", True),
                           ("sapphirerapids", True), ("x86-64-v4", True)):
        with target.use(name):
            assert row_divide.applies(a32, d32, True) == signed32, name
            assert row_divide.applies(a64, d64, True), name
            assert row_divide.applies(a32, d32, True, nonneg=True), name


def test_a_bf16_quotient_rounds_in_one_instruction(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product form's result is flushed (an fma's or the division's), so its rounding
    to bf16 is one vcvtneps2bf16 on AVX512-BF16 targets (it was the ~10-instruction integer
    rounding: jax l2-normalized bf16 rows 0.95 -> 0.74 ms, 2 threads); the interpreter's
    bits, special values and the division's rows included."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(row_divide, "general", lambda t, f64: True)
    rows, cols = 300, 512
    x, d = _case(np.float32, rows, cols, seed=8)
    shape = f"tensor<{rows}x{cols}x"
    text = DIVIDE.format(r=rows, c=cols, t="f32").replace(
        f"return %q : {shape}f32>",
        f"%h = stablehlo.convert %q : ({shape}f32>) -> {shape}bf16>\n"
        f"  return %h : {shape}bf16>").replace(f"-> {shape}f32> {{", f"-> {shape}bf16> {{")
    assert "xbf16>" in text
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"denormal": "ftz"})
    got = np.asarray(prog(x, d))
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(x, d))
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))
    t = target.current()
    if t.has("avx512bf16") and t.has("avx512f"):
        assert "cvtneps2bf16" in prog._exe.kernel_ir
