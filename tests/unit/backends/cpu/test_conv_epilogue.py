"""A convolution's element-wise consumer kernel computed in the convolution's registers
(conv_epilogue.py): bias + relu, relu6 (clamp), leaky relu (compare + select), a residual
read at the output's index; bit-identical to the unfused kernels, and refused where the
convolution's value is needed elsewhere."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy

HEAD = """
func.func @main(%x: tensor<2x6x9x16xET>, %w: tensor<3x3x16x32xET>, %b: tensor<32xET>,
                %r: tensor<2x6x9x32xET>) -> RET {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<2x6x9x16xET>, tensor<3x3x16x32xET>) -> tensor<2x6x9x32xET>
  %b1 = stablehlo.broadcast_in_dim %b, dims = [3] : (tensor<32xET>) -> tensor<2x6x9x32xET>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<ET>
  %z = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<ET>) -> tensor<2x6x9x32xET>
  %a = stablehlo.add %c, %b1 : tensor<2x6x9x32xET>
"""
T = "tensor<2x6x9x32xET>"
BODIES = {
    "bias_relu": f"""
  %y = stablehlo.maximum %a, %z : {T}""",
    "relu6": f"""
  %six = stablehlo.constant dense<6.000000e+00> : tensor<ET>
  %y = stablehlo.clamp %zero, %a, %six : (tensor<ET>, {T}, tensor<ET>) -> {T}""",
    "leaky": f"""
  %k = stablehlo.constant dense<1.000000e-02> : {T}
  %s = stablehlo.multiply %a, %k : {T}
  %p = stablehlo.compare GT, %a, %z : ({T}, {T}) -> tensor<2x6x9x32xi1>
  %y = stablehlo.select %p, %a, %s : tensor<2x6x9x32xi1>, {T}""",
    "residual": f"""
  %q = stablehlo.add %a, %r : {T}
  %y = stablehlo.maximum %q, %z : {T}""",
}


def _program(body: str, t: str, keep_conv: bool) -> str:
    ret = f"({T}, {T})" if keep_conv else T
    out = "%y, %c" if keep_conv else "%y"
    text = HEAD + BODIES[body] + f"\n  return {out} : {ret.strip('()')}\n}}\n"
    return text.replace("RET", ret).replace("ET", t)


def _args(t: str) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    dt = np.float32 if t == "f32" else np.float64
    return [rng.standard_normal(s).astype(dt) for s in
            ((2, 6, 9, 16), (3, 3, 16, 32), (32,), (2, 6, 9, 32))]


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("threads", [1, 2])
def test_epilogue_matches_unfused(body: str, t: str, threads: int) -> None:
    opts = {"num_threads": threads}
    fused = xlapy.compile(_program(body, t, False), backend="cpu", options=opts)
    text = fused._exe.explain()
    assert "convolution %c's epilogue" in text and not fused._exe.fallbacks(), text
    # The convolution's value is a result too: no epilogue, the kernels as before.
    unfused = xlapy.compile(_program(body, t, True), backend="cpu", options=opts)
    assert "epilogue" not in unfused._exe.explain()
    args = _args(t)
    got = np.asarray(fused(*args))
    want = np.asarray(unfused(*args)[0])
    np.testing.assert_array_equal(got, want)
    ref = np.asarray(xlapy.compile(_program(body, t, False), backend="interpreter")(*args))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(fused(*args)), got)  # the output is fresh


def test_epilogue_output_is_fresh_memory() -> None:
    """The epilogue root is the result: each call returns a new array."""
    cpu = xlapy.compile(_program("bias_relu", "f32", False), backend="cpu")
    args = _args("f32")
    a = np.asarray(cpu(*args))
    keep = a.copy()
    b = np.asarray(cpu(*[x * 2 for x in args]))
    np.testing.assert_array_equal(a, keep)
    assert not np.shares_memory(a, b)


def test_epilogue_refused_when_two_kernels_read_the_convolution() -> None:
    text = (HEAD + f"""
  %y = stablehlo.maximum %a, %z : {T}
  %e = stablehlo.exponential %c : {T}
  %n = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [0, 1, 2]
      : ({T}, tensor<ET>) -> tensor<32xET>
  return %y, %n : {T}, tensor<32xET>
}}
""").replace("RET", f"({T}, tensor<32xET>)").replace("ET", "f32")
    cpu = xlapy.compile(text, backend="cpu")
    assert "epilogue" not in cpu._exe.explain()
    args = [a * 0.1 for a in _args("f32")]
    want = xlapy.compile(text, backend="interpreter")(*args)
    for g, w in zip(cpu(*args), want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


POOL = """
func.func @main(%x: tensor<2xHxWx8xf32>, %w: tensor<3x3x8x16xf32>, %b: tensor<16xf32>)
    -> RET {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<2xHxWx8xf32>, tensor<3x3x8x16xf32>) -> tensor<2xHxWx16xf32>
  %b1 = stablehlo.broadcast_in_dim %b, dims = [3] : (tensor<16xf32>) -> tensor<2xHxWx16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %init = stablehlo.constant dense<INIT> : tensor<f32>
  %z = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<2xHxWx16xf32>
  %a = stablehlo.add %c, %b1 : tensor<2xHxWx16xf32>
  %y = stablehlo.maximum %a, %z : tensor<2xHxWx16xf32>
  %p = "stablehlo.reduce_window"(SRC, %init) <{window_dimensions = array<i64: 1, K, K, 1>,
      window_strides = array<i64: 1, K, K, 1>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.OP %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2xHxWx16xf32>, tensor<f32>) -> tensor<2xPHxPWx16xf32>
  %q = stablehlo.constant dense<2.500000e-01> : tensor<2xPHxPWx16xf32>
  %m = stablehlo.multiply %p, %q : tensor<2xPHxPWx16xf32>
  return RESULTS
}
"""


def _pool_program(h: int, w: int, k: int, op: str, src: str, post: bool, keep: bool
                  ) -> str:
    """conv -> (bias, relu)? -> k x k pooling -> (x 0.25)?; `keep` also returns %y (the
    pooling then runs as its own kernel: the reference)."""
    out = "%m" if post else "%p"
    pooled = "tensor<2xPHxPWx16xf32>"
    full = "tensor<2xHxWx16xf32>"
    results = f"{out}, %y : {pooled}, {full}" if keep else f"{out} : {pooled}"
    ret = f"({pooled}, {full})" if keep else pooled
    init = {"add": "0.000000e+00", "maximum": "0xFF800000"}[op]
    return (POOL.replace("RET", ret).replace("RESULTS", results).replace("SRC", src)
            .replace("OP", op).replace("INIT", init).replace("PH", str(h // k))
            .replace("PW", str(w // k)).replace("xHx", f"x{h}x").replace("xWx", f"x{w}x")
            .replace("K", str(k)))


@pytest.mark.parametrize("h,w,k,op,src,post", [
    (8, 12, 2, "add", "%y", True),       # the CNN's average pool
    (7, 13, 2, "add", "%y", True),       # rows and columns past the last window
    (9, 9, 3, "maximum", "%y", False),   # max pool, 3 x 3
    (6, 10, 2, "add", "%c", True),       # pooling the convolution itself
])
@pytest.mark.parametrize("threads", [1, 2])
def test_pooling_in_the_epilogue(h: int, w: int, k: int, op: str, src: str, post: bool,
                                 threads: int) -> None:
    opts = {"num_threads": threads}
    text = _pool_program(h, w, k, op, src, post, False)
    fused = xlapy.compile(text, backend="cpu", options=opts)
    report = fused._exe.explain()
    assert "reduce_window            convolution %c's epilogue" in report, report
    assert not fused._exe.fallbacks()
    rng = np.random.default_rng(11)
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((2, h, w, 8), (3, 3, 8, 16), (16,))]
    got = np.asarray(fused(*args))
    if src == "%y":  # the same values through the unfused reduce_window kernel: same bits
        ref_text = _pool_program(h, w, k, op, src, post, True)
        unfused = xlapy.compile(ref_text, backend="cpu", options=opts)
        assert "reduce_window            kernel" in unfused._exe.explain()
        np.testing.assert_array_equal(got, np.asarray(unfused(*args)[0]))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(fused(*args)), got)


def test_pooled_arena_holds_no_full_size_value() -> None:
    """conv -> relu -> pool -> scale: the relu'd 2x8x12x16 value never gets a buffer."""
    cpu = xlapy.compile(_pool_program(8, 12, 2, "add", "%y", True, False), backend="cpu")
    assert cpu._exe._arena_plan[1] < 2 * 8 * 12 * 16 * 4


def test_aot_gets_plain_convolutions(tmp_path: Any) -> None:
    """xlapy.aot emits its own convolution loops from the plan: a nested compile (aot's)
    plans no epilogue, and the object computes conv -> bias -> relu -> pool right."""
    from xlapy.aot import compile as aot_compile
    from xlapy.aot import driver

    text = _pool_program(8, 12, 2, "add", "%y", True, False)
    nested = xlapy.compile(text, backend="cpu", options={"nested": True})
    assert "epilogue" not in nested._exe.explain()
    if driver.tool("gcc") is None:
        pytest.skip("gcc is not installed")
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((2, 8, 12, 8), (3, 3, 8, 16), (16,))]
    obj = aot_compile(text, name="cnn_block")
    exe = driver.build([obj], tmp_path)
    got = driver.run([obj], {"cnn_block": args}, tmp_path, exe)["cnn_block"][0]
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
