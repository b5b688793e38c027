"""cpu targets (target.py): the feature table agrees with what LLVM generates for each name,
lower targets compile and run here and match the interpreter, higher or foreign targets
compile to objects and refuse to run, and the target reaches every compile (env, Client,
xlapy.compile, CLI) and the compile-cache key."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.util import module, op, run_both
from xlapy.backends.cpu import cache, lanes, objfile, target
from xlapy.backends.cpu.executable import CpuExecutable
from xlapy.backends.cpu.llvm_util import target_machine, verify
from xlapy.cli.main import main as cli_main
from xlapy.errors import XlapyError
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

ATTRS = ('attributes #0 = { "prefer-vector-width"="512" "min-legal-vector-width"="512" }')
#: feature -> (function body over %p, a ptr; what its assembly must contain iff the feature
#: is there). Without the feature each is a libcall or a narrower instruction.
PROBES = {
    "avx512f": ("%v = load <16 x float>, ptr %p\n  %w = fadd <16 x float> %v, %v\n"
                "  store <16 x float> %w, ptr %p", "zmm"),
    "avx": ("%v = load <8 x float>, ptr %p\n  %w = fadd <8 x float> %v, %v\n"
            "  store <8 x float> %w, ptr %p", "ymm"),
    "f16c": ("%v = load float, ptr %p\n  %h = fptrunc float %v to half\n"
             "  store half %h, ptr %p", "vcvt"),
    "avx512fp16": ("%v = load double, ptr %p\n  %h = fptrunc double %v to half\n"
                   "  store half %h, ptr %p", "vcvtsd2sh"),
    "fma": ("%v = load float, ptr %p\n  %w = call float @llvm.fma.f32(float %v, float %v, "
            "float %v)\n  store float %w, ptr %p", "vfmadd"),
    "sse4.1": ("%v = load float, ptr %p\n  %w = call float @llvm.floor.f32(float %v)\n"
               "  store float %w, ptr %p", "roundss"),
    "sse4a": ("%v = load float, ptr %p\n  %w = fadd float %v, %v\n"
              "  store float %w, ptr %p, !nontemporal !0", "movntss"),
}


def _asm(t: target.CpuTarget, body: str) -> str:
    text = (f'target triple = "{t.triple}"\n'
            f"declare float @llvm.fma.f32(float, float, float)\n"
            f"declare float @llvm.floor.f32(float)\n"
            f"define void @probe(ptr %p) #0 {{\n  {body}\n  ret void\n}}\n{ATTRS}\n"
            "!0 = !{i32 1}\n")
    return target_machine(t).emit_assembly(verify(text))


X86 = [n for n, (triple, _, _) in target.NAMED.items() if triple == target.X86_TRIPLE]


@pytest.mark.parametrize("name", [*X86, "host"] if target.host_target().is_x86 else X86)
def test_feature_table_matches_llvm(name: str) -> None:
    """What codegen assumes of a target is what LLVM generates for it."""
    t = target.resolve(name)
    for feature, (body, mnemonic) in PROBES.items():
        asm = _asm(t, body)
        assert (mnemonic in asm) == t.has(feature), (name, feature, asm)


def test_aarch64_target_compiles_and_names_its_machine() -> None:
    t = target.resolve("aarch64-linux-gnu")
    asm = _asm(t, "%v = load <4 x float>, ptr %p\n  %w = fadd <4 x float> %v, %v\n"
                  "  store <4 x float> %w, ptr %p")
    assert "fadd\tv" in asm and t.vector_bits == 128 and not t.runs_here


def test_unknown_target_lists_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(XlapyError, match="unknown cpu target 'pentium'.*x86-64-v3"):
        target.resolve("pentium")
    monkeypatch.setenv("XLAPY_CPU_TARGET", "pentium")
    with pytest.raises(XlapyError, match="unknown cpu target"):
        xlapy.compile(_PROGRAM, "cpu")


def test_env_sets_the_default_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CPU_TARGET", "x86-64-v2")
    assert target.default().name == "x86-64-v2"
    assert target.current().name == "x86-64-v2"
    with target.use("x86-64-v3"):
        assert target.current().name == "x86-64-v3" and lanes.vector_width() == 8
    monkeypatch.delenv("XLAPY_CPU_TARGET")
    assert target.current() is target.host_target()


def test_cache_key_includes_the_target() -> None:
    keys = set()
    for name in ("x86-64-v2", "x86-64-v3", "x86-64-v4", "aarch64"):
        with target.use(name):
            keys.add(cache.key("same text"))
    assert len(keys) == 4


_PROGRAM = """
func.func @main(%x: tensor<64xf64>) -> (tensor<64xf16>, tensor<64xf32>) {
  %h = stablehlo.convert %x : (tensor<64xf64>) -> tensor<64xf16>
  %f = stablehlo.convert %x : (tensor<64xf64>) -> tensor<64xf32>
  %e = stablehlo.exponential %f : tensor<64xf32>
  %m = stablehlo.multiply %e, %f : tensor<64xf32>
  %r = stablehlo.add %m, %f : tensor<64xf32>
  return %h, %r : tensor<64xf16>, tensor<64xf32>
}
"""

RUNNABLE = [n for n in ("x86-64-v2", "x86-64-v3", "x86-64-v4", "host")
            if target.resolve(n).runs_here]


@pytest.mark.parametrize("name", RUNNABLE)
def test_lower_targets_run_here_and_match(name: str) -> None:
    """Client and xlapy.compile options carry the target; the code is the target's (no
    wider vectors than it has) and matches the interpreter."""
    x = np.random.default_rng(2).standard_normal(64) * 50
    want = xlapy.compile(_PROGRAM, backend="interpreter")(x)
    prog = xlapy.compile(_PROGRAM, "cpu", options={"target": name})
    exe = prog._exe
    assert exe.target.name == name and exe.runnable
    asm = exe.engine.assembly
    t = target.resolve(name)
    assert ("zmm" in asm) <= t.has("avx512f") and ("ymm" in asm) <= t.has("avx")
    got = prog(x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_max_ulp(got[1], want[1], maxulp=4)  # exp: <= 1 ulp, then * and +
    client = xlapy.Client("cpu", options={"target": name})
    assert client.compile(prog.module).compiled.target.name == name


@pytest.mark.parametrize("name", ["x86-64-v4", "sapphirerapids", "znver5", "aarch64"])
def test_other_machines_compile_to_objects_and_refuse_to_run(name: str) -> None:
    t = target.resolve(name)
    prog = xlapy.compile(_PROGRAM, "cpu", options={"target": name})
    objs = prog._exe.all_objects()
    assert objs and all(objfile.machine(o) == t.arch for _, o in objs)
    if t.runs_here:  # an AVX-512 machine runs x86-64-v4 code: then it must run and match
        x = np.linspace(-3, 3, 64)
        want = xlapy.compile(_PROGRAM, backend="interpreter")(x)
        np.testing.assert_array_equal(prog(x)[0], want[0])
        return
    with pytest.raises(XlapyError, match=f"compiled for cpu target {t.name}, which cannot run"):
        prog(np.zeros(64))


def test_half_conversions_on_every_runnable_target() -> None:
    """f64 -> f16 (a libcall without AVX512-FP16) and f16 -> f32 (a libcall without F16C)."""
    x = np.concatenate([np.random.default_rng(3).standard_normal(200) * 1e3,
                        [65504.0, 65519.99, 65520.0, 2.0 ** -25, 3e-8, -0.0, np.inf, np.nan]])
    sh = Shape.array(ET.F64, (x.size,))
    for name in RUNNABLE:
        mod = module([sh], lambda c, p: [op(c, "convert", p, ConvertAttrs(ET.F16))])
        with target.use(name):
            ref, got, exe = run_both(mod, [x])
        assert isinstance(exe, CpuExecutable) and exe.target.name == name
        np.testing.assert_array_equal(got[0].view(np.uint16), ref[0].view(np.uint16))


def test_cli_target_flag() -> None:
    out = io.StringIO()
    rc = cli_main(["compile", "--target", "aarch64", "-"], out)
    assert rc == 1  # no such file: the flag itself parsed
    out = io.StringIO()
    assert cli_main(["run", "--target", "nope", "x.mlir"], out) == 2
    assert "unknown cpu target 'nope'" in out.getvalue()


_COMPLEX = """
func.func @main(%z: tensor<8xcomplex<f32>>, %w: tensor<8xcomplex<f64>>)
    -> (tensor<8xcomplex<f32>>, tensor<8xcomplex<f64>>, tensor<8xcomplex<f64>>) {
  %a = stablehlo.exponential %z : tensor<8xcomplex<f32>>
  %b = stablehlo.sine %a : tensor<8xcomplex<f32>>
  %c = stablehlo.log %w : tensor<8xcomplex<f64>>
  %d = stablehlo.atan2 %c, %w : tensor<8xcomplex<f64>>
  %e = stablehlo.rsqrt %d : tensor<8xcomplex<f64>>
  return %b, %c, %e : tensor<8xcomplex<f32>>, tensor<8xcomplex<f64>>, tensor<8xcomplex<f64>>
}
"""


def test_complex_libm_ops_are_native_on_aarch64() -> None:
    """These ran on the interpreter when targeting aarch64 (libm's C99 complex functions,
    still called for some of them, were called by the x86-64 ABI only; now AAPCS64's:
    [2 x T] in, {T, T} out; tests/aot runs them under qemu)."""
    from tests.fallbacks import fallback_ops

    prog = xlapy.compile(_COMPLEX, "cpu", options={"target": "aarch64"})
    assert fallback_ops(prog) == []
    assert all(objfile.machine(o) == "aarch64" for _, o in prog._exe.all_objects())


def test_code_features_hold_every_feature_codegen_asks_about() -> None:
    """covered_by_host compares CODE_FEATURES only: a feature codegen branches on that the
    set missed would let `make test` skip a lower target whose code differs from the host's."""
    root = Path(xlapy.__file__).parent
    asked = {m for f in root.rglob("*.py")
             for m in re.findall(r'\.has\("([a-z0-9.\-]+)"\)', f.read_text())}
    asked |= {m for f in root.rglob("*.py")
              for m in re.findall(r't\.has\(f\) for f in \(([^)]*)\)', f.read_text())
              for m in re.findall(r'"([a-z0-9.\-]+)"', m)}
    assert {"avx512f", "fma", "amx-int8"} <= asked
    assert asked <= target.CODE_FEATURES


def test_a_target_is_covered_by_the_host_only_with_the_same_code_features() -> None:
    host = target.host_target()
    assert host.covered_by_host
    for name in ("x86-64-v2", "x86-64-v3", "x86-64-v4", "cooperlake", "aarch64"):
        t = target.resolve(name)
        same = t.features & target.CODE_FEATURES == host.features & target.CODE_FEATURES
        assert t.covered_by_host == (t.runs_here and same)
    assert not target.resolve("aarch64").covered_by_host
    if host.has("avx2"):  # (every x86-64 machine these tests run on)
        assert not target.resolve("x86-64-v2").covered_by_host
    v3 = target.resolve("x86-64-v3")
    assert v3.covered_by_host == (host.has("fma") and not host.has("avx512f")
                                  and not host.has("avxvnni"))
