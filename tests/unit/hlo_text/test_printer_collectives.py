# ruff: noqa: E501  (programs are kept on one line each, as JAX prints them)
"""HLO text printing of collective_permute (it has no replica_groups: printing raised)."""

from __future__ import annotations

from xlapy.hlo_text import parse_hlo_module, print_hlo_module
from xlapy.stablehlo import parse_module


def test_collective_permute_prints_and_reparses() -> None:
    text = """module attributes {mhlo.num_replicas = 2 : i32} {
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.collective_permute"(%a) {source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
}"""
    hlo = print_hlo_module(parse_module(text))
    assert "collective-permute" in hlo and "source_target_pairs={{0,1},{1,0}}" in hlo
    assert "replica_groups" not in hlo
    again = parse_hlo_module(hlo)
    assert again.entry_computation().root.opcode == "collective_permute"
