"""Workloads as users bring them (issue 14): JAX functions, lowered with `jax.jit(f).lower`.

`JAX_WORKLOADS[name](small)` returns a `Case`: the function, its inputs (NumPy arrays made
from a fixed seed, so every run and the smoke test see the same numbers), the work it does
(FLOPs of its dots and convolutions, or bytes a memory-bound one must move; 0 when neither
means much) and the normwise relative error allowed against XLA's result. `small=True` gives
shapes that run in milliseconds (the unit smoke test and `jax_run.py --small`).

jax is imported inside the builders, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

SQ2PI = math.sqrt(2 / math.pi)
SEED = 0


@dataclass(frozen=True)
class Case:
    """One workload at one size: `fn(*args)` is what gets jitted, lowered and timed."""

    fn: Callable[..., Any]
    args: tuple[np.ndarray, ...]
    #: FLOPs (dots, convolutions) per call; 0 when the workload is not compute-bound.
    flops: float = 0.0
    #: Bytes a call must read + write at least; 0 when FLOPs are the measure.
    bytes: float = 0.0
    #: Allowed max |ours - XLA| / max |XLA| (0: bit-exact, for integer and data movement).
    tol: float = 1e-4


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _normal(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0,
            dtype: Any = np.float32) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _bf16() -> Any:
    import ml_dtypes

    return ml_dtypes.bfloat16


# ---- shared pieces ---------------------------------------------------------------------------
def _gelu(x: Any) -> Any:
    import jax.numpy as jnp

    return 0.5 * x * (1 + jnp.tanh(SQ2PI * (x + 0.044715 * (x * x * x))))


def _layernorm(x: Any, scale: Any, bias: Any) -> Any:
    from jax import lax

    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc * lax.rsqrt(var + 1e-5) * scale + bias


def _mha(q: Any, k: Any, v: Any) -> Any:
    """Softmax attention over (B, H, T, D)."""
    import jax
    import jax.numpy as jnp

    s = jnp.einsum("bhtd,bhsd->bhts", q, k) * (1 / math.sqrt(q.shape[-1]))
    return jnp.einsum("bhts,bhsd->bhtd", jax.nn.softmax(s, axis=-1), v)


def _mlp_fn(x: Any, *wb: Any) -> Any:
    import jax.numpy as jnp

    for i in range(0, len(wb), 2):
        x = x @ wb[i] + wb[i + 1]
        if i + 2 < len(wb):
            x = jnp.maximum(x, 0)
    return x


def _mlp_case(small: bool, dtype: Any, tol: float, batch: int = 256) -> Case:
    sizes = (8, 16, 32, 16) if small else (1024, 4096, 4096, 1024)
    batch = min(batch, 4) if small else batch
    rng = _rng()
    args: list[np.ndarray] = [_normal(rng, (batch, sizes[0]), dtype=dtype)]
    flops = 0.0
    for a, b in zip(sizes, sizes[1:]):
        args += [_normal(rng, (a, b), 1 / math.sqrt(a), dtype), _normal(rng, (b,), 0.1, dtype)]
        flops += 2.0 * batch * a * b
    return Case(_mlp_fn, tuple(args), flops=flops, tol=tol)


def _attention_case(small: bool, dtype: Any, tol: float) -> Case:
    b, h, t, d = (1, 2, 8, 4) if small else (4, 8, 256, 64)
    rng = _rng()
    args = tuple(_normal(rng, (b, h, t, d), dtype=dtype) for _ in range(3))
    return Case(_mha, args, flops=4.0 * b * h * t * t * d, tol=tol)


# ---- the workloads ---------------------------------------------------------------------------
def mlp(small: bool) -> Case:
    """256x1024-4096-4096-1024, relu between layers (f32)."""
    return _mlp_case(small, np.float32, 1e-4)


def mlp_b1(small: bool) -> Case:
    """The MLP at batch 1 (inference: bound by reading the 84 MB of weights)."""
    return _mlp_case(small, np.float32, 1e-4, batch=1)


def mlp_b32(small: bool) -> Case:
    """The MLP at batch 32 (a small serving batch: 32 rows against each weight)."""
    return _mlp_case(small, np.float32, 1e-4, batch=32)


def mlp_bf16(small: bool) -> Case:
    """The MLP in bfloat16 (inputs, weights and result)."""
    return _mlp_case(small, _bf16(), 3e-2)


def cnn(small: bool) -> Case:
    """NHWC 32x64x64x32: two 3x3 SAME convs + bias + relu, then a 2x2 average pool."""
    from jax import lax

    n, hw, c = (1, 6, 3) if small else (32, 64, 32)
    rng = _rng()
    args = (_normal(rng, (n, hw, hw, c)),
            _normal(rng, (3, 3, c, c), 1 / math.sqrt(9 * c)), _normal(rng, (c,), 0.1),
            _normal(rng, (3, 3, c, c), 1 / math.sqrt(9 * c)), _normal(rng, (c,), 0.1))

    def f(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        for w, b in ((w1, b1), (w2, b2)):
            x = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            x = lax.max(x + b, 0.0)
        pooled = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return pooled * 0.25

    return Case(f, args, flops=2 * 2.0 * n * hw * hw * c * c * 9, tol=1e-4)


def attention(small: bool) -> Case:
    """Softmax attention, B=4, H=8, T=256, D=64 (f32)."""
    return _attention_case(small, np.float32, 1e-4)


def attention_bf16(small: bool) -> Case:
    """The attention in bfloat16."""
    return _attention_case(small, _bf16(), 3e-2)


def layernorm(small: bool) -> Case:
    """Layer norm over rows of 4096x1024."""
    r, c = (8, 16) if small else (4096, 1024)
    rng = _rng()
    args = (_normal(rng, (r, c)), _normal(rng, (c,)), _normal(rng, (c,)))
    return Case(_layernorm, args, bytes=2.0 * r * c * 4, tol=1e-4)


def softmax(small: bool) -> Case:
    """Softmax over rows of 4096x1024."""
    import jax

    r, c = (8, 16) if small else (4096, 1024)
    return Case(lambda x: jax.nn.softmax(x, axis=-1), (_normal(_rng(), (r, c)),),
                bytes=2.0 * r * c * 4, tol=1e-4)


def gelu_chain(small: bool) -> Case:
    """Seven tanh-GELUs on 1M floats (one fused pass if the compiler fuses)."""
    n = 64 if small else 1 << 20

    def f(x: Any) -> Any:
        for _ in range(7):
            x = _gelu(x)
        return x

    return Case(f, (_normal(_rng(), (n,)),), bytes=2.0 * n * 4, tol=1e-4)


def transformer(small: bool) -> Case:
    """One pre-LN transformer block, T=256, D=512, 8 heads, MLP 4D with GELU."""
    t, d, h = (8, 16, 2) if small else (256, 512, 8)
    rng = _rng()
    ws = {"wqkv": (d, 3 * d), "wo": (d, d), "w1": (d, 4 * d), "w2": (4 * d, d)}
    args = [_normal(rng, (t, d))]
    for shape in ws.values():
        args.append(_normal(rng, shape, 1 / math.sqrt(shape[0])))
    args += [np.ones(d, np.float32), np.zeros(d, np.float32)] * 2

    def f(x: Any, wqkv: Any, wo: Any, w1: Any, w2: Any,
          s1: Any, b1: Any, s2: Any, b2: Any) -> Any:
        y = _layernorm(x, s1, b1) @ wqkv
        q, k, v = (y[:, i * d:(i + 1) * d].reshape(t, h, d // h).transpose(1, 0, 2)[None]
                   for i in range(3))
        a = _mha(q, k, v)[0].transpose(1, 0, 2).reshape(t, d)
        x = x + a @ wo
        return x + _gelu(_layernorm(x, s2, b2) @ w1) @ w2

    flops = 2.0 * t * d * (3 * d + d + 8 * d) + 4.0 * t * t * d
    return Case(f, tuple(args), flops=flops, tol=1e-4)


def fori_nested(small: bool) -> Case:
    """fori_loop, 1000 steps, whose body calls a nested jax.jit (func.call) on 64 floats."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    iters = 5 if small else 1000
    body = jax.jit(lambda x: jnp.tanh(x) * 0.5 + jnp.sin(x))

    def f(x: Any) -> Any:
        return lax.fori_loop(0, iters, lambda i, x: body(x), x)

    return Case(f, (_normal(_rng(), (64,)),), tol=1e-4)


def fori_cond(small: bool) -> Case:
    """fori_loop, 1000 steps, whose body is a lax.cond on the step's parity (256 floats)."""
    from jax import lax

    iters = 5 if small else 1000

    def f(x: Any) -> Any:
        return lax.fori_loop(0, iters, lambda i, v: lax.cond(
            i % 2 == 0, lambda u: u * 0.5 + 1.0, lambda u: u - 0.25, v), x)

    return Case(f, (_normal(_rng(), (256,)),), tol=1e-5)


def _rnn(small: bool, stacked: bool) -> Case:
    """lax.scan of h = tanh(h @ W + x_t), 128 steps, h 64x256: the last h, or (`stacked`)
    every step's h."""
    import jax.numpy as jnp
    from jax import lax

    steps, b, d = (4, 2, 8) if small else (128, 64, 256)
    rng = _rng()
    args = (_normal(rng, (b, d)), _normal(rng, (d, d), 1 / math.sqrt(d)),
            _normal(rng, (steps, b, d)))

    def f(h: Any, w: Any, xs: Any) -> Any:
        def cell(h: Any, x: Any) -> tuple[Any, Any]:
            h = jnp.tanh(h @ w + x)
            return h, (h if stacked else None)

        last, ys = lax.scan(cell, h, xs)
        return ys if stacked else last

    return Case(f, args, flops=2.0 * steps * b * d * d, tol=1e-4)


def scan_rnn(small: bool) -> Case:
    """lax.scan of h = tanh(h @ W + x_t), 128 steps, h 64x256."""
    return _rnn(small, False)


def scan_ys(small: bool) -> Case:
    """The scan_rnn cell returning every step's h (ys stacked by dynamic_update_slice into
    the loop's state: 128 x 64 x 256, 8 MB), as sequence models do."""
    return _rnn(small, True)


def reduce_sum(small: bool) -> Case:
    """Sum of 64M floats (256 MB read)."""
    import jax.numpy as jnp

    n = 1000 if small else 64 << 20
    x = _rng().random(n, dtype=np.float32)
    return Case(lambda x: jnp.sum(x), (x,), bytes=4.0 * n, tol=1e-5)


def reduce_max_rows(small: bool) -> Case:
    """Max over each row of 8192x1024."""
    r, c = (8, 16) if small else (8192, 1024)
    return Case(lambda x: x.max(axis=1), (_normal(_rng(), (r, c)),),
                bytes=4.0 * r * c + 4.0 * r, tol=0.0)


def gather(small: bool) -> Case:
    """Embedding lookup: 8192 ids into a 50000x512 table."""
    rows, d, n = (50, 8, 16) if small else (50000, 512, 8192)
    rng = _rng()
    table = _normal(rng, (rows, d))
    ids = rng.integers(0, rows, n).astype(np.int32)
    return Case(lambda t, i: t[i], (table, ids), bytes=2.0 * n * d * 4 + 4.0 * n, tol=0.0)


def scatter_add(small: bool) -> Case:
    """x.at[idx].add(updates): 100k rows of 64 added into 4096x64."""
    rows, d, n = (16, 4, 40) if small else (4096, 64, 100_000)
    rng = _rng()
    args = (_normal(rng, (rows, d)), rng.integers(0, rows, n).astype(np.int32),
            _normal(rng, (n, d)))
    return Case(lambda x, i, u: x.at[i].add(u), args,
                bytes=4.0 * n * d + 4.0 * n + 2.0 * rows * d * 4, tol=1e-5)


def sort(small: bool) -> Case:
    """jnp.sort of 1M floats."""
    import jax.numpy as jnp

    n = 100 if small else 1 << 20
    return Case(jnp.sort, (_normal(_rng(), (n,)),), bytes=2.0 * n * 4, tol=0.0)


def top_k(small: bool) -> Case:
    """lax.top_k, k=16, over the rows of 4096x1024 (values and indices)."""
    from jax import lax

    r, c, k = (4, 32, 4) if small else (4096, 1024, 16)
    return Case(lambda x: lax.top_k(x, k), (_normal(_rng(), (r, c)),),
                bytes=4.0 * r * c, tol=0.0)


def int8_matmul(small: bool) -> Case:
    """s8 512x512 @ 512x512 -> s32 (preferred_element_type); exact."""
    import jax.numpy as jnp

    n = 8 if small else 512
    rng = _rng()
    a, b = (rng.integers(-128, 128, (n, n)).astype(np.int8) for _ in range(2))
    return Case(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32), (a, b),
                flops=2.0 * n ** 3, tol=0.0)


# ---- convolution layouts and dot shapes (issue 14: every layout JAX emits) --------------------
def _conv_case(small: bool, big: tuple[int, int, int], dims: tuple[str, str, str], *,
               groups: int = 1, depthwise: bool = False, stride: int = 1,
               dilation: int = 1) -> Case:
    """One 3x3 SAME conv of an (n, hw, hw, c) image in layout `dims`, c -> c features, in
    `groups` feature groups (`depthwise`: one per channel). FLOPs count the multiply-adds
    done: 2 * outputs * (c / groups) * 9."""
    from jax import lax

    n, hw, c = (1, 6, 8) if small else big
    groups = c if depthwise else groups
    lhs_spec, rhs_spec, _ = dims
    sizes = {"N": n, "H": hw, "W": hw, "C": c, "O": c, "I": c // groups}
    x_shape = tuple(sizes[d] for d in lhs_spec)
    w_shape = tuple(3 if d in "HW" else sizes[d] for d in rhs_spec)
    rng = _rng()
    args = (_normal(rng, x_shape), _normal(rng, w_shape, 1 / math.sqrt(9 * c // groups)))

    def f(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                        rhs_dilation=(dilation, dilation),
                                        dimension_numbers=dims, feature_group_count=groups)

    out_hw = -(-hw // stride)
    return Case(f, args, flops=2.0 * n * out_hw * out_hw * c * (c // groups) * 9, tol=1e-4)


_NHWC = ("NHWC", "HWIO", "NHWC")


def conv_nchw(small: bool) -> Case:
    """NCHW/OIHW 3x3 SAME conv, 16x64x32x32, 64 -> 64 features (PyTorch's layout)."""
    return _conv_case(small, (16, 32, 64), ("NCHW", "OIHW", "NCHW"))


def conv_grouped(small: bool) -> Case:
    """NHWC 3x3 SAME conv, 16x32x32x128, feature_group_count=4 (ResNeXt-style)."""
    return _conv_case(small, (16, 32, 128), _NHWC, groups=4)


def conv_depthwise(small: bool) -> Case:
    """NHWC 3x3 SAME depthwise conv, 8x56x56x128 (feature_group_count = channels)."""
    return _conv_case(small, (8, 56, 128), _NHWC, depthwise=True)


def conv_strided(small: bool) -> Case:
    """NHWC 3x3 SAME conv with stride 2, 32x64x64x64 -> 32x32x32x64."""
    return _conv_case(small, (32, 64, 64), _NHWC, stride=2)


def conv_dilated(small: bool) -> Case:
    """NHWC 3x3 SAME conv with rhs_dilation 2 (atrous), 16x32x32x64."""
    return _conv_case(small, (16, 32, 64), _NHWC, dilation=2)


def dot_batched(small: bool) -> Case:
    """einsum('bij,bjk->bik'), 32 x 256x256 @ 256x256 (f32)."""
    import jax.numpy as jnp

    b, n = (2, 8) if small else (32, 256)
    rng = _rng()
    args = (_normal(rng, (b, n, n)), _normal(rng, (b, n, n), 1 / math.sqrt(n)))
    return Case(lambda x, y: jnp.einsum("bij,bjk->bik", x, y), args,
                flops=2.0 * b * n ** 3, tol=1e-4)


def dot_skinny(small: bool) -> Case:
    """8x4096 @ 4096x4096 (f32): a few rows against a big weight (bound by its 64 MB)."""
    m, k, n = (2, 16, 8) if small else (8, 4096, 4096)
    rng = _rng()
    args = (_normal(rng, (m, k)), _normal(rng, (k, n), 1 / math.sqrt(k)))
    return Case(lambda x, w: x @ w, args, flops=2.0 * m * k * n, tol=1e-4)


def matvec(small: bool) -> Case:
    """4096x4096 @ 4096 (f32 matrix-vector, a dot_general without a free dim on one side)."""
    m, k = (8, 16) if small else (4096, 4096)
    rng = _rng()
    args = (_normal(rng, (m, k)), _normal(rng, (k,), 1 / math.sqrt(k)))
    return Case(lambda a, v: a @ v, args, flops=2.0 * m * k, tol=1e-4)


JAX_WORKLOADS: dict[str, Callable[[bool], Case]] = {
    "mlp": mlp,
    "mlp_b1": mlp_b1,
    "mlp_b32": mlp_b32,
    "cnn": cnn,
    "attention": attention,
    "layernorm": layernorm,
    "softmax": softmax,
    "gelu_chain": gelu_chain,
    "transformer": transformer,
    "fori_nested": fori_nested,
    "fori_cond": fori_cond,
    "scan_rnn": scan_rnn,
    "scan_ys": scan_ys,
    "reduce_sum": reduce_sum,
    "reduce_max_rows": reduce_max_rows,
    "gather": gather,
    "scatter_add": scatter_add,
    "sort": sort,
    "top_k": top_k,
    "int8_matmul": int8_matmul,
    "mlp_bf16": mlp_bf16,
    "attention_bf16": attention_bf16,
    "conv_nchw": conv_nchw,
    "conv_grouped": conv_grouped,
    "conv_depthwise": conv_depthwise,
    "conv_strided": conv_strided,
    "conv_dilated": conv_dilated,
    "dot_batched": dot_batched,
    "dot_skinny": dot_skinny,
    "matvec": matvec,
}


@contextlib.contextmanager
def x64(on: bool) -> Iterator[None]:
    """JAX with 64-bit types `on` or off inside the block only, whatever the process has."""
    import jax

    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", was)


def x32() -> contextlib.AbstractContextManager[None]:
    """x64 off: the workloads are f32 programs, and a test that turned x64 on for its process
    (the differential suites do) would otherwise lower other programs, or fail to (lax.max of
    f32 and f64)."""
    return x64(False)


def lower(case: Case) -> str:
    """The StableHLO text jax emits for `case` (what a user hands to xlapy.compile)."""
    import jax

    with x32():
        return jax.jit(case.fn).lower(*case.args).as_text()


def leaves(value: Any) -> list[np.ndarray]:
    """A result (array, tuple or jax pytree) as a flat list of NumPy arrays."""
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in leaves(v)]
    return [np.asarray(value)]


def rel_error(got: Any, want: Any) -> float:
    """Max over results of max |got - want| / max |want| (computed in float64)."""
    worst = 0.0
    g, w = leaves(got), leaves(want)
    if len(g) != len(w):
        return math.inf
    for a, b in zip(g, w):
        if a.shape != b.shape:
            return math.inf
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        den = float(np.abs(b64).max()) if b64.size else 0.0
        err = float(np.abs(a64 - b64).max()) if b64.size else 0.0
        worst = max(worst, err / den if den else err)
    return worst
