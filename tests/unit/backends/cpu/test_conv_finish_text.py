"""conv_finish_text.py: a convolution's epilogue function written as IR text computes the
bits the llvmlite-built one (conv_kernel._finish_fn) does, denormals, signed zeros, NaN
(signaling too) and infinities included, for each op it writes and each pooling fold; what
it does not write (a compare / select) still builds through llvmlite."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_conv_finish import spy_builds
from xlapy.backends.cpu import conv_kernel, target
from xlapy.backends.cpu.conv_kernel import Split

CONV = """
func.func @main(%x: tensor<2x6x8x8xT>, %w: tensor<3x3x8x32xT>, %b: tensor<32xT>,
                %r: tensor<2x6x8x32xT>) -> tensor<OUT> {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<2x6x8x8xT>, tensor<3x3x8x32xT>) -> tensor<2x6x8x32xT>
  %bb = stablehlo.broadcast_in_dim %b, dims = [3] : (tensor<32xT>) -> tensor<2x6x8x32xT>
  %tiny = stablehlo.constant dense<TINY> : tensor<T>
  %tb = stablehlo.broadcast_in_dim %tiny, dims = [] : (tensor<T>) -> tensor<2x6x8x32xT>
BODY
}
"""

POOL = """
  %zero = stablehlo.constant dense<INIT> : tensor<T>
  %p = "stablehlo.reduce_window"(%e, %zero) <{window_dimensions = array<i64: 1, 2, 2, 1>,
      window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%l: tensor<T>, %m: tensor<T>):
      %s = stablehlo.FOLD %l, %m : tensor<T>
      stablehlo.return %s : tensor<T>
    }) : (tensor<2x6x8x32xT>, tensor<T>) -> tensor<2x3x4x32xT>
  %q = stablehlo.constant dense<2.500000e-01> : tensor<T>
  %qb = stablehlo.broadcast_in_dim %q, dims = [] : (tensor<T>) -> tensor<2x3x4x32xT>
  %o = stablehlo.multiply %p, %qb : tensor<2x3x4x32xT>
  return %o : tensor<2x3x4x32xT>"""

#: Epilogue bodies: %e from %c, the per-feature %b, the same-index %r and the constant %tb.
BODIES = {
    "bias_relu": """  %a = stablehlo.add %c, %bb : tensor<2x6x8x32xT>
  %z = stablehlo.constant dense<0.0> : tensor<T>
  %zb = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<T>) -> tensor<2x6x8x32xT>
  %e = stablehlo.maximum %a, %zb : tensor<2x6x8x32xT>""",
    "arith": """  %a = stablehlo.subtract %c, %bb : tensor<2x6x8x32xT>
  %m = stablehlo.multiply %a, %tb : tensor<2x6x8x32xT>
  %d = stablehlo.divide %m, %r : tensor<2x6x8x32xT>
  %n = stablehlo.minimum %d, %r : tensor<2x6x8x32xT>
  %e = stablehlo.add %n, %n : tensor<2x6x8x32xT>""",
    "residual_max": """  %a = stablehlo.maximum %c, %r : tensor<2x6x8x32xT>
  %e = stablehlo.minimum %a, %bb : tensor<2x6x8x32xT>""",
}


def _program(t: str, body: str, fold: str | None) -> str:
    tiny = "1.000000e-40" if t == "f32" else "1.000000e-310"  # a denormal constant
    if fold is None:
        body += "\n  return %e : tensor<2x6x8x32xT>"
        out = "2x6x8x32xT"
    else:
        init = {"add": "0.0", "maximum": "0xFF800000", "minimum": "0x7F800000",
                "multiply": "1.0"}[fold]
        if t == "f64" and init.startswith("0x"):
            init = "0xFFF0000000000000" if fold == "maximum" else "0x7FF0000000000000"
        body += POOL.replace("INIT", init).replace("FOLD", fold)
        out = "2x3x4x32xT"
    return CONV.replace("BODY", body).replace("OUT", out).replace("TINY", tiny) \
        .replace("T>", f"{t}>").replace("xT", f"x{t}")


def _args(t: str) -> list[np.ndarray]:
    dt = np.float32 if t == "f32" else np.float64
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 8, 8)).astype(dt)
    w = rng.standard_normal((3, 3, 8, 32)).astype(dt) * dt(0.2)
    tiny = np.finfo(dt).smallest_subnormal
    b = rng.standard_normal(32).astype(dt)
    b[:8] = [tiny, -tiny, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]
    snan = np.array([0x7F800001 if t == "f32" else 0x7FF0000000000001],
                    np.uint32 if t == "f32" else np.uint64).view(dt)[0]
    b[8] = snan  # a signaling NaN: quieted alike by the flush's multiply and the op
    r = rng.standard_normal((2, 6, 8, 32)).astype(dt)
    r.reshape(-1)[::7] = tiny * 3
    r.reshape(-1)[1::11] = -0.0
    r.reshape(-1)[2::13] = np.nan
    r.reshape(-1)[3::17] = snan
    x[1, 4:, :, :] = tiny * rng.integers(1, 9, (2, 8, 8))  # denormal sums, flushed (FTZ)
    x[0, 1, 2, :] = np.nan  # NaN sums
    x[1, 2, 3, 0] = np.inf
    return [x, w, b, r]


def _run(text: str, args: list[np.ndarray], monkeypatch: pytest.MonkeyPatch,
         as_text: bool, mode: str = "ftz") -> tuple[np.ndarray, list[Split]]:
    with monkeypatch.context() as m:
        splits = spy_builds(m)
        if not as_text:
            m.setattr(conv_kernel, "finish_text", lambda *a: None)
        prog = xlapy.compile(text, backend="cpu", options={"denormal": mode,
                                                           "entry_trip": False})
        assert not prog._exe.fallbacks()
        return np.asarray(prog(*args)), splits


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """The same bits, signed zeros included; NaN where NaN (which payload an op of two NaN
    operands returns is the operand order the code generator picked: LLVM's fadd is
    commutative, so the llvmlite path does not fix it either)."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("fold", [None, "add", "maximum", "minimum", "multiply"])
def test_text_finish_computes_the_llvmlite_bits(t: str, body: str, fold: str | None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _same_bits(t, body, fold, "ftz", monkeypatch)


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("fold", [None, "add"])
def test_text_finish_in_the_ieee_denormal_mode(t: str, fold: str | None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """No flush at all in the `ieee` mode (xlapy.denormal), as elementwise.flush."""
    _same_bits(t, "arith", fold, "ieee", monkeypatch)


def _same_bits(t: str, body: str, fold: str | None, mode: str,
               monkeypatch: pytest.MonkeyPatch) -> None:
    text = _program(t, BODIES[body], fold)
    args = _args(t)
    got, splits = _run(text, args, monkeypatch, True, mode)
    want, old = _run(text, args, monkeypatch, False, mode)
    assert len(splits) == 1 and len(old) == 1
    assert ".finish\"(" in "".join(splits[0].cold_defs)  # written as text
    assert not [f for f in splits[0].cold.functions if f.name.endswith(".finish")]
    assert [f for f in old[0].cold.functions if f.name.endswith(".finish")]  # the old path
    _same(got, want)
    ref = np.asarray(xlapy.compile(text, backend="interpreter",
                                   options={"denormal": mode})(*args))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    text = "".join(splits[0].cold_defs)
    if mode == "ieee":
        assert "fpclass" not in text and "canonicalize" not in text
    elif body == "arith" and target.current().is_x86:  # flush_ftz's form: add, ... operands
        assert "llvm.canonicalize" in text


def test_an_op_it_does_not_write_builds_through_llvmlite(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    body = """  %k = stablehlo.compare GT, %c, %bb : (tensor<2x6x8x32xT>, tensor<2x6x8x32xT>)
      -> tensor<2x6x8x32xi1>
  %e = stablehlo.select %k, %c, %r : tensor<2x6x8x32xi1>, tensor<2x6x8x32xT>"""
    text = _program("f32", body, None)
    args = _args("f32")
    got, splits = _run(text, args, monkeypatch, True)
    assert len(splits) == 1
    assert [f for f in splits[0].cold.functions if f.name.endswith(".finish")]
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_another_architecture_gets_the_portable_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """aarch64 (objects compiled, never run here): the finish is text with the fabs +
    compare flush (no vfpclass, no x86 FTZ multiply), the entry llvmlite's (its FPCR)."""
    splits = spy_builds(monkeypatch)
    prog = xlapy.compile(_program("f32", BODIES["arith"], "add"), backend="cpu",
                         options={"target": "aarch64"})
    assert not prog._exe.fallbacks() and len(splits) == 1
    text = "".join(splits[0].cold_defs)
    assert ".finish\"(" in text and "llvm.fabs" in text
    assert "fpclass" not in text and "canonicalize" not in text
    assert "llvm.aarch64.set.fpcr" in [f.name for f in splits[0].cold.functions]  # entry
