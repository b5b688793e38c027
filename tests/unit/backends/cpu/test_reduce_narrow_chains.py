"""A bf16 row max/min of arithmetic (each op rounded by integer code: a target without
AVX512-BF16) runs in NARROW_MINMAX_CHAINS vector accumulators (reduce_emit.py), not
MINMAX_CHAINS: the interpreter's bits with the extreme, NaN, signed zeros and denormals in
every chain, the vector after the chains and the scalar rest, in a row reduction feeding a
kernel (softmax's max, attention_bf16's x * 0.125, kept in a row buffer for its other
reader) and in a reduce root; a row of loaded values keeps MINMAX_CHAINS, and so does a
target with AVX512-BF16."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.util import plant_minmax_specials
from xlapy.backends.cpu import cache, reduce_emit, target

W = 8  # x86-64-v3's f32 lanes
N = reduce_emit.NARROW_MINMAX_CHAINS


def _program(rows: int, cols: int, op: str, scaled: bool, with_max: bool = True) -> str:
    """x * 0.125 (`scaled`) or x + x, minus its row max/min; the max/min a result too
    (`with_max`) or only read by the subtract."""
    x, r = f"tensor<{rows}x{cols}xbf16>", f"tensor<{rows}xbf16>"
    init = "0xFF80" if op == "maximum" else "0x7F80"
    scale = f"""
  %c = stablehlo.constant dense<1.250000e-01> : tensor<bf16>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<bf16>) -> {x}
  %s = stablehlo.multiply %x, %cb : {x}""" if scaled else f"""
  %s = stablehlo.add %x, %x : {x}"""
    sig, ret = (f"({x}, {r})", f"return %d, %m : {x}, {r}") if with_max else \
        (x, f"return %d : {x}")
    return f"""
func.func public @main(%x: {x}) -> {sig} {{{scale}
  %i = stablehlo.constant dense<{init}> : tensor<bf16>
  %m = stablehlo.reduce(%s init: %i) applies stablehlo.{op} across dimensions = [1]
    : ({x}, tensor<bf16>) -> {r}
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : ({r}) -> {x}
  %d = stablehlo.subtract %s, %mb : {x}
  {ret}
}}
"""


def _rows(op: str, cols: int) -> np.ndarray:
    sign = 1 if op == "maximum" else -1
    rows = 4 * N + 4
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((rows, cols)) * 100).astype(np.float32)
    tiny = np.float32(2.0 ** -126) * 3  # x * 0.125 of it: a denormal (flushed under FTZ)
    plant_minmax_specials(x, sign, N, W, tiny)  # specials in chain j, both rounds of chains
    return x.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_narrow_chains_match_the_interpreter(op: str, scaled: bool, mode: str,
                                             threads: int) -> None:
    cols = 2 * N * W + W + 3  # two rounds of chains, one more vector, a rest
    x = _rows(op, cols)
    text = _program(len(x), cols, op, scaled)
    opts = {"target": "x86-64-v3", "denormal": mode, "num_threads": threads}
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options=opts)
    assert prog._exe.kernel_ir.count('alloca <8 x float>') == N  # the accumulators
    got = prog(x)
    want = xlapy.compile(text, backend="interpreter", options={"denormal": mode})(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint16),
                                      np.asarray(w).view(np.uint16))


def test_loaded_rows_and_avx512_bf16_keep_four_chains() -> None:
    cols = 2 * reduce_emit.MINMAX_CHAINS * W
    x, r = f"tensor<4x{cols}xbf16>", "tensor<4xbf16>"
    text = f"""
func.func public @main(%x: {x}) -> {r} {{
  %i = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %m = stablehlo.reduce(%x init: %i) applies stablehlo.maximum across dimensions = [1]
    : ({x}, tensor<bf16>) -> {r}
  return %m : {r}
}}
"""
    cache.clear_memory()
    loaded = xlapy.compile(text, backend="cpu", options={"target": "x86-64-v3"})
    assert loaded._exe.kernel_ir.count("alloca <8 x float>") == reduce_emit.MINMAX_CHAINS
    if not target.resolve("host").has("avx512bf16"):
        return
    cache.clear_memory()
    host = xlapy.compile(_program(4, cols, "maximum", True), backend="cpu",
                         options={"target": "host"})
    assert host._exe.kernel_ir.count("alloca <16 x float>") == reduce_emit.MINMAX_CHAINS


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_the_row_operand_is_kept_for_its_other_reader(mode: str) -> None:
    """The row max inside the kernel (not a result): its operand x * 0.125 is computed once
    per row, in the max's loop, and read back by the subtract."""
    cols = 2 * N * W + W + 3
    x = _rows("maximum", cols)
    text = _program(len(x), cols, "maximum", True, with_max=False)
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"target": "x86-64-v3", "denormal": mode})
    assert len(prog._exe.kernel_specs) == 1 and "rowbuf." in prog._exe.kernel_ir
    want = xlapy.compile(text, backend="interpreter", options={"denormal": mode})(x)
    np.testing.assert_array_equal(np.asarray(prog(x)).view(np.uint16),
                                  np.asarray(want).view(np.uint16))
