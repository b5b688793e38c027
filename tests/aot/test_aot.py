# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""xlapy.aot: objects linked into a C program by gcc, run, and compared with the interpreter
(tests/aot/compare.py). Programs are batched: one object each, one generated driver and one
gcc run per test (xlapy/aot/driver.py)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.aot.compare import mismatch
from xlapy.aot import Unimplemented, driver
from xlapy.aot import compile as aot_compile
from xlapy.backends.cpu import objfile, rtlib
from xlapy.cli.main import main

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples" / "aot"
gcc = pytest.mark.skipif(driver.tool("gcc") is None, reason="gcc is not installed: the AOT "
                         "tests link objects with it (Debian package gcc)")

MLP = """
func.func @main(%x: tensor<5x8xf32>, %w: tensor<8x12xf32>, %b: tensor<12xf32>) -> tensor<5x12xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<5x8xf32>, tensor<8x12xf32>) -> tensor<5x12xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<12xf32>) -> tensor<5x12xf32>
  %2 = stablehlo.add %0, %1 : tensor<5x12xf32>
  %c = stablehlo.constant dense<0.0> : tensor<5x12xf32>
  %3 = stablehlo.maximum %2, %c : tensor<5x12xf32>
  return %3 : tensor<5x12xf32>
}
"""

LOOP = """
func.func @main(%n: tensor<i32>, %v: tensor<4xi32>) -> (tensor<i32>, tensor<4xi32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %acc = %v) : tensor<i32>, tensor<4xi32>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %i1 = stablehlo.add %i, %c1 : tensor<i32>
      %b = stablehlo.broadcast_in_dim %i1, dims = [] : (tensor<i32>) -> tensor<4xi32>
      %m = stablehlo.multiply %acc, %b : tensor<4xi32>
      stablehlo.return %i1, %m : tensor<i32>, tensor<4xi32>
    }
  return %r#0, %r#1 : tensor<i32>, tensor<4xi32>
}
"""

#: jaxlib's nonsymmetric eigensolver asked for right eigenvectors: the one LAPACK custom
#: call form with no in-object loops (eigenvalues alone compile: tests/aot/test_aot_lapack.py).
GEEV = """
func.func @main(%a: tensor<3x3xf64>) -> (tensor<3xf64>, tensor<3xf64>, tensor<3x3xcomplex<f64>>, tensor<3x3xcomplex<f64>>, tensor<i32>) {
  %0:5 = stablehlo.custom_call @lapack_dgeev_ffi(%a) {mhlo.backend_config = {compute_left = 78 : ui8, compute_right = 86 : ui8}} : (tensor<3x3xf64>) -> (tensor<3xf64>, tensor<3xf64>, tensor<3x3xcomplex<f64>>, tensor<3x3xcomplex<f64>>, tensor<i32>)
  return %0#0, %0#1, %0#2, %0#3, %0#4 : tensor<3xf64>, tensor<3xf64>, tensor<3x3xcomplex<f64>>, tensor<3x3xcomplex<f64>>, tensor<i32>
}
"""


def _check(objs: list, texts: list[str], inputs: dict[str, list[np.ndarray]], tmp: Path,
           cc: str = "gcc", runner: tuple[str, ...] = ()) -> None:
    exe = driver.build(objs, tmp, cc=cc)
    got = driver.run(objs, inputs, tmp, exe, runner=runner)
    for o, text in zip(objs, texts):
        ref = xlapy.compile(text, backend="interpreter")(*inputs[o.name])
        ref = ref if isinstance(ref, tuple) else (ref,)
        res = got[o.name]
        assert not isinstance(res, int), f"{o.name} returned error {res}"
        for j, (g, r) in enumerate(zip(res, ref)):
            assert mismatch(g, r) is None, f"{o.name} result {j}: {mismatch(g, r)}"


@gcc
def test_mlp_and_while_loop_link_and_match(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    objs = [aot_compile(MLP, name="mlp"), aot_compile(LOOP, name="loop")]
    inputs = {"mlp": [rng.standard_normal(s).astype(np.float32) for s in ((5, 8), (8, 12),
                                                                          (12,))],
              "loop": [np.array(3, np.int32), np.array([1, -2, 3, 4], np.int32)]}
    _check(objs, [MLP, LOOP], inputs, tmp_path)


@gcc
def test_multi_output_kernel_links_and_matches(tmp_path: Path) -> None:
    """A kernel that computes sibling results (multi_output.py): no step of their own."""
    from tests.unit.backends.cpu.test_multi_output import ADAM
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((512, 1024)).astype(np.float32) for _ in range(4)]
    args[3] = np.abs(args[3])
    _check([aot_compile(ADAM, name="adam")], [ADAM], {"adam": args}, tmp_path)


AXPY_HLO = """HloModule axpy

ENTRY main {
  a = f32[] parameter(0)
  x = f32[4] parameter(1)
  y = f32[4] parameter(2)
  ab = f32[4] broadcast(a), dimensions={}
  ax = f32[4] multiply(ab, x)
  ROOT r = f32[4] add(ax, y)
}
"""


@gcc
def test_hlo_text_program(tmp_path: Path) -> None:
    o = aot_compile(AXPY_HLO, name="axpy")
    assert "#define AXPY_ARG0_RANK 0" in o.header and "AXPY_ARG0_SHAPE" not in o.header
    args = [np.array(2, np.float32), np.arange(4, dtype=np.float32),
            np.ones(4, np.float32)]
    _check([o], [AXPY_HLO], {"axpy": args}, tmp_path)


def test_object_exports_run_only_and_needs_only_libc_libm() -> None:
    o = aot_compile(MLP, name="tiny_mlp", target="x86-64-v3")
    syms = objfile.symbols(o.object)
    exported = {s.name for s in syms if s.defined and s.binding == 1}
    assert exported == {"tiny_mlp_run", "tiny_mlp_run_threaded"}
    assert set(o.undefined) <= set(rtlib.LIBC) | set(rtlib.LIBM)
    assert objfile.machine(o.object) == "x86_64"
    assert "int tiny_mlp_run(const void *const *args, void *const *results, void *scratch);" \
        in o.header
    for macro in ("TINY_MLP_NUM_ARGS 3", "TINY_MLP_NUM_RESULTS 1", "TINY_MLP_ARG1_BYTES 384",
                  "TINY_MLP_RESULT0_SHAPE {5, 12}", "TINY_MLP_SCRATCH_ALIGN 64"):
        assert f"#define {macro}" in o.header


def test_aarch64_object_is_aarch64() -> None:
    o = aot_compile(LOOP, name="loop_arm", target="aarch64-linux-gnu")
    assert objfile.machine(o.object) == "aarch64"


def test_unimplemented_op_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(Unimplemented, match="lapack_dgeev_ffi"):
        aot_compile(GEEV, name="geev")
    src = tmp_path / "geev.mlir"
    src.write_text(GEEV)
    out = io.StringIO()
    assert main(["aot", str(src), "--name", "geev", "-o", str(tmp_path)], out) == 1
    assert "custom_call is not implemented ahead of time: lapack_dgeev_ffi: eigenvectors" \
        in out.getvalue()
    assert not (tmp_path / "geev.o").exists()


def test_cli_writes_object_and_header(tmp_path: Path) -> None:
    src = tmp_path / "mlp.mlir"
    src.write_text(MLP)
    out = io.StringIO()
    assert main(["aot", str(src), "--name", "net", "-o", str(tmp_path / "o"),
                 "--target", "x86-64-v3"], out) == 0
    assert (tmp_path / "o" / "net.o").read_bytes()[:4] == b"\x7fELF"
    assert "#define NET_NUM_ARGS 3" in (tmp_path / "o" / "net.h").read_text()
    assert "wrote" in out.getvalue()


def test_bad_name_is_an_error() -> None:
    with pytest.raises(xlapy.errors.XlapyError, match="C identifier"):
        aot_compile(MLP, name="9lives")


@gcc
def test_examples_mlp_and_cnn(tmp_path: Path) -> None:
    """examples/aot's programs (what `make aot-example` builds) match the interpreter."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("aot_example_check", EXAMPLES / "check.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)  # the example's seeded inputs
    spec.loader.exec_module(check)
    texts = [(EXAMPLES / f"{n}.mlir").read_text() for n in ("mlp", "cnn")]
    objs = [aot_compile(t, name=n) for t, n in zip(texts, ("mlp", "cnn"))]
    _check(objs, texts, {n: check.inputs(n) for n in ("mlp", "cnn")}, tmp_path)


THREADS_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "net.h"

static float x[NET_ARG0_ELEMENTS], w[NET_ARG1_ELEMENTS], bias[NET_ARG2_ELEMENTS];
static float want[NET_RESULT0_ELEMENTS];

static void *worker(void *arg) {
    (void)arg;
    void *scratch = NULL, *out = malloc(NET_RESULT0_BYTES);
    if (posix_memalign(&scratch, NET_SCRATCH_ALIGN, NET_SCRATCH_BYTES + 64)) return (void *)1;
    const void *args[] = {x, w, bias};
    void *res[] = {out};
    long bad = 0;
    for (int r = 0; r < 2000; r++) {
        if (net_run(args, res, scratch)) bad++;
        if (memcmp(out, want, NET_RESULT0_BYTES)) bad++;
    }
    free(scratch);
    free(out);
    return (void *)bad;
}

int main(void) {
    for (int i = 0; i < NET_ARG0_ELEMENTS; i++) x[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < NET_ARG1_ELEMENTS; i++) w[i] = (float)(i % 5) * 0.25f - 0.5f;
    for (int i = 0; i < NET_ARG2_ELEMENTS; i++) bias[i] = (float)i * 0.125f;
    void *scratch = NULL;
    if (posix_memalign(&scratch, NET_SCRATCH_ALIGN, NET_SCRATCH_BYTES + 64)) return 2;
    const void *args[] = {x, w, bias};
    void *res[] = {want};
    if (net_run(args, res, scratch)) return 3;
    pthread_t t[4];
    for (int k = 0; k < 4; k++) pthread_create(&t[k], NULL, worker, NULL);
    long bad = 0;
    for (int k = 0; k < 4; k++) { void *r; pthread_join(t[k], &r); bad += (long)r; }
    printf("%ld\n", bad);
    return bad != 0;
}
"""


@gcc
def test_concurrent_calls_with_distinct_scratch(tmp_path: Path) -> None:
    """No global state: four threads calling the same object agree with a lone call."""
    import subprocess

    aot_compile(MLP, name="net").write(tmp_path)
    (tmp_path / "threads.c").write_text(THREADS_C)
    subprocess.run(["gcc", "-O1", "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-pthread", "-I",
                    str(tmp_path), "-o", str(tmp_path / "threads"), str(tmp_path / "threads.c"),
                    str(tmp_path / "net.o"), "-lm"], check=True)
    res = subprocess.run([str(tmp_path / "threads")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "0", res.stdout + res.stderr


HALF = """
func.func @main(%x: tensor<6xf16>, %y: tensor<6xf32>) -> tensor<6xf16> {
  %0 = stablehlo.convert %y : (tensor<6xf32>) -> tensor<6xf16>
  %1 = stablehlo.multiply %x, %0 : tensor<6xf16>
  return %1 : tensor<6xf16>
}
"""


@gcc
def test_objects_needing_builtins_link_together(tmp_path: Path) -> None:
    """x86-64-v2 has no F16C: half conversions are compiler-rt calls, defined weak in each
    object, so two such objects link into one program."""
    objs = [aot_compile(HALF, name=n, target="x86-64-v2") for n in ("half_a", "half_b")]
    for o in objs:
        weak = {s.name for s in objfile.symbols(o.object) if s.defined and s.binding == 2}
        assert weak and weak <= set(rtlib.CONVERSIONS), weak
    x = np.array([0.5, -1, 2, 3.25, 1e-3, 60000], np.float16)
    y = np.array([3, 0.1, -2, 1e-4, 7, 2], np.float32)
    _check(objs, [HALF, HALF], {"half_a": [x, y], "half_b": [y.astype(np.float16), y]},
           tmp_path)
