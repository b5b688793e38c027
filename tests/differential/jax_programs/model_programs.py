"""jax.random (threefry and rbg), linalg, control flow (scan, while, cond, switch, map) and
small models: MLP, CNN, attention, layernorm, and their gradients."""

from __future__ import annotations

import jax
import jax.extend.random
import jax.numpy as jnp
import numpy as np
from jax import lax

from tests.differential.jax_programs.table import (
    C64,
    C128,
    F32,
    F64,
    I32,
    U32,
    Program,
    Sums,
    arr,
    inexact,
    spd,
)

P = Program
KEY = np.array([0, 42], np.uint32)  # a raw threefry key (jax.random.PRNGKey(42))
RBG_KEY = np.array([1, 2, 3, 4], np.uint32)  # a raw rbg key


def _threefry(fn):  # noqa: ANN001, ANN202
    return lambda k: fn(jax.random.wrap_key_data(k, impl="threefry2x32"))


def _rbg(fn):  # noqa: ANN001, ANN202
    return lambda k: fn(jax.random.wrap_key_data(k, impl="rbg"))


def _random() -> list[Program]:
    r = jax.random
    cases = {
        "uniform[f32]": lambda k: r.uniform(k, (3, 4)),
        "uniform[f64]": lambda k: r.uniform(k, (5,), dtype=np.float64, minval=-2, maxval=3),
        "uniform[bf16]": lambda k: r.uniform(k, (6,), dtype=jnp.bfloat16),
        "normal[f32]": lambda k: r.normal(k, (4, 3)),
        "randint[s32]": lambda k: r.randint(k, (10,), -5, 17),
        "bits[u32]": lambda k: r.bits(k, (7,)),
        "bits[u8]": lambda k: r.bits(k, (5,), dtype=np.uint8),
        "bernoulli[pred]": lambda k: r.bernoulli(k, 0.3, (8,)),
        "split_fold_in[u32]": lambda k: jax.random.key_data(
            r.split(r.fold_in(k, 7), 3)),
        "permutation[s32]": lambda k: r.permutation(k, 10),
        "categorical[s64]": lambda k: r.categorical(k, jnp.log(jnp.array([.1, .2, .7])),
                                                    shape=(6,)),
        # f16 logits: converts f64/f32 -> f16, a runtime-library call on CPUs without
        # AVX512-FP16 (issue 12: unresolved __truncdfhf2 on AMD Zen)
        "categorical_f16[s64]": lambda k: r.categorical(
            k, jnp.log(jnp.array([.1, .2, .3, .4], jnp.float16)), shape=(8,)),
        "truncated_normal[f32]": lambda k: r.truncated_normal(k, -1.0, 1.0, (5,)),
        "exponential[f32]": lambda k: r.exponential(k, (5,)),
        "choice[s32]": lambda k: r.choice(k, 9, (4,), replace=False),
        "gamma[f32]": lambda k: r.gamma(k, jnp.array([0.5, 1.0, 3.0], np.float32)),
        "dropout_mask[f32]": lambda k: jnp.where(r.bernoulli(k, 0.9, (3, 4)),
                                                 jnp.ones((3, 4)) / 0.9, 0.0),
    }
    out = []
    for name, fn in cases.items():
        # XLA's CPU backend contracts the scaling multiply-add into an FMA (uniform with a
        # range, normal, ...), which an exactly rounded interpreter cannot reproduce bit for bit.
        tol = inexact(F64, 5) if name == "uniform[f64]" else \
            inexact(F32, 5) if name.split("[")[0] in {"normal", "truncated_normal",
                                                      "exponential", "gamma"} else None
        out.append(P(f"random.threefry.{name}", _threefry(fn), (KEY,), tol))
    for name in ("uniform[f32]", "normal[f32]", "randint[s32]", "bits[u32]", "split_fold_in[u32]",
                 "permutation[s32]"):
        tol = inexact(F32, 5) if name.startswith("normal") else None
        out.append(P(f"random.rbg.{name}", _rbg(cases[name]), (RBG_KEY,), tol))
    out += [
        P("lax.rng_bit_generator[u32]", lambda k: lax.rng_bit_generator(
            k, (3, 4), dtype=np.uint32, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
          (np.array([1, 2, 3, 4], np.uint32),)),
        P("lax.rng_bit_generator_philox[u64]", lambda k: lax.rng_bit_generator(
            k, (5,), dtype=np.uint64, algorithm=lax.RandomAlgorithm.RNG_PHILOX),
          (np.array([1, 2, 3, 4], np.uint32),)),
        P("threefry2x32[u32]", lambda k, x: jax.extend.random.threefry_2x32(k, x),
          (KEY, np.arange(10, dtype=np.uint32))),
    ]
    return out


def _linalg() -> list[Program]:
    a = spd(4, F32)
    a64 = spd(5, F64)
    g = arr((4, 4), F32) + 3 * np.eye(4, dtype=np.float32)
    rect = arr((5, 3), F64)
    tol = inexact(F32, 100)
    tol64 = inexact(F64, 1000)
    return [
        P("linalg.cholesky[f32]", jnp.linalg.cholesky, (a,), tol),
        P("linalg.cholesky[f64]", jnp.linalg.cholesky, (a64,), tol64),
        P("linalg.cholesky_batched[f32]", jnp.linalg.cholesky,
          (np.stack([a, 2 * a]),), tol),
        P("linalg.triangular_solve[f32]", lambda m, b: lax.linalg.triangular_solve(
            m, b, left_side=True, lower=True), (np.tril(g), arr((4, 2), F32)), tol),
        P("linalg.triangular_solve_upper_transpose[f64]",
          lambda m, b: lax.linalg.triangular_solve(m, b, left_side=False, lower=False,
                                                   transpose_a=True),
          (np.triu(a64), arr((3, 5), F64)), tol64),
        P("linalg.solve_triangular_scipy[f32]", lambda m, b: jax.scipy.linalg.solve_triangular(
            m, b, lower=True), (np.tril(g), arr((4,), F32)), tol),
        P("linalg.qr[f32]", jnp.linalg.qr, (g,), tol),
        P("linalg.qr_rect[f64]", jnp.linalg.qr, (rect,), tol64),
        P("linalg.eigh[f32]", jnp.linalg.eigh, (a,), tol),
        P("linalg.eigvalsh[f64]", jnp.linalg.eigvalsh, (a64,), tol64),
        P("linalg.svd[f32]", jnp.linalg.svd, (g,), tol),
        P("linalg.svd_values[f64]", lambda m: jnp.linalg.svd(m, compute_uv=False), (rect,),
          tol64),
        P("linalg.svd_reduced[f64]", lambda m: jnp.linalg.svd(m, full_matrices=False), (rect,),
          tol64),
        P("linalg.lu[f32]", lax.linalg.lu, (g,), tol),
        P("linalg.inv[f32]", jnp.linalg.inv, (g,), tol),
        P("linalg.det[f64]", jnp.linalg.det, (a64,), tol64),
        P("linalg.slogdet[f32]", jnp.linalg.slogdet, (g,), tol),
        P("linalg.solve[f64]", jnp.linalg.solve, (a64, arr((5, 2), F64)), tol64),
        P("linalg.eig[f64]", jnp.linalg.eigvals, (a64,), tol64),
        P("linalg.pinv[f32]", jnp.linalg.pinv, (g,), inexact(F32, 1000)),
        P("linalg.matrix_power[f32]", lambda m: jnp.linalg.matrix_power(m, 5),
          (arr((3, 3), F32, -1, 1),), tol),
        P("linalg.cholesky[c64]", jnp.linalg.cholesky, (spd(3, C64),), tol),
        P("linalg.expm[f32]", jax.scipy.linalg.expm, (arr((3, 3), F32, -0.5, 0.5),), tol),
    ]


def _linalg_attributes() -> list[Program]:
    """The FFI attribute values JAX emits besides the defaults: uplo 'U' (eigh lower=False),
    trsm's side 'R', diag 'U', trans_x 'C', a conjugated operand and batch dimensions. Built
    last so the other programs' seeded inputs stay as they were."""
    a = spd(4, F32)
    g = arr((4, 4), F32) + 3 * np.eye(4, dtype=np.float32)
    tol = inexact(F32, 100)
    tol64 = inexact(F64, 1000)
    return [
        P("linalg.eigh_upper[f32]", lambda m: lax.linalg.eigh(m, lower=False), (a,), tol),
        P("linalg.eigh_upper[c64]", lambda m: lax.linalg.eigh(m, lower=False),
          (spd(3, C64),), tol),
        P("linalg.triangular_solve_right_unit[f32]", lambda m, b: lax.linalg.triangular_solve(
            m, b, left_side=False, lower=True, unit_diagonal=True),
          (np.tril(g), arr((3, 4), F32)), tol),
        P("linalg.triangular_solve_conj_transpose[c128]",
          lambda m, b: lax.linalg.triangular_solve(m, b, left_side=True, lower=False,
                                                   transpose_a=True, conjugate_a=True),
          (np.triu(spd(4, C128)), arr((4, 2), C128)), inexact(C128, 1000)),
        P("linalg.triangular_solve_conj[c64]", lambda m, b: lax.linalg.triangular_solve(
            m, b, left_side=True, lower=True, conjugate_a=True),
          (np.tril(spd(3, C64)), arr((3, 2), C64)), tol),
        P("linalg.triangular_solve_batched[f64]", lambda m, b: lax.linalg.triangular_solve(
            m, b, left_side=True, lower=True),
          (np.tril(spd(3, F64, (2,))), arr((2, 3, 2), F64)), tol64),
        *_tridiagonal(),
    ]


def _tridiagonal() -> list[Program]:
    """lax.linalg.tridiagonal_solve (jaxlib's lapack_?gtsv_ffi): dl[0] and du[-1] lie
    outside the matrix; one system of 6, a batch of 3 systems of 5 (f64), complex, and
    n = 1 (which scipy's own gtsv wrapper refuses)."""
    solve = lax.linalg.tridiagonal_solve

    def system(n: int, dt: type, batch: tuple[int, ...] = ()) -> tuple[np.ndarray, ...]:
        dl, du = arr((*batch, n), dt), arr((*batch, n), dt)
        dl[..., 0], du[..., -1] = 0, 0
        return dl, arr((*batch, n), dt) + 4, du, arr((*batch, n, 2), dt)

    return [
        P("linalg.tridiagonal_solve[f32]", solve, system(6, F32), inexact(F32, 100)),
        P("linalg.tridiagonal_solve_batched[f64]", solve, system(5, F64, (3,)),
          inexact(F64, 1000)),
        P("linalg.tridiagonal_solve[c64]", solve, system(4, C64), inexact(C64, 100)),
        P("linalg.tridiagonal_solve_one[f32]", solve, system(1, F32), inexact(F32, 100)),
    ]


def _factorizations() -> list[Program]:
    """jaxlib's gees (schur, sqrtm), gehrd (hessenberg), gesvd (svd's QR algorithm), geqp3
    (pivoted QR) and sytrd / hetrd (tridiagonal). jaxlib calls scipy's LAPACK with the
    workspaces xlapy asks for (ops/custom_call_factorizations.py): the same routine gives
    the same Schur vectors, signs and pivots, so results compare directly (measured: equal
    bits; the tolerance covers the element-wise work around the calls, sqrtm's loop). Built
    last so the other programs' seeded inputs stay as they were."""
    svd_qr = lax.linalg.SvdAlgorithm.QR

    def tri(lower: bool = True):  # noqa: ANN202
        return lambda m: lax.linalg.tridiagonal(m + jnp.conj(jnp.swapaxes(m, -1, -2)),
                                                lower=lower)

    tol, tol64 = inexact(F32, 100), inexact(F64, 1000)
    return [
        P("linalg.schur[f32]", jax.scipy.linalg.schur, (arr((5, 5), F32),), tol),
        P("linalg.schur[c128]", jax.scipy.linalg.schur, (arr((4, 4), C128),), tol64),
        P("linalg.schur_batched_values[f64]",
          lambda m: lax.linalg.schur(m, compute_schur_vectors=False), (arr((2, 4, 4), F64),),
          tol64),
        P("linalg.sqrtm[f32]", jax.scipy.linalg.sqrtm, (spd(4, F32),), inexact(C64, 100)),
        P("linalg.sqrtm[c128]", jax.scipy.linalg.sqrtm, (spd(3, C128),), tol64),
        P("linalg.hessenberg[f32]", lambda m: jax.scipy.linalg.hessenberg(m, calc_q=True),
          (arr((5, 5), F32),), tol),
        P("linalg.hessenberg[c64]", lambda m: jax.scipy.linalg.hessenberg(m, calc_q=True),
          (arr((4, 4), C64),), inexact(C64, 100)),
        P("linalg.svd_qr[f32]", lambda m: lax.linalg.svd(m, full_matrices=False,
                                                         algorithm=svd_qr),
          (arr((6, 4), F32),), tol),
        P("linalg.svd_qr_full[c128]", lambda m: lax.linalg.svd(m, full_matrices=True,
                                                               algorithm=svd_qr),
          (arr((3, 5), C128),), tol64),
        P("linalg.svd_qr_values[f64]", lambda m: lax.linalg.svd(m, compute_uv=False,
                                                                algorithm=svd_qr),
          (arr((5, 3), F64),), tol64),
        P("linalg.qr_pivoting[f32]", lambda m: jax.scipy.linalg.qr(m, pivoting=True),
          (arr((5, 4), F32),), tol),
        P("linalg.qr_pivoting_economic[c64]",
          lambda m: jax.scipy.linalg.qr(m, pivoting=True, mode="economic"),
          (arr((3, 5), C64),), inexact(C64, 100)),
        P("linalg.tridiagonal[f32]", tri(), (arr((5, 5), F32),), tol),
        P("linalg.tridiagonal_upper_batched[c128]", tri(lower=False), (arr((2, 4, 4), C128),),
          tol64),
    ]


def _control_flow() -> list[Program]:
    def fib(n):  # noqa: ANN001, ANN202
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[2], c[1] + c[2]),
                              (np.int32(0), np.int64(0), np.int64(1)))[1]

    def newton_sqrt(x):  # noqa: ANN001, ANN202
        return lax.fori_loop(0, 8, lambda i, y: 0.5 * (y + x / y), x)

    def scan_cumsum(xs):  # noqa: ANN001, ANN202
        return lax.scan(lambda c, x: (c + x, c * x), np.zeros(2, np.float32), xs)

    def rnn(h0, xs, w):  # noqa: ANN001, ANN202
        return lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h.sum()), h0, xs)

    def nested(x):  # noqa: ANN001, ANN202
        def inner(i, acc):  # noqa: ANN001, ANN202
            return lax.fori_loop(0, i, lambda j, a: a + j * x, acc)
        return lax.fori_loop(0, 4, inner, jnp.zeros_like(x))

    def scan_in_fori(w, xs):  # noqa: ANN001, ANN202  (inner loops of 20: not unrolled)
        def outer(i, st):  # noqa: ANN001, ANN202
            c, ys = lax.scan(lambda c, x: (c * 0.9 + x * i, c), st[0], xs)
            return c, st[1] + ys
        return lax.fori_loop(0, 18, outer, (w, jnp.zeros_like(xs)))

    def while_in_fori(x):  # noqa: ANN001, ANN202
        return lax.fori_loop(0, 20, lambda i, v: lax.while_loop(
            lambda u: jnp.max(u) > 0.5, lambda u: u * 0.8, v + 1.0), x)

    def rnn_in_fori(h, w, xs):  # noqa: ANN001, ANN202
        return lax.fori_loop(0, 17, lambda i, h: lax.scan(
            lambda h, x: (jnp.tanh(h @ w + x), None), h, xs)[0], h)

    return [
        P("lax.while_fib[s64]", fib, (np.int32(30),)),
        P("lax.fori_loop_newton[f64]", newton_sqrt, (arr((4,), F64, 1, 9),), inexact(F64)),
        P("lax.fori_loop_unrolled[s32]", lambda x: lax.fori_loop(0, 5, lambda i, a: a * 2 + i, x),
          (arr((3,), I32),)),
        P("lax.scan_carry[f32]", scan_cumsum, (arr((6, 2), F32),), inexact(F32)),
        P("lax.scan_reverse[s32]", lambda xs: lax.scan(lambda c, x: (c + x, c), np.int32(0), xs,
                                                       reverse=True), (arr((7,), I32),)),
        P("lax.scan_rnn[f32]", rnn, (arr((3,), F32), arr((5, 3), F32), arr((3, 3), F32, -.5, .5)),
          inexact(F32, 10)),
        P("lax.scan_no_xs[f32]", lambda c: lax.scan(lambda c, _: (c * 1.5, c), c, None,
                                                    length=4), (arr((2,), F32),)),
        P("lax.nested_fori[f32]", nested, (arr((3,), F32),), Sums(6 + 1)),  # sum of j x
        P("lax.cond[f32]", lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x),
          (np.bool_(True), arr((3,), F32)), inexact(F32)),
        P("lax.cond_false[s32]", lambda p, x: lax.cond(p, lambda v: v + 1, lambda v: v * 3, x),
          (np.bool_(False), arr((3,), I32))),
        P("lax.switch[f32]", lambda i, x: lax.switch(i, [jnp.exp, jnp.tanh, lambda v: -v], x),
          (np.int32(1), arr((4,), F32)), inexact(F32)),
        P("lax.switch_clamped[s32]", lambda i, x: lax.switch(i, [lambda v: v, lambda v: v * 2],
                                                             x), (np.int32(7), arr((4,), I32))),
        P("lax.map[f32]", lambda xs: lax.map(lambda v: jnp.sum(v ** 2), xs), (arr((5, 3), F32),),
          Sums(3 + 1)),
        P("jax.vmap_matvec[f32]", jax.vmap(lambda m, v: m @ v), (arr((3, 4, 2), F32),
                                                                  arr((3, 2), F32)), Sums(2)),
        P("lax.while_dynamic_trip[f32]", lambda x: lax.while_loop(
            lambda c: jnp.max(c) < 100.0, lambda c: c * 1.7 + 0.1, x),
          (arr((3,), F32, 0.5, 2),), inexact(F32, 10)),
        P("jax.checkpoint_grad[f32]", jax.grad(jax.checkpoint(lambda x: jnp.sum(jnp.sin(x) ** 2))),
          (arr((4,), F32),), inexact(F32)),
        # loops in loops (each inner one runs as a step of the outer native loop)
        P("lax.scan_in_fori[f32]", scan_in_fori, (arr((3,), F32), arr((20, 3), F32)),
          inexact(F32, 10)),
        P("lax.while_in_fori[f32]", while_in_fori, (arr((4,), F32),), inexact(F32, 10)),
        P("lax.rnn_in_fori[f32]", rnn_in_fori, (arr((2, 8), F32), arr((8, 8), F32, -.3, .3),
                                                arr((20, 2, 8), F32)), inexact(F32, 100)),
    ]


def _mlp(params_x):  # noqa: ANN001, ANN202
    w1, b1, w2, b2, x = params_x
    h = jax.nn.relu(x @ w1 + b1)
    return jax.nn.log_softmax(h @ w2 + b2)


def _cnn(w1, w2, x):  # noqa: ANN001, ANN202
    y = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO",
                                                                            "NHWC"))
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = y.reshape(y.shape[0], -1)
    return jax.nn.softmax(y @ w2)


def _attention(q, k, v):  # noqa: ANN001, ANN202
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1]).astype(q.dtype)
    mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))
    s = jnp.where(mask, s, -1e9)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def _layernorm(x, g, b):  # noqa: ANN001, ANN202
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.var(x, -1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + 1e-5) * g + b


def _models() -> list[Program]:
    mlp_args = (arr((4, 8), F32, -.5, .5), arr((8,), F32), arr((8, 3), F32, -.5, .5),
                arr((3,), F32), arr((5, 4), F32))
    cnn_args = (arr((3, 3, 2, 4), F32, -.5, .5), arr((16, 3), F32, -.5, .5),
                arr((2, 4, 4, 2), F32))
    qkv = tuple(arr((2, 5, 4), F32) for _ in range(3))
    ln = (arr((3, 8), F32), arr((8,), F32), arr((8,), F32))
    tol = inexact(F32, 20)

    def mlp_loss(*a):  # noqa: ANN002, ANN202
        return -jnp.mean(_mlp(a)[:, 0])

    return [
        P("model.mlp[f32]", lambda *a: _mlp(a), mlp_args, tol),
        P("model.mlp_grad[f32]", jax.grad(mlp_loss, argnums=(0, 1, 2, 3)), mlp_args, tol),
        P("model.mlp_value_and_grad[f64]", jax.value_and_grad(mlp_loss),
          tuple(a.astype(np.float64) for a in mlp_args), inexact(F64, 20)),
        P("model.cnn[f32]", _cnn, cnn_args, tol),
        P("model.cnn_grad[f32]", jax.grad(lambda *a: jnp.sum(_cnn(*a) ** 2), argnums=(0, 1)),
          cnn_args, inexact(F32, 100)),
        P("model.attention[f32]", _attention, qkv, tol),
        P("model.attention_grad[f32]", jax.grad(lambda *a: jnp.sum(_attention(*a)),
                                                argnums=(0, 1, 2)), qkv, inexact(F32, 100)),
        P("model.attention[bf16]", _attention, tuple(a.astype(jnp.bfloat16) for a in qkv),
          (5e-2, 5e-2)),
        P("model.layernorm[f32]", _layernorm, ln, tol),
        P("model.layernorm_grad[f32]", jax.grad(lambda *a: jnp.sum(_layernorm(*a) ** 2)), ln,
          inexact(F32, 100)),
        P("model.gelu_silu[f32]", lambda x: (jax.nn.gelu(x), jax.nn.silu(x),
                                            jax.nn.gelu(x, approximate=False)),
          (arr((3, 5), F32),), tol),
        P("model.softmax_xent[f32]", lambda lg, y: -jnp.sum(
            jax.nn.one_hot(y, 4) * jax.nn.log_softmax(lg), -1),
          (arr((5, 4), F32), arr((5,), I32, 0, 3)), tol),
        P("model.embedding_lookup[f32]", lambda t, ids: jnp.take(t, ids, axis=0).sum(1),
          (arr((10, 4), F32), arr((3, 5), I32, 0, 9)), tol),
        P("model.adam_step[f32]", lambda p, g, m, v: (
            p - 1e-3 * (0.9 * m + 0.1 * g) / (jnp.sqrt(0.999 * v + 0.001 * g * g) + 1e-8)),
          tuple(arr((6,), F32) for _ in range(3)) + (arr((6,), F32, 0, 1),), tol),
        P("model.hash_mix[u32]", lambda x: (x * np.uint32(2654435761)) ^ (x >> np.uint32(13)),
          (arr((8,), U32, 0, 2**32 - 1),)),
        P("model.jvp_tanh[f32]", lambda x, t: jax.jvp(jnp.tanh, (x,), (t,)),
          (arr((4,), F32), arr((4,), F32)), tol),
        P("model.hessian[f64]", jax.hessian(lambda x: jnp.sum(jnp.sin(x) * x ** 2)),
          (arr((3,), F64),), inexact(F64, 20)),
    ]


def programs() -> list[Program]:
    return (_random() + _linalg() + _control_flow() + _models() + _linalg_attributes()
            + _factorizations())
