"""jax_probe's programs over short rows and batches of small matrices: layouts whose vector
lanes must run across the rows (pairs broadcast against pairs, stacks of 3-4 columns,
packed nibbles) and matrices too small for a LAPACK call's own cost (4 x 4 inverses)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Shaped = Callable[..., np.ndarray]


def programs(f32: Shaped, rows: Shaped, spd: Shaped, rng: np.random.Generator
             ) -> dict[str, tuple[Callable[..., Any], list[np.ndarray]]]:
    """name -> (function, arguments), with jax_probe.programs' array makers (`rows`: rows
    of a fixed length; `spd`: batches of positive definite matrices)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    return {
        # session 56's cliffs: pairwise scores and distances spelled with broadcasting, a
        # fused reduce where XLA runs a GEMM (5-7x), and sums over rows of 9-16 a row loop
        # each (2-3x)
        "pair_scores": (lambda a, b: (a[:, None, :] * b[None, :, :]).sum(-1),
                        [f32(1024, 64), f32(1024, 64)]),
        "pair_dist12": (lambda a, b: ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1),
                        [f32(1024, 96)[:, :12].copy(), f32(1024, 96)[:, :12].copy()]),
        "sum_rows12": (lambda x: x.sum(-1), [f32(512, 1024, 96)[..., :12].copy()]),
        # session 57's: an element-wise root of stacked columns ran scalar, the rotated
        # vector's t = 2 u x v in a buffer of its own (quaternion rotation 2.5x XLA, a
        # stack of columns times 0.5 4x)
        "quat_rotate": (_quat_rotate, [rows(1 << 18, 4), rows(1 << 18, 3)]),
        "stack_scaled": (lambda x: jnp.stack([x[:, 0] - x[:, 2], jnp.maximum(x[:, 1], x[:, 0]),
                                              x[:, 2]], -1) * 0.5, [rows(1 << 20, 3)]),
        # batched small inverses, solves and factors: LAPACK's ~200 ns a call (XLA's too)
        # was the whole time (small_lu.py: 3-5x faster than XLA now)
        "inv4x4_batch": (jnp.linalg.inv, [f32(65536, 4, 4)]),
        "solve6_vmap": (jax.vmap(jnp.linalg.solve), [f32(16384, 6, 6), f32(16384, 6)]),
        "cholesky6": (jnp.linalg.cholesky, [spd(16384, 6)]),
        # session 58's: batched transposes of narrow matrices through 8 x 8 register
        # transposes (1.8x XLA's time; block_permute.py: 0.8x) and batched QR at LAPACK's
        # per-call cost (1.5-2x XLA's time; small_qr.py: 0.3-0.4x)
        "qr4_batch": (jnp.linalg.qr, [rows(1 << 16, 4).reshape(-1, 4, 4)]),
        "qr8x4_batch": (jnp.linalg.qr, [rows(1 << 16, 4).reshape(-1, 8, 4)]),
        "swap_16x2": (lambda x: jnp.swapaxes(x, 1, 2), [rows(1 << 16, 32).reshape(-1, 16, 2)]),
        # a matrix times its vector in a loop ran one BLAS sgemm of one column a step (1.4x
        # XLA's time at 512, 7x at 1024; gemm_small_dot.py)
        "power_iter": (_power_iter, [rows(512, 512)]),
        "loop_bmv": (lambda a, v: lax.fori_loop(0, 50, lambda i, v: jnp.tanh(jnp.einsum(
            "bij,bj->bi", a, v)), v), [rows(4096, 64).reshape(-1, 64, 64) * 0.1,
                                       rows(64, 64)]),
        # session 59's: a cached matrix a loop reads every step, from a misaligned numpy
        # array (split cache lines every load: 1.3-1.5x XLA's time; realign.py copies it),
        # and two gamma draws through one function (their loops built twice: the compile
        # 1.8x XLA's; computation_dedup.py)
        "loop_mv256": (lambda a, v: lax.fori_loop(0, 200, lambda i, v: jnp.tanh(a @ v), v),
                       [_misaligned(f32(256, 256) * 0.06), f32(256)]),
        "beta_sample": (_beta_sample(f32(65536).size),
                        [np.asarray(jax.random.key_data(jax.random.key(0)))]),
        # complex small solves, inverses and QRs: LAPACK per matrix (1.1-1.9x XLA's time;
        # small_lu_complex.py, small_qr_complex.py)
        "solve_c64_4": (jax.vmap(jnp.linalg.solve), [_complex(f32(8192, 4, 4), f32(8192, 4, 4)),
                                                     _complex(f32(8192, 4), f32(8192, 4))]),
        "inv_c128_8": (jnp.linalg.inv, [_complex(f32(2048, 8, 8), f32(2048, 8, 8), True)]),
        "qr_c64_4": (jnp.linalg.qr, [_complex(f32(4096, 4, 4), f32(4096, 4, 4))]),
        # int4 weights unpacked by a stack of the nibbles merged into rows, read through
        # the reshape in scalar code (6x slower than now); bf16 rows over their norms
        # rounded with integer ops (1.3x)
        "int4_unpack": (_int4_unpack, [rng.integers(0, 256, (1024, 512)).astype(np.uint8),
                                       np.float32(0.02)]),
        "l2norm_bf16": (lambda x: (x / jnp.linalg.norm(x.astype(jnp.float32), axis=-1,
                                                       keepdims=True)).astype(jnp.bfloat16),
                        [f32(8192, 768).astype(jnp.bfloat16)]),
        # session 60's: jnp.polyfit's Vandermonde powers computed in two kernels, its
        # column scales' roots once per row (1.3x XLA's time)
        "polyfit": (lambda x, y: jnp.polyfit(x, y, 5), [f32(4096), f32(4096)]),
        # upper-triangle pairs of a batch of matrices: the run-time triu indices (integer
        # divisions) recomputed once per batch row inside the gather (5.9x)
        "triu_pairs": (_triu_pairs, [f32(256, 64, 64)]),
        # keepdims=True row reductions: a per-row root [n, 1] ran without lanes, each row's
        # sum or max one vector chain (AVX2: max 2.2x XLA's time, logsumexp 2.5x slower)
        "max_keepdims": (lambda x: x.max(-1, keepdims=True), [f32(4096, 1024)]),
        "lse_keepdims": (lambda x: jax.nn.logsumexp(x, -1, keepdims=True), [f32(4096, 1024)]),
        # session 61's cliffs (Zen 3, AVX2): the first true index of a long boolean row, a
        # variadic reduce a step at a time (1.5x; jnp.select's short one: 4.5x); a layer
        # norm written in bf16 ops, each rounding's NaN select kept (1.7x)
        "first_true_row": (lambda x: jnp.argmax(x > 1.5, axis=-1), [f32(4096, 1000)]),
        "ln_bf16": (_layernorm, [f32(4096, 1024).astype(jnp.bfloat16)]),
        # session 62's: f32 erf as one f64 polynomial (2.7x XLA's time on AVX2; erf_f32.py:
        # f32 code, ~1.7x), and a loss's mean of log1p(exp(-|x|)) one vector an iteration
        # (1.3-1.6x; its vector groups widen now, interleave_emit.summed)
        "erf_f32": (lax.erf, [rows(1 << 20, 1).reshape(-1)]),
        "bce_mean": (lambda l, y: (jnp.maximum(l, 0) - l * y + jnp.log1p(jnp.exp(-jnp.abs(
            l)))).mean(), [rows(1 << 20, 1).reshape(-1), (rows(1 << 20, 1) > 0).reshape(
                -1).astype(np.float32)]),
        # session 63's: channels-first strided convolutions copied to channels-last by numpy
        # each call (2x XLA's time; conv_layout.py); 3-channel pixels padded, cropped at
        # random, rows of 3 concatenated with 3 of 8 lanes a pixel (1.3-2.5x;
        # kernel_collapse.py); flips of uint8 pixels (6x) and along the lanes (1.5x) in
        # scalar code (minor_stack.short, reverse_emit.py)
        "conv_s2_ncw": (lambda x, w: lax.conv_general_dilated(x, w, (2,), "SAME"),
                        [f32(16, 64, 2048), f32(64, 64, 5) * 0.1]),
        "conv_s2_nchw_relu": (_conv_relu, [f32(8, 32, 64, 64), f32(64, 32, 3, 3) * 0.1,
                                           f32(64)]),
        "pad_pixels": (lambda x: jnp.pad(x, ((0, 0), (4, 4), (4, 4), (0, 0))),
                       [f32(8, 128, 128, 3)]),
        "random_crop": (lambda x, i: lax.dynamic_slice(x, (0, i, i, 0), (8, 112, 112, 3)),
                        [f32(8, 128, 128, 3), np.int32(5)]),
        "concat_points": (lambda a, b: jnp.concatenate([a, b], 0) * 2.0,
                          [rows(200000, 3), rows(100000, 3)]),
        "flip_u8_pixels": (lambda x: jnp.flip(x, 2),
                           [rng.integers(0, 256, (8, 128, 128, 3)).astype(np.uint8)]),
        "flip_rows_mul": (lambda x: jnp.flip(x, -1) * 2.0 + x, [f32(1024, 1024)]),
        # a softmax over columns computed exp(x - max) in the sum's kernel and the divide's
        # (1.3x; fusion_spread.reduced_elsewhere)
        "softmax_cols": (lambda x: jax.nn.softmax(x, 0), [f32(1024, 1024)]),
        # a 2x nearest upsample of 3-channel images ran 3 of 8 masked lanes a pixel (1.4x,
        # uint8 2.2x; lanes.split_patterns with pinned channels)
        "upsample_pixels": (lambda x: jnp.repeat(jnp.repeat(x, 2, 1), 2, 2),
                            [f32(8, 128, 128, 3)]),
        # session 64's: a moving average folded its window position by position into the
        # output row in memory (3.3x; window_slide.py), and a concatenate of [N, 3] rows
        # times 2 ran 3 masked lanes a row (1.5x; kernel_collapse with segments)
        "moving_avg": (lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 16), (1, 1),
                                                   "VALID") / 16, [f32(64, 16384)]),
        # a decoding loop's attention times its value cache ("ht,thd->hd"), a reduce that
        # read the cache with a stride (6.2x; small_dots: the contraction in the middle)
        "attn_mix_loop": (lambda a, v: lax.fori_loop(0, 64, lambda i, s: s + jnp.einsum(
            "ht,thd->hd", a * i, v), jnp.zeros((a.shape[0], v.shape[2]))),
            [f32(4, 256), f32(256, 4, 64)]),
        # session 65's: a Mandelbrot loop over complex values carried in place ran scalar
        # code (the vectorizer's overlap check failed on the state written over itself: one
        # thread 5.5x slower; for_range's `parallel`), and a 1-layer decoding loop recomputed
        # its softmax per vector of the head dimension behind a split reshape (1.1-1.2x;
        # hoist_emit through reshape indices)
        "mandel_loop": (_mandel, [_complex(f32(256, 256), f32(256, 256)) * 0.7]),
        "decode_cache_loop": (_decode, _decode_args(f32)),
        # session 66's: a loop's c64 exp(1j t) of an f32 state element t, twice t's bytes,
        # recomputed (a sincos an element) every trip (3.5x; XLA's LICM carries it), and a
        # vector state updated element-wise on one thread, its 1.5 MB read from L3 every
        # trip (2.3x; row_loop: a vector's elements as rows, each share in its core's L2)
        "phase_loop": (lambda z, t: lax.fori_loop(
            0, 50, lambda i, z: z / jnp.abs(z) * jnp.exp(1j * t), z),
            [_complex(f32(65536), f32(65536)), f32(65536)]),
        "rotate_loop": (lambda z, w: lax.fori_loop(0, 100, lambda i, z: z * w, z),
                        [_complex(f32(65536), f32(65536)), _unit(f32(65536), f32(65536))]),
        # session 67's: a complex sum's two serial chains, one element a step (1.5-3x;
        # reduce_emit: two reassociated float sums, in blocks), and a bilinear form whose
        # W^T X^T went through a transpose kernel to its row sums (1.2-1.45x; swapped_dot)
        "csum_rows": (lambda a: a.sum(-1), [_complex(f32(256, 4096), f32(256, 4096))]),
        "bilinear_ein": (lambda x, y, w: jnp.einsum("bi,bj,ij->b", x, y, w),
                         [f32(4096, 64), f32(4096, 64), f32(64, 64)]),
        # session 68's: whole-array sums of short rows, a row at a time behind a loop of 1M
        # (f32 5.7x, c64 3.7x; kernel_collapse.merge_reduced), a narrow column sum read
        # through three reshapes (1.2x; Emitter.regroup), a narrow complex one element by
        # element (2.1x; narrow_columns) and jnp.argmax of a whole array as one scalar tree
        # (3.1x; total_argbest.py)
        "sum_short_rows": (lambda a: a.sum(), [rows(1 << 20, 4)]),
        "csum_short_rows": (lambda a: a.sum(), [_complex(rows(1 << 20, 4), rows(1 << 20, 4))]),
        "colsum_narrow": (lambda a: a.sum(0), [rows(1 << 20, 4)]),
        "csum_cols3": (lambda a: a.sum(0), [_complex(rows(1 << 18, 3), rows(1 << 18, 3))]),
        "argmax_all": (lambda a: jnp.argmax(a), [f32(1024, 1024)]),
        # session 69's: a whole-array max of a computed value (and a column sum of one) read
        # through a reshape into rows of 4096, an index division per element (1.4-1.5x, a
        # while loop stopping on jnp.max(jnp.abs(x)) 2.3x; Emitter.regroup)
        "max_abs_4k": (lambda a: jnp.max(jnp.abs(a)), [f32(1024, 256)]),
        "colsum_sq4": (lambda a: jnp.sum(a * a, 0), [rows(1 << 18, 4)]),
        "while_maxabs": (lambda a: lax.while_loop(
            lambda s: (s[0] < 100) & (jnp.max(jnp.abs(s[1])) > 1e-3),
            lambda s: (s[0] + 1, s[1] * 0.9), (0, a))[1], [f32(1024, 256)]),
        # session 70's: complex column sums added into the output per element (1.7-2.6x;
        # complex_reduce_emit._complex_columns), and narrow column sums whose rows are not
        # a multiple of the group read the groups through a slice, dividing each index
        # (f32 0.9x, int32 4.7x, of x * x 0.65x - 3.6x its even rows' time;
        # hlo_builder.prefix_slice and Emitter.regroup)
        "cmean_pairs": (lambda a: a.mean(0), [_complex(rows(1 << 18, 2), rows(1 << 18, 2))]),
        "csum_cols8": (lambda a: a.sum(0), [_complex(rows(1 << 16, 8), rows(1 << 16, 8))]),
        "cpower_cols": (lambda a: (a * a.conj()).real.sum(0) + (a * a).sum(0).real,
                        [_complex(rows(1 << 16, 8), rows(1 << 16, 8))]),
        "csum_mid": (lambda a: a.sum(1), [_complex(f32(64, 4096, 2), f32(64, 4096, 2))]),
        "colsum_odd3": (lambda a: a.mean(0), [rows(300007, 3)]),
        "icolsum_odd3": (lambda a: a.sum(0), [(rows(300007, 3) * 8).astype(np.int32)]),
        "var_odd3": (lambda a: a.var(0), [rows(300007, 3)]),
        "sqsum_odd3": (lambda a: (a * a).sum(0), [rows(300007, 3)]),
        # jnp.tile along the last axis: a broadcast [1, R, 3, C] written as [R, 3 C] divided
        # its index per element (3.8x; kernel_flat._unit_head)
        "tile_cols3": (lambda a: jnp.tile(a, (1, 3)), [rows(2048, 341)]),
        # jax.nn.elu: expm1 took a whole exp(x) - 1 for x past 20 on every lane (1.07x)
        "elu": (jax.nn.elu, [f32(2048, 1024)]),
        # reductions over a leading axis keeping [A, c] with c narrow: 7 of 16 lanes behind
        # a loop over A, narrow_columns taking only one kept dimension (max 7.9x, int32
        # sum 8.2x; kept_columns.py)
        "max_axis0_3d": (lambda a: a.max(0), [f32(300, 1000, 7)]),
        "isum_axis0_3d": (lambda a: a.sum(0), [(f32(300, 1000, 7) * 10).astype(np.int32)]),
        # session 71's: cummax along rows folded element by element, a store and reload in
        # each fold's chain (1.07x; 1-d 1.5x, reversed 1.4x; cumulative_emit._lanes)
        "cummax_rows": (lambda a: lax.cummax(a, 1), [f32(1024, 1024)]),
        "cummin_rev_1d": (lambda a: lax.cummin(a, 0, reverse=True), [f32(1 << 20)]),
        # bf16 moves widened each value to f32 and rounded it back (14 vector ops a vector:
        # a reverse 1.6x, a row gather 1.1-1.3x; elementwise._stored_bits)
        "flip_bf16": (lambda a: a[::-1], [f32(4096, 1024).astype(jnp.bfloat16)]),
        "gather_bf16": (lambda t, i: t[i], [f32(50000, 256).astype(jnp.bfloat16),
                                            rng.integers(0, 50000, 8192).astype(np.int32)]),
        # 1-byte values ran as many lanes as f32s, 16 bytes a step (an int8 column max 1.2-1.9x,
        # a bool column any 2.1x; interleave_emit._narrow_lanes)
        "i8_max_cols": (lambda a: a.max(0), [(f32(4096, 1024) * 40).astype(np.int8)]),
        "any_cols": (lambda a: a.any(0), [f32(4096, 1024) > 2.3]),
        # a float max over rows ran on one thread: its partials had no combine ordering -0
        # below +0 (1.9x; reduce_emit.PARTIAL_FLOAT, thunks.ordered_combine)
        "max_cols64": (lambda a: a.max(0), [f32(65536, 64)]),
        # session 72's: a max down the rows of a vector-wide row stored and reloaded the
        # output row each row (2.8x; 1.55x for [1M, 8], folded to that shape), a bf16 one on
        # one thread (9.5x), a wide bf16 one rounded each row's values back (2-4x;
        # column_registers.py, bf16 partials and blocks)
        "max_cols16": (lambda a: a.max(0), [f32(1 << 19, 16)]),
        "min_bf16_cols32": (lambda a: a.min(0), [f32(1 << 18, 32).astype(jnp.bfloat16)]),
        "max_bf16_cols": (lambda a: a.max(0), [f32(4096, 1024).astype(jnp.bfloat16)]),
        # a 2 x 2 max pool of NCHW images by reshape: each output's pairs in masked vectors
        # of 2 (2.0x; short_reduce.split_last)
        "pool2x2_reshape": (lambda a: a.reshape(8, 64, 28, 2, 28, 2).max((3, 5)),
                            [f32(8, 64, 56, 56)]),
        # a max pool of RGB images ran the native reduce_window's scalar channel loop (1.8x;
        # 3 x 3 / 2 SAME 2.9x; window_slices.py)
        "maxpool_rgb": (lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (1, 3, 3, 1),
                                                    (1, 2, 2, 1), "SAME"),
                        [f32(8, 224, 224, 3)]),
        # session 74's compile cliffs (benchmarks/compile_time.py --probe): a reversed cummax
        # along axis 0 unrolled 136 folds a block (0.75 s against XLA's 0.13; bf16 1.2 s),
        # a forward bf16 cummax along rows rounded every fold (0.4 s)
        "cummax_rev_cols": (lambda a: lax.cummax(a, 0, reverse=True), [f32(2048, 33)]),
        "cummax_bf16_rows": (lambda a: lax.cummax(a, 1),
                             [f32(512, 1000).astype(jnp.bfloat16)]),
    }


def _conv_relu(x: Any, w: Any, b: Any) -> Any:
    """A stride-2 NCHW convolution, its bias and relu (PyTorch's layout)."""
    import jax
    from jax import lax
    y = lax.conv_general_dilated(x, w, (2, 2), "SAME")
    return jax.nn.relu(y + b[None, :, None, None])


def _layernorm(x: Any) -> Any:
    """(x - mean) / sqrt(var + eps) over rows, in x's own type."""
    from jax import lax
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + 1e-5)


def _triu_pairs(x: Any) -> Any:
    import jax.numpy as jnp

    i, j = jnp.triu_indices(x.shape[-1], 1)
    return x[:, i, j]


def _mandel(c: Any) -> Any:
    """30 steps of z <- z z + c, counting the points still inside |z| < 2."""
    import jax.numpy as jnp
    from jax import lax

    def step(i: Any, s: Any) -> Any:
        z, n = s
        z = z * z + c
        return z, n + (jnp.abs(z) < 2).astype(jnp.int32)
    return lax.fori_loop(0, 30, step, (jnp.zeros_like(c), jnp.zeros(c.shape, jnp.int32)))[1]


def _decode(emb: Any, wqkv: Any, wo: Any, w1: Any, w2: Any, kc: Any, vc: Any) -> Any:
    """Greedy decoding with one transformer layer (RMS norm, attention over a KV cache
    updated in place, GELU MLP), the next token the argmax of the tied embedding's logits."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    t, h, dh = kc.shape
    d = h * dh

    def norm(x: Any) -> Any:
        return x * lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6)

    def step(i: Any, s: Any) -> Any:
        tok, kc, vc, out = s
        x = emb[tok]
        q, k, v = jnp.split(norm(x) @ wqkv, 3, -1)
        kc = lax.dynamic_update_slice(kc, k.reshape(1, h, dh), (i, 0, 0))
        vc = lax.dynamic_update_slice(vc, v.reshape(1, h, dh), (i, 0, 0))
        a = jnp.einsum("hd,thd->ht", q.reshape(h, dh), kc) / np.sqrt(dh)
        a = jax.nn.softmax(jnp.where(jnp.arange(t)[None, :] <= i, a, -1e9), -1)
        x = x + jnp.einsum("ht,thd->hd", a, vc).reshape(d) @ wo
        x = x + jax.nn.gelu(norm(x) @ w1) @ w2
        nt = jnp.argmax(x @ emb.T).astype(jnp.int32)
        return nt, kc, vc, out.at[i].set(nt)
    n = t // 4
    return lax.fori_loop(0, n, step, (jnp.int32(3), kc, vc, jnp.zeros(n, jnp.int32)))[3]


def _decode_args(f32: Shaped) -> list[np.ndarray]:
    """_decode's weights for a 1000-token vocabulary, width 256, 4 heads, a 256-step cache."""
    emb = f32(1000, 256) * 0.1
    d = emb.shape[1]
    cache = np.zeros((f32(256).shape[0], 4, d // 4), np.float32)
    return [emb, f32(256, 768)[:d, :3 * d] * 0.05, f32(256, 256)[:d, :d] * 0.05,
            f32(256, 1024)[:d, :4 * d] * 0.05, f32(1024, 256)[:4 * d, :d] * 0.05, cache,
            cache.copy()]


def _complex(re: np.ndarray, im: np.ndarray, wide: bool = False) -> np.ndarray:
    return (re + 1j * im).astype(np.complex128 if wide else np.complex64)


def _unit(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """c64 values of modulus 1 (a rotation repeated stays finite)."""
    z = _complex(re, im)
    return (z / np.abs(z)).astype(np.complex64)


def _misaligned(a: np.ndarray) -> np.ndarray:
    """A copy of `a` starting 16 bytes past a cache line (as malloc places most arrays)."""
    buf = np.empty(a.nbytes + 128, np.uint8)
    off = -buf.ctypes.data % 64 + 16
    out = buf[off: off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _beta_sample(n: int) -> Callable[[Any], Any]:
    """n beta(2, 3) variates from a raw key: two gamma draws, each a rejection loop."""
    import jax

    return lambda k: jax.random.beta(jax.random.wrap_key_data(k), 2.0, 3.0, (n,))


def _power_iter(a: Any) -> Any:
    """200 steps of v <- a v / |a v| (a's square part: the smoke test's rows are fewer)."""
    import jax.numpy as jnp
    from jax import lax

    a = a[:, :a.shape[0]]
    def step(i: Any, v: Any) -> Any:
        w = a @ v
        return w / jnp.linalg.norm(w)
    return lax.fori_loop(0, 200, step, jnp.ones(a.shape[0], a.dtype))


def _int4_unpack(wq: Any, scale: Any) -> Any:
    """Packed int4 weights (two a byte) as f32 rows, the low nibble first."""
    import jax.numpy as jnp
    lo = (wq & 15).astype(jnp.int8) - 8
    hi = (wq >> 4).astype(jnp.int8) - 8
    return jnp.stack([lo, hi], -1).reshape(wq.shape[0], -1).astype(jnp.float32) * scale


def _quat_rotate(q: Any, v: Any) -> Any:
    """v rotated by the unit quaternion q = (w, u): v + w t + u x t, t = 2 u x v."""
    import jax.numpy as jnp
    u = jnp.stack([q[:, 1], q[:, 2], q[:, 3]], -1)
    t = 2 * jnp.cross(u, v)
    return v + q[:, :1] * t + jnp.cross(u, t)


__all__ = ["programs"]
