"""Shape ops, jnp indexing and `.at[]` updates, reductions, cumulative ops, windows, sorting,
dot and convolution programs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tests.differential.jax_programs.table import (
    BF16,
    BOOL,
    C64,
    F16,
    F32,
    F64,
    I8,
    I32,
    I64,
    U8,
    U32,
    Program,
    Sums,
    arr,
    dtype_id,
    inexact,
)

P = Program


def _shape() -> list[Program]:
    x = arr((2, 3, 4), F32)
    xi = arr((2, 3, 4), I32, -9, 9)
    return [
        P("lax.broadcast_in_dim[f32]", lambda a: lax.broadcast_in_dim(a, (3, 2, 5, 4), (1, 3)),
          (arr((2, 4), F32),)),
        P("lax.broadcast[s8]", lambda a: lax.broadcast(a, (2, 3)), (arr((4,), I8, -9, 9),)),
        P("lax.reshape[f32]", lambda a: lax.reshape(a, (4, 6)), (x,)),
        P("lax.reshape_dims[s32]", lambda a: lax.reshape(a, (6, 4), dimensions=(2, 1, 0)), (xi,)),
        P("lax.transpose[f32]", lambda a: lax.transpose(a, (2, 0, 1)), (x,)),
        P("lax.transpose[bf16]", lambda a: lax.transpose(a, (1, 0)), (arr((3, 5), BF16),)),
        P("lax.rev[s32]", lambda a: lax.rev(a, (0, 2)), (xi,)),
        P("lax.pad[f32]", lambda a: lax.pad(a, np.float32(-1), ((1, 2, 0), (0, 1, 2))),
          (arr((3, 4), F32),)),
        P("lax.pad_negative[s32]", lambda a: lax.pad(a, np.int32(7), ((-1, 2, 1), (2, -2, 0))),
          (arr((3, 4), I32, -9, 9),)),
        P("lax.concatenate[f64]", lambda a, b: lax.concatenate([a, b, a], 1),
          (arr((2, 3), F64), arr((2, 1), F64))),
        P("lax.concatenate[pred]", lambda a, b: lax.concatenate([a, b], 0),
          (arr((2, 3), BOOL), arr((1, 3), BOOL))),
        P("lax.slice[f32]", lambda a: lax.slice(a, (0, 1, 0), (2, 3, 4), (1, 1, 3)), (x,)),
        P("lax.slice_strided[u8]", lambda a: lax.slice(a, (1, 0), (7, 5), (2, 2)),
          (arr((8, 6), U8, 0, 255),)),
        P("lax.squeeze[f32]", lambda a: lax.squeeze(a, (0, 2)), (arr((1, 3, 1, 2), F32),)),
        P("lax.expand_dims[s64]", lambda a: lax.expand_dims(a, (0, 2)), (arr((3, 2), I64),)),
        P("lax.iota[s32]", lambda: lax.iota(np.int32, 7), ()),
        P("lax.iota[f32]", lambda: lax.iota(np.float32, 5), ()),
        P("lax.iota[bf16]", lambda: lax.iota(BF16, 300), ()),
        P("lax.broadcasted_iota[u8]", lambda: lax.broadcasted_iota(np.uint8, (3, 4), 1), ()),
        P("lax.dynamic_slice[f32]", lambda a, i: lax.dynamic_slice(a, (i, np.int32(1)), (2, 3)),
          (arr((5, 6), F32), np.int32(2))),
        P("lax.dynamic_slice_clamped[s32]",
          lambda a, i: lax.dynamic_slice(a, (i, np.int32(-5)), (2, 3)),
          (arr((5, 6), I32, -9, 9), np.int32(9))),
        P("lax.dynamic_update_slice[f32]",
          lambda a, u, i: lax.dynamic_update_slice(a, u, (i, np.int32(2))),
          (arr((5, 6), F32), arr((2, 3), F32), np.int32(1))),
        P("lax.dynamic_update_slice_clamped[s64]",
          lambda a, u, i: lax.dynamic_update_slice(a, u, (i, i)),
          (arr((5, 6), I64, -9, 9), arr((2, 3), I64, 10, 20), np.int64(-3))),
        P("lax.split[f32]", lambda a: lax.split(a, (1, 3, 2), axis=1), (arr((2, 6), F32),)),
        P("lax.optimization_barrier[f32]", lambda a, b: lax.optimization_barrier((a, b)),
          (arr((2,), F32), arr((3,), I32))),
        P("jnp.tile[f32]", lambda a: jnp.tile(a, (2, 3)), (arr((2, 2), F32),)),
        P("jnp.repeat[s32]", lambda a: jnp.repeat(a, 3, axis=0), (arr((2, 3), I32),)),
        P("jnp.roll[f32]", lambda a: jnp.roll(a, (2, -1), (0, 1)), (arr((4, 5), F32),)),
        P("jnp.flip[f16]", lambda a: jnp.flip(a), (arr((3, 4), F16),)),
        P("jnp.stack[f32]", lambda a, b: jnp.stack([a, b], axis=1),
          (arr((3, 2), F32), arr((3, 2), F32))),
        P("jnp.where[f32]", lambda c, a: jnp.where(c, a, 0.5), (arr((3, 4), BOOL),
                                                                arr((3, 4), F32))),
        P("jnp.tril_triu[f64]", lambda a: (jnp.tril(a, -1), jnp.triu(a, 1)),
          (arr((4, 4), F64),)),
        P("jnp.eye_diag[f32]", lambda a: jnp.eye(4, 5, k=1) + jnp.diag(jnp.diagonal(a))[:, :1],
          (arr((4, 4), F32),)),
        P("jnp.kron[s32]", jnp.kron, (arr((2, 3), I32), arr((2, 2), I32))),
        P("jnp.meshgrid[f32]", lambda a, b: jnp.meshgrid(a, b), (arr((3,), F32),
                                                                 arr((4,), F32))),
        P("jnp.moveaxis[u32]", lambda a: jnp.moveaxis(a, 0, -1), (arr((2, 3, 4), U32, 0, 99),)),
        P("jnp.pad_reflect[f32]", lambda a: jnp.pad(a, ((1, 2), (2, 1)), mode="reflect"),
          (arr((4, 4), F32),)),
        P("jnp.pad_edge[s32]", lambda a: jnp.pad(a, 2, mode="edge"), (arr((3, 3), I32),)),
    ]


def _indexing() -> list[Program]:
    x = arr((5, 6), F32)
    xi = arr((5, 6), I32, -50, 50)
    idx = np.array([4, 0, 2, 2], np.int32)
    idx_oob = np.array([7, -1, 2, -9], np.int32)
    return [
        P("jnp.index_int[f32]", lambda a: a[1], (x,)),
        P("jnp.index_negative[f32]", lambda a: a[-1, -2], (x,)),
        P("jnp.index_slices[f32]", lambda a: a[::2, ::-1], (x,)),
        P("jnp.index_newaxis_ellipsis[f32]", lambda a: a[None, ..., 0], (x,)),
        P("jnp.index_array[f32]", lambda a, i: a[i], (x, idx)),
        P("jnp.index_array_cols[s32]", lambda a, i: a[:, i], (xi, idx)),
        P("jnp.index_two_arrays[f32]", lambda a, i: a[i, i + 1], (x, idx)),
        P("jnp.index_dynamic_scalar[f32]", lambda a, i: a[i], (x, np.int32(3))),
        P("jnp.index_dynamic_negative[f32]", lambda a, i: a[i], (x, np.int32(-2))),
        P("jnp.index_array_oob_clip[f32]", lambda a, i: a[i], (x, idx_oob)),
        P("jnp.take_fill[f32]", lambda a, i: jnp.take(a, i, axis=0, mode="fill",
                                                     fill_value=-7.0), (x, idx_oob)),
        P("jnp.take_along_axis[s32]", lambda a, i: jnp.take_along_axis(a, i, axis=1),
          (xi, arr((5, 2), I32, 0, 5))),
        P("jnp.index_bool_static[f32]", lambda a: a[np.array([True, False, True, False, True])],
          (x,)),
        P("jnp.at_set[f32]", lambda a, i: a.at[i].set(9.0), (x, idx)),
        P("jnp.at_set_slice[f32]", lambda a, v: a.at[:, 1:3].set(v), (x, arr((5, 2), F32))),
        P("jnp.at_add_duplicates[f32]", lambda a, i, v: a.at[i].add(v),
          (x, idx, arr((4, 6), F32)), inexact(F32)),
        P("jnp.at_add_duplicates[s32]", lambda a, i, v: a.at[i].add(v),
          (xi, idx, arr((4, 6), I32, -9, 9))),
        P("jnp.at_mul[f64]", lambda a, i: a.at[i, 2].multiply(3.0), (arr((5, 6), F64), idx)),
        P("jnp.at_min[s32]", lambda a, i, v: a.at[i].min(v), (xi, idx, arr((4, 6), I32))),
        P("jnp.at_max[f32]", lambda a, i, v: a.at[i].max(v), (x, idx, arr((4, 6), F32))),
        P("jnp.at_set_oob_dropped[f32]", lambda a, i: a.at[i].set(5.0), (x, idx_oob)),
        P("jnp.at_get_fill[f32]", lambda a, i: a.at[i].get(mode="fill", fill_value=np.nan),
          (x, idx_oob)),
        P("jnp.at_apply[f32]", lambda a, i: a.at[i].apply(jnp.sin), (x, idx), inexact(F32)),
        P("jnp.at_set_2d_points[u8]", lambda a, i, j: a.at[i, j].set(np.uint8(255)),
          (arr((5, 6), U8, 0, 9), idx, np.array([0, 5, 1, 1], np.int32))),
        P("jnp.at_add_bf16[bf16]", lambda a, i, v: a.at[i].add(v),
          (arr((5, 6), BF16), np.array([1, 3], np.int32), arr((2, 6), BF16))),
        P("segment_sum[f32]", lambda d, s: jax.ops.segment_sum(d, s, num_segments=4),
          (arr((8, 3), F32), np.array([0, 0, 1, 3, 3, 3, 2, 0], np.int32)), Sums(4)),
        P("segment_max[s32]", lambda d, s: jax.ops.segment_max(d, s, num_segments=5),
          (arr((8,), I32), np.array([0, 0, 1, 3, 3, 3, 2, 0], np.int32))),
        P("lax.gather_direct[f32]", lambda a, i: lax.gather(
            a, i, lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                             start_index_map=(0,)),
            slice_sizes=(1, 3), mode=lax.GatherScatterMode.CLIP), (x, idx[:, None])),
        P("lax.scatter_add_direct[s32]", lambda a, i, u: lax.scatter_add(
            a, i, u, lax.ScatterDimensionNumbers(update_window_dims=(1,),
                                                 inserted_window_dims=(0,),
                                                 scatter_dims_to_operand_dims=(0,))),
          (xi, idx[:, None], arr((4, 6), I32))),
        P("lax.scatter_mul_direct[f32]", lambda a, i, u: lax.scatter_mul(
            a, i, u, lax.ScatterDimensionNumbers(update_window_dims=(),
                                                 inserted_window_dims=(0, 1),
                                                 scatter_dims_to_operand_dims=(0, 1))),
          (x, np.array([[0, 1], [4, 5], [0, 1]], np.int32), arr((3,), F32))),
        P("jnp.one_hot[f32]", lambda i: jax.nn.one_hot(i, 5), (idx,)),
    ]


def _reductions() -> list[Program]:
    x = arr((4, 5, 3), F32)
    out = [
        P("jnp.sum[f32]", lambda a: jnp.sum(a, axis=(0, 2)), (x,), Sums(4 * 3 + 1)),
        P("jnp.sum_all[f64]", jnp.sum, (arr((4, 5), F64),), Sums(4 * 5 + 1)),
        P("jnp.sum[bf16]", lambda a: jnp.sum(a, axis=1), (arr((3, 8), BF16),), Sums(8 + 1)),
        P("jnp.sum[s32]", lambda a: jnp.sum(a, axis=0), (arr((6, 5), I32, -99, 99),)),
        P("jnp.sum[u8]", lambda a: jnp.sum(a, axis=1, dtype=np.uint8), (arr((3, 9), U8, 0, 255),)),
        P("jnp.prod[f32]", lambda a: jnp.prod(a, axis=1), (arr((4, 5), F32, 0.5, 1.5),),
          Sums(5 + 1)),
        P("jnp.prod[s64]", lambda a: jnp.prod(a, axis=0), (arr((5, 3), I64, -9, 9),)),
        P("jnp.max[f32]", lambda a: jnp.max(a, axis=2), (x,)),
        P("jnp.max_nan[f32]", lambda a: jnp.max(a, axis=1),
          (np.array([[1, np.nan, 3], [-np.inf, -1, 0]], np.float32),)),
        P("jnp.min[s8]", lambda a: jnp.min(a, axis=0), (arr((4, 5), I8, -128, 127),)),
        P("jnp.min[bf16]", lambda a: jnp.min(a), (arr((4, 5), BF16),)),
        P("jnp.mean[f32]", lambda a: jnp.mean(a, axis=0), (x,), Sums(4 + 1)),  # / 4 exact
        P("jnp.var_std[f64]", lambda a: (jnp.var(a, axis=1), jnp.std(a)), (arr((4, 6), F64),),
          inexact(F64, 10)),
        P("jnp.all_any[pred]", lambda a: (jnp.all(a, axis=1), jnp.any(a, axis=0)),
          (arr((4, 5), BOOL),)),
        P("jnp.argmax[f32]", lambda a: jnp.argmax(a, axis=1), (x,)),
        P("jnp.argmin[s32]", lambda a: jnp.argmin(a, axis=0), (arr((6, 4), I32, 0, 3),)),
        P("jnp.argmax_nan[f32]", lambda a: jnp.argmax(a, axis=1),
          (np.array([[1, np.nan, 3], [2, 5, 5]], np.float32),)),
        P("lax.reduce_xor[u32]", lambda a: lax.reduce_xor(a, (1,)), (arr((3, 7), U32, 0, 10**9),)),
        P("lax.reduce_or[s32]", lambda a: lax.reduce_or(a, (0,)), (arr((3, 7), I32, 0, 10**6),)),
        P("lax.reduce_variadic[f32]", lambda a, b: lax.reduce(
            (a, b), (np.float32(0), np.int32(0)),
            lambda x, y: (x[0] + y[0], jnp.maximum(x[1], y[1])), (1,)),
          (arr((3, 4), F32), arr((3, 4), I32)), inexact(F32, 5)),
        P("jax.nn.logsumexp[f32]", lambda a: jax.nn.logsumexp(a, axis=1), (arr((3, 6), F32),),
          inexact(F32, 5)),
        P("jnp.linalg.norm[f32]", lambda a: jnp.linalg.norm(a, axis=1), (arr((3, 6), F32),),
          inexact(F32, 5)),
        P("jnp.count_nonzero[s32]", lambda a: jnp.count_nonzero(a, axis=0),
          (arr((5, 4), I32, -1, 1),)),
    ]
    for dt in (F32, I32, F64):
        flt = dt.kind == "f"
        a = arr((5, 4), dt, -9, 9) if dt.kind != "f" else arr((5, 4), dt)
        out += [  # prefix sums and products of at most 5 (4) terms, in any association
            P(f"jnp.cumsum[{dtype_id(dt)}]", lambda v: jnp.cumsum(v, axis=0), (a,),
              Sums(5) if flt else None),
            P(f"lax.cumsum_reverse[{dtype_id(dt)}]", lambda v: lax.cumsum(v, axis=1,
                                                                           reverse=True),
              (a,), Sums(4) if flt else None),
            P(f"jnp.cumprod[{dtype_id(dt)}]", lambda v: jnp.cumprod(v, axis=1),
              (a if dt.kind != "f" else arr((5, 4), dt, 0.5, 1.5),), Sums(4) if flt else None),
            P(f"lax.cummax[{dtype_id(dt)}]", lambda v: lax.cummax(v, axis=0), (a,)),
            P(f"lax.cummin_reverse[{dtype_id(dt)}]", lambda v: lax.cummin(v, axis=0,
                                                                           reverse=True), (a,)),
        ]
    out += [
        P("lax.cumlogsumexp[f32]", lambda v: lax.cumlogsumexp(v, axis=1), (arr((3, 6), F32),),
          inexact(F32, 10)),
        P("jnp.cumsum_long[f32]", lambda v: jnp.cumsum(v), (arr((300,), F32),), Sums(300)),
        P("jnp.diff[s32]", lambda v: jnp.diff(v, n=2), (arr((7,), I32),)),
        P("lax.associative_scan[s32]", lambda v: lax.associative_scan(jnp.add, v),
          (arr((9,), I32),)),
    ]
    return out


def _windows() -> list[Program]:
    img = arr((2, 6, 7, 3), F32)

    def pool(op, init, window, strides, padding):  # noqa: ANN001, ANN202
        return lambda a: lax.reduce_window(a, np.array(init, a.dtype), op, window, strides,
                                           padding)

    return [
        P("lax.reduce_window_max[f32]", pool(lax.max, -np.inf, (1, 2, 2, 1), (1, 2, 2, 1),
                                             "VALID"), (img,)),
        P("lax.reduce_window_max_same[f32]", pool(lax.max, -np.inf, (1, 3, 3, 1),
                                                  (1, 1, 1, 1), "SAME"), (img,)),
        P("lax.reduce_window_sum[f32]", pool(lax.add, 0, (1, 3, 2, 1), (1, 2, 1, 1),
                                             ((0, 0), (1, 1), (0, 1), (0, 0))), (img,),
          Sums(3 * 2 + 1)),
        P("lax.reduce_window_min[s32]", pool(lax.min, 2**31 - 1, (2, 3), (1, 2),
                                             ((1, 0), (0, 2))), (arr((5, 7), I32),)),
        P("lax.reduce_window_sum[bf16]", pool(lax.add, 0, (2, 2), (1, 1), "VALID"),
          (arr((4, 5), BF16),), Sums(2 * 2 + 1, acc=BF16)),  # XLA adds in bf16
        P("lax.reduce_window_dilated[f32]", lambda a: lax.reduce_window(
            a, -np.inf, lax.max, (2, 2), (1, 1), "VALID", base_dilation=(2, 1),
            window_dilation=(1, 2)), (arr((4, 6), F32),)),
        P("avg_pool[f64]", lambda a: lax.reduce_window(a, 0.0, lax.add, (1, 2, 2, 1),
                                                       (1, 2, 2, 1), "VALID") / 4.0,
          (arr((1, 4, 4, 2), F64),), Sums(2 * 2 + 1)),  # / 4 exact
        P("max_pool_grad[f32]", jax.grad(lambda a: jnp.sum(lax.reduce_window(
            a, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") ** 2)), (img,),
          inexact(F32)),
    ]


def _sorting() -> list[Program]:
    xf = arr((4, 7), F32)
    xf_nan = xf.copy()
    xf_nan[0, :3] = [np.nan, -0.0, 0.0]
    xf_nan[1, 1] = -np.inf
    xi = arr((4, 7), I32, -5, 5)
    return [
        P("jnp.sort[f32]", lambda a: jnp.sort(a, axis=1), (xf_nan,)),
        P("jnp.sort_axis0[s32]", lambda a: jnp.sort(a, axis=0), (xi,)),
        P("jnp.sort[u8]", jnp.sort, (arr((9,), U8, 0, 255),)),
        P("jnp.sort[bf16]", jnp.sort, (arr((3, 8), BF16),)),
        P("jnp.sort_descending[f64]", lambda a: jnp.sort(a, descending=True),
          (arr((3, 6), F64),)),
        P("jnp.argsort_stable[s32]", lambda a: jnp.argsort(a, axis=1, stable=True), (xi,)),
        P("jnp.argsort[f32]", lambda a: jnp.argsort(a, axis=1), (xf_nan,)),
        P("jnp.argsort_descending[s32]", lambda a: jnp.argsort(a, descending=True, stable=True),
          (arr((10,), I32, 0, 3),)),
        P("lax.sort_multi[s32,f32]", lambda k, v: lax.sort((k, v), dimension=0, num_keys=1),
          (arr((6, 3), I32, 0, 3), arr((6, 3), F32))),
        P("lax.sort_two_keys[s32]", lambda k1, k2, v: lax.sort((k1, k2, v), num_keys=2),
          (arr((9,), I32, 0, 2), arr((9,), I32, 0, 2), arr((9,), I32, 0, 99))),
        P("lax.sort_key_val[f32]", lambda k, v: lax.sort_key_val(k, v), (xf, xi)),
        P("lax.top_k[f32]", lambda a: lax.top_k(a, 3), (xf,)),
        P("lax.top_k_ties[s32]", lambda a: lax.top_k(a, 4), (xi,)),
        P("lax.top_k_nan[f32]", lambda a: lax.top_k(a, 2), (xf_nan,)),
        P("lax.approx_max_k[f32]", lambda a: lax.approx_max_k(a, 2), (xf,)),
        P("lax.approx_min_k_dim0[f32]",
          lambda a: lax.approx_min_k(a, 2, reduction_dimension=0), (xf,)),
        P("jnp.median[f32]", lambda a: jnp.median(a, axis=1), (xf,), inexact(F32)),
        P("jnp.searchsorted[f32]", lambda s, v: jnp.searchsorted(s, v),
          (np.sort(arr((8,), F32)), arr((5,), F32))),
        P("jnp.unique_sized[s32]", lambda a: jnp.unique(a, size=6, fill_value=-1),
          (arr((10,), I32, 0, 4),)),
        P("jnp.percentile[f64]", lambda a: jnp.percentile(a, 30.0), (arr((11,), F64),),
          inexact(F64)),
    ]


def _dot_conv() -> list[Program]:
    out = []
    for dt in (F32, F64, BF16, F16, I32, I8, C64):
        a = arr((3, 5), dt, -4, 4)
        b = arr((5, 4), dt, -4, 4)
        tol = None if dt.kind in "iu" else Sums(5)
        out.append(P(f"jnp.matmul[{dtype_id(dt)}]", jnp.matmul, (a, b), tol))
    out += [
        P("lax.dot_general_batch[f32]", lambda a, b: lax.dot_general(
            a, b, (((2,), (1,)), ((0,), (0,)))), (arr((2, 3, 4), F32), arr((2, 4, 5), F32)),
          Sums(4)),
        P("lax.dot_general_two_contracting[f64]", lambda a, b: lax.dot_general(
            a, b, (((0, 2), (2, 0)), ((), ()))), (arr((3, 2, 4), F64), arr((4, 5, 3), F64)),
          Sums(3 * 4)),
        P("lax.dot_preferred[s8->s32]", lambda a, b: lax.dot(a, b,
                                                            preferred_element_type=np.int32),
          (arr((3, 6), I8, -128, 127), arr((6, 2), I8, -128, 127))),
        P("lax.dot_preferred[bf16->f32]", lambda a, b: lax.dot(
            a, b, preferred_element_type=np.float32), (arr((3, 6), BF16), arr((6, 2), BF16)),
          Sums(6)),
        P("jnp.einsum_bij_bjk[f32]", lambda a, b: jnp.einsum("bij,bjk->bki", a, b),
          (arr((2, 3, 4), F32), arr((2, 4, 2), F32)), Sums(4)),
        P("jnp.einsum_trace_outer[f32]", lambda a, b: jnp.einsum("ii,j->j", a, b),
          (arr((3, 3), F32), arr((4,), F32)), Sums(3 + 1)),  # the trace, times b
        P("jnp.vdot[c64]", jnp.vdot, (arr((6,), C64), arr((6,), C64)), Sums(6)),
        P("jnp.tensordot[f32]", lambda a, b: jnp.tensordot(a, b, axes=([1, 2], [0, 1])),
          (arr((2, 3, 4), F32), arr((3, 4, 2), F32)), Sums(3 * 4)),
        P("jnp.outer[s64]", jnp.outer, (arr((3,), I64), arr((4,), I64))),
    ]
    lhs = arr((2, 3, 7, 6), F32)
    rhs = arr((4, 3, 3, 2), F32)
    tol = Sums(3 * 3 * 2)  # input features x window: a dilated or padded window has fewer
    out += [
        P("lax.conv[f32]", lambda a, b: lax.conv(a, b, (1, 1), "VALID"), (lhs, rhs), tol),
        P("lax.conv_strided_same[f32]", lambda a, b: lax.conv(a, b, (2, 1), "SAME"),
          (lhs, rhs), tol),
        P("lax.conv_dilated[f32]", lambda a, b: lax.conv_general_dilated(
            a, b, (1, 1), ((1, 2), (0, 1)), lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
          (lhs, rhs), tol),
        P("lax.conv_nhwc[f64]", lambda a, b: lax.conv_general_dilated(
            a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
          (arr((1, 5, 5, 2), F64), arr((3, 3, 2, 4), F64)), Sums(3 * 3 * 2)),
        P("lax.conv_groups[f32]", lambda a, b: lax.conv_general_dilated(
            a, b, (1, 1), "VALID", feature_group_count=2),
          (arr((1, 4, 5, 5), F32), arr((6, 2, 2, 2), F32)), Sums(2 * 2 * 2)),
        P("lax.conv_batch_groups[f32]", lambda a, b: lax.conv_general_dilated(
            a, b, (1, 1), "VALID", batch_group_count=2),
          (arr((4, 2, 5, 5), F32), arr((6, 2, 2, 2), F32)), Sums(2 * 2 * 2)),
        P("lax.conv_1d[bf16]", lambda a, b: lax.conv(a, b, (1,), "SAME"),
          (arr((1, 2, 9), BF16), arr((3, 2, 3), BF16)), Sums(2 * 3)),
        P("lax.conv_transpose[f32]", lambda a, b: lax.conv_transpose(
            a, b, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
          (arr((1, 3, 3, 2), F32), arr((3, 3, 2, 3), F32)), Sums(3 * 3 * 2)),
        P("lax.conv_3d[f32]", lambda a, b: lax.conv(a, b, (1, 1, 1), "VALID"),
          (arr((1, 2, 4, 4, 3), F32), arr((2, 2, 2, 2, 2), F32)), Sums(2 * 2 * 2 * 2)),
        P("lax.conv[s32]", lambda a, b: lax.conv(a, b, (1, 1), "VALID"),
          (arr((1, 2, 4, 4), I32), arr((2, 2, 2, 2), I32))),
        # 2 conv(a, b) (exact doubling) back through the transposed convolution: a chain of
        # two contractions, 18 terms, then 4 output features x 3 x 2 window (input) or
        # batch 2 x 5 x 5 output positions (kernel).
        P("conv_grad_wrt_input[f32]", jax.grad(lambda a, b: jnp.sum(
            lax.conv(a, b, (2, 2), "SAME") ** 2)), (arr((1, 3, 6, 6), F32), rhs),
          Sums(18 + 4 * 3 * 2)),
        P("conv_grad_wrt_kernel[f32]", jax.grad(lambda a, b: jnp.sum(
            lax.conv(a, b, (1, 1), "VALID") ** 2), argnums=1), (lhs, rhs), Sums(18 + 2 * 5 * 5)),
    ]
    return out


def programs() -> list[Program]:
    return _shape() + _indexing() + _reductions() + _windows() + _sorting() + _dot_conv()
