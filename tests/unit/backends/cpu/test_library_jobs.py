"""Library modules a program's first run needs (gemv's loop forms, the int8 GEMMs) start
compiling on a compile thread while the compile that plans them runs (once.started,
cache.library_job), not in the first call: the batch-1 MLP's first call waited ~27 ms for
gemv's module, int8_matmul's ~12 ms for the AMX kernel."""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import gemm_amx, gemm_i16, gemm_vnni, gemv, target

#: Batch-1 rows times a 4 MB W (row-major, then transposed): past gemm_small's L2 bound.
ROW = """
func.func @main(%x: tensor<1x1024xf32>, %w: tensor<1024x1024xf32>) -> tensor<1x1024xf32> {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<1x1024xf32>, tensor<1024x1024xf32>) -> tensor<1x1024xf32>
  return %y : tensor<1x1024xf32>
}
"""
ROW_T = ROW.replace("[1] x [0]", "[1] x [1]")
INT8 = """
func.func @main(%x: tensor<128x256xi8>, %w: tensor<256x128xi8>) -> tensor<128x128xi32> {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<128x256xi8>, tensor<256x128xi8>) -> tensor<128x128xi32>
  return %y : tensor<128x128xi32>
}
"""


def _int8_module() -> ModuleType | None:
    """The int8 GEMM this target's compile routes to (library.py's order), if any."""
    t = target.current()
    if not t.runs_here or not t.is_x86:
        return None
    if gemm_amx.available():
        return gemm_amx
    if gemm_vnni.available():
        return gemm_vnni
    return gemm_i16 if gemm_i16.available() else None


def _spy(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> list[tuple[Any, ...]]:
    """The `_job` calls the compiling (main) thread makes; the build-ahead thread's calls
    (as the compile returns) are left out, since they alone would pass the test."""
    seen: list[tuple[Any, ...]] = []
    real = mod._job

    def spy(*args: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            seen.append(args)
        return real(*args)

    monkeypatch.setattr(mod, "_job", spy)
    return seen


def _args(text: str) -> list[np.ndarray]:
    rng = np.random.default_rng(4)
    prog = xlapy.compile(text, backend="interpreter")
    return [rng.integers(-100, 100, p.shape.dimensions).astype(p.shape.dtype)
            if np.dtype(p.shape.dtype).kind == "i" else
            rng.standard_normal(p.shape.dimensions).astype(p.shape.dtype)
            for p in prog.module.entry.parameters]


@pytest.mark.parametrize("text, form", [(ROW, "rows"), (ROW_T, "cols")])
def test_gemv_form_starts_while_the_compile_plans(monkeypatch: pytest.MonkeyPatch,
                                                 text: str, form: str) -> None:
    if not gemv.available():
        pytest.skip("gemv's loops run on x86-64 targets this machine runs")
    seen = _spy(monkeypatch, gemv)
    prog = xlapy.compile(text, backend="cpu")
    assert (False, target.current(), form) in seen
    assert "library jit gemv" in prog._exe.explain()  # type: ignore[attr-defined]
    args = _args(text)
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(np.asarray(prog(*args)), np.asarray(want), rtol=1e-5,
                               atol=1e-4)


def test_int8_gemm_starts_while_the_compile_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _int8_module()
    if mod is None:
        pytest.skip("no int8 GEMM module for this target")
    seen = _spy(monkeypatch, mod)
    prog = xlapy.compile(INT8, backend="cpu")
    assert seen and all(args[-1] == target.current().key for args in seen)
    args = _args(INT8)
    want = xlapy.compile(INT8, backend="interpreter")(*args)
    np.testing.assert_array_equal(np.asarray(prog(*args)), np.asarray(want))
