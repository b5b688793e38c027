"""exp of x - max(x) along x's own rows (exp_range.at_most_zero: no upper clamp, no big-lane
test) gives the bits of the general exp: softmax rows with NaN, +-inf, huge spreads,
denormals, zeros; f32/f64, ranks 2 and 3, jax's max(-inf, .) and keepdims reshape forms;
and the pattern is refused where the subtrahend is not such a maximum (another array's
max, a min, a max over other dimensions, an addition)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, exp_range
from xlapy.ir import Instruction
from xlapy.stablehlo import parse_module


def _t(dims: tuple[int, ...], t: str) -> str:
    return f"tensor<{'x'.join(map(str, dims))}x{t}>"


def _softmax(dims: tuple[int, ...], t: str, form: str = "jax", sub: str = "subtract",
             red: str = "maximum", other: bool = False) -> str:
    """softmax-like program: exp(x - m) / sum; `form` jax (max(-inf, .) and a keepdims
    reshape), plain; `other`: m from a second argument y."""
    lead = dims[:-1]
    keep = ", ".join(map(str, range(len(lead))))
    x, r = _t(dims, t), _t(lead, t)
    r1 = _t(lead + (1,), t)
    ninf = "0xFF800000" if t == "f32" else "0xFFF0000000000000"
    src = "%y" if other else "%x"
    if form == "jax":
        mx = f"""  %nb = stablehlo.broadcast_in_dim %ninf, dims = [] : (tensor<{t}>) -> {r}
  %m1 = stablehlo.maximum %nb, %m0 : {r}
  %m2 = stablehlo.reshape %m1 : ({r}) -> {r1}
  %mb = stablehlo.broadcast_in_dim %m2, dims = [{keep}, {len(lead)}] : ({r1}) -> {x}"""
    else:
        mx = f"  %mb = stablehlo.broadcast_in_dim %m0, dims = [{keep}] : ({r}) -> {x}"
    return f"""
func.func public @main(%x: {x}, %y: {x}) -> {x} {{
  %ninf = stablehlo.constant dense<{ninf}> : tensor<{t}>
  %z = stablehlo.constant dense<0.0> : tensor<{t}>
  %m0 = stablehlo.reduce({src} init: %ninf) applies stablehlo.{red}
    across dimensions = [{len(lead)}] : ({x}, tensor<{t}>) -> {r}
{mx}
  %d = stablehlo.{sub} %x, %mb : {x}
  %e = stablehlo.exponential %d : {x}
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [{len(lead)}]
    : ({x}, tensor<{t}>) -> {r}
  %sb = stablehlo.broadcast_in_dim %s, dims = [{keep}] : ({r}) -> {x}
  %o = stablehlo.divide %e, %sb : {x}
  return %o : {x}
}}
"""


def _arg_of_exp(text: str) -> Instruction:
    comp = parse_module(text).entry_computation()
    exps = [i for i in comp.instructions if i.opcode == "exponential"]
    assert len(exps) == 1
    return exps[0].operands[0]


@pytest.mark.parametrize("form", ["jax", "plain"])
def test_pattern(form: str) -> None:
    assert exp_range.at_most_zero(_arg_of_exp(_softmax((8, 32), "f32", form)))
    assert exp_range.at_most_zero(_arg_of_exp(_softmax((2, 4, 32), "f32", form)))
    assert not exp_range.at_most_zero(_arg_of_exp(_softmax((8, 32), "f32", form, other=True)))
    assert not exp_range.at_most_zero(_arg_of_exp(_softmax((8, 32), "f32", form,
                                                           red="minimum")))
    assert not exp_range.at_most_zero(_arg_of_exp(_softmax((8, 32), "f32", form, sub="add")))


def test_pattern_refuses_other_dimensions() -> None:
    """max over the rows (dim 0) broadcast along dim 1 of a square x: not x's own row."""
    text = """
func.func public @main(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0]
    : (tensor<16x16xf32>, tensor<f32>) -> tensor<16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<16xf32>) -> tensor<16x16xf32>
  %d = stablehlo.subtract %x, %mb : tensor<16x16xf32>
  %e = stablehlo.exponential %d : tensor<16x16xf32>
  return %e : tensor<16x16xf32>
}
"""
    assert not exp_range.at_most_zero(_arg_of_exp(text))


def _rows(dims: tuple[int, ...], dt: type) -> np.ndarray:
    rng = np.random.default_rng(17)
    x = (rng.standard_normal(dims) * 20).reshape(-1, dims[-1]).astype(dt)
    tiny = np.finfo(dt).tiny
    x[0, 3] = np.nan
    x[1, 5] = np.inf
    x[2, :] = -np.inf
    x[3, 7] = -np.inf
    x[4, :] = rng.uniform(-500, 500, dims[-1])  # exp of -1000: 0; big spreads
    x[5, :] = tiny / 4
    x[6, ::2] = -0.0
    x[6, 1::2] = 0.0
    x[7, 0] = np.finfo(dt).max
    x[7, 1] = -np.finfo(dt).max
    x[8, ::3] = rng.uniform(-1, 1, len(x[8, ::3])) * tiny  # denormals among normal values
    x[9, :] = tiny * 8  # a row max just over the denormals: x - m denormal, flushed
    x[9, 1::2] = rng.uniform(-1, 1, len(x[9, 1::2])) * tiny
    x[10, :] = 2.0 ** -100
    x[10, ::2] = tiny / 3
    x[11, :] = -tiny / 5
    x[11, 4] = np.finfo(dt).smallest_subnormal
    return x.reshape(dims)


@pytest.mark.parametrize("dims", [(16, 64), (2, 8, 48)])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("form", ["jax", "plain"])
def test_bits_equal_the_general_exp(form: str, dt: type, dims: tuple[int, ...],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    t = "f32" if dt is np.float32 else "f64"
    text = _softmax(dims, t, form)
    x = _rows(dims, dt)
    seen: list[bool] = []
    real = exp_range.at_most_zero

    def spy(arg):  # type: ignore[no-untyped-def]
        seen.append(real(arg))
        return seen[-1]

    monkeypatch.setattr(exp_range, "at_most_zero", spy)
    cache.clear_memory()
    got = np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": 2})(x, x))
    assert seen and all(seen)
    monkeypatch.setattr(exp_range, "at_most_zero", lambda arg: False)
    cache.clear_memory()
    want = np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": 2})(x, x))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(x, x))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))


def _spy_difference(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What exp_range.difference returned each time: "fsub of X" (X the first operand's
    opname, or a call's callee: llvm.canonicalize is x flushed first), else the opname."""
    seen: list[str] = []
    real = exp_range.difference

    def spy(k, sub, idx):  # type: ignore[no-untyped-def]
        v = real(k, sub, idx)
        if getattr(v, "opname", "") != "fsub":
            seen.append(getattr(v, "opname", type(v).__name__))
            return v
        x = v.operands[0]
        seen.append("fsub of " + (x.callee.name if getattr(x, "opname", "") == "call" else
                                  getattr(x, "opname", type(x).__name__)))
        return v

    monkeypatch.setattr(exp_range, "difference", spy)
    return seen


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_difference_skips_the_flush_of_x(t: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """exp, the subtraction's one user: x goes in as loaded (no multiply by 1.0); the bits
    are test_bits_equal_the_general_exp's."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    seen = _spy_difference(monkeypatch)
    cache.clear_memory()
    xlapy.compile(_softmax((16, 64), t), backend="cpu")
    assert seen and all(s.startswith("fsub of ") and "canonicalize" not in s
                        for s in seen), seen


def test_difference_keeps_the_flush_for_another_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """x - m also returned: the subtraction is not exp's alone, x is flushed as before."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    text = _softmax((16, 64), "f32").replace(
        "-> tensor<16x64xf32> {", "-> (tensor<16x64xf32>, tensor<16x64xf32>) {").replace(
        "return %o : tensor<16x64xf32>", "return %o, %d : tensor<16x64xf32>, tensor<16x64xf32>")
    seen = _spy_difference(monkeypatch)
    cache.clear_memory()
    x = _rows((16, 64), np.float32)
    got = xlapy.compile(text, backend="cpu")(x, x)
    ref = xlapy.compile(text, backend="interpreter")(x, x)
    assert seen and all(not s.startswith("fsub of ") or "canonicalize" in s
                        for s in seen), seen
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(r))
