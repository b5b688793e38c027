"""Batch chains (batch_chain.py): dot -> row kernel -> dot run batch by batch per thread with
one batch of scratch per thread. The results do not depend on the thread count and are
bit-identical to the three thunks on 1-3 threads where OpenBLAS's sums do not depend on the
row count (ROW_EXACT_CORES), the arena shrinks, and chains are refused where a batch's
intermediates would not be private (other readers, results, reads outside the row)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import batch_chain, blas, cache

#: softmax(q k^T) v over [B, H, T, D] (jax's lowering of the attention workload, smaller).
ATTENTION = """
func.func @main(%q: tensor<2x3x{t}x{d}x{f}>, %k: tensor<2x3x{s}x{d}x{f}>,
                %v: tensor<2x3x{s}x{d}x{f}>) -> {ret} {{
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1],
       contracting_dims = [3] x [3] : (tensor<2x3x{t}x{d}x{f}>, tensor<2x3x{s}x{d}x{f}>)
       -> tensor<2x3x{t}x{s}x{f}>
  %c = stablehlo.constant dense<0.125> : tensor<{f}>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<{f}>) -> tensor<2x3x{t}x{s}x{f}>
  %2 = stablehlo.multiply %0, %cb : tensor<2x3x{t}x{s}x{f}>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %ninfc = stablehlo.convert %ninf : (tensor<f32>) -> tensor<{f}>
  %3 = stablehlo.reduce(%2 init: %ninfc) applies stablehlo.maximum across dimensions = [3]
       : (tensor<2x3x{t}x{s}x{f}>, tensor<{f}>) -> tensor<2x3x{t}x{f}>
  %7 = stablehlo.broadcast_in_dim %3, dims = [0, 1, 2] : (tensor<2x3x{t}x{f}>)
       -> tensor<2x3x{t}x{s}x{f}>
  %8 = stablehlo.subtract %2, %7 : tensor<2x3x{t}x{s}x{f}>
  %9 = stablehlo.exponential %8 : tensor<2x3x{t}x{s}x{f}>
  %z = stablehlo.constant dense<0.0> : tensor<{f}>
  %10 = stablehlo.reduce(%9 init: %z) applies stablehlo.add across dimensions = [3]
        : (tensor<2x3x{t}x{s}x{f}>, tensor<{f}>) -> tensor<2x3x{t}x{f}>
  %12 = stablehlo.broadcast_in_dim %10, dims = [0, 1, 2] : (tensor<2x3x{t}x{f}>)
        -> tensor<2x3x{t}x{s}x{f}>
  %13 = stablehlo.divide %9, %12 : tensor<2x3x{t}x{s}x{f}>
  {between}
  %14 = stablehlo.dot_general %13, %vv, batching_dims = [0, 1] x [0, 1],
        contracting_dims = [3] x [2] : (tensor<2x3x{t}x{s}x{f}>, tensor<2x3x{s}x{d}x{f}>)
        -> tensor<2x3x{t}x{d}x{f}>
  return {results}
}}
"""

PLAIN = {"between": "%vv = stablehlo.negate %v : tensor<2x3x{s}x{d}x{f}>",
         "ret": "tensor<2x3x{t}x{d}x{f}>", "results": "%14 : tensor<2x3x{t}x{d}x{f}>"}
#: the scores are a result too: they must be whole, no chain
SCORES_OUT = {**PLAIN, "ret": "(tensor<2x3x{t}x{d}x{f}>, tensor<2x3x{t}x{s}x{f}>)",
              "results": "%14, %0 : tensor<2x3x{t}x{d}x{f}>, tensor<2x3x{t}x{s}x{f}>"}
#: the probabilities are read by another op: no chain
PROBS_READ = {**PLAIN, "ret": "(tensor<2x3x{t}x{d}x{f}>, tensor<2x3x{t}x{s}x{f}>)",
              "between": "%vv = stablehlo.negate %v : tensor<2x3x{s}x{d}x{f}>\n"
                         "  %e = stablehlo.exponential %13 : tensor<2x3x{t}x{s}x{f}>",
              "results": "%14, %e : tensor<2x3x{t}x{d}x{f}>, tensor<2x3x{t}x{s}x{f}>"}


def _text(parts: dict[str, str], t: int = 40, s: int = 24, d: int = 8, f: str = "f32") -> str:
    fill = {"t": t, "s": s, "d": d, "f": f}
    return ATTENTION.format(**{k: v.format(**fill) for k, v in parts.items()}, **fill)


def _args(t: int, s: int, d: int, dtype: type) -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    return [rng.standard_normal(shape).astype(dtype)
            for shape in ((2, 3, t, d), (2, 3, s, d), (2, 3, s, d))]


def _run(text: str, args: list[np.ndarray], threads: int, chains: bool,
         monkeypatch: pytest.MonkeyPatch) -> tuple[list[np.ndarray], object]:
    monkeypatch.setattr(batch_chain, "ENABLED", chains)
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads,
                                                       "split_cost": 1})
    out = prog(*args)
    out = [np.asarray(x) for x in (out if isinstance(out, tuple) else (out,))]
    again = prog(*args)  # the scratch reused: the same bits
    again = [np.asarray(x) for x in (again if isinstance(again, tuple) else (again,))]
    for x, y in zip(out, again):
        np.testing.assert_array_equal(x, y)
    return out, prog._exe  # type: ignore[attr-defined]


#: OpenBLAS cores whose sgemm sums an element in the same order whatever a product's row
#: count: a chain's blocks of rows give the whole batch's bits there. Its Haswell kernels
#: (AVX2 machines, and xlapy's choice on Zen 4: blas.CORETYPE) sum a block's tail rows in
#: another order: a few ulps apart.
ROW_EXACT_CORES = ("skylakex", "cooperlake", "sapphirerapids")


def _like_three_thunks(got: np.ndarray, want: np.ndarray, text: str, args: list[np.ndarray],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain's bits do not depend on the thread count (the one-thread chain's); they are
    the three thunks' where BLAS's sums do not depend on the row count, else within a few
    ulps of them."""
    one, _ = _run(text, args, 1, True, monkeypatch)
    np.testing.assert_array_equal(got, one[0])
    core = blas.library().lower()
    if blas.library().startswith("scipy") or any(c in core for c in ROW_EXACT_CORES):
        np.testing.assert_array_equal(got, want)
        return
    eps = float(np.finfo(want.dtype).eps)
    np.testing.assert_allclose(got, want, rtol=8 * eps, atol=8 * eps * np.abs(want).max())


def _chain_lines(exe: object) -> list[str]:
    return [ln for ln in exe.explain().splitlines() if "batch chain" in ln]  # type: ignore[attr-defined]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("dtype", "f"), [(np.float32, "f32"), (np.float64, "f64")])
def test_chain_bits_equal_the_three_thunks(threads: int, dtype: type, f: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text(PLAIN, f=f)
    args = _args(40, 24, 8, dtype)
    got, exe = _run(text, args, threads, True, monkeypatch)
    want, ref = _run(text, args, threads, False, monkeypatch)
    assert _chain_lines(exe) and not _chain_lines(ref)
    _like_three_thunks(got[0], want[0], text, args, monkeypatch)
    # one batch of scores per thread instead of all 6
    assert exe._arena_plan[1] < ref._arena_plan[1]  # type: ignore[attr-defined]
    interp = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    assert np.abs(got[0] - interp).max() <= 1e-5 * np.abs(interp).max()


def test_chain_with_thunks_between_and_a_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thunk between the kernel and the second dot (its rhs, computed there): the chain
    runs in the second dot's place."""
    text = _text(PLAIN, t=64, s=48, d=16)
    args = _args(64, 48, 16, np.float32)
    got, exe = _run(text, args, 2, True, monkeypatch)
    want, _ = _run(text, args, 2, False, monkeypatch)
    assert _chain_lines(exe)
    _like_three_thunks(got[0], want[0], text, args, monkeypatch)


@pytest.mark.parametrize("parts", [SCORES_OUT, PROBS_READ], ids=["scores_out", "probs_read"])
def test_no_chain_when_intermediates_escape(parts: dict[str, str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text(parts)
    args = _args(40, 24, 8, np.float32)
    got, exe = _run(text, args, 2, True, monkeypatch)
    assert not _chain_lines(exe)
    want = xlapy.compile(text, backend="interpreter")(*args)
    for x, y in zip(got, want):
        y = np.asarray(y)
        assert np.abs(x - y).max() <= 1e-5 * np.abs(y).max()


TRANSPOSED_ROWS = """
func.func @main(%q: tensor<4x32x16xf32>, %k: tensor<4x32x16xf32>, %v: tensor<4x32x16xf32>)
    -> tensor<4x32x16xf32> {
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [2]
       : (tensor<4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<4x32x32xf32>
  %t = stablehlo.transpose %0, dims = [0, 2, 1] : (tensor<4x32x32xf32>) -> tensor<4x32x32xf32>
  %1 = stablehlo.add %0, %t : tensor<4x32x32xf32>
  %2 = stablehlo.dot_general %1, %v, batching_dims = [0] x [0], contracting_dims = [2] x [1]
       : (tensor<4x32x32xf32>, tensor<4x32x16xf32>) -> tensor<4x32x16xf32>
  return %2 : tensor<4x32x16xf32>
}
"""


def test_no_chain_when_the_kernel_reads_other_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    args = [rng.standard_normal((4, 32, 16)).astype(np.float32) for _ in range(3)]
    got, exe = _run(TRANSPOSED_ROWS, args, 2, True, monkeypatch)
    assert not _chain_lines(exe)
    want = np.asarray(xlapy.compile(TRANSPOSED_ROWS, backend="interpreter")(*args))
    assert np.abs(got[0] - want).max() <= 1e-5 * np.abs(want).max()


#: q, k, v as heads of one fused projection [T, 3 H D]: slice, split into heads, heads first -
#: view kernels the chain's GEMMs read where the projection lies (dot_views.py), no copy.
HEADS = """
func.func @main(%y: tensor<48x{w3}xf32>) -> tensor<{h}x48x{d}xf32> {{
{qkv}
  %s = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [2]
       : (tensor<{h}x48x{d}xf32>, tensor<{h}x48x{d}xf32>) -> tensor<{h}x48x48xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %mx = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [2]
        : (tensor<{h}x48x48xf32>, tensor<f32>) -> tensor<{h}x48xf32>
  %mb = stablehlo.broadcast_in_dim %mx, dims = [0, 1] : (tensor<{h}x48xf32>)
        -> tensor<{h}x48x48xf32>
  %e = stablehlo.subtract %s, %mb : tensor<{h}x48x48xf32>
  %p = stablehlo.exponential %e : tensor<{h}x48x48xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0] x [0], contracting_dims = [2] x [1]
       : (tensor<{h}x48x48xf32>, tensor<{h}x48x{d}xf32>) -> tensor<{h}x48x{d}xf32>
  return %o : tensor<{h}x48x{d}xf32>
}}
"""
HEAD = """
  %{n}0 = stablehlo.slice %y [0:48, {lo}:{hi}] : (tensor<48x{w3}xf32>) -> tensor<48x{w}xf32>
  %{n}1 = stablehlo.reshape %{n}0 : (tensor<48x{w}xf32>) -> tensor<48x{h}x{d}xf32>
  %{n} = stablehlo.transpose %{n}1, dims = [1, 0, 2] : (tensor<48x{h}x{d}xf32>)
         -> tensor<{h}x48x{d}xf32>"""


def _heads(h: int, d: int) -> str:
    w = h * d
    qkv = "".join(HEAD.format(n=n, lo=i * w, hi=(i + 1) * w, w=w, w3=3 * w, h=h, d=d)
                  for i, n in enumerate("qkv"))
    return HEADS.format(qkv=qkv, w3=3 * w, h=h, d=d)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_chain_reads_heads_where_the_projection_lies(threads: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    text = _heads(4, 16)
    args = [np.random.default_rng(13).standard_normal((48, 192)).astype(np.float32)]
    got, exe = _run(text, args, threads, True, monkeypatch)
    want, ref = _run(text, args, threads, False, monkeypatch)
    (ch,) = exe.chains  # type: ignore[attr-defined]
    assert len(ch.views) == 3 and {leaf for _, leaf in ch.views} == {0}
    assert (ch.first.lhs_at[4], ch.first.rhs_at[4], ch.second.rhs_at[4]) == ("N", "T", "N")
    assert len(exe.thunks) == 1  # type: ignore[attr-defined]  # the copies are gone
    _like_three_thunks(got[0], want[0], text, args, monkeypatch)
    interp = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    assert np.abs(got[0] - interp).max() <= 1e-5 * np.abs(interp).max()


def test_a_reshape_that_needs_a_copy_keeps_its_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """q's slice merged into one dimension cannot be a view (its rows are 192 apart): q's
    kernel copies as before, k and v are still read in place; the result is the same."""
    text = _heads(4, 16)
    q_copy = """
  %qa = stablehlo.slice %y [0:48, 0:64] : (tensor<48x192xf32>) -> tensor<48x64xf32>
  %qb = stablehlo.reshape %qa : (tensor<48x64xf32>) -> tensor<3072xf32>
  %q = stablehlo.reshape %qb : (tensor<3072xf32>) -> tensor<4x48x16xf32>"""
    start = text.index("  %q0 =")
    end = text.index("  %k0 =")
    text = text[:start] + q_copy + "\n" + text[end:]
    args = [np.random.default_rng(14).standard_normal((48, 192)).astype(np.float32)]
    got, exe = _run(text, args, 2, True, monkeypatch)
    want, _ = _run(text, args, 2, False, monkeypatch)
    (ch,) = exe.chains  # type: ignore[attr-defined]
    assert len(ch.views) == 2 and ch.first.lhs_at is None
    _like_three_thunks(got[0], want[0], text, args, monkeypatch)
