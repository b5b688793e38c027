# ruff: noqa: E501  (HLO text lines are written as XLA prints them)
"""print_hlo_module: parse(print(m)) is structurally m, for builder modules, StableHLO modules
(several results) and hand-written HLO covering every attribute form."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.builder import ops
from xlapy.hlo_text import parse_hlo_module, print_hlo_module
from xlapy.stablehlo import parse_module
from xlapy.stablehlo.equality import modules_equal
from xlapy.types import ElementType, Shape

F32 = ElementType.F32


def round_trip(m: xlapy.ir.Module) -> xlapy.ir.Module:  # type: ignore[name-defined]
    text = print_hlo_module(m)
    again = parse_hlo_module(text)
    assert modules_equal(m, again), text
    assert print_hlo_module(again) == text
    return again


def test_builder_module_round_trips_and_runs() -> None:
    b = xlapy.XlaBuilder("f")
    x = ops.Parameter(b, 0, Shape.array(F32, (3, 4)), "x")
    add = xlapy.XlaBuilder("add")
    ops.Add(ops.Parameter(add, 0, Shape.scalar(F32), "a"),
            ops.Parameter(add, 1, Shape.scalar(F32), "b"))
    s = ops.Reduce(b, [ops.Mul(x, ops.ConstantR0(b, np.float32(2)))],
                   [ops.ConstantR0(b, np.float32(0))], add.build(), [1])
    ops.Tuple(b, [s, ops.Transpose(x, [1, 0]), ops.Slice(x, [0, 1], [3, 4], [2, 2])])
    m = b.build().module
    again = round_trip(m)
    arg = np.arange(12, dtype=np.float32).reshape(3, 4)
    ours = xlapy.compile(again)(arg)
    np.testing.assert_array_equal(ours[0], (arg * 2).sum(1))
    np.testing.assert_array_equal(ours[2], arg[0:3:2, 1:4:2])


def test_stablehlo_multi_result_round_trips() -> None:
    m = parse_module("""
func.func @main(%a: tensor<2xf32>, %b: tensor<2xi32>) -> (tensor<2xf32>, tensor<2xi32>) {
  %0:2 = "stablehlo.sort"(%a, %b) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>, %i: tensor<i32>, %j: tensor<i32>):
    %c = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<2xf32>, tensor<2xi32>) -> (tensor<2xf32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<2xf32>, tensor<2xi32>
}""")
    again = round_trip(m)
    assert again.entry_computation().multi_result
    vals, idx = xlapy.compile(again)(np.float32([2, 1]), np.int32([0, 1]))
    np.testing.assert_array_equal(idx, [1, 0])


HEADER = """HloModule all_forms

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%ge (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = pred[] compare(%a, %b), direction=GE
}
"""


@pytest.mark.parametrize("body", [
    "%r = f32[4,5]{0,1} broadcast(%v), dimensions={0}",
    "%r = f32[2,2] reshape(%v)",
    "%r = f32[2] slice(%v), slice={[0:4:2]}",
    "%z = f32[] constant(-0.5)\n  %r = f32[9] pad(%v, %z), padding=1_1_1",
    "%r = f32[4] reduce-window(%v, %c), window={size=2 stride=1 pad=0_1 lhs_dilate=1 "
    "rhs_dilate=1}, to_apply=%add",
    "%r = f32[] reduce(%v, %c), dimensions={0}, to_apply=%add",
    "%s = f32[2] parameter(1)\n  %r = f32[4] select-and-scatter(%v, %s, %c), "
    "window={size=2 stride=2}, select=%ge, scatter=%add",
    "%r = f32[4] sort(%v), dimensions={0}, is_stable=true, to_apply=%ge",
    "%r = f32[4] map(%v, %v), dimensions={0}, to_apply=%add",
    "%k = f32[2,1,3] parameter(1)\n  %x = f32[1,1,4] reshape(%v)\n"
    "  %r = f32[1,3,3] convolution(%x, %k), window={size=2 stride=1 pad=0_0 rhs_reversal=1}, "
    "dim_labels=bf0_0io->bf0, feature_group_count=1",
    "%r = f32[] dot(%v, %v), lhs_contracting_dims={0}, rhs_contracting_dims={0}, "
    "operand_precision={high,high}",
    "%i = s32[2,1] constant({ {0}, {3} })\n  %r = f32[2] gather(%v, %i), offset_dims={}, "
    "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}",
    "%i = s32[2,1] constant({ {0}, {3} })\n  %u = f32[2] constant({1, 2})\n"
    "  %r = f32[4] scatter(%v, %i, %u), update_window_dims={}, inserted_window_dims={0}, "
    "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add",
    "%r = c64[4] fft(%cv), fft_type=FFT, fft_length={4}",
    "%r = f32[4] reduce-precision(%v), exponent_bits=5, mantissa_bits=2",
    "%r = s32[4] iota(), iota_dimension=0",
    "%r = pred[4] compare(%v, %v), direction=NE, type=TOTALORDER",
    "%r = u32[4] bitcast-convert(%v)",
    "%s = u64[2] constant({1, 2})\n  %r = (u64[2], u32[4]) rng-bit-generator(%s), "
    "algorithm=rng_three_fry",
    "%lo = f32[] constant(0)\n  %hi = f32[] constant(1)\n"
    "  %r = f32[3] rng(%lo, %hi), distribution=rng_uniform",
    "%r = f32[4] all-reduce(%v), replica_groups={{0}}, to_apply=%add",
    "%r = f32[4] custom-call(%v), custom_call_target=\"my_target\", backend_config=\"cfg\"",
    "%r = s32[] get-dimension-size(%v), dimensions={0}",
    "%m = f32[2,2] reshape(%v)\n  %r = f32[2,2] cholesky(%m), lower=true",
    "%m = f32[2,2] reshape(%v)\n  %r = f32[2,2] triangular-solve(%m, %m), left_side=true, "
    "lower=true, unit_diagonal=false, transpose_a=TRANSPOSE",
])
def test_attribute_forms_round_trip(body: str) -> None:
    text = (HEADER + "\nENTRY %main {\n  %v = f32[4] parameter(0)\n  %c = f32[] constant(0)\n"
            "  %cv = c64[4] convert(%v)\n  " + body + "\n  ROOT %out = tuple(%r)\n}\n")
    # the ROOT tuple's shape is filled from %r's declared shape
    r_shape = body.rsplit("%r = ", 1)[1].split(" rng-bit")[0].split(" ", 1)[0] \
        if "rng-bit" not in body else "(u64[2], u32[4])"
    text = text.replace("ROOT %out = tuple", f"ROOT %out = ({r_shape}) tuple")
    round_trip(parse_hlo_module(text))
