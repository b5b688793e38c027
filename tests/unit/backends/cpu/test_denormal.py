"""The denormal modes (xlapy.denormal): `ftz` (XLA CPU's, the default) and `ieee` (the spec's),
honoured alike by the interpreter and the cpu backend, chosen by compile options, `Client`
options, `denormal.use` or `xlapy run --denormal`."""

from __future__ import annotations

import io

import numpy as np
import pytest

import xlapy
from xlapy import denormal
from xlapy.cli.main import main
from xlapy.errors import XlapyError

BACKENDS = ("interpreter", "cpu")
MODES = denormal.MODES


def _unary(op: str, t: str, n: int) -> str:
    return (f"func.func @main(%x: tensor<{n}x{t}>) -> tensor<{n}x{t}> {{\n"
            f"  %0 = stablehlo.{op} %x : tensor<{n}x{t}>\n  return %0 : tensor<{n}x{t}>\n}}")


def _binary(op: str, t: str, n: int) -> str:
    return (f"func.func @main(%x: tensor<{n}x{t}>, %y: tensor<{n}x{t}>) -> tensor<{n}x{t}> {{\n"
            f"  %0 = stablehlo.{op} %x, %y : tensor<{n}x{t}>\n  return %0 : tensor<{n}x{t}>\n}}")


def _run(text: str, backend: str, mode: str, *args: np.ndarray) -> np.ndarray:
    return np.asarray(xlapy.compile(text, backend=backend, options={"denormal": mode})(*args))


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_square_of_a_tiny_value(backend: str) -> None:
    """(-3.2e-20)^2 = 1.024e-39 is subnormal: 0 under ftz, kept under ieee, on both backends
    (they disagreed before the modes: the interpreter's power flushed, a kernel did not)."""
    x = np.array([-3.2e-20, 2.0], np.float32)
    two = np.array([2.0, 2.0], np.float32)
    for op in ("multiply", "power"):
        args = (x, x) if op == "multiply" else (x, two)
        ftz = _run(_binary(op, "f32", 2), backend, "ftz", *args)
        ieee = _run(_binary(op, "f32", 2), backend, "ieee", *args)
        assert _bits(ftz).tolist() == _bits(np.array([0.0, 4.0], np.float32)).tolist(), op
        assert ieee[0] == np.float32(-3.2e-20) * np.float32(-3.2e-20) != 0, op


@pytest.mark.parametrize("backend", BACKENDS)
def test_sqrt_of_the_smallest_subnormal(backend: str) -> None:
    """The spec's math tests: sqrt(1.4e-45) is 3.74e-23 (XLA CPU reads the input as 0)."""
    x = np.array([1.4e-45, 4.0], np.float32)
    assert _run(_unary("sqrt", "f32", 2), backend, "ieee", x)[0] == np.sqrt(x[0])
    assert _run(_unary("sqrt", "f32", 2), backend, "ftz", x)[0] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", BACKENDS)
def test_log_and_exp_reach_the_subnormals(backend: str, dtype: type) -> None:
    """log of a subnormal (the cpu polynomial normalizes it first in the ieee mode) and exp
    with a subnormal result."""
    t = "f32" if dtype is np.float32 else "f64"
    tiny = np.finfo(dtype).tiny
    x = np.array([tiny / 3, tiny / 1000, tiny * 0.999, 2.0], dtype)
    got = _run(_unary("log", t, 4), backend, "ieee", x)
    np.testing.assert_allclose(got, np.log(x), rtol=4 * np.finfo(dtype).eps)
    assert np.isneginf(_run(_unary("log", t, 4), backend, "ftz", x)[:3]).all()
    e = np.array([-100.0 if t == "f32" else -720.0, 0.0], dtype)
    got = _run(_unary("exponential", t, 2), backend, "ieee", e)
    assert 0 < got[0] < tiny and abs(got[0] - np.exp(e[0])) <= np.spacing(np.exp(e[0]))
    assert _run(_unary("exponential", t, 2), backend, "ftz", e)[0] == 0


UNARY = ["sqrt", "rsqrt", "cbrt", "exponential", "exponential_minus_one", "log", "log_plus_one",
         "sine", "cosine", "tan", "tanh", "logistic", "abs", "negate", "floor", "ceil",
         "round_nearest_even", "round_nearest_afz", "sign"]
BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "remainder",
          "atan2"]
#: Ops whose two backends agree bit for bit (correctly rounded or exact); the others within
#: 4 ulp (the polynomials' bounds, test_math_poly.py).
EXACT = {"sqrt", "abs", "negate", "floor", "ceil", "round_nearest_even", "round_nearest_afz",
         "sign", "add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder"}


def _samples(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Subnormals of both signs, the smallest normals, values whose products, quotients,
    squares and exponentials are subnormal, signed zeros and ordinary values."""
    tiny = float(np.finfo(dtype).tiny)
    small = 1e-20 if dtype is np.float32 else 1e-160
    x = np.array([-3.2 * small, small, tiny / 3, -tiny / 7, tiny, -tiny * 0.999, 1.5, -2.0,
                  0.0, -0.0, tiny * 2, tiny * 1e7, -90.0 if dtype is np.float32 else -720.0,
                  -tiny / 1e5, 3.0, 0.5], dtype)
    y = x[::-1].copy()
    y[0], y[5] = 2.0, 0.5
    return x, y


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backends_agree_on_subnormals(mode: str, dtype: type) -> None:
    """Every listed op on subnormal inputs and results: the cpu backend as the interpreter,
    in each mode."""
    t = "f32" if dtype is np.float32 else "f64"
    x, y = _samples(dtype)
    bad = []
    for op in UNARY + BINARY:
        text = _unary(op, t, x.size) if op in UNARY else _binary(op, t, x.size)
        args = (x,) if op in UNARY else (x, y)
        ref, got = (_run(text, be, mode, *args) for be in BACKENDS)
        same = (_bits(ref) == _bits(got)) | (np.isnan(ref) & np.isnan(got))
        if op not in EXACT:
            with np.errstate(invalid="ignore"):
                ulp = np.spacing(np.maximum(abs(ref), abs(got)).astype(dtype))
                same |= np.abs(ref - got) <= 4 * ulp
        if not same.all():
            k = int(np.flatnonzero(~same)[0])
            bad.append((op, args[0][k], args[-1][k], ref[k], got[k]))
    assert not bad, bad


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_and_convert_keep_subnormals_in_the_ieee_mode(backend: str) -> None:
    text = """
func.func @main(%x: tensor<4xf64>) -> (tensor<f64>, tensor<4xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f64>
  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<4xf64>, tensor<f64>) -> tensor<f64>
  %c = stablehlo.convert %x : (tensor<4xf64>) -> tensor<4xf32>
  return %s, %c : tensor<f64>, tensor<4xf32>
}"""
    x = np.array([1e-310, 2e-310, 1e-40, 3e-39], np.float64)
    for mode in MODES:
        s, c = xlapy.compile(text, backend=backend, options={"denormal": mode})(x)
        if mode == "ieee":
            assert float(s) == x[0] + x[1] + x[2] + x[3]
            assert np.asarray(c).tolist() == x.astype(np.float32).tolist()
        else:
            assert float(s) == x[2] + x[3] and not np.asarray(c).any()  # f64 normals


def test_client_options_choose_the_mode() -> None:
    comp = xlapy.compile(_binary("multiply", "f32", 1), backend="interpreter").module
    x = np.array([1e-20], np.float32)
    for backend in BACKENDS:
        ieee = xlapy.Client(backend, options={"denormal": "ieee"})
        ftz = xlapy.Client(backend)
        assert ieee.execute_and_transfer(comp, [x, x]).to_numpy()[0] == np.float32(1e-40)
        assert ftz.execute_and_transfer(comp, [x, x]).to_numpy()[0] == 0


def test_an_executable_keeps_its_mode_whatever_the_caller_uses() -> None:
    x = np.array([1e-20, 1.0], np.float32)
    for backend in BACKENDS:
        exe = xlapy.compile(_binary("multiply", "f32", 2), backend=backend)  # ftz default
        with denormal.use(denormal.IEEE):
            assert np.asarray(exe(x, x))[0] == 0
            # no options: a compile inside `use` takes the mode in force
            inner = xlapy.compile(_binary("multiply", "f32", 2), backend=backend)
        assert np.asarray(inner(x, x))[0] != 0
        assert denormal.current() == denormal.FTZ


def test_unknown_mode_is_an_error() -> None:
    for backend in BACKENDS:
        with pytest.raises(XlapyError, match="denormal mode"):
            xlapy.compile(_unary("sqrt", "f32", 1), backend=backend, options={"denormal": "daz"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_cli_denormal_flag(tmp_path: object, backend: str) -> None:
    path = tmp_path / "sqrt.mlir"  # type: ignore[operator]
    path.write_text("func.func @main() -> tensor<f32> {\n"
                    "  %0 = stablehlo.constant dense<1.4e-45> : tensor<f32>\n"
                    "  %1 = stablehlo.sqrt %0 : tensor<f32>\n  return %1 : tensor<f32>\n}\n")
    outs = {}
    for mode in MODES:
        out = io.StringIO()
        assert main(["run", str(path), "--backend", backend, "--denormal", mode], out) == 0
        outs[mode] = out.getvalue()
    assert "3.74" in outs["ieee"] and "3.74" not in outs["ftz"], outs


@pytest.mark.parametrize("backend", BACKENDS)
def test_process_grid_runs_in_the_callers_mode(tmp_path: object, backend: str) -> None:
    """The grid's process threads start in a copy of the caller's context: `--denormal ieee`
    holds on every replica (the interpreter's replicas flushed before)."""
    path = tmp_path / "grid.mlir"  # type: ignore[operator]
    path.write_text(
        "module @g attributes {mhlo.num_replicas = 2 : i32, mhlo.num_partitions = 1 : i32} {\n"
        "  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "    %0 = stablehlo.multiply %x, %x : tensor<2xf32>\n"
        "    return %0 : tensor<2xf32>\n  }\n}\n")
    out = io.StringIO()
    assert main(["run", str(path), "--input", "2xf32=[1e-20 2]", "--backend", backend,
                 "--denormal", "ieee"], out) == 0
    assert out.getvalue().count("9.99994610111476e-41") == 2, out.getvalue()
