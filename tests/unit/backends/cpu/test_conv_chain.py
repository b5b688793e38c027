"""Two convolutions in one loop nest (conv_chain.py): the first's rows (with its epilogue)
computed as the second's ring needs them - bit-identical to the two unchained, on any
thread count, with no buffer for the first's value; refused where that value is needed
elsewhere or the second's rows cannot take it."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

PROG = """
func.func @main(%x: tensor<N0xf32>, %w1: tensor<W1xf32>, %b1: tensor<C1xf32>,
                %w2: tensor<W2xf32>) -> RET {
  %c1 = stablehlo.convolution(%x, %w1) dim_numbers = [b, LAY, f]x[LAY, i, o]->[b, LAY, f],
      window = {pad = PAD1}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<N0xf32>, tensor<W1xf32>) -> tensor<N1xf32>
  %bb = stablehlo.broadcast_in_dim %b1, dims = [FD] : (tensor<C1xf32>) -> tensor<N1xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %z = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<N1xf32>
  %a = stablehlo.add %c1, %bb : tensor<N1xf32>
  %y = stablehlo.maximum %a, %z : tensor<N1xf32>
  %c2 = stablehlo.convolution(SRC, %w2) dim_numbers = [b, LAY, f]x[LAY, i, o]->[b, LAY, f],
      window = {stride = STRIDE2, pad = PAD2}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<N1xf32>, tensor<W2xf32>) -> tensor<N2xf32>
  return RESULTS
}
"""


def _text(sp: tuple[int, ...], c0: int, c1: int, c2: int, k: int, pad1: int, pad2: int,
          stride2: int, src: str, keep: bool) -> tuple[str, list[tuple[int, ...]]]:
    s = len(sp)
    sp1 = tuple(n + 2 * pad1 - k + 1 for n in sp)
    sp2 = tuple((n + 2 * pad2 - k) // stride2 + 1 for n in sp1)
    j = lambda v: "x".join(map(str, v))  # noqa: E731
    n0, n1, n2 = (2, *sp, c0), (2, *sp1, c1), (2, *sp2, c2)
    w1, w2 = (k,) * s + (c0, c1), (k,) * s + (c1, c2)
    t1, t2 = f"tensor<{j(n1)}xf32>", f"tensor<{j(n2)}xf32>"
    results = f"%c2, {src} : {t2}, {t1}" if keep else f"%c2 : {t2}"
    ret = f"({t2}, {t1})" if keep else t2
    text = (PROG.replace("RESULTS", results).replace("RET", ret).replace("SRC", src)
            .replace("N0", j(n0)).replace("N1", j(n1)).replace("N2", j(n2))
            .replace("W1", j(w1)).replace("W2", j(w2)).replace("C1", str(c1))
            .replace("LAY", ", ".join(str(d) for d in range(s))).replace("FD", str(s + 1))
            .replace("PAD1", str([[pad1, pad1]] * s)).replace("PAD2", str([[pad2, pad2]] * s))
            .replace("STRIDE2", str([stride2] * s)))
    return text, [n0, w1, (c1,), w2]


CASES = {
    "cnn_block": ((9, 12), 8, 16, 32, 3, 1, 1, 1, "%y"),
    "no_epilogue": ((7, 10), 4, 16, 16, 3, 1, 1, 1, "%c1"),
    "valid_first_stride_second": ((10, 11), 4, 16, 16, 3, 0, 1, 2, "%y"),
    "one_d": ((20,), 8, 16, 16, 3, 1, 2, 1, "%y"),
    "three_d": ((4, 5, 6), 4, 16, 16, 3, 1, 1, 1, "%y"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_chain_matches_unchained(case: str, threads: int) -> None:
    sp, c0, c1, c2, k, p1, p2, st, src = CASES[case]
    text, shapes = _text(sp, c0, c1, c2, k, p1, p2, st, src, False)
    opts = {"num_threads": threads}
    chained = xlapy.compile(text, backend="cpu", options=opts)
    report = chained._exe.explain()
    assert "c1                       convolution              convolution %c2's epilogue" \
        in report, report
    assert not chained._exe.fallbacks()
    assert chained._exe._arena_plan[1] == 0  # no buffer for the first convolution's value
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = np.asarray(chained(*args))
    ref_text = _text(sp, c0, c1, c2, k, p1, p2, st, src, True)[0]
    unchained = xlapy.compile(ref_text, backend="cpu", options=opts)
    assert "%c2's epilogue" not in unchained._exe.explain()
    np.testing.assert_array_equal(got, np.asarray(unchained(*args)[0]))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(chained(*args)), got)  # rings reset per call


def test_chain_refused_for_negative_padding() -> None:
    """The second convolution crops: the first's rows do not land whole in its ring."""
    text, shapes = _text((9, 12), 8, 16, 16, 3, 1, -1, 1, "%y", False)
    cpu = xlapy.compile(text, backend="cpu")
    assert "%c2's epilogue" not in cpu._exe.explain()
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(np.asarray(cpu(*args)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_cnn_block_is_one_loop_nest(threads: int) -> None:
    """JAX's conv -> bias -> relu -> conv -> bias -> relu -> 2x2 average pool (the CNN
    benchmark, smaller): one convolution thunk, no kernel, no arena; the same bits as with
    the first layer's value kept (unchained), the interpreter's within rounding."""
    import jax
    from jax import lax

    zero, quarter = np.float32(0), np.float32(0.25)  # not Python floats: f64 under x64

    def block(x, w1, b1, w2, b2, keep=False):  # type: ignore[no-untyped-def]
        y = lax.max(lax.conv_general_dilated(x, w1, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC")) + b1,
                    zero)
        z = lax.max(lax.conv_general_dilated(y, w2, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC")) + b2,
                    zero)
        p = lax.reduce_window(z, zero, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * quarter
        return (p, y) if keep else p

    rng = np.random.default_rng(9)
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((3, 10, 12, 16), (3, 3, 16, 16), (16,), (3, 3, 16, 16), (16,))]
    text = jax.jit(block).lower(*args).as_text()
    opts = {"num_threads": threads}
    cpu = xlapy.compile(text, backend="cpu", options=opts)
    exe = cpu._exe
    assert not exe.kernel_specs and exe._arena_plan[1] == 0 and not exe.fallbacks()
    got = np.asarray(cpu(*args))
    keep = jax.jit(lambda *a: block(*a, keep=True)).lower(*args).as_text()
    unchained = xlapy.compile(keep, backend="cpu", options=opts)
    np.testing.assert_array_equal(got, np.asarray(unchained(*args)[0]))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
