"""`xlapy compile --explain`: kernels, library calls and interpreter fallbacks are listed."""

from __future__ import annotations

import io
from pathlib import Path

from xlapy.cli.main import main

PROGRAM = """
func.func @main(%x: tensor<4xf32>, %k: tensor<1xi32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = stablehlo.exponential %x : tensor<4xf32>
  %z = stablehlo.add %y, %x : tensor<4xf32>
  %c = stablehlo.dynamic_reshape %x, %k : (tensor<4xf32>, tensor<1xi32>) -> tensor<4xf32>
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
    assert "1 instruction(s) on interpreter fallback: dynamic_reshape" in text


def test_explain_nested_control_flow() -> None:
    rc, text = run("compile", "workload:fori_loop", "--explain")
    assert rc == 0, text
    assert "-- called by %while" in text
    assert "0 instruction(s) on interpreter fallback" in text


def test_compile_reports_bad_file(tmp_path: Path) -> None:
    rc, text = run("compile", str(tmp_path / "missing.mlir"))
    assert rc == 1 and text.startswith("error:")


CALLS = """
func.func private @relu(%a: tensor<64xf32>) -> tensor<64xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<64xf32>
  %r = stablehlo.maximum %a, %z : tensor<64xf32>
  return %r : tensor<64xf32>
}
func.func @main(%x: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %y = stablehlo.add %x, %b : tensor<64xf32>
  %unused = stablehlo.exponential %y : tensor<64xf32>
  %r = func.call @relu(%y) : (tensor<64xf32>) -> tensor<64xf32>
  %s = func.call @relu(%y) : (tensor<64xf32>) -> tensor<64xf32>
  %t = stablehlo.add %r, %s : tensor<64xf32>
  return %t : tensor<64xf32>
}
"""


def test_backend_pipeline_inlines_calls_and_cleans_up() -> None:
    """JAX's private functions are inlined before planning (a call would be a thunk boundary
    running a sub-executable), the duplicate call is CSE'd and the unused exp is dropped: the
    whole program is one kernel."""
    import numpy as np

    import xlapy

    prog = xlapy.compile(CALLS, backend="cpu")
    text = prog._exe.explain()  # type: ignore[attr-defined]
    assert "call" not in text and "exponential" not in text, text
    assert text.count("kernel k") == 1, text
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    b = np.full(64, 0.25, np.float32)
    np.testing.assert_array_equal(prog(x, b), 2 * np.maximum(x + b, 0))


def test_explain_prints_where_the_compile_time_went(tmp_path: Path) -> None:
    f = tmp_path / "p.mlir"
    f.write_text(PROGRAM)
    rc, text = run("compile", str(f), "--explain")
    assert rc == 0, text
    line = next(ln for ln in text.splitlines() if ln.startswith("-- compile "))
    assert "parse " in line and "import " in line and "emit " in line
