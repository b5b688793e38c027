"""Inside control flow (a loop body runs once per step) work below `nested_split_cost` runs on
the calling thread: no hand-off to a worker per step; the same work at the top level still
splits, and the bits are the same either way (fixed chunks, parallel.py)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import threads
from xlapy.backends.cpu.options import CpuOptions

_B, _D, _STEPS = 64, 256, 6
_CELL = (f"%m = stablehlo.dot_general %h, %w, contracting_dims = [1] x [0] : "
         f"(tensor<{_B}x{_D}xf32>, tensor<{_D}x{_D}xf32>) -> tensor<{_B}x{_D}xf32>\n"
         f"      %t = stablehlo.tanh %m : tensor<{_B}x{_D}xf32>\n")
_T, _W = f"tensor<{_B}x{_D}xf32>", f"tensor<{_D}x{_D}xf32>"
_LOOP = f"""func.func @main(%h0: {_T}, %w: {_W}) -> {_T} {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %h = %h0) : tensor<i32>, tensor<{_B}x{_D}xf32>
    cond {{
      %n = stablehlo.constant dense<{_STEPS}> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      {_CELL}      stablehlo.return %j, %t : tensor<i32>, tensor<{_B}x{_D}xf32>
    }}
  return %r#1 : tensor<{_B}x{_D}xf32>
}}
"""
_ONCE = f"""func.func @main(%h: {_T}, %w: {_W}) -> {_T} {{
      {_CELL}  return %t : tensor<{_B}x{_D}xf32>
}}
"""


def _args() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((_B, _D)).astype(np.float32),
            (rng.standard_normal((_D, _D)) / 16).astype(np.float32)]


def _count_submits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count = [0]
    submit = threads.NativePool.submit

    def counting(self: threads.NativePool, *a: int, **k: object) -> threads.Handle:
        count[0] += 1
        return submit(self, *a, **k)

    monkeypatch.setattr(threads.NativePool, "submit", counting)
    return count


def test_loop_body_work_below_the_nested_cost_stays_on_the_caller(
        monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = CpuOptions.make()
    assert defaults.split_cost <= _B * _D * _D < defaults.nested_split_cost
    count = _count_submits(monkeypatch)
    opts = {"num_threads": 2}
    once = xlapy.compile(_ONCE, backend="cpu", options=opts)
    once(*_args())
    assert count[0] > 0  # the top level splits this work
    count[0] = 0
    loop = xlapy.compile(_LOOP, backend="cpu", options=opts)
    got = loop(*_args())
    assert count[0] <= 1  # no hand-off per step: the row-split loop (row_loop.py) hands a
    # worker its row shares once per call
    one = xlapy.compile(_LOOP, backend="cpu", options={"num_threads": 1})(*_args())
    assert got.tobytes() == one.tobytes()
