"""`xlapy run`: PASS/FAIL lines, the closing count, exit status, inputs and error spans."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.cli.main import main, parse_input

GOOD = """func.func @good() {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %1 = stablehlo.add %0, %0 : tensor<2xi32>
  check.expect_eq_const %1, dense<[2, 4]> : tensor<2xi32>
  func.return
}"""
BAD = GOOD.replace("[2, 4]", "[2, 5]")


def _run(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = main(args, out)
    return code, out.getvalue()


def test_chunks_pass_and_fail(tmp_path: Path) -> None:
    f = tmp_path / "t.mlir"
    f.write_text(GOOD + "\n// -----\n" + BAD)
    code, out = _run(["run", str(f)])
    assert code == 1
    assert "PASS" in out and "FAIL" in out and "1 passed, 1 failed" in out


def test_all_pass_exit_zero(tmp_path: Path) -> None:
    f = tmp_path / "t.mlir"
    f.write_text(GOOD)
    code, out = _run(["run", str(f), "--split-input-file"])
    assert code == 0


def test_inline_input_and_results(tmp_path: Path) -> None:
    f = tmp_path / "t.mlir"
    f.write_text("""func.func @main(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}""")
    code, out = _run(["run", str(f), "--input", "2x2xf32=[1 2][3 4]"])
    assert code == 0 and "tensor<2x2xf32>" in out and "[[2.0, 4.0], [6.0, 8.0]]" in out


def test_parse_input_npy(tmp_path: Path) -> None:
    p = tmp_path / "x.npy"
    np.save(p, np.arange(3, dtype=np.int32))
    assert parse_input(str(p))[0].tolist() == [0, 1, 2]


def test_parse_error_has_caret(tmp_path: Path) -> None:
    f = tmp_path / "t.mlir"
    f.write_text("func.func @main() {\n  %0 = stablehlo.add %nope, %nope : tensor<f32>\n}\n")
    code, out = _run(["run", str(f)])
    assert code == 1 and f"{f}:2:" in out and "^" in out


def test_python_dash_m(tmp_path: Path) -> None:
    f = tmp_path / "t.mlir"
    f.write_text(GOOD)
    r = subprocess.run([sys.executable, "-m", "xlapy", "run", str(f)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


ADD = """func.func @main(%a: tensor<2xi32>, %b: tensor<2xi32>) -> tensor<2xi32> {
  %0 = stablehlo.add %a, %b : tensor<2xi32>
  return %0 : tensor<2xi32>
}"""


def test_args_like_stablehlo_translate(tmp_path: Path) -> None:
    f = tmp_path / "t.mlir"
    f.write_text(ADD)
    code, out = _run(["run", str(f), "--args=[dense<1> : tensor<2xi32>, dense<2> : "
                                     "tensor<2xi32>]"])
    assert code == 0 and out.splitlines() == ["tensor<2xi32> {", "  [3, 3]", "}"]
    code, out = _run(["run", str(f), "--args=not_array"])
    assert code == 2 and "expected array attribute string for args" in out
    code, out = _run(["run", str(f), "--args=[4.0 : f32]"])
    assert code == 2 and "expected dense elements attribute for args elements" in out


def test_installed_script_reads_workloads_from_the_repository(tmp_path: Path) -> None:
    """`xlapy compile workload:NAME` through the installed script (its sys.path lacks the
    current directory): the repository's workload from its root, a clear error elsewhere
    (a ModuleNotFoundError traceback before)."""
    script = Path(sys.executable).parent / "xlapy"
    if not script.exists():
        pytest.skip("no installed xlapy script beside this interpreter")
    root = Path(__file__).resolve().parents[3]
    ok = subprocess.run([str(script), "compile", "workload:softmax"], cwd=root,
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "compiled softmax" in ok.stdout, ok.stderr
    bad = subprocess.run([str(script), "compile", "workload:softmax"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "run from its root" in bad.stdout + bad.stderr
