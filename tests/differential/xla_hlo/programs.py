"""The issue-20 suite's jax functions: the JAX program suite's models, control flow, random,
linalg, gather/scatter and sort programs (reused by id), plus whole-model programs whose
optimized HLO has every fusion kind XLA's CPU compiler forms: a transformer block, training
steps with an optimizer update (MLP with Adam, CNN with pooling and SGD), an RNN scan's
gradient and an embedding's scatter-add gradient."""

from __future__ import annotations

from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tests.differential.jax_programs import array_programs, lax_programs, model_programs
from tests.differential.jax_programs.table import F32, I32, Program, arr, inexact

#: Programs of the JAX program suite run here too, by id.
REUSED = (
    # models
    "model.mlp[f32]", "model.mlp_grad[f32]", "model.mlp_value_and_grad[f64]", "model.cnn[f32]",
    "model.cnn_grad[f32]", "model.attention[f32]", "model.attention_grad[f32]",
    "model.attention[bf16]", "model.layernorm[f32]", "model.layernorm_grad[f32]",
    "model.gelu_silu[f32]", "model.softmax_xent[f32]", "model.embedding_lookup[f32]",
    "model.adam_step[f32]", "model.hessian[f64]",
    # control flow
    "lax.while_fib[s64]", "lax.fori_loop_newton[f64]", "lax.scan_carry[f32]",
    "lax.scan_rnn[f32]", "lax.nested_fori[f32]", "lax.cond[f32]", "lax.switch[f32]",
    "lax.map[f32]", "lax.while_dynamic_trip[f32]",
    # rng
    "random.threefry.uniform[f32]", "random.threefry.normal[f32]",
    "random.threefry.permutation[s32]", "random.rbg.uniform[f32]",
    "random.threefry.dropout_mask[f32]",
    # gather / scatter
    "jnp.index_array[f32]", "jnp.take_along_axis[s32]", "jnp.at_add_duplicates[f32]",
    "segment_sum[f32]", "jnp.at_max[f32]",
    # sort, top-k, reductions, windows
    "jnp.sort[f32]", "jnp.argsort[f32]", "lax.top_k[f32]", "lax.sort_multi[s32,f32]",
    "jnp.cumsum_long[f32]", "max_pool_grad[f32]", "jax.nn.logsumexp[f32]",
    # dots, convolutions, linalg (LAPACK custom calls)
    "lax.dot_general_batch[f32]", "lax.conv_strided_same[f32]", "conv_grad_wrt_kernel[f32]",
    "linalg.cholesky[f32]", "linalg.triangular_solve[f32]", "linalg.qr[f32]",
    "linalg.eigh[f32]", "linalg.svd[f32]", "linalg.solve[f64]", "linalg.inv[f32]",
)


def _layernorm(x, g, b):  # noqa: ANN001, ANN202
    mu = jnp.mean(x, -1, keepdims=True)
    return (x - mu) * lax.rsqrt(jnp.var(x, -1, keepdims=True) + 1e-5) * g + b


def _attention(q, k, v):  # noqa: ANN001, ANN202
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    s = jnp.where(jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool)), s, -1e9)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def transformer_block(x, wqkv, wo, w1, w2, g1, b1, g2, b2):  # noqa: ANN001, ANN201
    """A pre-norm GPT-2-style block: causal attention and a GELU MLP, both residual."""
    q, k, v = jnp.split(_layernorm(x, g1, b1) @ wqkv, 3, axis=-1)
    x = x + _attention(q, k, v) @ wo
    return x + jax.nn.gelu(_layernorm(x, g2, b2) @ w1) @ w2


def _mlp_loss(w1, b1, w2, b2, x, y):  # noqa: ANN001, ANN202
    logits = jax.nn.relu(x @ w1 + b1) @ w2 + b2
    return -jnp.mean(jnp.sum(jax.nn.one_hot(y, logits.shape[-1]) * jax.nn.log_softmax(logits),
                             -1))


def adam_train_step(w1, b1, w2, b2, m1, m2, m3, m4, v1, v2, v3, v4, x, y):  # noqa: ANN001, ANN201
    """One Adam step of an MLP classifier: loss, new parameters and moments."""
    params, ms, vs = (w1, b1, w2, b2), (m1, m2, m3, m4), (v1, v2, v3, v4)
    loss, grads = jax.value_and_grad(_mlp_loss, argnums=(0, 1, 2, 3))(*params, x, y)
    ms = tuple(0.9 * m + 0.1 * g for m, g in zip(ms, grads))
    vs = tuple(0.999 * v + 0.001 * g * g for v, g in zip(vs, grads))
    new = tuple(p - 1e-2 * m / (jnp.sqrt(v) + 1e-8) for p, m, v in zip(params, ms, vs))
    return (loss, *new, *ms, *vs)


def _cnn_loss(w1, w2, x, y):  # noqa: ANN001, ANN202
    h = lax.conv_general_dilated(x, w1, (1, 1), "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = lax.reduce_window(jax.nn.relu(h), -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                          "VALID")
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
    logits = h.reshape(h.shape[0], -1) @ w2
    return -jnp.mean(jnp.sum(jax.nn.one_hot(y, logits.shape[-1]) * jax.nn.log_softmax(logits),
                             -1))


def cnn_sgd_step(w1, w2, x, y):  # noqa: ANN001, ANN201
    """One SGD step of a conv net with max and average pooling."""
    loss, (g1, g2) = jax.value_and_grad(_cnn_loss, argnums=(0, 1))(w1, w2, x, y)
    return loss, w1 - 0.1 * g1, w2 - 0.1 * g2


def rnn_grad(h0, xs, w):  # noqa: ANN001, ANN201
    """The gradient of a tanh RNN's summed states through `lax.scan` (a reverse scan)."""
    def loss(w):  # noqa: ANN001, ANN202
        return jnp.sum(lax.scan(lambda h, x: (jnp.tanh(h @ w + x),) * 2, h0, xs)[1])
    return jax.grad(loss)(w)


def embedding_grad(table, ids, w):  # noqa: ANN001, ANN201
    """An embedding's gradient: a scatter-add of the rows the ids gathered."""
    return jax.grad(lambda t: jnp.sum(jnp.tanh(jnp.take(t, ids, axis=0) @ w)))(table)


def dropout_layer(key, x, w):  # noqa: ANN001, ANN201
    """Dropout (threefry bits) after a dense layer."""
    keep = jax.random.bernoulli(jax.random.wrap_key_data(key), 0.8, (x.shape[0], w.shape[1]))
    return jnp.where(keep, jax.nn.relu(x @ w) / 0.8, 0.0)


def _new() -> list[Program]:
    tol = inexact(F32, 100)
    d, f = 16, 32
    block = (arr((2, 8, d), F32), arr((d, 3 * d), F32, -.3, .3), arr((d, d), F32, -.3, .3),
             arr((d, f), F32, -.3, .3), arr((f, d), F32, -.3, .3), arr((d,), F32, .5, 1.5),
             arr((d,), F32, -.1, .1), arr((d,), F32, .5, 1.5), arr((d,), F32, -.1, .1))
    params = (arr((8, 16), F32, -.4, .4), arr((16,), F32, -.1, .1), arr((16, 4), F32, -.4, .4),
              arr((4,), F32, -.1, .1))
    moments = tuple(np.zeros_like(p) for p in params) + tuple(
        arr(p.shape, F32, 0, .01) for p in params)
    cnn = (arr((3, 3, 2, 4), F32, -.5, .5), arr((4, 3), F32, -.5, .5), arr((2, 4, 4, 2), F32),
           arr((2,), I32, 0, 2))
    return [
        Program("xla.transformer_block[f32]", transformer_block, block, tol),
        Program("xla.adam_train_step[f32]", adam_train_step,
                params + moments + (arr((6, 8), F32), arr((6,), I32, 0, 3)), tol),
        Program("xla.cnn_sgd_step[f32]", cnn_sgd_step, cnn, tol),
        Program("xla.rnn_grad[f32]", rnn_grad,
                (arr((3,), F32), arr((5, 3), F32), arr((3, 3), F32, -.5, .5)), tol),
        Program("xla.embedding_grad[f32]", embedding_grad,
                (arr((10, 4), F32), arr((3, 5), I32, 0, 9), arr((4, 2), F32)), tol),
        Program("xla.dropout_layer[f32]", dropout_layer,
                (np.array([0, 7], np.uint32), arr((4, 6), F32), arr((6, 5), F32)), tol),
    ]


@cache
def programs() -> tuple[Program, ...]:
    table = {p.id: p for p in (lax_programs.programs() + array_programs.programs()
                               + model_programs.programs())}
    missing = [i for i in REUSED if i not in table]
    assert not missing, f"not in the JAX program suite: {missing}"
    return tuple(table[i] for i in REUSED) + tuple(_new())
