"""Every simplifier rule: a positive case (fires, same values) and a negative (does not fire)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.passes.algebraic_simplifier import RULES, AlgebraicSimplifier
from xlapy.passes.hlo_builder import HloBuilder, parse_shape
from xlapy.passes.pass_base import run_passes

I = "s32[4]"  # noqa: E741
F = "f32[4]"
P = "pred[4]"
M = "f32[2,3]"

Case = tuple[str, Callable, Callable]


def _c(g: HloBuilder, v: object, like: object) -> object:
    return g.splat(v, like)


CASES: dict[str, Case] = {
    "argmax_pred_rows": ("pred[5,6]", lambda g, a, b: _argmax_rows(g, a),
                         lambda g, a, b: _argmax_rows(g, a, ties_last=True)),
    "add_zero_rhs": (F, lambda g, a, b: g.add(a, _c(g, 0, a)),
                     lambda g, a, b: g.add(a, _c(g, 1, a))),
    "add_zero_lhs": (F, lambda g, a, b: g.add(_c(g, 0, a), a),
                     lambda g, a, b: g.add(_c(g, -0.0, a), a)),
    "sub_zero": (F, lambda g, a, b: g.subtract(a, _c(g, 0, a)),
                 lambda g, a, b: g.subtract(_c(g, 0, a), _c(g, 2, a))),
    "sub_self": (I, lambda g, a, b: g.subtract(a, a), lambda g, a, b: g.subtract(a, b)),
    "zero_sub": (I, lambda g, a, b: g.subtract(_c(g, 0, a), a),
                 lambda g, a, b: g.subtract(_c(g, 1, a), a)),
    "mul_one_rhs": (F, lambda g, a, b: g.multiply(a, _c(g, 1, a)),
                    lambda g, a, b: g.multiply(a, _c(g, 2, a))),
    "mul_one_lhs": (F, lambda g, a, b: g.multiply(_c(g, 1, a), a),
                    lambda g, a, b: g.multiply(b, a)),
    "mul_zero": (I, lambda g, a, b: g.multiply(a, _c(g, 0, a)),
                 lambda g, a, b: g.multiply(a, _c(g, 3, a))),
    "mul_neg_one": (I, lambda g, a, b: g.multiply(a, _c(g, -1, a)),
                    lambda g, a, b: g.multiply(a, _c(g, -2, a))),
    "div_one": (F, lambda g, a, b: g.divide(a, _c(g, 1, a)),
                lambda g, a, b: g.divide(a, _c(g, 3, a))),
    "div_pow2": (F, lambda g, a, b: g.divide(a, _c(g, 4, a)),
                 lambda g, a, b: g.divide(a, _c(g, 3, a))),
    "neg_neg": (F, lambda g, a, b: g.negate(g.negate(a)), lambda g, a, b: g.negate(g.abs(a))),
    "not_not": (P, lambda g, a, b: g.op("not", g.op("not", a)),
                lambda g, a, b: g.op("not", a)),
    "abs_abs": (F, lambda g, a, b: g.abs(g.abs(a)), lambda g, a, b: g.abs(g.negate(b))
                if False else g.abs(g.sign(a))),
    "abs_neg": (F, lambda g, a, b: g.abs(g.negate(a)), lambda g, a, b: g.abs(a)),
    "sub_neg": (F, lambda g, a, b: g.subtract(a, g.negate(b)), lambda g, a, b: g.subtract(a, b)),
    "add_neg_rhs": (F, lambda g, a, b: g.add(a, g.negate(b)), lambda g, a, b: g.add(a, b)),
    "add_neg_lhs": (F, lambda g, a, b: g.add(g.negate(a), b), lambda g, a, b: g.add(g.abs(a), b)),
    "mul_neg_neg": (F, lambda g, a, b: g.multiply(g.negate(a), g.negate(b)),
                    lambda g, a, b: g.multiply(g.negate(a), b)),
    "neg_sub": (F, lambda g, a, b: g.negate(g.subtract(a, b)), lambda g, a, b: g.negate(
        g.add(a, b))),
    "max_self": (F, lambda g, a, b: g.maximum(a, a), lambda g, a, b: g.maximum(a, b)),
    "min_self": (F, lambda g, a, b: g.minimum(a, a), lambda g, a, b: g.minimum(a, b)),
    "max_lowest": (F, lambda g, a, b: g.maximum(a, _c(g, -np.inf, a)),
                   lambda g, a, b: g.maximum(a, _c(g, -1e30, a))),
    "min_highest": (I, lambda g, a, b: g.minimum(a, _c(g, 2**31 - 1, a)),
                    lambda g, a, b: g.minimum(a, _c(g, 2**31 - 2, a))),
    "and_self": (I, lambda g, a, b: g.op("and", a, a), lambda g, a, b: g.op("and", a, b)),
    "or_self": (I, lambda g, a, b: g.op("or", a, a), lambda g, a, b: g.op("or", a, b)),
    "xor_self": (I, lambda g, a, b: g.xor(a, a), lambda g, a, b: g.xor(a, b)),
    "and_true": (P, lambda g, a, b: g.op("and", a, _c(g, True, a)),
                 lambda g, a, b: g.op("and", a, b)),
    "and_false": (P, lambda g, a, b: g.op("and", a, _c(g, False, a)),
                  lambda g, a, b: g.op("and", _c(g, False, a), b) if False else g.op("or", a, b)),
    "or_false": (P, lambda g, a, b: g.op("or", a, _c(g, False, a)),
                 lambda g, a, b: g.op("or", a, b)),
    "or_true": (P, lambda g, a, b: g.op("or", a, _c(g, True, a)),
                lambda g, a, b: g.op("and", a, _c(g, True, a)) if False else g.xor(a, b)),
    "pow_one": (F, lambda g, a, b: g.power(a, _c(g, 1, a)),
                lambda g, a, b: g.power(a, _c(g, 3, a))),
    "pow_zero": (F, lambda g, a, b: g.power(a, _c(g, 0, a)),
                 lambda g, a, b: g.power(a, _c(g, 0.5, a))),
    "pow_two": (F, lambda g, a, b: g.power(a, _c(g, 2, a)),
                lambda g, a, b: g.power(a, b)),
    "pow_two_wide": ("f64[4]", lambda g, a, b: g.power(a, _c(g, 2, a)),
                     lambda g, a, b: g.power(a, b)),
    "pow_half": (F, lambda g, a, b: g.power(g.abs(a), _c(g, 0.5, a)),
                 lambda g, a, b: g.power(g.sqrt(g.abs(a)), _c(g, 0.5, a))),
    "pow_half_wide": ("f64[4]", lambda g, a, b: g.power(g.multiply(a, a), _c(g, 0.5, a)),
                      lambda g, a, b: g.power(g.multiply(a, b), _c(g, 0.5, a))),
    "sign_sign": (F, lambda g, a, b: g.sign(g.sign(a)), lambda g, a, b: g.sign(g.abs(a))),
    "floor_floor": (F, lambda g, a, b: g.floor(g.floor(a)), lambda g, a, b: g.floor(g.ceil(a))),
    "ceil_ceil": (F, lambda g, a, b: g.ceil(g.ceil(a)), lambda g, a, b: g.ceil(g.floor(a))),
    "select_true": (F, lambda g, a, b: g.select(g.splat(True, "pred[4]"), a, b),
                    lambda g, a, b: g.select(g.cmp(a, b, "LT"), a, b)),
    "select_false": (F, lambda g, a, b: g.select(g.splat(False, "pred[4]"), a, b),
                     lambda g, a, b: g.select(g.cmp(a, b, "GT"), a, b)),
    "select_same": (F, lambda g, a, b: g.select(g.cmp(a, b, "LT"), a, a),
                    lambda g, a, b: g.select(g.cmp(a, b, "LT"), b, a)),
    "select_not": (F, lambda g, a, b: g.select(g.op("not", g.cmp(a, b, "LT")), a, b),
                   lambda g, a, b: g.select(g.cmp(a, b, "GE"), a, b)),
    "compare_self_eq": (I, lambda g, a, b: g.cmp(a, a, "EQ"), lambda g, a, b: g.cmp(a, b, "EQ")),
    "compare_self_ne": (I, lambda g, a, b: g.cmp(a, a, "NE"), lambda g, a, b: g.cmp(a, a, "LT")),
    # JAX's index wrap: an iota of [4] (0..3) is never < 0, and one of [2, 2] along its first
    # dimension (0..1), reshaped (the range stays), is always <= [3, 1, 1, 2]; a parameter,
    # or 2 within the iota's range, decides nothing
    "compare_range": (I, lambda g, a, b: g.select(
        g.cmp(g.iota(shape=parse_shape(I), iota_dimension=0), g.splat(0, I), "LT"), a,
        g.select(g.cmp(g.reshape(g.iota(shape=parse_shape("s32[2,2]"), iota_dimension=0),
                                 shape=(4,)), g.const(np.array([3, 1, 1, 2], np.int32), "s32"),
                       "LE"), b, g.add(a, b))),
        lambda g, a, b: g.select(g.cmp(g.iota(shape=parse_shape(I), iota_dimension=0),
                                       g.splat(2, I), "LT"), a, g.select(
            g.cmp(a, g.splat(0, I), "LT"), b, a))),
    # a scalar parameter broadcast, so folding cannot do it instead
    "op_of_scalar_broadcasts": (F, lambda g, a, b: g.multiply(
        g.bcast(g.reshape(g.slice(a, start_indices=(1,), limit_indices=(2,), strides=(1,)),
                          shape=()), (4,), ()), g.splat(3.0, a)),
        lambda g, a, b: g.multiply(g.bcast(g.slice(a, start_indices=(1,), limit_indices=(2,),
                                                   strides=(1,)), (4,), (0,)), g.splat(3.0, a))),
    # a costly op of a broadcast: once per source value, then broadcast (with a splat)
    "sink_broadcast": (F, lambda g, a, b: g.divide(g.sine(g.bcast(g.slice(
        a, start_indices=(1,), limit_indices=(2,), strides=(1,)), (4,), (0,))), g.splat(3.0, a)),
        lambda g, a, b: g.divide(g.bcast(g.slice(a, start_indices=(1,), limit_indices=(2,),
                                                 strides=(1,)), (4,), (0,)), b)),
    "convert_same": (F, lambda g, a, b: g.convert(a, new_element_type=a.shape.element_type),
                     lambda g, a, b: g.convert(g.convert(a, new_element_type=_s32()),
                                               new_element_type=a.shape.element_type)),
    "convert_roundtrip": (I, lambda g, a, b: g.convert(g.convert(a, new_element_type=_s64()),
                                                       new_element_type=_s32()),
                          lambda g, a, b: g.convert(g.convert(a, new_element_type=_f16()),
                                                    new_element_type=_s32())),
    "bitcast_same": (F, lambda g, a, b: g.bitcast_convert(a, new_element_type=_f32()),
                     lambda g, a, b: g.bitcast_convert(g.bitcast_convert(
                         a, new_element_type=_s32()), new_element_type=_f32())),
    "reshape_same": (M, lambda g, a, b: g.reshape(a, shape=(2, 3)),
                     lambda g, a, b: g.reshape(g.reshape(a, shape=(6,)), shape=(3, 2))
                     if False else g.reshape(a, shape=(3, 2))),
    "reshape_reshape": (M, lambda g, a, b: g.reshape(g.reshape(a, shape=(6,)), shape=(3, 2)),
                        lambda g, a, b: g.reshape(g.transpose(a, permutation=(1, 0)),
                                                  shape=(6,))),
    "reshape_broadcast_scalar": (M, lambda g, a, b: g.reshape(g.splat(2.0, a), shape=(6,)),
                                 lambda g, a, b: g.reshape(g.add(a, b), shape=(6,))),
    "transpose_identity": (M, lambda g, a, b: g.transpose(a, permutation=(0, 1)),
                           lambda g, a, b: g.transpose(a, permutation=(1, 0))),
    "transpose_transpose": (M, lambda g, a, b: g.transpose(g.transpose(a, permutation=(1, 0)),
                                                           permutation=(1, 0)),
                            lambda g, a, b: g.transpose(g.negate(a), permutation=(1, 0))),
    "transpose_concat": (F, lambda g, a, b: g.transpose(g.concatenate(
        g.bcast(a, (1, 4), (1,)), g.bcast(g.negate(b), (1, 4), (1,)), g.bcast(a, (2, 4), (1,)),
        dimension=0), permutation=(1, 0)),
        lambda g, a, b: g.transpose(g.concatenate(
            g.op("reshape", a, shape=(1, 4)), g.bcast(b, (1, 4), (1,)), dimension=0),
            permutation=(1, 0))),
    "transpose_broadcast_scalar": (M, lambda g, a, b: g.transpose(g.splat(3.0, a),
                                                                  permutation=(1, 0)),
                                   lambda g, a, b: g.transpose(a, permutation=(1, 0))),
    "broadcast_identity": (M, lambda g, a, b: g.bcast(a, (2, 3), (0, 1)),
                           lambda g, a, b: g.bcast(a, (4, 2, 3), (1, 2))),
    "broadcast_broadcast": (F, lambda g, a, b: g.bcast(g.bcast(a, (4, 2), (0,)), (3, 4, 2),
                                                       (1, 2)),
                            lambda g, a, b: g.bcast(g.negate(a), (4, 2), (0,))),
    "slice_full": (M, lambda g, a, b: g.slice(a, start_indices=(0, 0), limit_indices=(2, 3),
                                              strides=(1, 1)),
                   lambda g, a, b: g.slice(a, start_indices=(0, 1), limit_indices=(2, 3),
                                           strides=(1, 1))),
    "slice_slice": (M, lambda g, a, b: g.slice(g.slice(a, start_indices=(0, 1),
                                                       limit_indices=(2, 3), strides=(1, 1)),
                                               start_indices=(1, 0), limit_indices=(2, 2),
                                               strides=(1, 2)),
                    lambda g, a, b: g.slice(g.negate(a), start_indices=(1, 0),
                                            limit_indices=(2, 2), strides=(1, 1))),
    # columns 3 and 5 of [a | -b]: -b's 0 and 2; a slice across both keeps the concatenate
    "slice_concat": (M, lambda g, a, b: g.slice(g.concatenate(a, g.negate(b), dimension=1),
                                                start_indices=(0, 3), limit_indices=(2, 6),
                                                strides=(1, 2)),
                     lambda g, a, b: g.slice(g.concatenate(a, g.negate(b), dimension=1),
                                             start_indices=(0, 2), limit_indices=(2, 4),
                                             strides=(1, 1))),
    "slice_broadcast_scalar": (M, lambda g, a, b: g.slice(g.splat(1.5, a), start_indices=(0, 1),
                                                          limit_indices=(2, 3), strides=(1, 1)),
                               lambda g, a, b: g.slice(a, start_indices=(0, 1),
                                                       limit_indices=(2, 3), strides=(1, 1))),
    "pad_nothing": (M, lambda g, a, b: g.pad(a, g.const(0.0), edge_padding_low=(0, 0),
                                             edge_padding_high=(0, 0), interior_padding=(0, 0)),
                    lambda g, a, b: g.pad(a, g.const(0.0), edge_padding_low=(0, 1),
                                          edge_padding_high=(0, 0), interior_padding=(0, 0))),
    "concat_single": (F, lambda g, a, b: g.concatenate(a, dimension=0),
                      lambda g, a, b: g.concatenate(a, b, dimension=0)),
    "concat_flatten": (F, lambda g, a, b: g.concatenate(g.concatenate(a, b, dimension=0), a,
                                                        dimension=0),
                       lambda g, a, b: g.concatenate(a, b, a, dimension=0)),
    "concat_drop_empty": (F, lambda g, a, b: g.concatenate(
        a, g.slice(b, start_indices=(0,), limit_indices=(0,), strides=(1,)), b, dimension=0),
        lambda g, a, b: g.concatenate(a, g.slice(b, start_indices=(0,), limit_indices=(1,),
                                                 strides=(1,)), dimension=0)),
    "reverse_reverse": (M, lambda g, a, b: g.reverse(g.reverse(a, dimensions=(1,)),
                                                     dimensions=(1,)),
                        lambda g, a, b: g.reverse(g.reverse(a, dimensions=(1,)),
                                                  dimensions=(0,))),
    "reverse_trivial": ("f32[1,3]", lambda g, a, b: g.reverse(a, dimensions=(0,)),
                        lambda g, a, b: g.reverse(a, dimensions=(1,))),
    "gte_tuple": (F, lambda g, a, b: g.get_tuple_element(g.tuple(a, b), index=1),
                  lambda g, a, b: g.get_tuple_element(g.get_tuple_element(
                      g.tuple(g.tuple(a, b), a), index=0) if False else g.tuple(a, b), index=0)
                  if False else g.negate(a)),
    "dynamic_slice_broadcast_scalar": (M, lambda g, a, b: g.dynamic_slice(
        g.splat(2.5, a), g.const(1, "s32"), g.const(1, "s32"), slice_sizes=(1, 2)),
        lambda g, a, b: g.dynamic_slice(a, g.const(1, "s32"), g.const(1, "s32"),
                                        slice_sizes=(1, 2))),
    "dynamic_slice_constant": (F, lambda g, a, b: g.dynamic_slice(
        a, g.const(3, "s32"), slice_sizes=(2,)),
        lambda g, a, b: g.dynamic_slice(a, g.convert(g.slice(
            g.convert(a, new_element_type=_s32()), start_indices=(0,), limit_indices=(1,),
            strides=(1,)), new_element_type=_s32()) if False else g.const(1, "s32") if False
            else g.reshape(g.slice(g.convert(a, new_element_type=_s32()), start_indices=(0,),
                                   limit_indices=(1,), strides=(1,)), shape=()),
            slice_sizes=(2,))),
    # one row of b added into row 1 of a; the updates reshaped to [1, 1, 3] (XLA's form)
    "scatter_unit_window": (M, lambda g, a, b: _scatter_row(g, a, b, True),
                            lambda g, a, b: _scatter_row(g, a, b, False)),
    # max over a dimension of extent 1 of [2, 1, 3]; not over extent 2
    "reduce_unit_dims": (M, lambda g, a, b: g.reduce(
        g.reshape(a, shape=(2, 1, 3)), g.const(0.5, "f32"), [1], g.scalar_fn("maximum")),
        lambda g, a, b: g.reshape(g.reduce(a, g.const(0.5, "f32"), [0],
                                           g.scalar_fn("maximum")), shape=(1, 3))),
    # a sum over the last dimension of [1, 6, 1] (the trailing extent-1 one dropped); one
    # over the middle dimension of [1, 6, 1] (a leading one only) stays
    "reduce_squeeze_units": (M, lambda g, a, b: g.reduce(
        g.reshape(a, shape=(6, 1)), g.const(0.5, "f32"), [0], g.scalar_fn("add")),
        lambda g, a, b: g.reduce(g.reshape(a, shape=(1, 6)), g.const(0.5, "f32"), [1],
                                 g.scalar_fn("add"))),
    # a 2x2 window summing a [2, 3] padded by one and dilated by one with zeros; a pad of
    # 1.0 (not add's identity) stays
    "reduce_window_pad": (M, lambda g, a, b: _window_of_pad(g, a, 0.0),
                          lambda g, a, b: _window_of_pad(g, a, 1.0)),
    # each 2x3 window of a [2, 3] dilated (2, 3) and padded (1, 2) holds one element: an
    # upsampling; a padding of (0, 1) along the first dimension does not
    "dot_outer": (M, lambda g, a, b: g.dot_general(a, b, lhs_batching_dimensions=(0,),
                                                    rhs_batching_dimensions=(0,)),
                  lambda g, a, b: g.dot_general(a, b, lhs_batching_dimensions=(0,),
                                                rhs_batching_dimensions=(0,),
                                                lhs_contracting_dimensions=(1,),
                                                rhs_contracting_dimensions=(1,))),
    # [2, 3] x [2, 3] batched over dim 0, transposed to (rhs free, batch, lhs free); one with
    # a contracting dimension stays a dot
    "transpose_dot_outer": (M, lambda g, a, b: g.transpose(g.dot_general(
        a, b, lhs_batching_dimensions=(0,), rhs_batching_dimensions=(0,)),
        permutation=(2, 0, 1)),
        lambda g, a, b: g.transpose(g.dot_general(
            a, b, lhs_batching_dimensions=(0,), rhs_batching_dimensions=(0,),
            lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(1,)),
            permutation=(0,))),
    # (a^T b)^T as b^T a (one operand read transposed either way); (a b^T)^T stays: as
    # b a^T... (b^T)^T a^T both operands would be read transposed
    "transpose_dot_swap": (M, lambda g, a, b: g.transpose(g.dot_general(
        a, b, lhs_contracting_dimensions=(0,), rhs_contracting_dimensions=(0,)),
        permutation=(1, 0)),
        lambda g, a, b: g.transpose(g.dot_general(
            a, g.transpose(b, permutation=(1, 0)), lhs_contracting_dimensions=(1,),
            rhs_contracting_dimensions=(0,)), permutation=(1, 0))),
    "reduce_window_upsample": (M, lambda g, a, b: _upsample(g, a, (1, 1)),
                               lambda g, a, b: _upsample(g, a, (0, 1))),
    "dus_full": (F, lambda g, a, b: g.dynamic_update_slice(a, b, g.const(0, "s32")),
                 lambda g, a, b: g.dynamic_update_slice(a, g.slice(
                     b, start_indices=(0,), limit_indices=(2,), strides=(1,)),
                     g.const(1, "s32"))),
}


def _window_of_pad(g: HloBuilder, a: object, value: float, op: str = "add",
                   init: float = 0.0) -> object:
    padded = g.pad(a, g.const(value, "f32"), edge_padding_low=(1, 0),
                   edge_padding_high=(1, 2), interior_padding=(1, 1))
    return g.op("reduce_window", padded, g.const(init, "f32"), called=[g.scalar_fn(op)],
                window_dimensions=(2, 2), window_strides=(1, 2))


def _upsample(g: HloBuilder, a: object, pad0: tuple[int, int], op: str = "add",
              init: float = 0.0) -> object:
    return g.op("reduce_window", a, g.const(init, "f32"), called=[g.scalar_fn(op)],
                window_dimensions=(2, 3), window_strides=(1, 1), base_dilations=(2, 3),
                window_dilations=(1, 1), padding=(pad0, (2, 2)))


def _scatter_row(g: HloBuilder, a: object, b: object, reshaped: bool) -> object:
    from xlapy.ops.indexing_scatter import ScatterDimensionNumbers

    row = g.slice(b, start_indices=(0, 0), limit_indices=(1, 3), strides=(1, 1))
    idx = g.reshape(g.const(1, "s32"), shape=(1, 1))
    if reshaped:
        upd, dn = g.reshape(row, shape=(1, 1, 3)), ScatterDimensionNumbers((1, 2), (), (0,), 1)
    else:
        upd, dn = row, ScatterDimensionNumbers((1,), (0,), (0,), 1)
    return g.scatter(a, idx, upd, called=[g.scalar_fn("add")], scatter_dimension_numbers=dn)


def _argmax_rows(g: HloBuilder, a: object, ties_last: bool = False) -> object:
    """jnp.argmax's variadic reduce of pred[5, 6] over dimension 0 (`ties_last`: a region
    that keeps the larger index on ties, which the rule must not take)."""
    def region(e: object, av: object, ai: object, ev: object, ei: object) -> object:
        gt = e.cmp(av, ev, "GT")
        take = e.op("or", gt, e.op("and", e.cmp(av, ev, "EQ"),
                                   e.cmp(ai, ei, "GT" if ties_last else "LT")))
        return e.tuple(e.select(gt, av, ev), e.select(take, ai, ei))

    body = g.sub("argmax", ["pred[]", "s32[]", "pred[]", "s32[]"], region)
    ids = g.op("iota", shape=parse_shape("s32[5,6]"), iota_dimension=0)
    r = g.op("reduce", a, ids, g.const(False, "pred"), g.const(0, "s32"), called=[body],
             dimensions=(0,))
    return g.op("get_tuple_element", r, index=1)


def _et(name: str) -> object:
    from xlapy.types import from_hlo_name

    return from_hlo_name(name)


def _s32() -> object:
    return _et("s32")


def _s64() -> object:
    return _et("s64")


def _f16() -> object:
    return _et("f16")


def _f32() -> object:
    return _et("f32")


def _build(shape: str, fn: Callable) -> tuple:
    g = HloBuilder()
    a = g.param(shape)
    b = g.param(shape)
    return g.build(fn(g, a, b)), a.shape


def _inputs(shape: object) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    dims = shape.dimensions
    if shape.element_type.is_pred:
        return [rng.random(dims) < 0.5, rng.random(dims) < 0.5]
    if shape.element_type.is_integer:
        return [rng.integers(-50, 50, dims).astype(shape.dtype) for _ in range(2)]
    return [(rng.standard_normal(dims) * 3).astype(shape.dtype) for _ in range(2)]


def test_every_rule_has_cases() -> None:
    assert len(RULES) >= 40
    assert {r.name for r in RULES} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_fires_and_preserves_values(name: str) -> None:
    shape, pos, _ = CASES[name]
    module, pshape = _build(shape, pos)
    args = _inputs(pshape)
    before = Interpreter().run_module(module, args)
    simp = AlgebraicSimplifier()
    assert run_passes(module, [simp])
    assert simp.fired[name] >= 1, dict(simp.fired)
    after = Interpreter().run_module(module, args)
    np.testing.assert_array_equal(np.asarray(after), np.asarray(before))


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_does_not_fire_on_negative(name: str) -> None:
    shape, _, neg = CASES[name]
    module, _ = _build(shape, neg)
    simp = AlgebraicSimplifier()
    run_passes(module, [simp])
    assert simp.fired[name] == 0


def test_exact_only_skips_float_inexact_rules() -> None:
    module, _ = _build(F, CASES["add_zero_rhs"][1])
    simp = AlgebraicSimplifier(exact_only=True)
    assert not run_passes(module, [simp])
    module, _ = _build(I, CASES["add_zero_rhs"][1])
    assert run_passes(module, [AlgebraicSimplifier(exact_only=True)])


@pytest.mark.parametrize("t", ["f32", "bf16", "f16"])
def test_pow_two_is_exact_on_narrow_floats(t: str) -> None:
    """pow(A, 2) => A * A fires under exact_only for floats of 32 bits or fewer (their pow is
    the f64 function rounded once, where A^2 is exact) and keeps the interpreter's bits: on
    squares that are f32 ties (odd 13-bit significands), denormal squares, inf and NaN."""
    module, pshape = _build(f"{t}[16]", CASES["pow_two"][1])
    odd = np.array([4097, 4099, 5793, -4097], np.float64) * 2.0 ** -12
    x = np.concatenate([odd, [1e-20, -3e-23, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e19, 3.0,
                              0.1, -7.5, 65504.0]]).astype(pshape.dtype)
    _fires_keeping_bits(module, [x, np.ones(16, pshape.dtype)], "pow_two")


def _fires_keeping_bits(module: Module, args: list[np.ndarray], rule: str) -> None:
    """`rule` fires once under exact_only and the interpreter's bits on `args` stay."""
    before = Interpreter().run_module(module, args)
    simp = AlgebraicSimplifier(exact_only=True)
    assert run_passes(module, [simp]) and simp.fired[rule] == 1
    after = Interpreter().run_module(module, args)
    np.testing.assert_array_equal(np.asarray(after).view(np.uint8),
                                  np.asarray(before).view(np.uint8))


def test_pow_half_is_exact_on_f32() -> None:
    """pow(A, 0.5) => sqrt(A) fires under exact_only for f32 A >= 0 that is never -0 (here
    exp(x) + |x|) and keeps the interpreter's bits on 1M such arguments (x spread by a grid) and
    on inf, NaN, +-0, denormal and huge ones (every f32 of [1, 4), both exponent parities,
    was checked once outside the suite: no difference)."""
    g = HloBuilder()
    a = g.param("f32[1048576]")
    g.param("f32[1048576]")
    arg = g.add(g.exponential(a), g.abs(a))
    module = g.build(g.power(arg, _c(g, 0.5, arg)))
    grid = np.arange(0x3F800000, 0x40800000, 16, dtype=np.uint32).view(np.float32)
    x = np.log(grid - 1 + 1e-30).astype(np.float32)
    x[:12] = [-np.inf, np.inf, np.nan, 0.0, -0.0, -87.0, -104.0, 88.7, 1e30, -1e30, 1e-40, 3.0]
    _fires_keeping_bits(module, [x, np.ones_like(x)], "pow_half")


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum"])
def test_reduce_unit_dims_is_exact_on_special_values(op: str) -> None:
    """The one application of the reducer keeps -0 + 0 = +0, NaN, inf, denormals."""
    g = HloBuilder()
    a = g.param("f32[8,1]")
    init = {"add": -0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}[op]
    module = g.build(g.reduce(a, g.const(init, "f32"), [1], g.scalar_fn(op)))
    x = np.array([[-0.0], [0.0], [np.nan], [np.inf], [-np.inf], [1e-40], [-3.5], [2.0]],
                 np.float32)
    before = np.asarray(Interpreter().run_module(module, [x]))
    simp = AlgebraicSimplifier(exact_only=True)
    assert run_passes(module, [simp]) and simp.fired["reduce_unit_dims"] == 1
    after = np.asarray(Interpreter().run_module(module, [x]))
    np.testing.assert_array_equal(after.view(np.uint32), before.view(np.uint32))


@pytest.mark.parametrize(("op", "ident"), [("add", 0.0), ("maximum", -np.inf),
                                           ("minimum", np.inf), ("multiply", 1.0)])
def test_reduce_window_pad_is_exact_on_special_values(op: str, ident: float) -> None:
    g = HloBuilder()
    a = g.param("f32[3,4]")
    module = g.build(_window_of_pad(g, a, ident, op, ident))
    x = np.array([[-0.0, 0.0, np.nan, 1.0], [np.inf, -np.inf, 1e-40, -2.5],
                  [3.0, -0.0, 7.0, -1e30]], np.float32)
    before = np.asarray(Interpreter().run_module(module, [x]))
    simp = AlgebraicSimplifier(exact_only=True)
    assert run_passes(module, [simp]) and simp.fired["reduce_window_pad"] == 1
    after = np.asarray(Interpreter().run_module(module, [x]))
    np.testing.assert_array_equal(after.view(np.uint32), before.view(np.uint32))


@pytest.mark.parametrize(("op", "ident"), [("add", 0.0), ("maximum", -np.inf),
                                           ("minimum", np.inf), ("multiply", 1.0)])
def test_reduce_window_upsample_is_exact_on_special_values(op: str, ident: float) -> None:
    """JAX's average-pool gradient form: reduce_window over pad(A, identity, interior w - 1,
    edges w - 1) becomes op(identity, A repeated): -0, NaN, inf and denormals as before."""
    g = HloBuilder()
    a = g.param("f32[3,4]")
    padded = g.pad(a, g.const(ident, "f32"), edge_padding_low=(1, 2),
                   edge_padding_high=(1, 2), interior_padding=(1, 2))
    module = g.build(g.op("reduce_window", padded, g.const(ident, "f32"),
                          called=[g.scalar_fn(op)], window_dimensions=(2, 3),
                          window_strides=(1, 1)))
    x = np.array([[-0.0, 0.0, np.nan, 1.0], [np.inf, -np.inf, 1e-40, -2.5],
                  [3.0, -0.0, 7.0, -1e30]], np.float32)
    before = np.asarray(Interpreter().run_module(module, [x]))
    assert before.shape == (6, 12)
    simp = AlgebraicSimplifier(exact_only=True)
    assert run_passes(module, [simp])  # reduce_window_pad, then (next sweep) the upsample
    while run_passes(module, [simp]):
        pass
    assert simp.fired["reduce_window_pad"] == simp.fired["reduce_window_upsample"] == 1
    assert not any(i.opcode == "reduce_window" for i in module.entry.instructions)
    after = np.asarray(Interpreter().run_module(module, [x]))
    np.testing.assert_array_equal(after.view(np.uint32), before.view(np.uint32))


@pytest.mark.parametrize(("shape", "dims"), [("f32[4096,1]", [0]), ("f32[1,64,1,64,1]", [1, 3]),
                                             ("f32[8,512,1,1]", [1, 2]), ("f32[300,1]", [0, 1])])
def test_reduce_squeeze_units_keeps_the_sums_bits(shape: str, dims: list[int]) -> None:
    """The interpreter's sum before and after is bit for bit the same (the same elements in
    the same order)."""
    g = HloBuilder()
    a = g.param(shape)
    module = g.build(g.reduce(a, g.const(-0.0, "f32"), dims, g.scalar_fn("add")))
    x = np.random.default_rng(0).standard_normal(
        module.entry.parameters[0].shape.dimensions).astype(np.float32)
    before = np.asarray(Interpreter().run_module(module, [x]))
    simp = AlgebraicSimplifier(exact_only=True)
    assert run_passes(module, [simp]) and simp.fired["reduce_squeeze_units"] == 1
    assert module.entry.root.shape.dimensions == before.shape
    after = np.asarray(Interpreter().run_module(module, [x]))
    np.testing.assert_array_equal(after.view(np.uint32), before.view(np.uint32))
