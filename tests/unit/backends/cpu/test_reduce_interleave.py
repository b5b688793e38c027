"""Float sums of an expression with a transcendental (a loss's mean of log1p(exp(-|x|)), a
log-likelihood) widen their vector groups as element-wise kernels do (interleave_emit
`summed`): several independent vectors an iteration, one wide accumulator. Sums over the
last dimension (1-D, rows, all dimensions, outer ones too) match the interpreter within the
reassociation's rounding (groups halve until they divide the last dimension); a sum that
keeps the last dimension, a cheap expression and a max keep one vector."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import interleave_emit
from xlapy.backends.cpu.lanes import vector_width


def _sum(shape: tuple[int, ...], dims: tuple[int, ...], body: str = "log_plus_one",
         et: str = "f32", reducer: str = "add") -> str:
    t = f"tensor<{'x'.join(map(str, shape))}x{et}>"
    out = [n for d, n in enumerate(shape) if d not in dims]
    o = f"tensor<{''.join(f'{n}x' for n in out)}{et}>"
    return f"""
func.func @main(%x: {t}) -> {o} {{
  %a = stablehlo.abs %x : {t}
  %n = stablehlo.negate %a : {t}
  %e = stablehlo.exponential %n : {t}
  %y = stablehlo.{body} %e : {t}
  %z = stablehlo.constant dense<0.0> : tensor<{et}>
  %s = stablehlo.reduce(%y init: %z) applies stablehlo.{reducer} across dimensions = \
{list(dims)} : ({t}, tensor<{et}>) -> {o}
  return %s : {o}
}}
"""


def _lanes(prog: xlapy.CompiledProgram, et: str = "float") -> set[int]:
    return {int(n) for n in re.findall(rf"<(\d+) x {et}>", prog._exe.kernel_ir)}


def _one() -> int:
    return interleave_emit.INTERLEAVE_AVX2 if interleave_emit.sixteen_registers() else \
        interleave_emit.INTERLEAVE


@pytest.mark.parametrize("shape,dims", [((1 << 15,), (0,)), (((1 << 15) + 7,), (0,)),
                                        ((64, 2048), (1,)), ((64, 2056), (1,)),
                                        ((64, 2048), (0, 1)), ((8, 16, 1024), (0, 2))])
def test_sums_of_transcendentals_widen_and_match(shape: tuple[int, ...],
                                                 dims: tuple[int, ...]) -> None:
    w = vector_width()
    text = _sum(shape, dims)
    prog = xlapy.compile(text, "cpu")
    assert not prog._exe.fallbacks()
    if w:  # (groups halve until they divide the last dimension)
        k = _one()
        while k > 1 and shape[-1] % (k * w):
            k //= 2
        assert max(_lanes(prog)) == k * w
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32) * 3
    want = np.asarray(xlapy.compile(text, "interpreter")(x), np.float64)
    got = np.asarray(prog(x), np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-6 * np.sqrt(x.size / want.size))


def test_f64_sums_widen_at_most_wide_interleave() -> None:
    w = vector_width()
    text = _sum((1 << 14,), (0,), "log", "f64")
    prog = xlapy.compile(text, "cpu")
    x = np.random.default_rng(3).standard_normal(1 << 14) * 3
    np.testing.assert_allclose(float(np.asarray(prog(x))),
                               float(np.asarray(xlapy.compile(text, "interpreter")(x))),
                               rtol=1e-13)
    if w:  # (f64 lanes: w of them, two vectors, at most WIDE_INTERLEAVE groups)
        assert max(_lanes(prog, "double")) == min(_one(), interleave_emit.WIDE_INTERLEAVE) * w


@pytest.mark.parametrize("case", ["kept_last", "cheap", "max"])
def test_other_reductions_keep_one_vector(case: str) -> None:
    w = vector_width()
    if not w:
        pytest.skip("scalar kernels on this target")
    text = {"kept_last": _sum((64, 2048), (0,)),
            "cheap": _sum((1 << 15,), (0,), "negate").replace("stablehlo.exponential",
                                                               "stablehlo.abs"),
            "max": _sum((1 << 15,), (0,), reducer="maximum").replace(
                "dense<0.0>", "dense<0xFF800000>")}[case]
    prog = xlapy.compile(text, "cpu")
    assert max(_lanes(prog)) <= w
