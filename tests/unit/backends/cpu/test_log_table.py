"""log_table.py: the f32 log from register tables (AVX-512: 16 entries, AVX2: 8) is within
1 ulp where its sums cancel (near 1, log1p of small values), takes the permute (no lane by
lane lookups) in vector kernels, and gives every element the same bits wherever it sits
(vector lanes, masked or scalar tails, either thread count)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import log_table
from xlapy.stablehlo.check import ulp_difference

UNARY = """func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = stablehlo.{op} %x : tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}"""


def _run(op: str, x: np.ndarray, threads: int = 2) -> tuple[np.ndarray, str]:
    prog = xlapy.compile(UNARY.format(n=x.size, op=op), backend="cpu",
                         options={"denormal": "ieee", "num_threads": threads, "split_cost": 1})
    return np.asarray(prog(x)), prog._exe.kernel_ir


@pytest.mark.parametrize(("op", "lo", "hi", "ref"), [
    ("log", 0.9, 1.1, np.log), ("log", 1.0234, 1.15, np.log), ("log", 0.69, 1.4, np.log),
    ("log_plus_one", 0.02, 0.04, np.log1p), ("log_plus_one", -0.3, 0.3, np.log1p)])
def test_within_an_ulp_where_the_sums_cancel(op: str, lo: float, hi: float, ref) -> None:  # noqa: ANN001
    """Near 1 the table's log(c) and r cancel: r = z invc - 1 rounded, and P evaluated at r
    without its rounding's share, each cost up to an ulp there (x = 1.0302: 2 ulp)."""
    x = np.linspace(lo, hi, 1 << 18).astype(np.float32)
    got, _ = _run(op, x)
    want = ref(x.astype(np.float64)).astype(np.float32)
    assert ulp_difference(got, want).max() <= 1


def test_tables() -> None:
    """The interval holding 1 has c = 1 (log(c) = 0); log(c) = hi + lo to ~2^-40, hi a
    multiple of 2^-16; P within ~2^-28 of log1p(r) - r over every interval's r."""
    for n in (8, 16):
        t = log_table.table(n)
        assert len(t.invc) == n and 1.0 in t.invc
        for ic, hi, lo in zip(t.invc, t.logc_hi, t.logc_lo):
            assert abs(hi + lo + np.log(ic)) < 2.0 ** -40
            assert hi * 2 ** 16 == round(hi * 2 ** 16)
        r = np.linspace(-0.52 / n, 0.52 / n, 10001)  # (|r| < 1/2n: a half interval over c)
        r = r[r != 0]
        p = np.polynomial.polynomial.polyval(r, np.array(t.poly))
        assert np.max(np.abs(r + r * r * p - np.log1p(r))) < 2.0 ** -28


@pytest.mark.parametrize("n", [1, 5, 16 * 9 + 7, 4099])
def test_same_bits_in_lanes_and_tails(n: int) -> None:
    """Each value's log has the same bits as a lane, in a tail or alone, on 1 or 2 threads:
    the tails read the same table (an element's bits never depend on the split)."""
    rng = np.random.default_rng(n)
    x = np.exp(rng.uniform(-80, 80, n)).astype(np.float32)
    one, ir_text = _run("log", x, 1)
    for shift in (1, 3):
        y = np.concatenate([rng.random(shift).astype(np.float32) + 0.5, x])
        got, _ = _run("log", y, 2)
        np.testing.assert_array_equal(got[shift:].view(np.uint32), one.view(np.uint32))
    alone = np.array([_run("log", x[k:k + 1], 1)[0][0] for k in range(min(n, 4))], np.float32)
    np.testing.assert_array_equal(alone.view(np.uint32), one[:alone.size].view(np.uint32))
    if log_table.size() and n > 64:
        assert "llvm.x86.avx" in ir_text and "perm" in ir_text  # the register table


def test_f64_log_from_two_register_tables() -> None:
    """f64 log: 16 entries in two zmm halves (vpermi2pd) on AVX-512, Taylor's log1p to r^11
    (|r| < 0.03): within 0.55 ulp of an 80-bit log over every binade, near 1 and on
    subnormals (the atanh form with its division measured 0.82); the same bits in the
    vector body and the scalar tail; +-0, negatives, inf and NaN as C's log."""
    if log_table.size() != 16:
        pytest.skip("the f64 table needs AVX-512")
    rng = np.random.default_rng(64)
    n = (1 << 16) + 7  # (a scalar tail)
    x = np.concatenate([np.exp(rng.uniform(-744, 709, n)), 1 + rng.uniform(-0.04, 0.04, n),
                        rng.uniform(0.69, 1.4, n), [5e-324, 1e-310, 1.0, 2.0, 0.5]])
    text = UNARY.format(n=x.size, op="log").replace("f32", "f64")
    prog = xlapy.compile(text, backend="cpu", options={"denormal": "ieee"})
    assert "vpermi2var.pd.512" in prog._exe.kernel_ir
    got = np.asarray(prog(x))
    ref = np.log(x.astype(np.longdouble))
    ulp = np.abs((got - ref) / np.spacing(np.abs(got)).astype(np.longdouble)).astype(float)
    assert ulp.max() <= 0.55, (ulp.max(), x[ulp.argmax()])
    tail = np.asarray(xlapy.compile(text.replace(f"{x.size}x", "5x"), backend="cpu",
                                    options={"denormal": "ieee"})(x[:5]))
    np.testing.assert_array_equal(tail.view(np.uint64), got[:5].view(np.uint64))
    sp = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan])
    text = UNARY.format(n=sp.size, op="log").replace("f32", "f64")
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(xlapy.compile(text, backend="cpu")(sp)),
                                      np.log(sp))
