"""The sharded JAX programs of issue 17: jit with in/out shardings and
with_sharding_constraint, shard_map collectives, an MLP (data + tensor parallel), a
Megatron-style transformer layer, a sharded conv net and a scan, over 1-D and 2-D meshes of
2, 4 and 8 devices. Each entry builds `(fn, args)`; jax is imported by the caller (generate.py,
in its own process with 8 host devices)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Builder = Callable[[Any, Any], tuple[Any, list[np.ndarray]]]
PROGRAMS: dict[str, Builder] = {}


def program(fn: Builder) -> Builder:
    PROGRAMS[fn.__name__] = fn
    return fn


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return _rng(seed).standard_normal(shape).astype(np.float32)


def _mesh(jax: Any, shape: tuple[int, ...], names: tuple[str, ...]) -> Any:
    n = int(np.prod(shape))
    return jax.sharding.Mesh(np.array(jax.devices()[:n]).reshape(shape), names)


def _ns(jax: Any, mesh: Any, *spec: Any) -> Any:
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec(*spec))


# ---- jit with shardings ------------------------------------------------------------------------
@program
def elementwise_1d_x4(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: jnp.sin(x) * 2.0 + x, in_shardings=_ns(jax, m, "x"))
    return f, [_f32(16, 8)]


@program
def elementwise_2d_2x2(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 2), ("x", "y"))
    f = jax.jit(lambda x, y: jnp.exp(x) - y * y, in_shardings=(_ns(jax, m, "x", "y"),) * 2)
    return f, [_f32(8, 6), _f32(8, 6, seed=1)]


@program
def dot_rows_x4(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda a, b: a @ b, in_shardings=(_ns(jax, m, "x", None), _ns(jax, m)))
    return f, [_f32(16, 8), _f32(8, 5, seed=1)]


@program
def dot_contracting_x8(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (8,), ("x",))
    f = jax.jit(lambda a, b: a @ b, in_shardings=(_ns(jax, m, None, "x"), _ns(jax, m, "x", None)),
                out_shardings=_ns(jax, m))
    return f, [_f32(4, 16), _f32(16, 6, seed=1)]


@program
def dot_2d_mesh(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 2), ("x", "y"))
    f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum(axis=0),
                in_shardings=(_ns(jax, m, "x", "y"), _ns(jax, m, "y", None)),
                out_shardings=_ns(jax, m))
    return f, [_f32(8, 4), _f32(4, 6, seed=1)]


@program
def batched_einsum_2x4(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 4), ("b", "m"))
    f = jax.jit(lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
                in_shardings=(_ns(jax, m, "b", None, None), _ns(jax, m, "b", None, "m")))
    return f, [_f32(4, 3, 5), _f32(4, 5, 8, seed=1)]


@program
def reduce_sum_sharded_dim(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: x.sum(axis=0), in_shardings=_ns(jax, m, "x", None))
    return f, [_f32(16, 6)]


@program
def reduce_max_other_dim(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 2), ("x", "y"))
    f = jax.jit(lambda x: jnp.max(x, axis=1), in_shardings=_ns(jax, m, "x", "y"))
    return f, [_f32(8, 6)]


@program
def softmax_rows(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: jax.nn.softmax(x, axis=-1), in_shardings=_ns(jax, m, "x", None))
    return f, [_f32(8, 10)]


@program
def transpose_2d(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 2), ("x", "y"))
    f = jax.jit(lambda x: x.T + 1.0, in_shardings=_ns(jax, m, "x", "y"))
    return f, [_f32(4, 6)]


@program
def reshape_heads(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: (x.reshape(2, 8, 4, 3) * 2.0).sum(axis=-1),
                in_shardings=_ns(jax, m, None, None, "x"))
    return f, [_f32(2, 8, 12)]


@program
def broadcast_bias(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2,), ("x",))
    f = jax.jit(lambda x, b: jnp.maximum(x + b[None, :], 0.0),
                in_shardings=(_ns(jax, m, "x", None), _ns(jax, m)))
    return f, [_f32(6, 4), _f32(4, seed=1)]


@program
def constraint_all_gather(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 2), ("x", "y"))
    f = jax.jit(lambda x: jax.lax.with_sharding_constraint(x * 2.0, _ns(jax, m, None, "x")) + 1,
                in_shardings=_ns(jax, m, "y", "x"))
    return f, [_f32(8, 4)]


@program
def constraint_all_to_all(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: jnp.cos(jax.lax.with_sharding_constraint(x, _ns(jax, m, None, "x"))),
                in_shardings=_ns(jax, m, "x", None), out_shardings=_ns(jax, m, None, "x"))
    return f, [_f32(8, 8)]


@program
def out_sharding_differs(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 4), ("a", "b"))
    f = jax.jit(lambda x: x * 3.0, in_shardings=_ns(jax, m, "a", "b"),
                out_shardings=_ns(jax, m, "b", None))
    return f, [_f32(8, 8)]


@program
def uneven_rows_sum(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    wsc = jax.lax.with_sharding_constraint  # uneven shards: only inside a program
    f = jax.jit(lambda x: wsc(jnp.exp(x) + 1.0, _ns(jax, m, "x", None)).sum(axis=0) + x.mean())
    return f, [_f32(10, 3)]


@program
def uneven_contracting(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    wsc = jax.lax.with_sharding_constraint
    f = jax.jit(lambda a, b: wsc(jnp.exp(a), _ns(jax, m, None, "x")) @ wsc(b, _ns(jax, m, "x")))
    return f, [_f32(3, 10), _f32(10, 5, seed=1)]


@program
def slice_concat(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2,), ("x",))
    f = jax.jit(lambda x: jnp.concatenate([x[:, 1:], x[:, :1]], axis=1) * x,
                in_shardings=_ns(jax, m, "x", None))
    return f, [_f32(6, 5)]


@program
def cumsum_sharded_axis(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: jnp.cumsum(x, axis=0), in_shardings=_ns(jax, m, "x", None))
    return f, [_f32(8, 3)]


@program
def argmax_rows(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2,), ("x",))
    f = jax.jit(lambda x: jnp.argmax(x, axis=1), in_shardings=_ns(jax, m, None, "x"))
    return f, [_f32(4, 8)]


@program
def int_sum(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: (x * 3 + 1).sum(axis=0), in_shardings=_ns(jax, m, "x", None))
    return f, [_rng(3).integers(-50, 50, (8, 5)).astype(np.int32)]


# ---- shard_map ---------------------------------------------------------------------------------
def _smap(jax: Any, fn: Any, mesh: Any, ins: Any, out: Any) -> Any:
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=ins, out_specs=out, check_vma=False))


@program
def shard_map_psum(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    from jax.sharding import PartitionSpec as P

    m = _mesh(jax, (4,), ("x",))
    return _smap(jax, lambda x: jax.lax.psum(x, "x"), m, P("x"), P()), [_f32(8, 3)]


@program
def shard_map_all_gather(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    from jax.sharding import PartitionSpec as P

    m = _mesh(jax, (2, 2), ("x", "y"))
    return _smap(jax, lambda x: jax.lax.all_gather(x, "y", axis=1, tiled=True) * 2.0, m,
                 P("x", "y"), P("x", None)), [_f32(4, 6)]


@program
def shard_map_ppermute_ring(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    from jax.sharding import PartitionSpec as P

    m = _mesh(jax, (8,), ("x",))
    perm = [(i, (i + 1) % 8) for i in range(8)]
    return _smap(jax, lambda x: jax.lax.ppermute(x, "x", perm) + x, m, P("x"), P("x")), \
        [_f32(16, 2)]


@program
def shard_map_all_to_all(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    from jax.sharding import PartitionSpec as P

    m = _mesh(jax, (4,), ("x",))
    fn = lambda x: jax.lax.all_to_all(x, "x", 1, 0, tiled=True)  # noqa: E731
    return _smap(jax, fn, m, P("x", None), P(None, "x")), [_f32(8, 8)]


@program
def shard_map_psum_scatter(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    from jax.sharding import PartitionSpec as P

    m = _mesh(jax, (4,), ("x",))
    fn = lambda x: jax.lax.psum_scatter(x, "x", scatter_dimension=0, tiled=True)  # noqa: E731
    return _smap(jax, fn, m, P(None, "x"), P("x", None)), [_f32(8, 8)]


@program
def shard_map_axis_index(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    from jax.sharding import PartitionSpec as P

    m = _mesh(jax, (2, 2), ("x", "y"))
    fn = lambda x: x + jax.lax.axis_index("y").astype(jnp.float32)  # noqa: E731
    return _smap(jax, fn, m, P("x", "y"), P("x", "y")), [_f32(4, 4)]


@program
def shard_map_in_jit(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    from jax.sharding import PartitionSpec as P

    m = _mesh(jax, (2,), ("x",))
    inner = jax.shard_map(lambda x: jax.lax.pmean(x, "x"), mesh=m, in_specs=P("x"),
                          out_specs=P())
    f = jax.jit(lambda x: jnp.tanh(inner(x * 2.0)) + 1.0, in_shardings=_ns(jax, m, "x"))
    return f, [_f32(4, 3)]


# ---- models ------------------------------------------------------------------------------------
@program
def mlp_data_tensor_parallel(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 4), ("data", "model"))

    def mlp(x: Any, w1: Any, b1: Any, w2: Any) -> Any:
        h = jax.nn.relu(x @ w1 + b1)
        return h @ w2

    f = jax.jit(mlp, in_shardings=(_ns(jax, m, "data", None), _ns(jax, m, None, "model"),
                                   _ns(jax, m, "model"), _ns(jax, m, "model", None)),
                out_shardings=_ns(jax, m, "data", None))
    return f, [_f32(8, 16), _f32(16, 32, seed=1) * 0.2, _f32(32, seed=2), _f32(32, 8, seed=3)]


@program
def megatron_layer(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (1, 4), ("data", "model"))
    heads, dh, d = 4, 4, 16

    def layer(x: Any, wqkv: Any, wo: Any, w1: Any, w2: Any) -> Any:
        b, t, _ = x.shape
        qkv = jnp.einsum("btd,dhe->bthe", x, wqkv)  # heads sharded (column parallel)
        q, k, v = qkv[..., :dh], qkv[..., dh:2 * dh], qkv[..., 2 * dh:]
        s = jnp.einsum("bthe,bshe->bhts", q, k) / np.sqrt(dh)
        p = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bhts,bshe->bthe", p, v)
        x = x + jnp.einsum("bthe,hed->btd", o, wo)  # row parallel: all_reduce
        h = jax.nn.gelu(x @ w1)
        return x + h @ w2

    f = jax.jit(layer, in_shardings=(_ns(jax, m, "data", None, None),
                                     _ns(jax, m, None, "model", None),
                                     _ns(jax, m, "model", None, None),
                                     _ns(jax, m, None, "model"), _ns(jax, m, "model", None)))
    return f, [_f32(2, 6, d), _f32(d, heads, 3 * dh, seed=1) * 0.3,
               _f32(heads, dh, d, seed=2) * 0.3, _f32(d, 32, seed=3) * 0.3,
               _f32(32, d, seed=4) * 0.3]


@program
def conv_net(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2, 2), ("batch", "feat"))

    def net(x: Any, k1: Any, k2: Any, w: Any) -> Any:
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.nn.relu(jax.lax.conv_general_dilated(x, k1, (1, 1), "SAME",
                                                     dimension_numbers=dn))
        h = jax.nn.relu(jax.lax.conv_general_dilated(h, k2, (2, 2), "VALID",
                                                     dimension_numbers=dn))
        return h.mean(axis=(1, 2)) @ w

    f = jax.jit(net, in_shardings=(_ns(jax, m, "batch", None, None, None),
                                   _ns(jax, m, None, None, None, "feat"),
                                   _ns(jax, m, None, None, "feat", None), _ns(jax, m)))
    return f, [_f32(4, 8, 8, 3), _f32(3, 3, 3, 8, seed=1) * 0.3, _f32(2, 2, 8, 4, seed=2) * 0.3,
               _f32(4, 5, seed=3)]


@program
def conv_spatial_halo(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    """Rows of an image split 4 ways: a SAME 3x3 convolution exchanges 1-row halos."""
    m = _mesh(jax, (4,), ("h",))
    dn = ("NHWC", "HWIO", "NHWC")
    f = jax.jit(lambda x, k: jax.nn.relu(jax.lax.conv_general_dilated(
        x, k, (1, 1), "SAME", dimension_numbers=dn)),
        in_shardings=(_ns(jax, m, None, "h", None, None), _ns(jax, m)),
        out_shardings=_ns(jax, m, None, "h", None, None))
    return f, [_f32(2, 16, 8, 3), _f32(3, 3, 3, 4, seed=1)]


@program
def dot_reduce_scatter(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    """A contraction over a sharded dim whose result is wanted sharded: reduce_scatter."""
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda a, b: a @ b, in_shardings=(_ns(jax, m, None, "x"), _ns(jax, m, "x", None)),
                out_shardings=_ns(jax, m, "x", None))
    return f, [_f32(8, 16), _f32(16, 4, seed=1)]


@program
def embedding_lookup(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    """A table sharded on its embedding dim, ids on the batch: a local gather."""
    m = _mesh(jax, (2, 2), ("b", "e"))
    f = jax.jit(lambda t, ids: jnp.tanh(t[ids]).sum(axis=1),
                in_shardings=(_ns(jax, m, None, "e"), _ns(jax, m, "b", None)))
    return f, [_f32(16, 8), _rng(5).integers(0, 16, (4, 3)).astype(np.int32)]


@program
def embedding_vocab_sharded(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    """A table sharded on its vocabulary: the gather indexes a tiled dim (gathered first)."""
    m = _mesh(jax, (4,), ("v",))
    f = jax.jit(lambda t, ids: t[ids] * 2.0, in_shardings=(_ns(jax, m, "v", None), _ns(jax, m)))
    return f, [_f32(16, 4), _rng(6).integers(0, 16, (5,)).astype(np.int32)]


@program
def scan_rnn(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (2,), ("x",))

    def rnn(h: Any, xs: Any, w: Any) -> Any:
        def step(c: Any, x: Any) -> Any:
            c = jnp.tanh(c @ w + x)
            return c, c.sum()
        return jax.lax.scan(step, h, xs)

    f = jax.jit(rnn, in_shardings=(_ns(jax, m, "x", None), _ns(jax, m, None, "x", None),
                                   _ns(jax, m)))
    return f, [_f32(4, 6), _f32(5, 4, 6, seed=1), _f32(6, 6, seed=2) * 0.3]


@program
def fori_loop_sharded(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    m = _mesh(jax, (4,), ("x",))
    f = jax.jit(lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + 1.0, x),
                in_shardings=_ns(jax, m, "x"))
    return f, [_f32(8)]


@program
def layernorm_residual_2x2(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
    """A pre-norm residual block: rows over one axis, the hidden dim over the other (the
    normalization's mean and variance reduce across partitions), a constraint on the output."""
    m = _mesh(jax, (2, 2), ("x", "y"))

    def block(x: Any, g: Any, w: Any) -> Any:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        h = (x - mu) * jax.lax.rsqrt(var + 1e-5) * g
        out = x + jnp.tanh(h @ w)
        return jax.lax.with_sharding_constraint(out, _ns(jax, m, "x", None))

    f = jax.jit(block, in_shardings=(_ns(jax, m, "x", "y"), _ns(jax, m, "y"),
                                     _ns(jax, m, None, "y")))
    return f, [_f32(8, 12), _f32(12, seed=1), _f32(12, 12, seed=2) * 0.2]


def _mlp_memory(mesh_shape: tuple[int, int]) -> Builder:
    def build(jax: Any, jnp: Any) -> tuple[Any, list[np.ndarray]]:
        m = _mesh(jax, mesh_shape, ("data", "model"))

        def mlp(x: Any, w1: Any, w2: Any) -> Any:
            return jax.nn.relu(x @ w1) @ w2

        f = jax.jit(mlp, in_shardings=(_ns(jax, m, "data", None), _ns(jax, m, None, "model"),
                                       _ns(jax, m, "model", None)),
                    out_shardings=_ns(jax, m, "data", None))
        return f, [_f32(16, 128), _f32(128, 1024, seed=1) * 0.1, _f32(1024, 128, seed=2) * 0.1]
    return build


#: larger MLPs (weights dominate) whose per-partition memory test_sharded_jax measures
PROGRAMS["mlp_memory_1x8"] = _mlp_memory((1, 8))
PROGRAMS["mlp_memory_2x4"] = _mlp_memory((2, 4))

#: programs whose lowering matches XLA only within a tolerance (reassociated sums)
TOLERANCE = 2e-5
