"""The gpu executable's runtime and kernel index logic, run on tests/unit/backends/gpu/
emulate.py's stand-in device (kernels compiled for the host CPU as a one-thread grid,
cuBLAS as a numpy column-major GEMM), compared with the interpreter. This is no substitute
for a GPU run (warp shuffles, shared memory, barriers, libdevice and the real launch path
are not exercised here); it checks planning, delinearization, reductions walked by one
thread, host and alias steps, and the cuBLAS plans' transposes."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.gpu import emulate


def _check(text: str, args: list[np.ndarray], monkeypatch: pytest.MonkeyPatch,
           rtol: float = 1e-5) -> emulate.FakeDevice:
    exe = xlapy.compile(text, backend="gpu")._exe
    got, dev = emulate.run(exe, args, monkeypatch)
    want = xlapy.compile(text, backend="interpreter")(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol)
    return dev


def test_elementwise_and_reductions(monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
    func.func @main(%x: tensor<3x5x70xf32>, %y: tensor<3x5x70xf32>) -> (tensor<3x5x70xf32>,
        tensor<3x5xf32>, tensor<5x70xf32>, tensor<f32>, tensor<70x5x3xf32>) {
      %e = stablehlo.exponential %x : tensor<3x5x70xf32>
      %s = stablehlo.add %e, %y : tensor<3x5x70xf32>
      %lo = stablehlo.constant dense<-1.0e30> : tensor<f32>
      %r = stablehlo.reduce(%s init: %lo) applies stablehlo.maximum across dimensions = [2]
        : (tensor<3x5x70xf32>, tensor<f32>) -> tensor<3x5xf32>
      %z = stablehlo.constant dense<1.5> : tensor<f32>
      %c = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0]
        : (tensor<3x5x70xf32>, tensor<f32>) -> tensor<5x70xf32>
      %f = stablehlo.reduce(%y init: %lo) applies stablehlo.maximum across dimensions = [0, 1, 2]
        : (tensor<3x5x70xf32>, tensor<f32>) -> tensor<f32>
      %t = stablehlo.transpose %s, dims = [2, 1, 0] : (tensor<3x5x70xf32>) -> tensor<70x5x3xf32>
      return %s, %r, %c, %f, %t : tensor<3x5x70xf32>, tensor<3x5xf32>, tensor<5x70xf32>,
        tensor<f32>, tensor<70x5x3xf32>
    }"""
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((3, 5, 70)).astype(np.float32) for _ in range(2))
    dev = _check(text, [x, y], monkeypatch)
    kinds = sorted(how.split("(")[-1] for _, _, how in dev.exes[0].report if "kernel" in how)
    assert kinds == ["block)", "block)", "elements)", "elements)", "elements)"]


def test_integer_ops_and_host_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
    func.func @main(%x: tensor<6x9xi32>) -> (tensor<6x9xi32>, tensor<9xi32>, tensor<6x9xi32>) {
      %i = stablehlo.iota dim = 1 : tensor<6x9xi32>
      %m = stablehlo.multiply %x, %i : tensor<6x9xi32>
      %z = stablehlo.constant dense<0> : tensor<i32>
      %r = stablehlo.reduce(%m init: %z) applies stablehlo.add across dimensions = [0]
        : (tensor<6x9xi32>, tensor<i32>) -> tensor<9xi32>
      %s = "stablehlo.sort"(%m) ({
        ^bb0(%a: tensor<i32>, %b: tensor<i32>):
          %c = stablehlo.compare LT, %a, %b : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
      }) {dimension = 1 : i64, is_stable = true} : (tensor<6x9xi32>) -> tensor<6x9xi32>
      %n = stablehlo.negate %s : tensor<6x9xi32>
      return %m, %r, %n : tensor<6x9xi32>, tensor<9xi32>, tensor<6x9xi32>
    }"""
    x = np.arange(54, dtype=np.int32).reshape(6, 9) % 7 - 3
    _check(text, [x], monkeypatch, rtol=0)


@pytest.mark.parametrize(("lhs", "rhs", "dims"), [
    ((4, 3), (3, 5), "[1] x [0]"),
    ((3, 4), (3, 5), "[0] x [0]"),
    ((4, 3), (5, 3), "[1] x [1]"),
    ((3, 4), (5, 3), "[0] x [1]"),
    ((3,), (3, 5), "[0] x [0]"),
    ((4, 3), (3,), "[1] x [0]"),
])
def test_cublas_plans(lhs: tuple[int, ...], rhs: tuple[int, ...], dims: str,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    lc, rc = (int(d) for d in dims.replace("[", "").replace("]", "").split(" x "))
    out = [d for i, d in enumerate(lhs) if i != lc] + [d for i, d in enumerate(rhs) if i != rc]

    def t(s: list[int] | tuple[int, ...]) -> str:
        return f"tensor<{''.join(f'{d}x' for d in s)}f64>"

    text = f"""
    func.func @main(%a: {t(lhs)}, %b: {t(rhs)}) -> {t(out)} {{
      %d = stablehlo.dot_general %a, %b, contracting_dims = {dims}
        : ({t(lhs)}, {t(rhs)}) -> {t(out)}
      return %d : {t(out)}
    }}"""
    rng = np.random.default_rng(1)
    _check(text, [rng.standard_normal(lhs), rng.standard_normal(rhs)], monkeypatch, 1e-12)


def test_batched_cublas_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
    func.func @main(%a: tensor<2x4x3xf32>, %b: tensor<2x5x3xf32>) -> tensor<2x4x5xf32> {
      %d = stablehlo.dot_general %a, %b, batching_dims = [0] x [0],
        contracting_dims = [2] x [2] : (tensor<2x4x3xf32>, tensor<2x5x3xf32>) -> tensor<2x4x5xf32>
      return %d : tensor<2x4x5xf32>
    }"""
    rng = np.random.default_rng(2)
    _check(text, [rng.standard_normal((2, 4, 3)).astype(np.float32),
                  rng.standard_normal((2, 5, 3)).astype(np.float32)], monkeypatch)


def test_results_stay_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    from xlapy.backends.gpu import cublas, driver, runtime

    text = """
    func.func @main(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x3xf32>) {
      %a = stablehlo.abs %x : tensor<3x4xf32>
      %d = stablehlo.dot_general %a, %x, contracting_dims = [1] x [1]
        : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x3xf32>
      return %a, %d : tensor<3x4xf32>, tensor<3x3xf32>
    }"""
    exe = xlapy.compile(text, backend="gpu")._exe
    dev = emulate.FakeDevice()
    dev.register(exe)
    monkeypatch.setattr(driver, "device", lambda: dev)
    monkeypatch.setattr(cublas, "run", emulate.numpy_gemm)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    first = exe.run_on_device([x])
    assert all(isinstance(v, runtime.DeviceArray) for v in first)
    again = exe.run_on_device([first[0]])  # a device array as the argument: no copy in
    np.testing.assert_array_equal(runtime.to_host(again[0]), np.abs(x))
    np.testing.assert_allclose(runtime.to_host(again[1]), np.abs(x) @ np.abs(x).T)
    exe._runtime = None


def test_client_keeps_results_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Client("gpu"): execute returns GlobalData holding the device value; passing it to the
    next execution copies nothing; transfer_to_client copies it out."""
    from xlapy.backends.gpu import driver, runtime

    dev = emulate.FakeDevice()
    monkeypatch.setattr(driver, "device", lambda: dev)
    client = xlapy.Client("gpu")
    text = """
    func.func @main(%x: tensor<5xf32>) -> tensor<5xf32> {
      %y = stablehlo.multiply %x, %x : tensor<5xf32>
      return %y : tensor<5xf32>
    }"""
    exe = client.compile(xlapy.compile(text, backend="interpreter")._exe.module)
    dev.register(exe.compiled)
    x = np.arange(5, dtype=np.float32)
    sq = exe.execute([x])
    assert isinstance(sq.device_value, runtime.DeviceArray)
    uploads = []
    monkeypatch.setattr(runtime.DeviceArray, "from_host",
                        classmethod(lambda cls, d, v: uploads.append(v)))
    quad = exe.execute([sq])
    assert uploads == []
    np.testing.assert_array_equal(client.transfer_to_client(quad).to_numpy(), x ** 4)
    assert str(quad.shape) == str(sq.shape)
    quad.deallocate()
    with pytest.raises(xlapy.XlapyError, match="deallocated"):
        client.transfer_to_client(quad)


def test_control_flow_runs_gpu_sub_executables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A while loop (its body a kernel, its predicate read back per step) and an if: their
    computations are gpu executables on device values, nothing runs on the host."""
    text = """
    func.func @main(%x: tensor<16xf32>, %n: tensor<i32>) -> (tensor<16xf32>, tensor<i32>) {
      %zero = stablehlo.constant dense<0> : tensor<i32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %r:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<16xf32>
        cond {
          %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
        } do {
          %i1 = stablehlo.add %i, %one : tensor<i32>
          %h = stablehlo.constant dense<0.5> : tensor<16xf32>
          %t = stablehlo.tanh %v : tensor<16xf32>
          %v1 = stablehlo.add %t, %h : tensor<16xf32>
          stablehlo.return %i1, %v1 : tensor<i32>, tensor<16xf32>
        }
      %p = stablehlo.compare GT, %r#0, %one : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %o = "stablehlo.if"(%p) ({
        %neg = stablehlo.negate %r#1 : tensor<16xf32>
        stablehlo.return %neg : tensor<16xf32>
      }, {
        stablehlo.return %r#1 : tensor<16xf32>
      }) : (tensor<i1>) -> tensor<16xf32>
      return %o, %r#0 : tensor<16xf32>, tensor<i32>
    }"""
    from xlapy.passes import conditional_to_select

    # (an if this small would become a select: keep it a conditional here)
    monkeypatch.setattr(conditional_to_select, "MAX_ELEMENTS", 0)
    x = np.linspace(-2, 2, 16, dtype=np.float32)
    for n in (0, 1, 5):
        dev = _check(text, [x, np.int32(n)], monkeypatch)
        exe = dev.exes[0]
        assert exe.host_ops() == []
        hows = {op: how for _, op, how in exe.report}
        assert hows["while"] == hows["if"] == "control flow (gpu sub-executables)"
