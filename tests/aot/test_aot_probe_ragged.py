# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Objects with what xlapy aot used to refuse: chlo.ragged_dot (a loop nest in the object),
interpreter.probe (values as extra results, xlapy/aot/probe.py), and on aarch64 the complex
libm ops the cpu backend ran on the interpreter there (run under qemu)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.aot.compare import mismatch
from tests.aot.corpus import conformance_cases
from tests.conformance import test_interpret as conf
from xlapy.aot import compile as aot_compile
from xlapy.aot import driver
from xlapy.errors import XlapyError

gcc = pytest.mark.skipif(driver.tool("gcc") is None, reason="gcc is not installed: the AOT "
                         "tests link objects with it (Debian package gcc)")
ARM_TOOLS = ("aarch64-linux-gnu-gcc", "qemu-aarch64")

RAGGED = """
func.func @main(%l: tensor<2x7x3xf32>, %r: tensor<2x3x3x4xf32>, %g: tensor<3xi32>) -> tensor<2x7x4xf32> {
  %0 = "chlo.ragged_dot"(%l, %r, %g) {ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2], lhs_ragged_dimensions = [1], rhs_group_dimensions = [1]>} : (tensor<2x7x3xf32>, tensor<2x3x3x4xf32>, tensor<3xi32>) -> tensor<2x7x4xf32>
  return %0 : tensor<2x7x4xf32>
}
"""

PROBED_LOOP = """
func.func @main(%n: tensor<i32>, %v: tensor<3xf32>) -> tensor<3xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %p = interpreter.probe %v, probe_id = "input" : tensor<3xf32>
  %r:2 = stablehlo.while(%i = %c0, %acc = %p) : tensor<i32>, tensor<3xf32>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %i1 = stablehlo.add %i, %c1 : tensor<i32>
      %d = stablehlo.add %acc, %acc : tensor<3xf32>
      %q = interpreter.probe %d, probe_id = "step" : tensor<3xf32>
      stablehlo.return %i1, %q : tensor<i32>, tensor<3xf32>
    }
  return %r#1 : tensor<3xf32>
}
"""


@gcc
def test_ragged_dot_in_an_object(tmp_path: Path) -> None:
    """Batched, the ragged dimension in the middle, a negative group size (the later group
    overrides) and sizes summing past the rows: the interpreter's values."""
    rng = np.random.default_rng(1)
    obj = aot_compile(RAGGED, name="ragged")
    groups = {"ragged": [rng.standard_normal((2, 7, 3)).astype(np.float32),
                         rng.standard_normal((2, 3, 3, 4)).astype(np.float32),
                         np.array([3, -1, 9], np.int32)]}
    got = driver.run([obj], groups, tmp_path, driver.build([obj], tmp_path))["ragged"]
    want = xlapy.compile(RAGGED, backend="interpreter")(*groups["ragged"])
    assert not isinstance(got, int) and mismatch(got[0], want) is None


@gcc
def test_probes_are_extra_results(tmp_path: Path) -> None:
    """A probe outside a loop and one inside: each gives [capacity, *shape] values and an
    s64 count after the program's result; runs past the capacity are counted, not kept;
    a second call starts counting from zero."""
    obj = aot_compile(PROBED_LOOP, name="probed", probe_capacity=2)
    assert obj.probes == ["input", "step"]
    assert [str(s) for s in obj.results] == ["f32[3]", "f32[2,3]", "s64[]", "f32[2,3]",
                                             "s64[]"]
    for macro in ('#define PROBED_PROBE1_ID "step"', "#define PROBED_PROBE1_VALUES 3",
                  "#define PROBED_PROBE1_COUNT 4", "#define PROBED_PROBE_CAPACITY 2"):
        assert macro in obj.header
    exe = driver.build([obj], tmp_path)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    for n in (3, 1):
        out, vin, cin, vstep, cstep = driver.run([obj], {"probed": [np.int32(n), v]},
                                                 tmp_path, exe)["probed"]
        np.testing.assert_array_equal(out, v * 2.0 ** n)
        np.testing.assert_array_equal(vin[0], v)
        assert int(cin) == 1 and int(cstep) == n
        np.testing.assert_array_equal(vstep[:min(n, 2)], [v * 2, v * 4][:min(n, 2)])


@pytest.mark.skipif(any(driver.tool(t) is None for t in ARM_TOOLS),
                    reason="aarch64-linux-gnu-gcc / qemu-aarch64 missing: `make aot-tools`")
def test_complex_libm_ops_on_aarch64_under_qemu(tmp_path: Path) -> None:
    """c64 / c128 exp, log, sqrt, rsqrt, logistic, atan2, sine, cosine, tanh of the
    conformance corpus: libm's C99 complex functions called by AAPCS64 (they ran on the
    interpreter when targeting aarch64, so the object was refused)."""
    ops = ("atan2", "cosine", "exponential", "log", "logistic", "rsqrt", "sine", "sqrt",
           "tanh")
    cases = [c for c in conformance_cases(conf.CHUNKS)
             if c.cid.split(".mlir")[0] in ops and ("_c64" in c.cid or "_c128" in c.cid
                                                    or "_c32" in c.cid)]
    assert len(cases) >= 12
    objs = [aot_compile(c.module, name=f"z{k}", function=c.comp,
                        target="aarch64-linux-gnu") for k, c in enumerate(cases)]
    exe = driver.build(objs, tmp_path, cc="aarch64-linux-gnu-gcc")
    got = driver.run(objs, {o.name: [] for o in objs}, tmp_path, exe,
                     runner=("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"))
    for c, o in zip(cases, objs):
        ref = xlapy.interpreter.Interpreter().run(c.comp, [])
        ref = ref if isinstance(ref, tuple) else (ref,)
        res = got[o.name]
        assert not isinstance(res, int), f"{c.cid}: error {res}"
        for g, r in zip(res, ref):
            assert mismatch(g, r) is None, f"{c.cid}: {mismatch(g, r)}"


def test_negative_probe_capacity_is_an_error() -> None:
    with pytest.raises(XlapyError, match="probe_capacity -1 is negative"):
        aot_compile(PROBED_LOOP, name="probed", probe_capacity=-1)


PROBED_BRANCHES = """
func.func @main(%i: tensor<i32>, %v: tensor<4xi32>) -> tensor<4xi32> {
  %r = "stablehlo.case"(%i) ({
    %a = stablehlo.add %v, %v : tensor<4xi32>
    %p = interpreter.probe %a, probe_id = "b0" : tensor<4xi32>
    stablehlo.return %p : tensor<4xi32>
  }, {
    %m = stablehlo.multiply %v, %v : tensor<4xi32>
    %q = func.call @helper(%m) : (tensor<4xi32>) -> tensor<4xi32>
    stablehlo.return %q : tensor<4xi32>
  }) : (tensor<i32>) -> tensor<4xi32>
  %out = interpreter.probe %r, probe_id = "out" : tensor<4xi32>
  return %out : tensor<4xi32>
}
func.func private @helper(%x: tensor<4xi32>) -> tensor<4xi32> {
  %p = interpreter.probe %x, probe_id = "helper" : tensor<4xi32>
  return %p : tensor<4xi32>
}
"""


@gcc
def test_probes_in_branches_calls_and_at_the_root(tmp_path: Path) -> None:
    """A probe in a case branch counts only when its branch runs; one in a called function
    records through the call; a probe as the root value is the program's result too."""
    obj = aot_compile(PROBED_BRANCHES, name="branches")
    assert obj.probes == ["b0", "helper", "out"]
    exe = driver.build([obj], tmp_path)
    v = np.arange(4, dtype=np.int32)
    for i, want, counts in ((0, v + v, (1, 0, 1)), (1, v * v, (0, 1, 1)), (7, v * v, (0, 1, 1))):
        out, *probes = driver.run([obj], {"branches": [np.int32(i), v]}, tmp_path,
                                  exe)["branches"]
        np.testing.assert_array_equal(out, want)
        assert tuple(int(c) for c in probes[1::2]) == counts
        for values, c in zip(probes[::2], counts):
            if c:
                np.testing.assert_array_equal(values[0], want)
