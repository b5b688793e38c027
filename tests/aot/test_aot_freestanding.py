# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""`xlapy aot --freestanding` (xlapy/aot/freestanding.py): objects with no undefined symbol
at all, linked with gcc and compared with the interpreter; programs needing libm refused by
name; the private mem* loops themselves."""

from __future__ import annotations

import ctypes
import io
import re
from pathlib import Path

import numpy as np
import pytest

from tests.aot.compare import mismatch
from tests.aot.corpus import conformance_cases
from tests.aot.test_aot import EXAMPLES, HALF, LOOP, MLP, _check
from xlapy.aot import Unimplemented, driver, freestanding
from xlapy.aot import compile as aot_compile
from xlapy.aot.link import machine
from xlapy.backends.cpu import objfile, target
from xlapy.backends.cpu.llvm_util import optimize
from xlapy.cli.main import main
from xlapy.interpreter import Interpreter

gcc = pytest.mark.skipif(driver.tool("gcc") is None, reason="gcc is not installed (Debian: gcc)")
ARM_TOOLS = ("aarch64-linux-gnu-gcc", "qemu-aarch64")
QEMU = ("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")

#: Copies (concatenate, pad, slices, a dynamic update) and fills: memcpy / memset / memmove
#: in normal objects.
COPIES = """
func.func @main(%x: tensor<64x33xf32>, %y: tensor<64x33xf32>, %i: tensor<i32>) -> (tensor<128x33xf32>, tensor<70x40xf32>, tensor<64x33xf32>, tensor<256x33xf32>) {
  %0 = stablehlo.concatenate %x, %y, dim = 0 : (tensor<64x33xf32>, tensor<64x33xf32>) -> tensor<128x33xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.pad %x, %z, low = [3, 2], high = [3, 5], interior = [0, 0] : (tensor<64x33xf32>, tensor<f32>) -> tensor<70x40xf32>
  %s = stablehlo.slice %y [0:8, 0:33] : (tensor<64x33xf32>) -> tensor<8x33xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %2 = stablehlo.dynamic_update_slice %x, %s, %i, %c0 : (tensor<64x33xf32>, tensor<8x33xf32>, tensor<i32>, tensor<i32>) -> tensor<64x33xf32>
  %3 = stablehlo.concatenate %0, %0, dim = 0 : (tensor<128x33xf32>, tensor<128x33xf32>) -> tensor<256x33xf32>
  return %0, %1, %2, %3 : tensor<128x33xf32>, tensor<70x40xf32>, tensor<64x33xf32>, tensor<256x33xf32>
}
"""

#: Element-wise math the cpu backend writes inline (polynomials): no libm needed.
MATH = """
func.func @main(%x: tensor<300xf32>) -> (tensor<300xf32>, tensor<300xi32>) {
  %0 = stablehlo.exponential %x : tensor<300xf32>
  %1 = stablehlo.tanh %x : tensor<300xf32>
  %2 = stablehlo.logistic %x : tensor<300xf32>
  %3 = stablehlo.add %0, %1 : tensor<300xf32>
  %4 = stablehlo.add %3, %2 : tensor<300xf32>
  %5 = stablehlo.floor %4 : tensor<300xf32>
  %6 = stablehlo.convert %5 : (tensor<300xf32>) -> tensor<300xi32>
  %7 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %l = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %l : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<300xf32>) -> tensor<300xf32>
  return %7, %6 : tensor<300xf32>, tensor<300xi32>
}
"""

POWER = """
func.func @main(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {
  %0 = stablehlo.power %x, %y : tensor<64xf32>
  %1 = stablehlo.add %0, %x : tensor<64xf32>
  %2 = stablehlo.multiply %1, %y : tensor<64xf32>
  return %2 : tensor<64xf32>
}
"""

LIBC_LIBM = {"memcpy", "memset", "memmove"}


def _programs() -> dict[str, tuple[str, list[np.ndarray]]]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("aot_example_check_fs", EXAMPLES / "check.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)  # the example's seeded inputs
    spec.loader.exec_module(check)
    rng = np.random.default_rng(1)
    f32 = np.float32
    return {
        "mlp": (MLP, [rng.standard_normal(s).astype(f32) for s in ((5, 8), (8, 12), (12,))]),
        "ex_mlp": ((EXAMPLES / "mlp.mlir").read_text(), check.inputs("mlp")),
        "ex_cnn": ((EXAMPLES / "cnn.mlir").read_text(), check.inputs("cnn")),
        "loop": (LOOP, [np.array(3, np.int32), np.array([1, -2, 3, 4], np.int32)]),
        "copies": (COPIES, [rng.standard_normal((64, 33)).astype(f32),
                            rng.standard_normal((64, 33)).astype(f32), np.array(50, np.int32)]),
        "math": (MATH, [rng.standard_normal(300).astype(f32) * 3]),
        "half": (HALF, [np.array([0.5, -1, 2, 3.25, 1e-3, 6e4], np.float16),
                        np.array([3, 0.1, -2, 1e-4, 7, 2], f32)]),
    }


def _compile_all(tgt: str | None) -> tuple[list, list[str], dict[str, list[np.ndarray]]]:
    progs = _programs()
    if tgt == "x86-64-v2":  # no FMA instruction: f32 fma in software, f64's is refused
        with pytest.raises(Unimplemented, match=r"needs libm's fma \("):
            aot_compile(progs.pop("math")[0], name="fs_math", target=tgt, freestanding=True)
    objs = [aot_compile(text, name=f"fs_{n}", target=tgt, freestanding=True)
            for n, (text, _) in progs.items()]
    for o in objs:
        assert objfile.undefined(o.object) == set(), (o.name, objfile.undefined(o.object))
        assert o.undefined == []
        defined = {s.name for s in objfile.symbols(o.object) if s.defined}
        assert not defined & LIBC_LIBM, defined  # private loops, no global memcpy
        assert f"#define {o.name.upper()}_FREESTANDING 1" in o.header
        assert "needs no symbol at all" in o.header
    return objs, [t for t, _ in progs.values()], {f"fs_{n}": a for n, (_, a) in progs.items()}


@gcc
@pytest.mark.parametrize("tgt", [None, "x86-64-v2"])
def test_freestanding_programs_link_and_match(tmp_path: Path, tgt: str | None) -> None:
    objs, texts, inputs = _compile_all(tgt)
    _check(objs, texts, inputs, tmp_path)


def test_freestanding_aarch64_under_qemu(tmp_path: Path) -> None:
    objs, texts, inputs = _compile_all("aarch64-linux-gnu")
    assert all(objfile.machine(o.object) == "aarch64" for o in objs)
    missing = [t for t in ARM_TOOLS if driver.tool(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (`make aot-tools`): the objects "
                    "were checked for undefined symbols only")
    _check(objs, texts, inputs, tmp_path, cc="aarch64-linux-gnu-gcc", runner=QEMU)


def test_normal_objects_still_need_libc() -> None:
    """The test above bites: the same programs in normal mode call libc's memcpy / memset
    (x86-64-v2) and the normal header lists them, with no FREESTANDING macro."""
    needs = set()
    for n in ("copies", "mlp"):
        o = aot_compile(_programs()[n][0], name=f"n_{n}", target="x86-64-v2")
        needs |= set(o.undefined)
        assert "_FREESTANDING" not in o.header
    assert needs & LIBC_LIBM, needs


def test_f64_power_is_refused_naming_pow(tmp_path: Path) -> None:
    """f64 power calls libm's pow; f32 power is vector code (backends/cpu/libm_f32.py) and
    needs nothing."""
    assert aot_compile(POWER, name="pw", freestanding=True).undefined == []
    power64 = POWER.replace("f32", "f64")
    assert "pow" in aot_compile(power64, name="pw").undefined  # normal mode: libm's pow
    with pytest.raises(Unimplemented, match=r"power is not implemented ahead of time: it "
                       r"needs libm's pow \(%0 f64\[64\]\)") as e:
        aot_compile(power64, name="pw", freestanding=True)
    assert e.value.opcode == "power"
    src = tmp_path / "pw.mlir"
    src.write_text(power64)
    out = io.StringIO()
    assert main(["aot", str(src), "--name", "pw", "-o", str(tmp_path), "--freestanding"],
                out) == 1
    assert "pow" in out.getvalue() and not (tmp_path / "pw.o").exists()


def test_cli_freestanding(tmp_path: Path) -> None:
    src = tmp_path / "mlp.mlir"
    src.write_text(MLP)
    out = io.StringIO()
    assert main(["aot", str(src), "--name", "net", "-o", str(tmp_path), "--freestanding",
                 "--target", "x86-64-v2"], out) == 0
    assert "needs nothing (freestanding)" in out.getvalue()
    assert objfile.undefined((tmp_path / "net.o").read_bytes()) == set()
    assert "#define NET_FREESTANDING 1" in (tmp_path / "net.h").read_text()


MEM_IR = """
declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1 immarg)
declare void @llvm.memcpy.p0.p0.i32(ptr, ptr, i32, i1 immarg)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1 immarg)
define void @mv(ptr %d, ptr %s, i64 %n) {
  call void @llvm.memmove.p0.p0.i64(ptr %d, ptr %s, i64 %n, i1 false)
  ret void
}
define void @cp(ptr %d, ptr %s, i32 %n) {
  call void @llvm.memcpy.p0.p0.i32(ptr %d, ptr %s, i32 %n, i1 false)
  ret void
}
define void @fill(ptr %d, i8 %c, i64 %n) nounwind {
  call void @llvm.memset.p0.i64(ptr %d, i8 %c, i64 %n, i1 false)
  ret void
}
define void @zero(ptr %d, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %p = getelementptr i32, ptr %d, i64 %i
  store i32 0, ptr %p
  %j = add i64 %i, 1
  %e = icmp ult i64 %j, %n
  br i1 %e, label %loop, label %done
done:
  ret void
}
"""


def test_private_mem_loops_run_and_need_nothing() -> None:
    """The rewritten module (O3) has no mem* intrinsic and no libc call, not even for the
    zero-fill loop LLVM's loop idiom pass would make a memset; run through MCJIT, memmove
    is right for overlaps either way, memcpy / memset for sizes 0..200."""
    import llvmlite.binding as llvm

    t = target.resolve(None)
    tm = machine(t)
    ref = llvm.parse_assembly(freestanding.rewrite(MEM_IR))
    ref.triple, ref.data_layout = t.triple, str(tm.target_data)
    ref.verify()
    optimize(ref, tm)
    text = str(ref)
    assert not freestanding.has_mem_intrinsics(text)
    assert not re.search(r"@(memcpy|memset|memmove)\b", text)
    assert objfile.undefined(tm.emit_object(ref)) == set()
    engine = llvm.create_mcjit_compiler(ref, tm)
    engine.finalize_object()
    vp, u64 = ctypes.c_void_p, ctypes.c_uint64
    mv = ctypes.CFUNCTYPE(None, vp, vp, u64)(engine.get_function_address("mv"))
    cp = ctypes.CFUNCTYPE(None, vp, vp, ctypes.c_uint32)(engine.get_function_address("cp"))
    fill = ctypes.CFUNCTYPE(None, vp, ctypes.c_uint8, u64)(engine.get_function_address("fill"))
    zero = ctypes.CFUNCTYPE(None, vp, u64)(engine.get_function_address("zero"))
    base = np.arange(300, dtype=np.uint8)
    for d, s, n in ((10, 0, 200), (0, 10, 200), (5, 5, 50), (0, 1, 0), (1, 0, 299)):
        buf, want = base.copy(), base.copy()
        want[d:d + n] = base[s:s + n].copy()
        mv(buf.ctypes.data + d, buf.ctypes.data + s, n)
        assert (buf == want).all(), (d, s, n)
    for n in (0, 1, 7, 64, 200):
        dst = np.zeros(256, np.uint8)
        cp(dst.ctypes.data, base.ctypes.data + 3, n)
        assert (dst[:n] == base[3:3 + n]).all() and not dst[n:].any()
        fill(dst.ctypes.data, 0xAB, n)
        assert (dst[:n] == 0xAB).all() and not dst[n:].any()
    words = np.full(100, 7, np.int32)
    zero(words.ctypes.data, 60)
    assert not words[:60].any() and (words[60:] == 7).all()


FMA_IR = """
declare float @llvm.fma.f32(float, float, float)
declare <4 x float> @llvm.fma.v4f32(<4 x float>, <4 x float>, <4 x float>)
define float @f(float %x, float %y, float %z) {
  %r = call float @llvm.fma.f32(float %x, float %y, float %z)
  ret float %r
}
define void @v(ptr %x, ptr %y, ptr %z, ptr %o) {
  %a = load <4 x float>, ptr %x
  %b = load <4 x float>, ptr %y
  %c = load <4 x float>, ptr %z
  %r = call <4 x float> @llvm.fma.v4f32(<4 x float> %a, <4 x float> %b, <4 x float> %c)
  store <4 x float> %r, ptr %o
  ret void
}
"""


def _fma_ok(x: np.float32, y: np.float32, z: np.float32, r: np.float32) -> bool:
    """r is x y + z correctly rounded to f32 (ties to even), checked with exact fractions."""
    from fractions import Fraction

    vals = (x, y, z)
    if not all(np.isfinite(v) for v in vals) or not np.isfinite(r):
        with np.errstate(all="ignore"):
            want = np.float32(np.float64(x) * np.float64(y) + np.float64(z))
        return bool(np.isnan(want) and np.isnan(r) or want == r)
    exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
    if exact == 0:
        return r == 0
    err = abs(Fraction(float(r)) - exact)
    for nb in (np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(-np.inf))):
        if not np.isfinite(nb):
            continue
        e2 = abs(Fraction(float(nb)) - exact)
        if e2 < err or e2 == err and int(np.float32(r).view(np.uint32)) & 1:
            return False
    return True


def test_soft_fmaf_is_correctly_rounded() -> None:
    """The f32 fma of targets without FMA (freestanding._fmaf), scalar and vector, through
    MCJIT: correctly rounded on random operands, double-rounding traps (x y + z a hair off
    a tie: f64 first, then f32 rounding, would be wrong), subnormal results, inf / NaN."""
    import llvmlite.binding as llvm

    t = target.resolve("x86-64-v2")
    tm = machine(t)
    ref = llvm.parse_assembly(freestanding.rewrite(FMA_IR, soft_fma=True))
    ref.triple, ref.data_layout = t.triple, str(tm.target_data)
    ref.verify()
    optimize(ref, tm)
    assert "llvm.fma" not in str(ref)
    assert objfile.undefined(tm.emit_object(ref)) == set()
    engine = llvm.create_mcjit_compiler(ref, tm)
    engine.finalize_object()
    fl = ctypes.c_float
    f = ctypes.CFUNCTYPE(fl, fl, fl, fl)(engine.get_function_address("f"))
    vp = ctypes.c_void_p
    v = ctypes.CFUNCTYPE(None, vp, vp, vp, vp)(engine.get_function_address("v"))
    f32 = np.float32
    h = f32(1 + 2.0 ** -12)  # h h = 1 + 2^-11 + 2^-24: an f32 tie
    cases = [(h, h, f32(2.0 ** -80)), (h, h, f32(-2.0 ** -80)), (-h, h, f32(2.0 ** -80)),
             (f32(1e-20), f32(1e-20), f32(1e-45)), (f32(3e-39), f32(0.5), f32(1e-45)),
             (f32(np.inf), f32(0), f32(1)), (f32(np.inf), f32(2), f32(-np.inf)),
             (f32(np.nan), f32(1), f32(1)), (f32(-0.0), f32(1), f32(0.0)),
             (f32(3e38), f32(10), f32(-3e38)), (f32(1.5), f32(2), f32(-3))]
    rng = np.random.default_rng(3)
    for _ in range(1500):
        x, y = (f32(rng.standard_normal() * 2.0 ** int(rng.integers(-60, 60))) for _ in "xy")
        z = f32(-x * y * (1 + rng.standard_normal() * 2.0 ** -int(rng.integers(1, 30)))) \
            if rng.random() < 0.5 else f32(rng.standard_normal())
        cases.append((x, y, z))
    naive = f32(float(h) * float(h) + 2.0 ** -80)  # rounded twice: the tie goes to even
    assert f(h, h, f32(2.0 ** -80)) == np.nextafter(naive, f32(2))
    bad = [(x, y, z, f(x, y, z)) for x, y, z in cases if not _fma_ok(x, y, z, f32(f(x, y, z)))]
    assert not bad, bad[:5]
    xs, ys, zs = (np.array([c[k] for c in cases[:1000]], f32) for k in range(3))
    out = np.empty_like(xs)
    for at in range(0, len(xs), 4):
        v(*(a.ctypes.data + 4 * at for a in (xs, ys, zs, out)))
    assert all(_fma_ok(x, y, z, r) for x, y, z, r in zip(xs, ys, zs, out))


@gcc
@pytest.mark.parametrize("tgt", [None, "aarch64-linux-gnu"])
def test_freestanding_conformance_sample(tmp_path: Path, tgt: str | None) -> None:
    """Every 12th conformance function with checks, freestanding on the host (every 8th on
    aarch64 under qemu): each compiles with no undefined symbol and matches the
    interpreter, or is refused for a process grid or for a libm function (named)."""
    from tests.aot.test_aot_corpus import GRID_OPS
    from tests.conformance import test_interpret as conf

    cc, runner = "gcc", ()
    if tgt is not None:
        missing = [t for t in ARM_TOOLS if driver.tool(t) is None]
        if missing:
            pytest.skip(f"{', '.join(missing)} not installed (`make aot-tools`)")
        cc, runner = "aarch64-linux-gnu-gcc", QEMU
    cases = conformance_cases(conf.CHUNKS)[::8 if tgt else 12]
    objs, kept, libm = [], [], []
    for k, c in enumerate(cases):
        try:
            objs.append(aot_compile(c.module, name=f"c{k}", function=c.comp, target=tgt,
                                    probe_capacity=c.probe_capacity, freestanding=True))
            kept.append(c)
        except Unimplemented as e:
            assert e.opcode in GRID_OPS or "needs libm's" in e.why, f"{c.cid}: {e}"
            libm += ["needs libm's" in e.why]
    assert len(objs) >= 0.7 * len(cases), (len(objs), len(cases), len(libm))
    for o in objs:
        assert objfile.undefined(o.object) == set(), (o.name, objfile.undefined(o.object))
    exe = driver.build(objs, tmp_path, cc=cc)
    got = driver.run(objs, {o.name: [] for o in objs}, tmp_path, exe, runner=runner)
    bad = []
    for c, o in zip(kept, objs):
        ref = Interpreter().run(c.comp, [])
        ref = ref if isinstance(ref, tuple) else (ref,)
        res = got[o.name]
        assert not isinstance(res, int), f"{c.cid}: error {res}"
        bad += [f"{c.cid} result {j}: {mismatch(g, r)}" for j, (g, r) in
                enumerate(zip(res, ref)) if mismatch(g, r) is not None]
    assert not bad, "\n".join(bad)
