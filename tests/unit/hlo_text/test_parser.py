# ruff: noqa: E501  (HLO text lines are written as XLA prints them)
"""HLO text parsing: module header, sections, shapes and layouts, operands, every attribute
form read into the op's attrs dataclass, constants, and out-of-order instructions."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.errors import ParseError
from xlapy.hlo_text import is_hlo_text, parse_hlo_module
from xlapy.ir import Instruction, Module
from xlapy.ops.attrs import ComparisonDirection, ComparisonType, Precision
from xlapy.types import ElementType, Layout, Shape


def entry_of(body: str, params: str = "", extra: str = "") -> Module:
    return parse_hlo_module(f"HloModule m\n{extra}\nENTRY %main {params}{{\n{body}\n}}\n")


def root_of(body: str, extra: str = "") -> Instruction:
    comp = entry_of(body, extra=extra).entry_computation()
    assert comp.root is not None
    return comp.root


ADD = "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n" \
      "  ROOT %s = f32[] add(%a, %b)\n}\n"


def test_module_header_sections_comments_and_entry() -> None:
    text = """/* leading comment */ HloModule jit_f, is_scheduled=true, replica_count=2,
    entry_computation_layout={(f32[2]{0})->f32[2]{0}}, num_partitions=1

FileNames
1 "/tmp/x.py"

StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY %main.3 (x.1: f32[2]) -> f32[2] {
  %x.1 = f32[2]{0} parameter(0), metadata={op_name="x" stack_frame_id=1}
  ROOT %neg = f32[2]{0} negate(f32[2]{0} %x.1), metadata={op_name="neg"}
}
"""
    assert is_hlo_text(text) and not is_hlo_text("module {}")
    m = parse_hlo_module(text)
    assert m.name == "jit_f" and m.num_replicas == 2
    root = m.entry_computation().root
    assert root is not None and root.opcode == "negate"
    assert root.meta["hlo_attrs"]["metadata"] == '{op_name="neg"}'


def test_shapes_layouts_tiling_tuples_tokens() -> None:
    comp = entry_of("""  p = (f32[2,3]{0,1:T(8,128)}, s32[], token[]) parameter(0)
  a = f32[2,3]{0,1} get-tuple-element(p), index=0
  ROOT t = (f32[2,3], s32[]) tuple(a, get-tuple-element.1)
  get-tuple-element.1 = s32[] get-tuple-element(p), index=1""").entry_computation()
    p = comp.parameters[0]
    assert p.shape.tuple_shapes[0].layout == Layout((0, 1))
    assert p.shape.tuple_shapes[2] == Shape.token()
    assert comp.root is not None and comp.root.shape.is_tuple


def test_constants() -> None:
    comp = entry_of("""  a = f32[2,2] constant({ {1, 2.5}, {-inf, nan} })
  b = s8[3] constant({-128, 0, 127})
  c = pred[2] constant({true, false})
  d = c64[] constant((1, -2))
  e = u64[] constant(18446744073709551615)
  f = bf16[] constant(1.5)
  ROOT t = (f32[2,2], s8[3], pred[2], c64[], u64[], bf16[]) tuple(a, b, c, d, e, f)""")
    values = {i.name: i.attrs.literal.to_numpy() for i in comp.entry_computation().instructions
              if i.opcode == "constant"}
    np.testing.assert_array_equal(values["a"][0], [1, 2.5])
    assert np.isneginf(values["a"][1, 0]) and np.isnan(values["a"][1, 1])
    assert values["b"].dtype == np.int8 and list(values["b"]) == [-128, 0, 127]
    assert list(values["c"]) == [True, False]
    assert values["d"] == np.complex64(1 - 2j)
    assert values["e"] == np.uint64(2**64 - 1)
    assert float(values["f"]) == 1.5


@pytest.mark.parametrize("line,field,value", [
    ("ROOT r = f32[3,2] broadcast(v), dimensions={0}", "broadcast_dimensions", (0,)),
    ("ROOT r = f32[3] slice(w), slice={[1:7:2]}", "limit_indices", (7,)),
    ("ROOT r = f32[2] slice(v), slice={[0:2]}", "strides", (1,)),
    ("ROOT r = f32[6] pad(v, z), padding=1_2", "edge_padding_high", (2,)),
    ("ROOT r = f32[8] pad(v, z), padding=1_2_1", "interior_padding", (1,)),
    ("ROOT r = f32[3] reverse(v), dimensions={0}", "dimensions", (0,)),
    ("ROOT r = f32[2] dynamic-slice(v, i), dynamic_slice_sizes={2}", "slice_sizes", (2,)),
    ("ROOT r = f32[11] concatenate(v, w), dimensions={0}", "dimension", 0),
    ("ROOT r = s32[4,3] iota(), iota_dimension=1", "iota_dimension", 1),
    ("ROOT r = pred[3] compare(v, v), direction=LT, type=TOTALORDER", "compare_type",
     ComparisonType.TOTALORDER),
    # Newer XLA (jaxlib 0.12) prints a float total order as order=TOTAL.
    ("ROOT r = pred[3] compare(v, v), direction=LT, order=TOTAL", "compare_type",
     ComparisonType.TOTALORDER),
    ("ROOT r = pred[3] compare(v, v), direction=LT, order=PARTIAL", "compare_type", None),
    ("ROOT r = pred[3] compare(v, v), direction=LT, type=TOTALORDER, order=TOTAL",
     "compare_type", ComparisonType.TOTALORDER),
    ("ROOT r = pred[] compare(i, i), direction=LT, order=TOTAL", "compare_type", None),
    ("ROOT r = pred[3] compare(v, v), direction=GE", "comparison_direction",
     ComparisonDirection.GE),
    ("ROOT r = f32[3] reduce-precision(v), exponent_bits=5, mantissa_bits=10",
     "mantissa_bits", 10),
    ("ROOT r = s32[] get-dimension-size(v), dimensions={0}", "dimension", 0),
    ("ROOT r = f32[] dot(v, v), lhs_contracting_dims={0}, rhs_contracting_dims={0}, "
     "operand_precision={highest,default}", "precision_config",
     (Precision.HIGHEST, Precision.DEFAULT)),
    ("ROOT r = f64[] dot(v, v), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
     "result_element_type", ElementType.F64),
    ("ROOT r = s32[3] convert(v)", "new_element_type", ElementType.S32),
    ("ROOT r = u32[3] bitcast-convert(v)", "new_element_type", ElementType.U32),
])
def test_attribute_forms(line: str, field: str, value: object) -> None:
    root = root_of(f"""  v = f32[3] parameter(0)
  w = f32[8] parameter(1)
  z = f32[] parameter(2)
  i = s32[] parameter(3)
  {line}""")
    attrs = root.attrs.dimension_numbers if hasattr(root.attrs, "dimension_numbers") \
        and not hasattr(root.attrs, field) else root.attrs
    assert getattr(attrs, field) == value


@pytest.mark.parametrize("line", [
    "ROOT r = pred[3] compare(v, v), direction=LT, type=FLOAT, order=TOTAL",
    "ROOT r = pred[3] compare(v, v), direction=LT, type=TOTALORDER, order=PARTIAL",
    "ROOT r = pred[] compare(i, i), direction=LT, order=PARTIAL",
    "ROOT r = pred[3] compare(v, v), direction=LT, order=SOME",
])
def test_compare_order_rejected(line: str) -> None:
    with pytest.raises(ParseError, match="order"):
        root_of(f"""  v = f32[3] parameter(0)
  i = s32[] parameter(1)
  {line}""")


def test_window_dim_labels_and_groups() -> None:
    root = root_of("""  x = f32[1,5,5,2] parameter(0)
  k = f32[3,3,2,4] parameter(1)
  ROOT c = f32[1,3,5,4] convolution(x, k), window={size=3x3 stride=2x1 pad=1_1x1_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f""")
    a = root.attrs
    assert a.window_strides == (2, 1) and a.padding == ((1, 1), (1, 1))
    assert a.lhs_dilation == () and a.rhs_dilation == (1, 1)
    dn = a.dimension_numbers
    assert (dn.input_batch_dimension, dn.input_feature_dimension) == (0, 3)
    assert dn.kernel_spatial_dimensions == (0, 1) and dn.kernel_output_feature_dimension == 3
    rw = root_of("""  x = f32[4,6] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,3] reduce-window(x, z), window={size=1x3 stride=1x2 pad=0_0x1_0 lhs_dilate=1x1}, to_apply=add""", extra=ADD)
    assert rw.attrs.window_dimensions == (1, 3) and rw.attrs.window_strides == (1, 2)
    assert rw.attrs.padding == ((0, 0), (1, 0)) and rw.attrs.window_dilations is None
    ar = root_of("""  x = f32[4] parameter(0)
  ROOT r = f32[4] all-reduce(x), replica_groups={{0}}, channel_id=3, to_apply=%add""",
                 extra=ADD)
    assert ar.attrs.replica_groups == ((0,),) and ar.attrs.channel_id == 3


def test_gather_scatter_dimension_numbers() -> None:
    g = root_of("""  x = f32[6,3] parameter(0)
  i = s32[4,1] parameter(1)
  ROOT g = f32[4,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}, indices_are_sorted=true""")
    assert g.attrs.dimension_numbers.offset_dims == (1,) and g.attrs.indices_are_sorted
    s = root_of("""  x = f32[6,3] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,3] parameter(2)
  ROOT s = f32[6,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=add""",
                extra=ADD)
    assert s.attrs.scatter_dimension_numbers.inserted_window_dims == (0,)
    assert s.attrs.unique_indices and s.called[0].name == "add"


def test_control_flow_and_fusion() -> None:
    text = """HloModule cf

%cond (s: (s32[], f32[2])) -> pred[] {
  %s = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (s: (s32[], f32[2])) -> (s32[], f32[2]) {
  %s = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[2] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %v2 = f32[2] fusion(%v), kind=kLoop, calls=%fused
  ROOT %t = (s32[], f32[2]) tuple(%i2, %v2)
}

%fused (p: f32[2]) -> f32[2] {
  %p = f32[2] parameter(0)
  ROOT %m = f32[2] multiply(%p, %p)
}

%neg (p: f32[2]) -> f32[2] {
  %p = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%p)
}

ENTRY %main (x: f32[2], b: pred[], k: s32[]) -> f32[2] {
  %x = f32[2] parameter(0)
  %b = pred[] parameter(1)
  %k = s32[] parameter(2)
  %zero = s32[] constant(0)
  %init = (s32[], f32[2]) tuple(%zero, %x)
  %w = (s32[], f32[2]) while(%init), condition=%cond, body=%body
  %r = f32[2] get-tuple-element(%w), index=1
  %c1 = f32[2] conditional(%b, %r, %r), true_computation=%neg, false_computation=%fused
  %c2 = f32[2] conditional(%k, %c1, %c1, %c1), branch_computations={%neg, %fused, %neg}
  ROOT %call = f32[2] call(%c2), to_apply=%neg
}
"""
    m = parse_hlo_module(text)
    ops = {i.name: i for i in m.entry_computation().instructions}
    assert ops["w"].opcode == "while" and [c.name for c in ops["w"].called] == ["cond", "body"]
    assert ops["c1"].opcode == "if" and ops["c2"].opcode == "case"
    assert len(ops["c2"].called) == 3
    body = m.get("body")
    assert any(i.opcode in ("fusion", "call") for i in body.instructions)
    import xlapy

    out = xlapy.compile(m)(np.float32([1, -2]), np.bool_(True), np.int32(1))
    # 3 squarings: x**8 = [1, 256]; negate; square; negate
    np.testing.assert_array_equal(out, -np.float32([1, 256]) ** 2 * -1 * -1)


def test_bitcast_and_copy_follow_layouts() -> None:
    import xlapy

    m = parse_hlo_module("""HloModule b
ENTRY %e (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{1,0} parameter(0)
  %t = f32[3,2]{0,1} transpose(%p), dimensions={1,0}
  %c = f32[3,2]{1,0} copy(%t)
  %b1 = f32[6]{0} bitcast(%c)
  %b2 = f32[3,2]{0,1} bitcast(%p)
  %b3 = s32[6]{0} bitcast(%b1)
  ROOT %r = (f32[6], f32[3,2], s32[6]) tuple(%b1, %b2, %b3)
}
""")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    flat, col, ints = xlapy.compile(m)(x)
    np.testing.assert_array_equal(flat, x.T.reshape(6))
    np.testing.assert_array_equal(col, x.T)  # same bytes read column-major
    np.testing.assert_array_equal(ints, x.T.reshape(6).view(np.int32))
