"""xlapy-cpu vs XLA on many small JAX programs of the kinds users bring (control flow,
training gradients, conversions, linalg, fft, random numbers), interleaved in one process,
to find the programs that fall off a cliff:

    python benchmarks/jax_probe.py [--only cond_in_loop,scan_ys] [--reps N] [--burst B]

Each row: xlapy and XLA min ms over `reps` rounds of `burst` calls (benchmarks/timing.py),
the ratio of minima, fallbacks, and the max error relative to XLA (|got - want| /
(|want| + 0.01)). Ratios over 1.2 are marked. The workloads of jax_run.py are the big
programs measured against the issue's targets; these are the many small ones that found
this session's cliffs (a lax.cond in a loop at 600x, a scan's stacked outputs at O(n^2), a
transpose at 8.6x): keep adding programs here when a user brings a new kind.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402
from benchmarks.timing import round_robin  # noqa: E402

env.prepare()  # first, before OpenBLAS loads (benchmarks/env.py)

import numpy as np  # noqa: E402

from benchmarks import jax_probe_rows  # noqa: E402  (imports numpy: after prepare)

Program = tuple[Callable[..., Any], list[np.ndarray]]


def _lstm_cell(c: Any, x: Any, w: Any, u: Any) -> Any:
    """One LSTM step (gates i, f, g, o of x @ w + h @ u): ((h, c), h)."""
    import jax
    import jax.numpy as jnp

    h, cc = c
    i, f, g, o = jnp.split(x @ w + h @ u, 4, -1)
    cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(cc)
    return (h, cc), h


def adam_step(*a: Any) -> list[Any]:
    """Adam over parameters, gradients, first and second moments (a quarter of `a` each)."""
    import jax.numpy as jnp

    n = len(a) // 4
    out: list[Any] = []
    for p, g, m, v in zip(a[:n], a[n:2 * n], a[2 * n:3 * n], a[3 * n:]):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        out += [p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), m, v]
    return out


def programs(small: bool = False) -> dict[str, Program]:
    """name -> (function, arguments). `small`: tiny shapes (the smoke test)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(0)
    s = 8 if small else 1

    def rows(n: int, c: int) -> np.ndarray:  # (small: fewer rows, the same row length)
        return rng.standard_normal((max(1, n // s), c)).astype(np.float32)

    def f32(*shape: int) -> np.ndarray:
        return rng.standard_normal([max(1, d // s) for d in shape]).astype(np.float32)

    def spd(b: int, n: int) -> np.ndarray:  # b symmetric positive definite n x n matrices
        a = f32(b, n, n)
        return a @ np.swapaxes(a, -1, -2) / a.shape[-1] + np.eye(a.shape[-1], dtype=np.float32)

    def pts(n: int, *shape: int) -> np.ndarray:  # n points of a fixed shape (3-vectors)
        return rng.standard_normal([n // s, *shape]).astype(np.float32)

    def conv(x: Any, w: Any, stride: int = 1) -> Any:
        return lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def group_norm(x: Any, g: int = 8) -> Any:
        """flax.linen.GroupNorm's statistics: [n, h, w, c] as [n, h, w, g, c / g]."""
        y = x.reshape(*x.shape[:-1], g, x.shape[-1] // g)
        y = (y - y.mean((1, 2, 4), keepdims=True)) / jnp.sqrt(y.var((1, 2, 4), keepdims=True)
                                                              + 1e-5)
        return y.reshape(x.shape)

    def attn(q: Any, k: Any, v: Any) -> Any:
        p = jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0, -1)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v)

    def decoder(vocab: int, width: int, steps: int) -> Program:
        """Greedy decoding: a 2-layer, 4-head transformer (rms norm, KV cache, GELU MLP) in a
        fori_loop over `steps` tokens, the next one its logits' argmax."""
        layers, heads = 2, 4

        def w(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) * 0.05).astype(np.float32)

        names = ("emb", "wq", "wk", "wv", "wo", "w1", "w2")
        shapes = [(vocab, width)] + [(layers, width, width)] * 4 + [
            (layers, width, 4 * width), (layers, 4 * width, width)]

        def rms(x: Any) -> Any:
            return x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)

        def run(*ws: Any) -> Any:
            p = dict(zip(names, ws))

            def body(i: Any, st: Any) -> Any:
                tok, kc, vc, out = st
                x = p["emb"][tok]
                for ly in range(layers):
                    h = rms(x)
                    q = h @ p["wq"][ly]
                    kc = kc.at[ly, i].set(h @ p["wk"][ly])
                    vc = vc.at[ly, i].set(h @ p["wv"][ly])
                    s = jnp.einsum("hd,thd->ht", q.reshape(heads, -1),
                                   kc[ly].reshape(steps, heads, -1)) / 8.0
                    s = jnp.where(jnp.arange(steps)[None, :] <= i, s, -1e9)
                    a = jnp.einsum("ht,thd->hd", jax.nn.softmax(s, -1),
                                   vc[ly].reshape(steps, heads, -1))
                    x = x + a.reshape(width) @ p["wo"][ly]
                    x = x + jax.nn.gelu(rms(x) @ p["w1"][ly]) @ p["w2"][ly]
                nxt = jnp.argmax(x @ p["emb"].T).astype(jnp.int32)
                return nxt, kc, vc, out.at[i].set(nxt)

            cache = jnp.zeros((layers, steps, width))
            return lax.fori_loop(0, steps, body, (jnp.int32(3), cache, cache,
                                                  jnp.zeros(steps, jnp.int32)))[3]

        return run, [w(*sh) for sh in shapes]

    def rope(x: Any, pos: Any) -> Any:
        """Rotary embedding over [batch, seq, heads, 64]: the cos/sin table per position."""
        d = x.shape[-1] // 2
        a = pos[:, None] * (1.0 / (10000 ** (jnp.arange(d) / d)))[None, :]
        c, s_ = jnp.cos(a)[None, :, None, :], jnp.sin(a)[None, :, None, :]
        x1, x2 = x[..., :d], x[..., d:]
        return jnp.concatenate([x1 * c - x2 * s_, x1 * s_ + x2 * c], -1)

    def lstm(xs: Any, h0: Any, c0: Any, wx: Any, wh: Any) -> Any:
        """An LSTM over the leading axis of xs (lax.scan; one fused gate matmul pair)."""
        def step(carry: Any, x: Any) -> Any:
            h, c = carry
            i, f, g, o = jnp.split(x @ wx + h @ wh, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        return lax.scan(step, (h0, c0), xs)[1]

    def mlp_loss(w1: Any, w2: Any, x: Any, y: Any) -> Any:
        return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

    def batch_norm(x: Any, g: Any, b: Any) -> Any:  # training mode: the batch's statistics
        m, v = x.mean((0, 1, 2)), x.var((0, 1, 2))
        return jax.nn.relu((x - m) / jnp.sqrt(v + 1e-5) * g + b)

    def renorm_loop(x: Any, w: Any) -> Any:
        """A recurrence renormalized through an inverse every 8th step: a cond of LAPACK
        calls no select can stand for (branch_chain.py: it ran through Python, 8.8x)."""
        inv = jnp.linalg.inv(w + 4 * jnp.eye(w.shape[0], dtype=w.dtype))
        return lax.fori_loop(0, 64, lambda i, c: lax.cond(
            i % 8 == 0, lambda c: c / jnp.linalg.norm(c, axis=0) @ jnp.linalg.inv(w + inv),
            lambda c: c * 1.01, jnp.tanh(c @ w)), x)

    steps = 10 if small else 1000
    table = {
        # control flow
        "cond_in_loop": (lambda v: lax.fori_loop(0, steps, lambda i, w: lax.cond(
            i % 2 == 0, lambda u: u * 0.5 + 1, lambda u: u - 0.25, w), v), [f32(256)]),
        "switch_in_loop": (lambda v: lax.fori_loop(0, steps, lambda i, w: lax.switch(
            i % 3, [lambda u: u * 0.5, lambda u: u + 1, jnp.sin], w), v), [f32(256)]),
        "cond_lapack_loop": (renorm_loop, [f32(32, 32), f32(32, 32) * 0.2]),
        "loop_in_loop": (lambda v: lax.fori_loop(0, 100, lambda i, w: lax.fori_loop(
            0, 10, lambda j, u: u * 0.99 + 0.01, w), v), [f32(256)]),
        "scan_in_loop": (lambda v: lax.fori_loop(0, 50, lambda i, w: lax.scan(
            lambda c, x: (c + x * 0.1, c), w, jnp.ones((8, v.shape[0])))[0], v), [f32(256)]),
        "loop_in_loop_100": (lambda v: lax.fori_loop(0, 100, lambda i, w: lax.fori_loop(
            0, 100, lambda j, u: u * 0.99 + 0.01, w), v), [f32(256)]),
        "scan64_in_loop": (lambda v: lax.fori_loop(0, 100, lambda i, w: lax.scan(
            lambda c, x: (c + x * 0.1, c), w, jnp.ones((64, v.shape[0])))[0], v), [f32(256)]),
        "while_in_loop": (lambda v: lax.fori_loop(0, 50, lambda i, w: lax.while_loop(
            lambda u: jnp.max(u) > 0.5, lambda u: u * 0.9, w + 1.0), v), [f32(256)]),
        "scan_ys": (lambda xs: lax.scan(lambda c, x: (c + x, c * x),
                                        jnp.zeros(xs.shape[1], jnp.float32), xs)[1],
                    [f32(2000, 128)]),
        "while_converge": (lambda v: lax.while_loop(
            lambda st: (st[1] < 500) & (jnp.max(jnp.abs(st[0])) > 1e-3),
            lambda st: (st[0] * 0.98, st[1] + 1), (v, 0))[0], [f32(256)]),
        "decode_loop": decoder(512 if small else 4096, 64 if small else 256,
                               8 if small else 64),
        "matvec_loop": (lambda h, a, b: lax.fori_loop(0, 100, lambda i, h: jnp.tanh(jnp.tanh(
            h @ a) @ b), h), [f32(1, 256), f32(256, 1024) * .05, f32(1024, 256) * .05]),  # 4.6x
        "lstm": (lstm, [f32(100, 32, 128), f32(32, 256), f32(32, 256), f32(128, 1024) * .05,
                        f32(256, 1024) * .05]),
        # training
        "per_example_grad": (jax.vmap(jax.grad(mlp_loss, (0, 1)), in_axes=(None, None, 0, 0)),
                             [f32(64, 128) * .1, f32(128, 10) * .1, f32(256, 64),
                              f32(256, 10)]),
        "batch_norm": (batch_norm, [f32(32, 32, 32, 64), f32(64), f32(64)]),
        "mlp_grad": (jax.grad(lambda w1, w2, x: jnp.sum(jax.nn.relu(x @ w1) @ w2)),
                     [f32(1024, 4096) * 0.02, f32(4096, 1024) * 0.02, f32(256, 1024)]),
        "attention_grad": (jax.grad(lambda q, k, v: jnp.sum(attn(q, k, v) ** 2)),
                           [f32(4, 8, 256, 64), f32(4, 8, 256, 64), f32(4, 8, 256, 64)]),
        "conv_grad_x": (jax.grad(lambda x, w: jnp.sum(conv(x, w) ** 2)),
                        [f32(16, 32, 32, 64), f32(3, 3, 64, 64) * 0.05]),
        "conv_grad_w": (jax.grad(lambda w, x: jnp.sum(conv(x, w) ** 2)),
                        [f32(3, 3, 64, 64) * 0.05, f32(16, 32, 32, 64)]),
        "conv_s2_grad_x": (jax.grad(lambda x, w: jnp.sum(conv(x, w, 2) ** 2)),
                           [f32(16, 32, 32, 64), f32(3, 3, 64, 128) * 0.05]),
        "conv_transpose": (lambda x, w: lax.conv_transpose(
            x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
            [f32(16, 16, 16, 64), f32(3, 3, 64, 32)]),
        "avgpool_grad": (jax.grad(lambda x: jnp.sum(lax.reduce_window(
            x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") ** 2)), [f32(32, 32, 32, 64)]),
        "embedding_grad": (jax.grad(lambda e, i: jnp.sum(e[i] ** 2)),
                           [f32(30000, 256), rng.integers(0, 30000 // s, (64, 128)).astype(
                               np.int32)]),
        "xent_grad": (jax.grad(lambda lg, y: -jnp.mean(jnp.take_along_axis(
            jax.nn.log_softmax(lg), y[:, None], 1))),
            [f32(512, 32000), rng.integers(0, 32000 // s, 512 // s).astype(np.int32)]),
        "xent_onehot": (lambda lg, y: -jnp.mean(jnp.sum(jax.nn.one_hot(y, lg.shape[-1])
                                                      * jax.nn.log_softmax(lg), -1)),
                        [f32(512, 1000), rng.integers(0, 1000 // s, 512 // s).astype(np.int32)]),
        "adam_step": (lambda p, g, m, v: (p - 1e-3 * (0.9 * m + 0.1 * g) / (
            jnp.sqrt(0.999 * v + 0.001 * g * g) + 1e-8)),
            [f32(4096, 1024), f32(4096, 1024), f32(4096, 1024), np.abs(f32(4096, 1024))]),
        # element-wise and layout
        "logsumexp": (lambda x: jax.nn.logsumexp(x, axis=-1), [f32(4096, 1024)]),
        "transpose": (lambda x: x.T + 0, [f32(4096, 1024)]),
        "to_int8": (lambda x: jnp.round(jnp.clip(x * 10, -5, 5)).astype(jnp.int8),
                    [f32(1024, 1024)]),
        "erf_gelu": (lambda x: jax.nn.gelu(x, approximate=False), [f32(1024, 1024)]),
        "random_normal": (lambda k: jax.random.normal(jax.random.wrap_key_data(k),
                                                      (1000 // s, 100)),
                          [np.array([0, 42], np.uint32)]),
        # linalg and fft
        "rfft": (lambda x: jnp.abs(jnp.fft.rfft(x, axis=-1)), [f32(256, 4096)]),
        "cho_solve": (lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(
            a @ a.T + 256 * jnp.eye(a.shape[0])), b), [f32(256, 256), f32(256, 16)]),
        "solve_64": (lambda a, b: jnp.linalg.solve(a, b),
                     [(lambda a: a @ a.T + 64 * np.eye(a.shape[0], dtype=np.float32))(
                         f32(64, 64)), f32(64, 8)]),
        "cumsum": (lambda x: jnp.cumsum(x, axis=1), [f32(256, 512)]),
        "assoc_scan": (lambda x: lax.associative_scan(jnp.add, x, axis=1), [f32(256, 4096)]),
        "polyval": (lambda x: jnp.polyval(jnp.arange(20.0), x), [f32(1 << 20)]),
        "vmap_solve": (jax.vmap(jnp.linalg.solve),
                       [rng.standard_normal((512 // s, 4, 4)).astype(np.float32)
                        + 4 * np.eye(4, dtype=np.float32),
                        rng.standard_normal((512 // s, 4)).astype(np.float32)]),
        "rope": (rope, [f32(8, 512, 16, 64), np.arange(512 // s, dtype=np.float32)]),
        "resize": (lambda x: jax.image.resize(x, (8, 128 // s, 128 // s, 3), "bilinear"),
                   [f32(8, 64, 64, 3)]),
        # a switch of big branches in a loop (a call per branch each iteration until the
        # select budget counted only computed elements: 2.4x)
        "switch_64k": (lambda v: lax.fori_loop(0, 50, lambda i, w: lax.switch(
            i % 3, [lambda u: u * 0.5, lambda u: u + 1, jnp.tanh], w), v), [f32(65536)]),
        "argmin_cols": (lambda x: jnp.argmin(x, axis=0), [f32(2048, 512)]),  # was 2.05x
        "uniform": (lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (
            (1 << 20) // s,)), [np.array([0, 42], np.uint32)]),  # threefry: 1.6x
        "kron": (jnp.kron, [f32(32, 32), f32(32, 32)]),  # a reshape split the lanes: 2.6x
        "top_k_100": (lambda x: lax.top_k(x, 100)[1], [f32(64, 32768)]),  # was a sort: 29x
        "cumsum_rev": (lambda x: lax.cumsum(x, axis=0, reverse=True), [f32(1024, 512)]),  # 9.6x
        "clip_u8": (lambda x: jnp.clip(x * 255, 0, 255).astype(jnp.uint8),
                    [f32(8, 224, 224, 3)]),  # a last dimension of 3 ran scalar: 4.4x
        "image_norm": (lambda x: (x / 255 - jnp.array([0.485, 0.456, 0.406])) / jnp.array(
            [0.229, 0.224, 0.225]), [f32(8, 224, 224, 3)]),  # per-channel, was scalar: 6x
        "maxpool_nchw": (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (
            1, 1, 2, 2), "SAME"), [f32(16, 32, 64, 64)]),  # 3.25x, now 1.56x: open
        "lstm_grad": (jax.grad(lambda w, u, xs: jnp.sum(lax.scan(
            lambda c, x: _lstm_cell(c, x, w, u), (jnp.zeros((xs.shape[1], u.shape[0])),) * 2,
            xs)[1] ** 2)), [f32(32, 256) * 0.1, f32(64, 256) * 0.1, f32(50, 8, 32)]),  # 5.2x
        "group_norm": (group_norm, [f32(8, 32, 32, 64)]),  # a reshape split the lanes: 1.7x
        "logsumexp_bf16": (lambda x: jax.nn.logsumexp(x.astype(jnp.bfloat16), -1),
                           [f32(1024, 1024)]),  # a per-row root: scalar rows, 6.6x
        "sort_i32": (lambda x: jnp.sort(x, -1), [
            rng.integers(0, 1 << 30, (256 // s, 1024)).astype(np.int32)]),  # stable: 1.6x
        "randint": (lambda k: jax.random.randint(jax.random.wrap_key_data(k), (
            (1 << 20) // s,), 0, 1000), [np.array([0, 42], np.uint32)]),  # 1.9x
        "dropout": (lambda k, x: jnp.where(jax.random.bernoulli(
            jax.random.wrap_key_data(k), 0.9, x.shape), x / 0.9, 0), [
            np.array([0, 42], np.uint32), f32(1024, 1024)]),  # threefry's buffers: 1.6x
        "erfinv": (lambda x: jax.scipy.special.erfinv(jnp.tanh(x)), [f32(1 << 20)]),  # 1.9x
        "u8_to_f32": (lambda x: x.astype(jnp.float32) / 255, [rng.integers(
            0, 256, (16 // s, 224, 224, 3)).astype(np.uint8)]),  # streaming stores: 2x
        "arctan2": (jnp.arctan2, [f32(1 << 20), f32(1 << 20)]),  # libm a lane: 1.0 (13 ms)
        "arcsin": (jnp.arcsin, [np.tanh(f32(1 << 20))]),  # f64 atan2 a lane: 1.06
        "pow_xy": (lambda x, y: jnp.abs(x) ** y, [f32(1 << 20), f32(1 << 20)]),  # powf: 0.93
        "square_f": (lambda x: x ** 2.0, [f32(1 << 20)]),  # powf, not x * x: 11.7x
        "mod_2pi": (lambda x: jnp.mod(x, 2 * np.pi), [f32(1 << 20) * 10]),  # fmod a lane: 0.67
        "patchify": (lambda x: x.reshape(16 // s, 14, 16, 14, 16, 3).transpose(
            0, 1, 3, 2, 4, 5).reshape(16 // s, 196, 768), [
            rng.standard_normal((16 // s, 224, 224, 3)).astype(np.float32)]),  # 2.0x
        "rotate_pts": (lambda r, v: jnp.einsum("nij,nj->ni", r, v), [
            pts(1 << 17, 3, 3), pts(1 << 17, 3)]),  # a BLAS call per point: 7x
        "cross": (jnp.cross, [pts(1 << 18, 3), pts(1 << 18, 3)]),  # transposed stack: 4.5x
        "segment_max": (lambda d, i: jax.ops.segment_max(d, i, 1024, indices_are_sorted=True),
                        [f32(1 << 20), np.sort(rng.integers(0, 1024, (1 << 20) // s)).astype(
                            np.int32)]),  # a store and reload per update: 2.2x, now 1.8x
        "searchsorted": (lambda k, x: jnp.searchsorted(k, x), [np.sort(f32(64)), f32(
            1 << 18)]),  # the loop's knot gather kept its kernel scalar: 1.3x
        "vmap_eigh3": (lambda a: jnp.linalg.eigh(a + jnp.swapaxes(a, -1, -2))[0], [
            pts(4096, 3, 3)]),  # an f2py syevd call per matrix: 10x
        "take_along": (lambda x, i: jnp.take_along_axis(x, i, -1), [f32(1024, 512), rng.integers(
            0, 512 // s, (1024 // s, 512 // s)).astype(np.int32)]),  # open: 1.0-1.8x
        "embed1_sum": (lambda e, i: e[i].sum(0), [pts(1000, 1), rng.integers(
            0, 1000 // s, (1 << 18) // s).astype(np.int32)]),  # open: a gather, a width-1 sum 2.8x
        "gat_softmax": (lambda e, d: (lambda ex: ex / jax.ops.segment_sum(ex, d, 4096)[d])(
            jnp.exp(e - jax.ops.segment_max(e, d, 4096)[d])), [f32(1 << 16), rng.integers(
                0, 4096, (1 << 16) // s).astype(np.int32)]),  # open: unsorted scatter max 1.2-1.4x
        # sorts in loops (a step of the native loop since loop_library.py; Python: 9-26x; a
        # lone integer key numpy's SIMD sort through a callback: sort_i32_loop 2.1 -> 0.75-0.93)
        "topk_loop": (lambda l: lax.fori_loop(0, 64 // s, lambda i, c: (
            c[0] * 0.5 + lax.top_k(l[i], 8)[0], c[1] + lax.top_k(l[i], 8)[1]),
            (jnp.zeros(8), jnp.zeros(8, jnp.int32))), [f32(64, 1000)]),
        "map_sort": (lambda x: lax.map(lambda r: jnp.sort(r)[::-1][:4], x), [f32(256, 128)]),
        "sort_i32_loop": (lambda x: lax.fori_loop(0, 64 // s, lambda i, c: c + jnp.sort(x[i])[
            -3:], jnp.zeros(3, jnp.int32)), [rng.integers(0, 1000, (64, 512)).astype(np.int32)]),
        # LAPACK in a loop (steps of the native loop since loop_lapack.py; Python: 29x)
        "solve_loop": (lambda a, b: lax.fori_loop(0, 16, lambda i, c: c + jnp.linalg.solve(
            a, b + c), jnp.zeros_like(b)), [(lambda a: a @ a.T + 16 * np.eye(
                a.shape[0], dtype=np.float32))(
                f32(16, 16)), f32(16)]),
        # a 200-step continued fraction over 64K lanes (a carried constant divisor: 2.1x)
        "betainc": (lambda x: jax.scipy.special.betainc(2.0, 3.0, jax.nn.sigmoid(x)),
                    [f32(1 << 16)]),
        # many small GEMMs, a case and LAPACK calls at the top level (open: 4-7x)
        "expm": (lambda a: jax.scipy.linalg.expm(a), [f32(16, 16) * 0.1]),
        "expm_64": (jax.scipy.linalg.expm, [f32(64, 64) * 0.1]),  # a segfault (a null GEMM out)
        # session 33's idioms: expm of 128 x 128 (a case per squaring step: 1.45x; guarded
        # dots), segment_sum (rows of 16 split over threads: 2.1x), a global norm's 1M sum
        # (16 partial chunks: 1.42x), x[i, j] (scalar gathers: 1.54x), bincount weights
        "expm_128": (jax.scipy.linalg.expm, [f32(128, 128) * 0.05]),
        "segment_sum": (lambda d, i: jax.ops.segment_sum(d, i, num_segments=128), [
            f32(65536, 16), rng.integers(0, 128, 65536 // s).astype(np.int32)]),
        "clip_norm": (lambda g: g * jnp.minimum(1.0, 1.0 / (jnp.linalg.norm(g) + 1e-6)),
                      [f32(1 << 20)]),
        "gather_pairs": (lambda x, i, j: x[i, j], [f32(512, 512)] + [
            rng.integers(0, 512 // s, 65536 // s).astype(np.int32) for _ in range(2)]),
        "bincount_w": (lambda i, w: jnp.bincount(i, w, length=1024), [
            rng.integers(0, 1024, (1 << 18) // s).astype(np.int32), f32(1 << 18)]),
        # session 34's idioms: multi-head attention's gradient in [b, t, h, d] (callback
        # dots on one thread in the native trip, numpy's transposing copies: 1.26x), an
        # edge-padded stencil (a scalar kernel over two concatenates: 2.15x), a concatenate
        # along the last axis (1.4x), jax.checkpoint's recomputation (1.15x), n-body forces
        # (a scalar pow per pair: 4x), an einsum's outer product to the front (6.7x)
        "attn_grad_bthd": (jax.grad(lambda q, k, v: jnp.sum(jnp.einsum(
            "bhqk,bkhd->bqhd", jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0, -1),
            v) ** 2)), [f32(2, 128, 4, 64) for _ in range(3)]),
        "heat_pad": (lambda u: lax.fori_loop(0, 50, lambda i, u: (lambda p: u + 0.1 * (
            p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u))(
                jnp.pad(u, 1, mode="edge")), u), [f32(256, 256)]),
        "concat_last": (lambda a, b: jnp.concatenate([a, b], -1) * 2,
                        [f32(512, 512), f32(512, 512)]),
        "remat_mlp_grad": (jax.grad(lambda w, x: jnp.sum(jax.checkpoint(
            lambda w, x: jnp.tanh(jnp.tanh(x @ w) @ w))(w, x) ** 2)),
                           [f32(256, 256) * 0.05, f32(512, 256)]),
        "nbody": (lambda p, v: lax.fori_loop(0, 10, lambda i, s: (lambda p, v: (lambda a: (
            p + 0.01 * (v + 0.01 * a), v + 0.01 * a))(-((p[:, None] - p[None]) / (((
                p[:, None] - p[None]) ** 2).sum(-1) + 1e-2)[..., None] ** 1.5).sum(1)))(*s),
            (p, v))[0], [pts(256, 3), pts(256, 3)]),
        "moe_dispatch": (lambda x, g: jnp.einsum("te,td->etd", g, x), [
            f32(1024, 256), np.eye(8, dtype=np.float32)[rng.integers(0, 8, 1024 // s)]]),
        # library calls in loops: an FFT (a callback step, loop_callback.py: 4.2x -> 1.9),
        # qr (geqrf as a step, its unused orgqr dead: 14x -> 1.4), a batched product
        # (gemm_small's products as a step: 2.7x -> 0.37-0.55), eigh (6.7x -> 1.07)
        "qr_loop": (lambda a: lax.fori_loop(0, 8, lambda i, c: c + jnp.linalg.qr(
            a + c * 0.01)[1], jnp.zeros_like(a)), [f32(8, 8)]),
        "fft_loop": (lambda x: lax.fori_loop(0, 32, lambda i, c: jnp.real(jnp.fft.ifft(
            jnp.fft.fft(c) * 0.99)).astype(jnp.float32), x), [f32(1024)]),
        "bmm_loop": (lambda a, b: lax.fori_loop(0, 16, lambda i, c: jnp.tanh(jnp.einsum(
            "bij,bjk->bik", c, b)), a), [f32(8, 16, 16), f32(8, 16, 16) * 0.2]),
        "eigh_loop": (lambda a: lax.fori_loop(0, 8, lambda i, c: c + jnp.linalg.eigh(
            a + c * 0)[0][0], jnp.zeros_like(a)), [(lambda a: a @ a.T + 8 * np.eye(
                a.shape[0], dtype=np.float32))(f32(8, 8))]),
        # pow(A, 0.5) of A >= 0 is a sqrt (algebraic_rules pow_half: 5.9x -> 0.28)
        "pow_half": (lambda x: x ** 3 + jnp.abs(x) ** 0.5, [f32(1 << 20)]),
        "cexp": (lambda z: jnp.abs(jnp.exp(z) * jnp.conj(z) + jnp.sqrt(z)), [
            (f32(1001, 17) + 1j * f32(1001, 17)).astype(np.complex64)]),  # 2.4x (scalar)
        "svd_batch": (lambda a: jnp.linalg.svd(a, compute_uv=False), [f32(64, 16, 16)]),  # 2.8x
        "eigvals_batch": (jnp.linalg.eigvals, [f32(64, 8, 8)]),  # 5.6x
        "tridiag_batch": (lax.linalg.tridiagonal_solve, [f32(64, 128) * 0.1, f32(64, 128) * 0.1
                                                         + 4, f32(64, 128) * 0.1,
                                                         f32(64, 128, 4)]),  # 3.4x
        "slice_acc_loop": (lambda x: lax.fori_loop(0, 100, lambda i, c: c + lax.dynamic_slice(
            x, (i * 7, 0), (64, 256)), jnp.zeros((64, 256))), [f32(1024, 256)]),  # 1.22x
        "ring_loop": (lambda c: lax.fori_loop(0, 2000 // s, lambda i, c: lax.dynamic_update_slice(
            c, lax.dynamic_slice(c, (i, 0), (1, 256 // s)) * 0.5 + 1.0, ((i + 1) % (2000 // s), 0)),
            c), [f32(2000, 256)]),  # the update read its own state: every step a copy, 68x
        "at_set_loop": (lambda c: lax.fori_loop(1, 2000 // s, lambda i, c: c.at[i].set(
            c[i - 1] * 0.5 + 1.0), c), [f32(2000, 256)]),  # a scatter copying all of c: 83x
        "kv_cache_loop": (lambda k, v: lax.fori_loop(0, 256 // s, lambda i, k: k.at[:, i].set(
            v[:, i] * 2.0), k), [f32(64, 256), f32(64, 256)]),  # 7x
        # 512 small products (a Python job tuple each: 1.7x; int8: a Python loop, 13.7x)
        "vmap_dot_small": (jax.vmap(lambda a, b: a @ b), [f32(512, 16, 64), f32(512, 64, 16)]),
        "vmap_dot_int8": (jax.vmap(lambda a, b: lax.dot(a, b, preferred_element_type=jnp.int32)),
                          [rng.integers(-128, 128, (512 // s, 16, 64)).astype(np.int8),
                           rng.integers(-128, 128, (512 // s, 64, 16)).astype(np.int8)]),
        # scatter-adds of short rows: rows of 8 floats ran scalar under AVX-512 (4.4x)
        "segment_sum_1024": (lambda d, i: jax.ops.segment_sum(d, i, 1024 // s), [
            f32(262144, 16), rng.integers(0, 1024 // s, 262144 // s).astype(np.int32)]),
        "scatter_rows8": (lambda x, i, u: x.at[i].add(u), [
            f32(100000, 8), rng.integers(0, 100000 // s, 262144 // s).astype(np.int32),
            f32(262144, 8)]),
        # batches of 64 x 64 LAPACK calls on one thread (1.2-1.8x; split: batch_call.py),
        # integer division a scalar idiv a lane (0.67x, but 4x slower than it needs:
        # int_division.py), a CNN's max-pool gradient (select_and_scatter), a 3-D conv, an
        # LSTM scan and a layer norm's gradient
        "lu_batch64": (lambda a: jax.scipy.linalg.lu_factor(a)[0], [spd(32, 64)]),
        "solve_batch64": (jnp.linalg.solve, [spd(32, 64), f32(32, 64, 4)]),
        "eigh_batch64": (lambda a: jnp.linalg.eigh(a)[1], [spd(32, 64)]),
        "int_floordiv": (lambda x, y: x // y + x % y, [
            rng.integers(-1000, 1000, 1 << 20 // s).astype(np.int32),
            rng.integers(1, 100, 1 << 20 // s).astype(np.int32)]),
        "maxpool_grad": (jax.grad(lambda x: jnp.sum(lax.reduce_window(
            x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") ** 2)),
                         [f32(16, 64, 64, 32)]),
        "conv3d": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1, 1), "SAME",
                                                         dimension_numbers=("NDHWC", "DHWIO",
                                                                            "NDHWC")),
                   [f32(2, 16, 32, 32, 16), f32(3, 3, 3, 16, 16) * 0.1]),
        "lstm_scan": (lambda xs, w, u: lax.scan(lambda c, x: _lstm_cell(c, x, w, u), (
            jnp.zeros((xs.shape[1], u.shape[0])),) * 2, xs)[0][0],
                      [f32(64, 32, 128), f32(128, 1024) * 0.05, f32(256, 1024) * 0.05]),
        "layernorm_grad": (jax.grad(lambda x, g: jnp.sum(((x - x.mean(-1, keepdims=True)) * (
            lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)) * g) ** 2), argnums=(0, 1)),
                           [f32(2048, 1024), f32(1024)]),
        # session 50's cliffs: a nearest resize of 3 channels (its row index per pixel), a
        # 3-D FFT on one thread, an f8 product widened by ml_dtypes casts, the sum of a
        # log_softmax (a log per vector), a sum of logs in 3 chunks on 2 threads
        "resize_nearest": (lambda x: jax.image.resize(x, (x.shape[0], 2 * x.shape[1],
                                                          2 * x.shape[2], x.shape[3]), "nearest"),
                           [f32(8, 128, 128, 3)]),
        "fftn3": (lambda x: jnp.abs(jnp.fft.fftn(x)), [f32(64, 64, 64)]),
        "fp8_dot": (lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32),
                    [f32(256, 512).astype(jnp.float8_e4m3fn),
                     f32(512, 512).astype(jnp.float8_e4m3fn)]),
        "log_softmax_sum": (lambda x: jax.nn.log_softmax(x, -1).sum(), [f32(1024, 1024)]),
        "sum_log": (lambda x: jnp.log(x * x + 1).sum(), [f32(1 << 20)]),
        # session 51's cliffs: packbits' fold of a reshaped flat compare (4.7x), the column
        # norms of a Vandermonde matrix (4.5x), jnp.select's argmax (2.2x), a softmax of a
        # transpose (1.4x), a trsm's 64 x 64 triangle on one thread (1.6x), ducc0's rows
        # 12 KB apart (2.3x), f32 lgamma's three f64 logs (2.2x)
        "packbits": (lambda x: jnp.packbits(x > 0), [f32(1 << 20)]),
        "vander_sum": (lambda x: (jnp.vander(x, 6) ** 2).sum(0), [f32(4096)]),
        "select3": (lambda x: jnp.select([x < -1, x < 0, x < 1], [x * 2, x * x, x + 3], x - 1),
                    [f32(1 << 20)]),
        "softmax_T": (lambda x: jax.nn.softmax(x.T, -1), [f32(1024, 1024)]),
        "mvn_logpdf": (lambda x, m, a: jax.scipy.stats.multivariate_normal.logpdf(
            x, m, a @ a.T + 0.1 * jnp.eye(a.shape[0])), [f32(4096, 64), f32(64), f32(64, 64) / 8]),
        "fft_1536": (jnp.fft.fft, [f32(256, 1536).astype(np.complex64)]),
        "poisson_lp": (lambda k, lam: jax.scipy.stats.poisson.logpmf(k, lam), [
            np.floor(np.abs(f32(1 << 20)) * 5), np.abs(f32(1 << 20)) * 5 + 0.1]),
        # session 54's cliffs: argmax's tree over rows of 1024 in scalar code (0.8x, 11x
        # slower than jnp.max), 8 products of 512^3 each split over the threads (1.3x), 32
        # [1, 4096] @ [4096, 1024] as single-threaded BLAS calls (1.65x), 4096 bf16 products
        # of 4 x 4 x 4 padded to 32-blocks on AMX (1.7x), a batch of mid-size int8
        # products split one by one from Python (AMX 1.2x, VNNI 3.8x), an f16 rounding
        # chain converted around every op (1.8x), x @ w.T through a copy of w
        "argmax_rows": (lambda x: jnp.argmax(x, -1), [f32(4096, 1024)]),
        "bmm_8x512": (lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b),
                      [f32(8, 512, 512), f32(8, 512, 512)]),
        "bmv_32": (lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b),
                   [f32(32, 1, 4096), f32(32, 4096, 1024)]),
        "bmm_bf16_tiny": (lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b),
                          [f32(4096, 4, 4).astype(jnp.bfloat16),
                           f32(4096, 4, 4).astype(jnp.bfloat16)]),
        "bmm_int8_mid": (lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b,
                                                 preferred_element_type=jnp.int32),
                         [(f32(64, 128, 256) * 40).astype(np.int8),
                          (f32(64, 256, 128) * 40).astype(np.int8)]),
        # x @ w.T: a transpose kernel copied the weight every call (12x at batch 1)
        "xwT_decode": (lambda h, w: h @ w.T, [f32(1, 4096), f32(4096, 4096)]),
        "xwT_logits": (lambda h, e: h @ e.T, [f32(256, 768), f32(32000, 768)]),
        "f16_rounds": (lambda x: jnp.clip(jnp.round(x * 0.5) + jnp.floor(x) - jnp.ceil(
            x * 0.25) * jnp.sign(x), -50, 50), [(f32(1 << 22) * 100).astype(np.float16)]),
        # session 55's cliffs: dots of vectors (no free dimension) a BLAS call or NumPy's
        # matmul per batch element (a column dot 38x, bf16 rows 4.3x); a max over the whole
        # array in one llvm.maximum chain a thread (2.7x; bf16 11x)
        "coldot": (lambda a, b: jnp.einsum("ji,ji->i", a, b), [f32(512, 8192), f32(512, 8192)]),
        "rowdot_bf16": (lambda a, b: jnp.einsum("ij,ij->i", a, b),
                        [f32(8192, 512).astype(jnp.bfloat16), f32(8192, 512).astype(jnp.bfloat16)]),
        "max_all": (jnp.max, [f32(1 << 24)]),
        "max_all_bf16": (jnp.max, [f32(1 << 24).astype(jnp.bfloat16)]),
        # a 1-D jnp.dot one sdot on one thread (1.5x); a weight gradient over 8192 tokens
        # into 128 x 128 one BLAS call on one thread (1.7x); an Adam step over 40 small
        # parameters split over threads from Python (1.8x)
        "vdot_1d": (jnp.dot, [f32(1 << 22), f32(1 << 22)]),
        "ein_wgrad": (lambda x, g: jnp.einsum("btd,bte->de", x, g),
                      [f32(16, 512, 128), f32(16, 512, 128)]),
        "adam_tree40": (adam_step, [f32(37, 19) for _ in range(120)] +
                        [np.abs(f32(37, 19)) for _ in range(40)]),
        # segment_max over rows of 16 into sorted segments: each row's update waited on a
        # store and reload of the same row (1.5x)
        "segment_max_rows": (lambda x, i: jax.ops.segment_max(x, i, 1024 // s), [
            f32(1 << 18, 16), np.sort(rng.integers(0, 1024 // s, (1 << 18) // s)).astype(
                np.int32)]),
        # session 56's cliffs: f64 tanh as two series (1.5x); an f64 fft2 through numpy's
        # one-thread fftn (2.7x); (short rows: jax_probe_rows.py)
        "tanh_f64": (jnp.tanh, [f32(2048, 1024).astype(np.float64)]),
        "fft2_c128": (jnp.fft.fft2, [(f32(16, 256, 256) + 1j * f32(16, 256, 256)).astype(
            np.complex128)]),
        # a one-feature 1-D filter in the loop nest's scalar code (11x slower than now)
        "correlate_255": (lambda x, w: jnp.correlate(x, w, mode="valid"),
                          [f32(1 << 18), f32(255)]),
        # sin of a meshgrid's Y computed per element, not per row (1.55x)
        "meshgrid_sin": (lambda x, y: (lambda gx, gy: gx ** 3 - 3 * gx * gy ** 2 + jnp.sin(gy))(
            *jnp.meshgrid(x, y)), [f32(2048), f32(2048)]),
    }
    more = jax_probe_rows.programs(f32, rows, spd, rng)  # short rows, small matrices
    if twice := sorted(table.keys() & more.keys()):  # (a dict would keep one silently)
        raise ValueError(f"jax_probe programs named twice: {', '.join(twice)}")
    return table | more


def probe_one(fn: Callable[..., Any], args: list[np.ndarray], reps: int,
              burst: int) -> dict[str, Any]:
    import jax

    wide = any(np.asarray(a).dtype in (np.float64, np.complex128) for a in args)
    with jax.enable_x64(wide):  # (double-precision programs: the x64 mode for both sides)
        return _probe(fn, args, reps, burst)


def _probe(fn: Callable[..., Any], args: list[np.ndarray], reps: int,
           burst: int) -> dict[str, Any]:
    import jax

    import xlapy

    jf = jax.jit(fn)
    lowered = jf.lower(*args)
    jc = lowered.compile()
    prog = xlapy.compile(lowered.as_text(), backend="cpu")
    jargs = jax.block_until_ready([jax.device_put(a) for a in args])
    got = prog(*args)
    want = jax.block_until_ready(jc(*jargs))
    gl = list(got) if isinstance(got, (list, tuple)) else [got]
    err = max((float(np.max(np.abs(np.asarray(g, np.complex128) - np.asarray(w, np.complex128))
                            / (np.abs(np.asarray(w, np.complex128)) + 1e-2), initial=0.0))
               for g, w in zip(gl, jax.tree_util.tree_leaves(want))), default=0.0)
    t = round_robin({"xlapy": lambda: prog(*args),
                     "xla": lambda: jax.block_until_ready(jc(*jargs))}, reps, burst)
    return {"xlapy": min(t["xlapy"]), "xla": min(t["xla"]),
            "fallbacks": len(prog._exe.fallbacks()), "err": err}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="program names, comma-separated")
    ap.add_argument("--reps", type=int, default=10, help="rounds")
    ap.add_argument("--burst", type=int, default=3, help="calls per side per round")
    ap.add_argument("--small", action="store_true", help="tiny shapes (a smoke run)")
    args = ap.parse_args(argv)
    table = programs(args.small)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"jax_probe: unknown program(s) {', '.join(unknown)}; known: "
                         f"{', '.join(table)}")
    print(env.header())
    print(f"{'program':<16} | {'xlapy ms':>9} | {'XLA ms':>9} | ratio | fallbacks | max err")
    for name in names:
        fn, fargs = table[name]
        r = probe_one(fn, fargs, args.reps, args.burst)
        ratio = r["xlapy"] / r["xla"]
        mark = " <" if ratio > 1.2 else ""
        print(f"{name:<16} | {1e3 * r['xlapy']:9.3f} | {1e3 * r['xla']:9.3f} | {ratio:5.2f} | "
              f"{r['fallbacks']:9d} | {r['err']:.1e}{mark}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
