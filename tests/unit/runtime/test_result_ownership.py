"""Every result is memory the caller owns, on both backends and through every front door:
never a constant of the executable, an argument, or another result of the same call."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.runtime.client import Client

BACKENDS = ["interpreter", "cpu"]

CONST_AND_SUM = """func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %y = stablehlo.add %x, %c : tensor<4xf32>
  return %c, %y : tensor<4xf32>, tensor<4xf32>
}"""
IDENTITY = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}"""
TWICE = """func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = stablehlo.negate %x : tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}"""
PARAM_TWICE = """func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_result_written_by_caller_does_not_change_next_call(backend: str) -> None:
    exe = xlapy.compile(CONST_AND_SUM, backend=backend)
    x = np.zeros(4, np.float32)
    c, _ = exe(x)
    c[...] = 77
    c2, y2 = exe(x)
    np.testing.assert_array_equal(c2, np.ones(4, np.float32))
    np.testing.assert_array_equal(y2, np.ones(4, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_result_is_not_the_argument(backend: str) -> None:
    x = np.arange(4, dtype=np.float32)
    r = xlapy.compile(IDENTITY, backend=backend)(x)
    assert r is not x and not np.shares_memory(r, x)
    np.testing.assert_array_equal(r, np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", [TWICE, PARAM_TWICE], ids=["computed", "parameter"])
def test_repeated_result_is_two_arrays(backend: str, text: str) -> None:
    x = np.arange(4, dtype=np.float32)
    a, b = xlapy.compile(text, backend=backend)(x)
    assert not np.shares_memory(a, b) and not np.shares_memory(a, x)
    a[...] = 5
    assert not np.any(b == 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cpu_executable_run_and_client_results_are_owned(backend: str) -> None:
    x = np.arange(4, dtype=np.float32)
    exe = xlapy.compile(IDENTITY, backend=backend)
    assert not np.shares_memory(exe._exe.run([x]), x)
    client = Client(backend)
    compiled = client.compile(exe.module)
    out = compiled.execute_and_transfer([x]).to_numpy()
    assert not np.shares_memory(out, x)
    const = client.compile(xlapy.compile(CONST_AND_SUM, backend=backend).module)
    first = const.execute([x])
    first._get().to_value()[0][...] = 9
    np.testing.assert_array_equal(const.execute_and_transfer([x]).to_value()[0], np.ones(4))


def test_transfer_to_server_copies_the_host_value() -> None:
    client = Client("interpreter")
    x = np.arange(4, dtype=np.float32)
    data = client.transfer_to_server(x)
    x[...] = -1
    np.testing.assert_array_equal(data._get().to_numpy(), np.arange(4, dtype=np.float32))
