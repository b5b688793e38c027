"""The demo `make demo` runs: build, compile and run real programs on xlapy, print the results.

1. seed 001's axpy through the client/service flow;
2. a two-layer MLP with softmax (dot_general, broadcasts, reduce, exp) from the XlaBuilder;
3. a while loop (Fibonacci) with tuple state;
4. a StableHLO module as `jax.jit(f).lower(...).as_text()` prints it, parsed and run.
Each result is checked against NumPy, so the demo fails loudly if anything is wrong.
"""

from __future__ import annotations

import numpy as np

import xlapy

try:
    from examples.axpy import compute_axpy_parameters
except ImportError:  # run as a script: python examples/demo.py
    from axpy import compute_axpy_parameters  # type: ignore[no-redef]
from xlapy.builder import XlaBuilder, XlaComputation, ops
from xlapy.types import ElementType, Literal, Shape

F32, S32 = ElementType.F32, ElementType.S32


def _scalar_computation(name: str, combine: str, et: ElementType = F32) -> XlaComputation:
    b = XlaBuilder(name)
    x = ops.Parameter(b, 0, Shape.scalar(et))
    y = ops.Parameter(b, 1, Shape.scalar(et))
    getattr(ops, combine)(x, y)
    return b.build()


def mlp() -> XlaComputation:
    """softmax(relu(x @ w1 + b1) @ w2 + b2) over rows."""
    b = XlaBuilder("mlp")
    x = ops.Parameter(b, 0, Shape.array(F32, [8, 16]), "x")
    w1 = ops.Parameter(b, 1, Shape.array(F32, [16, 32]), "w1")
    b1 = ops.Parameter(b, 2, Shape.array(F32, [32]), "b1")
    w2 = ops.Parameter(b, 3, Shape.array(F32, [32, 4]), "w2")
    b2 = ops.Parameter(b, 4, Shape.array(F32, [4]), "b2")
    h = ops.Max(ops.Add(ops.Dot(x, w1), b1, [1]), ops.ConstantR0(b, 0.0))
    logits = ops.Add(ops.Dot(h, w2), b2, [1])
    row_max = ops.Reduce(b, [logits], [ops.ConstantR0(b, -np.inf)],
                         _scalar_computation("max", "Max"), [1])
    e = ops.Exp(ops.Sub(logits, row_max, [0]))
    total = ops.Reduce(b, [e], [ops.ConstantR0(b, 0.0)], _scalar_computation("add", "Add"), [1])
    ops.Div(e, total, [0])
    return b.build()


def fibonacci() -> XlaComputation:
    """(i, a, b) -> while i < n: (i + 1, b, a + b); returns a."""
    state = Shape.tuple([Shape.scalar(S32)] * 3)
    cb = XlaBuilder("cond")
    s = ops.Parameter(cb, 0, state)
    ops.Lt(ops.GetTupleElement(s, 0), ops.ConstantR0(cb, 20))
    bb = XlaBuilder("body")
    s = ops.Parameter(bb, 0, state)
    i, a, c = (ops.GetTupleElement(s, k) for k in range(3))
    ops.Tuple(bb, [ops.Add(i, ops.ConstantR0(bb, 1)), c, ops.Add(a, c)])
    b = XlaBuilder("fib")
    init = ops.Tuple(b, [ops.ConstantR0(b, 0), ops.ConstantR0(b, 0), ops.ConstantR0(b, 1)])
    ops.GetTupleElement(ops.While(cb.build(), bb.build(), init), 1)
    return b.build()


# JAX prints long lines.
STABLEHLO = """
module @jit_layernorm attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<4x8xf32> {jax.result_info = ""}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %cst_0 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %2 = stablehlo.divide %0, %1 : tensor<4xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
    %4 = stablehlo.subtract %arg0, %3 : tensor<4x8xf32>
    %5 = stablehlo.multiply %4, %4 : tensor<4x8xf32>
    %6 = stablehlo.reduce(%5 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %7 = stablehlo.divide %6, %1 : tensor<4xf32>
    %cst_1 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %9 = stablehlo.add %7, %8 : tensor<4xf32>
    %10 = stablehlo.rsqrt %9 : tensor<4xf32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
    %12 = stablehlo.multiply %4, %11 : tensor<4x8xf32>
    return %12 : tensor<4x8xf32>
  }
}
"""


def main() -> None:
    rng = np.random.default_rng(0)
    client = xlapy.Client()

    alpha = Literal.from_numpy(np.float32(2.5))
    x = Literal.from_numpy(np.arange(4, dtype=np.float32))
    y = Literal.from_numpy(np.ones(4, np.float32))
    print("1. axpy:", compute_axpy_parameters(alpha, x, y))

    args = [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 32), (32,), (32, 4),
                                                               (4,)]]
    exe = client.compile(mlp())
    probs = exe.execute_and_transfer(args).to_numpy()
    x, w1, b1, w2, b2 = (a.astype(np.float64) for a in args)
    h = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    want = np.exp(h - h.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    # Tolerance from the computation, not from one machine: each logit is a sum of
    # 16 + 32 + 2 f32 terms added in any order (BLAS kernels differ), so it is within
    # 2 * 50 * eps * (sum of |terms|) of exact; a softmax probability moves by a factor of at
    # most exp(2 * that) over its row, plus a few roundings of exp, the sum and the divide.
    eps = float(np.finfo(np.float32).eps)
    terms = (np.abs(x) @ np.abs(w1) + np.abs(b1)) @ np.abs(w2) + np.abs(b2)
    logit_err = 2 * 50 * eps * terms.max(1, keepdims=True)
    assert np.all(np.abs(probs - want) <= want * (np.expm1(2 * logit_err) + 16 * eps)), \
        np.abs(probs - want).max()
    print("2. MLP softmax, first row:", np.array2string(probs[0], precision=4),
          "(rows sum to", np.array2string(probs.sum(1), precision=4) + ")")

    fib = client.execute_and_transfer(fibonacci(), []).to_py()
    assert fib == 6765, fib
    print("3. while loop: fib(20) =", fib)

    program = xlapy.compile(STABLEHLO)
    data = rng.standard_normal((4, 8)).astype(np.float32)
    out = program(data)
    d = data.astype(np.float64)
    centered = d - d.mean(1, keepdims=True)
    ref = centered / np.sqrt((centered ** 2).mean(1, keepdims=True) + 1e-5)
    # Mean and variance are sums of 8 f32 terms in any order: each result is within a few
    # times 8 * eps of exact, relative to |x| + |mean| over the standard deviation.
    scale = (np.abs(d) + np.abs(d.mean(1, keepdims=True))) / np.sqrt(
        (centered ** 2).mean(1, keepdims=True) + 1e-5)
    assert np.all(np.abs(out - ref) <= 4 * (8 + 4) * eps * scale), np.abs(out - ref).max()
    print("4. StableHLO layernorm from JAX's text, row 0:", np.array2string(out[0], precision=3))
    print("demo: all results match NumPy")


if __name__ == "__main__":
    main()
