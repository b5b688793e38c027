"""Documented limits (xlapy/types/limits.py): literal bytes, processes, nesting depth.

Each is a ParseError naming the location, raised before anything large is allocated or
started (before: 5.4 GB allocated, a raw MemoryError, a RecursionError, 100,000 threads)."""

from __future__ import annotations

import tracemalloc

import pytest

from xlapy.errors import ParseError
from xlapy.hlo_text import parse_hlo_module
from xlapy.stablehlo import parse_module, print_module

CONST = """func.func @main() -> tensor<{t}> {{
  %0 = stablehlo.constant dense<1.0> : tensor<{t}>
  return %0 : tensor<{t}>
}}"""


LIST = """func.func @main() -> tensor<{t}> {{
  %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<{t}>
  return %0 : tensor<{t}>
}}"""

SIZES = ["800000000xf32", "1000000000000xf32", "1x2x1000000000000x4xi64"]


@pytest.mark.parametrize("t", SIZES)
def test_big_literal_is_refused_before_allocating(t: str) -> None:
    with pytest.raises(ParseError, match=r"<input>:2:33: dense literal .* bytes\) is over the "
                                         r"literal size limit of 1073741824 bytes"):
        parse_module(LIST.format(t=t))


@pytest.mark.parametrize("t", SIZES)
def test_big_splat_stays_one_element(t: str) -> None:
    """A splat is held as one element at any size (it was materialized: 5.4 GB for the
    first), and prints back as a splat."""
    tracemalloc.start()
    try:
        module = parse_module(CONST.format(t=t).replace("1.0", "1" if "xi" in t else "1.0"))
        text = print_module(module)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    lit = module.entry.root.attrs.literal
    assert lit.is_splat and not lit.to_numpy().flags.writeable
    assert peak < 4 << 20
    assert f"dense<1{'' if 'xi' in t else '.0'}> : tensor<{t}>" in text


@pytest.mark.parametrize("body", ["1.5", '"0x0000C03F"'])
def test_splat_forms(body: str) -> None:
    text = CONST.format(t="3x4xf32").replace("1.0", body)
    lit = parse_module(text).entry.root.attrs.literal
    assert lit.is_splat
    assert lit.to_numpy().tolist() == [[1.5] * 4] * 3


def test_literal_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_MAX_LITERAL_BYTES", "64")
    values = ", ".join(["1.0"] * 16)
    parse_module(CONST.format(t="16xf32").replace("1.0", f"[{values}]"))
    with pytest.raises(ParseError, match=r"17 element\(s\) \(68 bytes\) is over .* 64 bytes"):
        parse_module(CONST.format(t="17xf32").replace("1.0", f"[{values}, 1.0]"))
    parse_module(CONST.format(t="17xf32"))  # a splat holds one element


def test_big_type_in_a_signature_is_only_a_shape() -> None:
    text = """func.func @main(%a: tensor<1000000000000xf32>) -> tensor<1000000000000xf32> {
  return %a : tensor<1000000000000xf32>
}"""
    assert parse_module(text).entry.root.shape.dimensions == (1000000000000,)


def test_big_hlo_constant_is_refused() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = f32[1000000000000] constant({1})\n}"
    with pytest.raises(ParseError, match=r"<input>:3:40: constant f32\[1000000000000\] .* over "
                                         r"the literal size limit"):
        parse_hlo_module(text)


def test_too_many_replicas_in_stablehlo() -> None:
    text = """module attributes {mhlo.num_replicas = 100000 : i32} {
func.func @main() -> () {
  return
}
}"""
    with pytest.raises(ParseError, match=r"<input>:1:1: module: 100000 replica\(s\) x 1 "
                                         r"partition\(s\) = 100000 processes is over the limit "
                                         r"of 1024 \(XLAPY_MAX_PROCESSES\)"):
        parse_module(text)


def test_process_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = """module attributes {mhlo.num_replicas = 4 : i32, mhlo.num_partitions = 2 : i32} {
func.func @main() -> () {
  return
}
}"""
    assert parse_module(text).num_replicas == 4
    monkeypatch.setenv("XLAPY_MAX_PROCESSES", "7")
    with pytest.raises(ParseError, match="= 8 processes is over the limit of 7"):
        parse_module(text)


def test_too_many_replicas_in_hlo_text() -> None:
    text = "HloModule m, replica_count=100000\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}"
    with pytest.raises(ParseError, match=r"<input>:1:28: 100000 replica\(s\) .* over the limit"):
        parse_hlo_module(text)
    with pytest.raises(ParseError, match=r"replicas \(0\) and partitions \(1\) must be at least"):
        parse_hlo_module(text.replace("100000", "0"))


@pytest.mark.parametrize("depth", [100, 2000])
def test_deep_tuple_type(depth: int) -> None:
    t = "tuple<" * depth + "tensor<f32>" + ">" * depth
    with pytest.raises(ParseError, match="<input>:1:621: nested more than 100 levels deep"):
        parse_module(f"func.func @main(%a: {t}) -> {t} {{\n  return %a : {t}\n}}")


def test_tuple_type_99_deep_still_parses() -> None:
    t = "tuple<" * 99 + "tensor<f32>" + ">" * 99
    parse_module(f"func.func @main(%a: {t}) -> {t} {{\n  return %a : {t}\n}}")


def test_deep_attribute_list() -> None:
    text = 'func.func @main() -> () {\n  "f"() {a = ' + "[" * 2000 + "]" * 2000 + "} : () -> ()\n}"
    with pytest.raises(ParseError, match="<input>:2:114: nested more than 100 levels deep"):
        parse_module(text)


def test_deep_hlo_tuple_shape() -> None:
    sh = "(" * 2000 + "f32[]" + ")" * 2000
    with pytest.raises(ParseError, match="<input>:3:112: tuple shape nested more than 100"):
        parse_hlo_module(f"HloModule m\nENTRY e {{\n  ROOT p = {sh} parameter(0)\n}}")


def test_deep_hlo_constant_braces() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = f32[1] constant(" + "{" * 2000 + "1" + \
        "}" * 2000 + ")\n}"
    with pytest.raises(ParseError, match="<input>:3:128: constant nested more than 100 levels"):
        parse_hlo_module(text)


@pytest.mark.parametrize("handle", ["-100000000000000000000", "9223372036854775808"])
def test_integer_attribute_outside_64_bits_is_refused(handle: str) -> None:
    """Integer attributes are 64-bit (MLIR refuses wider ones); a channel id of -10**20 was
    accepted and failed later on the MPI grid."""
    text = f"""func.func @main(%x: tensor<2xf32>, %t: !stablehlo.token) -> !stablehlo.token {{
  %0 = "stablehlo.send"(%x, %t) {{channel_handle = #stablehlo.channel_handle<handle = {handle}, type = 2>, is_host_transfer = true}} : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
  return %0 : !stablehlo.token
}}"""  # noqa: E501
    with pytest.raises(ParseError, match=f"<input>:2:8: .*integer {handle} does not fit a "
                                         "64-bit attribute"):
        parse_module(text)
    parse_module(text.replace(handle, "-9223372036854775808"))
