"""The check dialect's rules (xlapy/stablehlo/check.py, after StableHLO's CheckOps.td/.cpp).

Each rule has a passing and a failing case; a failure must name the element index, both
values and (expect_close) the ulp difference.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.cli.main import run_chunk
from xlapy.stablehlo.check import UNBOUNDED, almost_equal, exactly_equal, ulp_difference


def _run(body: str) -> tuple[bool, str]:
    """Run the ops `body` in a function of no arguments with the interpreter."""
    text = f"func.func @main() {{\n{body}\n  func.return\n}}\n"
    result = run_chunk(text, "check_test.mlir")
    return result.ok, result.message


def _check(op: str, t: str, a: str, b: str, attrs: str = "") -> tuple[bool, str]:
    """`check.<op> %a, %b[, attrs] : t` on the constants `a` and `b`."""
    tail = f", {attrs}" if attrs else ""
    types = f"{t}, {t}" if op == "expect_close" else t
    return _run(f"  %a = stablehlo.constant dense<{a}> : {t}\n"
                f"  %b = stablehlo.constant dense<{b}> : {t}\n"
                f"  check.{op} %a, %b{tail} : {types}")


def _custom_call(target: str, t: str, a: str, b: str, attrs: str = "") -> tuple[bool, str]:
    """The JAX-exported form: `stablehlo.custom_call @check.<target>(%a, %b) {attrs}`."""
    attr_dict = f" {{{attrs}}}" if attrs else ""
    return _run(f"  %a = stablehlo.constant dense<{a}> : {t}\n"
                f"  %b = stablehlo.constant dense<{b}> : {t}\n"
                f"  stablehlo.custom_call @check.{target}(%a, %b){attr_dict} : ({t}, {t}) -> ()")


def _fails(result: tuple[bool, str], *parts: str) -> str:
    ok, message = result
    assert not ok, "the check passed"
    for p in parts:
        assert p in message, f"{p!r} not in {message!r}"
    return message


def _passes(result: tuple[bool, str]) -> None:
    ok, message = result
    assert ok, message


ONE_PLUS_1ULP = "0x3F800001"  # f32 1.0000001
ONE_PLUS_2ULP = "0x3F800002"


# ---- expect_close ---------------------------------------------------------------------------
def test_expect_close_default_max_ulp_difference_is_1() -> None:
    _passes(_check("expect_close", "tensor<f32>", "1.0", ONE_PLUS_1ULP))
    _fails(_check("expect_close", "tensor<f32>", "1.0", ONE_PLUS_2ULP),
           "index []", "actual 1.0 (0x3f800000)", "expected 1.0000002 (0x3f800002)",
           "ulp difference 2", "allowed [0, 1]")


def test_expect_close_max_ulp_difference_attribute() -> None:
    _passes(_check("expect_close", "tensor<f16>", "5.0", "5.010", "max_ulp_difference = 3"))
    _fails(_check("expect_close", "tensor<f16>", "5.0", "5.020", "max_ulp_difference = 3"),
           "ulp difference 5", "allowed [0, 3]")


def test_expect_close_min_ulp_difference() -> None:
    close = "max_ulp_difference = 2, min_ulp_difference = 1"
    _passes(_check("expect_close", "tensor<f32>", "1.0", ONE_PLUS_1ULP, close))
    _fails(_check("expect_close", "tensor<f32>", "1.0", "1.0", close),
           "ulp difference 0", "allowed [1, 2]")


def test_expect_close_bounds_apply_per_element() -> None:
    """Element 0 is equal (0 < min) while element 1 is 2 ulps away: the worst element alone
    (2, within [1, 2]) would pass."""
    close = "max_ulp_difference = 2, min_ulp_difference = 1"
    _passes(_check("expect_close", "tensor<2xf32>", f"[{ONE_PLUS_1ULP}, {ONE_PLUS_2ULP}]",
                   "[1.0, 1.0]", close))
    _fails(_check("expect_close", "tensor<2xf32>", f"[1.0, {ONE_PLUS_2ULP}]",
                  "[1.0, 1.0]", close),
           "1 of 2 elements", "index [0]", "ulp difference 0")


def test_expect_close_non_finite_pairs_match_only_when_identical() -> None:
    inf, big, nan = "0x7F800000", "0x7F7FFFFF", "0x7FC00000"
    _passes(_check("expect_close", "tensor<3xf32>", f"[{inf}, {nan}, 0xFF800000]",
                   f"[{inf}, {nan}, 0xFF800000]"))
    # inf and the largest float are adjacent bit patterns (1 ulp), but inf is not close
    _fails(_check("expect_close", "tensor<2xf32>", f"[1.0, {inf}]", f"[1.0, {big}]"),
           "index [1]", "actual inf (0x7f800000)", "unbounded")
    _fails(_check("expect_close", "tensor<f32>", nan, "1.0"), "actual nan", "unbounded")


def test_expect_close_signed_zeros_are_one_point() -> None:
    _passes(_check("expect_close", "tensor<f32>", "-0.0", "0.0", "max_ulp_difference = 0"))
    # the smallest subnormals of either sign are 1 ulp from zero, 2 from each other
    _fails(_check("expect_close", "tensor<f32>", "0x80000001", "0x00000001"),
           "ulp difference 2")


def test_expect_close_complex_parts_separately() -> None:
    t = "tensor<complex<f32>>"
    _passes(_check("expect_close", t, "(1.0, 2.0)", "(1.0, 2.0)"))
    _fails(_check("expect_close", t, "(1.0, 2.0)", "(1.0, 2.0000005)"),
           "imaginary part of actual 2.0", "ulp difference 2")
    # per part: the real part (0 ulps) is below min even though the imaginary part is not
    _fails(_check("expect_close", t, "(1.0, 2.0)", "(1.0, 2.0000002)",
                  "max_ulp_difference = 1, min_ulp_difference = 1"),
           "real part of actual 1.0", "ulp difference 0")


def test_ulp_difference_counts_representable_values() -> None:
    f64 = np.array([np.finfo(np.float64).max, 1.0, -0.0])
    got = ulp_difference(-f64, f64)
    assert int(got[0]) == 2 * 0x7FEFFFFFFFFFFFFF  # no int64 overflow
    assert int(got[2]) == 0
    bf16 = np.array([1.0], ml_dtypes.bfloat16)
    assert int(ulp_difference(bf16, np.nextafter(np.float32(1.0), np.float32(2.0))
                              .astype(ml_dtypes.bfloat16))[0]) == 0
    f8 = np.array([1.0, 1.125], ml_dtypes.float8_e4m3fn)
    assert int(ulp_difference(f8[:1], f8[1:])[0]) == 1
    assert int(ulp_difference(np.array([1, -3], np.int32), np.array([4, 3], np.int32))[1]) == 6
    i64 = np.iinfo(np.int64)
    assert int(ulp_difference(np.array([i64.min]), np.array([i64.max]))[0]) == 2**64 - 1
    assert int(ulp_difference(np.array([np.nan]), np.array([np.inf]))[0]) == UNBOUNDED


# ---- the custom_call form -------------------------------------------------------------------
def test_custom_call_expect_close_takes_the_defaults() -> None:
    _passes(_custom_call("expect_close", "tensor<f32>", "1.0", ONE_PLUS_1ULP,
                         "has_side_effect = true"))
    _fails(_custom_call("expect_close", "tensor<f32>", "1.0", ONE_PLUS_2ULP),
           "check.expect_close", "ulp difference 2", "allowed [0, 1]")


def test_custom_call_expect_close_with_attributes() -> None:
    attrs = "has_side_effect = true, max_ulp_difference = 3 : i64"
    _passes(_custom_call("expect_close", "tensor<f32>", "1.0", "0x3F800003", attrs))
    _fails(_custom_call("expect_close", "tensor<f32>", "1.0", "0x3F800004", attrs),
           "ulp difference 4", "allowed [0, 3]")


def test_custom_call_expect_eq_and_almost_eq() -> None:
    _passes(_custom_call("expect_eq", "tensor<2xi32>", "[1, 2]", "[1, 2]"))
    _fails(_custom_call("expect_eq", "tensor<2xi32>", "[1, 2]", "[1, 3]",
                        "has_side_effect = true"),
           "check.expect_eq", "index [1]", "actual 2 vs expected 3")
    _passes(_custom_call("expect_almost_eq", "tensor<f32>", "1.0", "1.00005"))
    _fails(_custom_call("expect_almost_eq", "tensor<f32>", "1.0", "1.001"),
           "check.expect_almost_eq", "tolerance 0.0001")


# ---- expect_eq ------------------------------------------------------------------------------
def test_expect_eq_integers_by_value() -> None:
    _passes(_check("expect_eq", "tensor<2x2xi8>", "[[1, -2], [3, 4]]", "[[1, -2], [3, 4]]"))
    _fails(_check("expect_eq", "tensor<2x2xi8>", "[[1, -2], [3, 4]]", "[[1, -2], [3, 5]]"),
           "1 of 4 elements", "index [1, 1]", "actual 4 vs expected 5")


def test_expect_eq_floats_bitwise() -> None:
    nan = "0x7FC00000"
    _passes(_check("expect_eq", "tensor<2xf32>", f"[{nan}, -0.0]", f"[{nan}, -0.0]"))
    _fails(_check("expect_eq", "tensor<f32>", "-0.0", "0.0"),
           "actual -0.0 (0x80000000) vs expected 0.0 (0x00000000)")
    _fails(_check("expect_eq", "tensor<f32>", nan, "0xFFC00000"), "index []")
    _fails(_check("expect_eq", "tensor<f32>", "1.0", ONE_PLUS_1ULP), "index []")


def test_expect_eq_const() -> None:
    body = "  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n" \
           "  check.expect_eq_const %a, dense<[1.0, {}]> : tensor<2xf32>"
    _passes(_run(body.format("2.0")))
    _fails(_run(body.format("2.5")), "check.expect_eq_const", "index [1]",
           "actual 2.0 (0x40000000) vs expected 2.5")


def test_expect_eq_complex_parts() -> None:
    t = "tensor<complex<f64>>"
    _passes(_check("expect_eq", t, "(1.0, -0.0)", "(1.0, -0.0)"))
    _fails(_check("expect_eq", t, "(1.0, -0.0)", "(1.0, 0.0)"), "imaginary part of actual -0.0")


# ---- expect_almost_eq -----------------------------------------------------------------------
def test_expect_almost_eq_default_tolerance() -> None:
    _passes(_check("expect_almost_eq", "tensor<2xf64>", "[1.0, 2.0]", "[1.00009, 1.99991]"))
    _fails(_check("expect_almost_eq", "tensor<2xf64>", "[1.0, 2.0]", "[1.00009, 2.0002]"),
           "index [1]", "actual 2.0 (0x4000000000000000) vs expected 2.0002",
           "tolerance 0.0001")


def test_expect_almost_eq_tolerance_attribute() -> None:
    _passes(_check("expect_almost_eq", "tensor<f64>", "5.0", "5.1", "tolerance = 0.1"))
    _fails(_check("expect_almost_eq", "tensor<f64>", "5.0", "5.2", "tolerance = 0.1"),
           "tolerance 0.1")


def test_expect_almost_eq_const() -> None:
    body = "  %a = stablehlo.constant dense<5.0> : tensor<f64>\n" \
           "  check.expect_almost_eq_const %a, dense<{}> : tensor<f64>{}"
    _passes(_run(body.format("5.00001", "")))
    _passes(_run(body.format("5.1", " {tolerance = 0.1 : f64}")))
    _fails(_run(body.format("5.001", "")), "check.expect_almost_eq_const",
           "actual 5.0", "expected 5.001", "tolerance 0.0001")


def test_expect_almost_eq_tolerance_rounds_to_the_element_type() -> None:
    """f16(1e-4) is 1.0001659e-4: a difference of exactly that is within the tolerance."""
    tol16 = np.float16(1e-4)
    assert float(tol16) > 1e-4
    assert almost_equal(np.array([tol16]), np.array([0.0], np.float16), 1e-4).all()
    assert not almost_equal(np.array([np.float16(2e-4)]), np.array([0.0], np.float16),
                            1e-4).any()


def test_expect_almost_eq_non_finite() -> None:
    nan, inf = "0x7FC00000", "0x7F800000"
    _passes(_check("expect_almost_eq", "tensor<3xf32>", f"[{nan}, {inf}, 0xFF800000]",
                   f"[0xFFC00001, {inf}, 0xFF800000]"))
    _fails(_check("expect_almost_eq", "tensor<f32>", nan, "1.0"), "actual nan")
    _fails(_check("expect_almost_eq", "tensor<f32>", inf, "0xFF800000"), "actual inf")


def test_expect_almost_eq_integers_exactly() -> None:
    _passes(_check("expect_almost_eq", "tensor<2xi32>", "[1, 2]", "[1, 2]"))
    _fails(_check("expect_almost_eq", "tensor<2xi32>", "[1, 2]", "[1, 3]"), "index [1]")


def test_expect_almost_eq_complex_parts() -> None:
    t = "tensor<complex<f32>>"
    _passes(_check("expect_almost_eq", t, "(1.0, 2.0)", "(1.00005, 1.99995)"))
    _fails(_check("expect_almost_eq", t, "(1.0, 2.0)", "(1.00005, 2.001)"),
           "imaginary part of actual 2.0")


# ---- expect_serialized_eq -------------------------------------------------------------------
def test_expect_serialized_eq_compares_exactly() -> None:
    body = "  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi64>\n" \
           "  %b = stablehlo.constant dense<[1, {}]> : tensor<2xi64>\n" \
           "  %p = interpreter.probe %a, probe_id = \"p\" : tensor<2xi64>\n" \
           "  check.expect_serialized_eq %b, probe_id = \"p\" : tensor<2xi64>"
    _passes(_run(body.format("2")))
    _fails(_run(body.format("7")), "check.expect_serialized_eq", "index [1]",
           "actual 7 vs expected 2")


def test_exactly_equal_is_per_element() -> None:
    got = exactly_equal(np.array([0.0, -0.0, np.nan]), np.array([0.0, 0.0, np.nan]))
    assert got.tolist() == [True, False, True]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, ml_dtypes.bfloat16,
                                   ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu])
def test_equal_values_are_always_almost_equal(dtype: type) -> None:
    x = np.array([1.0, 0.5, 4.0], np.float32).astype(dtype)
    assert almost_equal(x, x.copy(), 1e-4).all()
    assert (ulp_difference(x, x.copy()) == 0).all()
