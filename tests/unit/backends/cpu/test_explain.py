"""`xlapy compile --explain`: kernels, library calls and interpreter fallbacks are listed."""

from __future__ import annotations

import io
from pathlib import Path

from xlapy.cli.main import main

PROGRAM = """
func.func @main(%x: tensor<4xf32>, %k: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = stablehlo.exponential %x : tensor<4xf32>
  %z = stablehlo.add %y, %x : tensor<4xf32>
  %c = stablehlo.bitcast_convert %k : (tensor<4xi32>) -> tensor<4xf32>
  return %z, %c : tensor<4xf32>, tensor<4xf32>
}
"""


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out), out.getvalue()


def test_explain_lists_kernels_and_fallbacks(tmp_path: Path) -> None:
    f = tmp_path / "p.mlir"
    f.write_text(PROGRAM)
    rc, text = run("compile", str(f), "--explain")
    assert rc == 0, text
    assert "kernel k0" in text
    assert "1 kernel(s) built" in text
    assert "1 instruction(s) on interpreter fallback: bitcast_convert" in text


def test_explain_nested_control_flow() -> None:
    rc, text = run("compile", "workload:fori_loop", "--explain")
    assert rc == 0, text
    assert "-- called by %while" in text
    assert "0 instruction(s) on interpreter fallback" in text


def test_compile_reports_bad_file(tmp_path: Path) -> None:
    rc, text = run("compile", str(tmp_path / "missing.mlir"))
    assert rc == 1 and text.startswith("error:")
