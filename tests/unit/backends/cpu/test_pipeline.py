"""One pipeline (issue 13): `xlapy opt --pipeline cpu` runs the pipeline `compile` runs, and its
fusion (the cpu-fusion pass's plans) is the one the executable builds its kernels from, so
`opt --explain-fusion` and `compile --explain` print the same kernels.

The agreement check covers every reference workload (benchmarks/workloads), every JAX workload
(benchmarks/jax_workloads, small sizes) and a fixed sample of the JAX program table (every
25th program, 23 programs, with control flow among them)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import xlapy
from benchmarks import jax_workloads
from benchmarks.workloads import WORKLOADS
from xlapy.backends import get_backend
from xlapy.backends.cpu.executable import CpuExecutable
from xlapy.backends.cpu.pipeline import META_KEY, CpuFusion, cpu_pipeline
from xlapy.cli.compile import FUSION_HEADER
from xlapy.cli.main import main
from xlapy.errors import XlapyError
from xlapy.ir import Instruction
from xlapy.passes import make_pipeline
from xlapy.stablehlo import parse_module

#: Every 25th program of the JAX program table.
SAMPLE_STEP = 25


def _run(*argv: str) -> str:
    out = io.StringIO()
    assert main(list(argv), out) == 0, out.getvalue()
    return out.getvalue()


def _fusion_lines(text: str) -> list[str]:
    """The lines under the "// cpu fusion" header (up to a blank line or the end)."""
    after = text.split(FUSION_HEADER + "\n", 1)[1]
    return after.split("\n\n", 1)[0].strip("\n").splitlines()


def _assert_agree(spec: str) -> None:
    fused = _fusion_lines(_run("opt", spec, "--pipeline", "cpu", "--explain-fusion"))
    explained = _fusion_lines(_run("compile", spec, "--explain"))
    assert fused == explained
    assert fused and fused[0].startswith("computation ")


_x64 = jax_workloads.x64  # (the program table needs x64 on, the workloads off)


def _jax_programs() -> list[object]:
    from tests.differential.jax_programs import array_programs, lax_programs, model_programs

    with _x64(True):  # (as test_jax_programs builds its table)
        programs = (lax_programs.programs() + array_programs.programs()
                    + model_programs.programs())
    return [pytest.param(p, id=p.id) for p in programs[::SAMPLE_STEP]]


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_opt_and_explain_agree_on_workloads(name: str) -> None:
    _assert_agree(f"workload:{name}")


@pytest.mark.parametrize("name", sorted(jax_workloads.JAX_WORKLOADS))
def test_opt_and_explain_agree_on_jax_workloads(name: str, tmp_path: Path) -> None:
    f = tmp_path / f"{name}.mlir"
    with _x64(False):
        f.write_text(jax_workloads.lower(jax_workloads.JAX_WORKLOADS[name](True)))
    _assert_agree(str(f))


@pytest.mark.parametrize("program", _jax_programs())
def test_opt_and_explain_agree_on_jax_programs(program: object, tmp_path: Path) -> None:
    import jax

    with _x64(True):
        text = jax.jit(program.fn, keep_unused=True).lower(  # type: ignore[attr-defined]
            *program.args).as_text()  # type: ignore[attr-defined]
    f = tmp_path / "p.mlir"
    f.write_text(text)
    _assert_agree(str(f))


def _fused_kernel_count(exe: CpuExecutable) -> int:
    """Kernels the executable built from fusion (not the op-specific ones, nor in regions)."""
    own = sum(1 for _, _, how in exe.report if how.startswith("kernel k") and "(" not in how)
    return own + sum(_fused_kernel_count(sub) for _, sub in exe.subexecs)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "attention", "fori_loop"])
def test_the_executable_builds_the_plans_kernels(name: str) -> None:
    """compile runs the cpu pipeline and the executable takes the pass's plan object as is;
    each planned kernel is one compiled kernel."""
    exe = get_backend("cpu").compile(WORKLOADS[name][0]().module, None)
    plans = exe.module.meta[META_KEY]
    assert exe.fusion is plans[exe.comp.name]
    assert _fused_kernel_count(exe) == sum(len(p.kernel_roots()) for p in plans.values())


def test_cpu_is_the_backends_pipeline() -> None:
    names = [p.name for p in make_pipeline("cpu").passes]
    assert names == [p.name for p in cpu_pipeline().passes]
    assert names[-1] == CpuFusion.name


def test_a_stale_plan_is_an_error() -> None:
    """A computation changed after the cpu-fusion pass is refused, never re-planned."""
    module = WORKLOADS["softmax"][0](rows=4, cols=8).module
    cpu_pipeline().run(module)
    entry = module.entry_computation()
    x = entry.parameters[0]
    entry.add(Instruction("negate", [x], x.shape, name="extra"))
    with pytest.raises(XlapyError, match="stale"):
        CpuExecutable(entry, module)


SHARED = """
func.func @main(%x: tensor<64xf32>, %y: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %e = stablehlo.exponential %x : tensor<64xf32>
  %t = stablehlo.tanh %e : tensor<64xf32>
  %a = stablehlo.add %t, %y : tensor<64xf32>
  %m = stablehlo.multiply %t, %y : tensor<64xf32>
  %s = stablehlo.sine %a : tensor<64xf32>
  %c = stablehlo.cosine %m : tensor<64xf32>
  return %s, %c : tensor<64xf32>, tensor<64xf32>
}
"""


def test_decisions_say_why(tmp_path: Path) -> None:
    """A short chain two kernels need is recomputed in each (duplicated), with its reason."""
    f = tmp_path / "p.mlir"
    f.write_text(SHARED)
    text = _run("opt", str(f), "--pipeline", "cpu", "--explain-fusion")
    assert "%t fused into kernel of %s (duplicated): a chain of 2 op(s), recomputed in each " \
        "of 2 kernels" in text, text
    assert "%s gets a buffer: a result of the computation" in text
    assert "  kernel %c (cosine): %e (dup), %t (dup), %m" in _fusion_lines(text)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    got = xlapy.compile(SHARED, "cpu")(x, x)
    want = xlapy.compile(SHARED, "interpreter")(x, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


def test_compile_function_plans_with_the_pass() -> None:
    """A function compiled without the pipeline (conformance chunks) is planned by the same
    cpu fusion, and the caller's module is left without plans."""
    module = parse_module(SHARED, "shared")
    comp = module.get("main")
    exe = get_backend("cpu").compile_function(module, comp)
    assert META_KEY not in module.meta
    assert [line.split(":")[0] for line in exe.fusions()[1:]] == ["  kernel %s (sine)",
                                                                  "  kernel %c (cosine)"]
