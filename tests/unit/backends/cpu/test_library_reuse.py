"""library.dot_plan: the f32 copies of bf16 operands and the f32 result of a bf16 dot are
buffers reused across calls (no fresh 32 MB and its page faults per call), and reusing them
never changes a result, this call's or one the caller still holds."""

from __future__ import annotations

import tracemalloc

import ml_dtypes
import numpy as np

import xlapy

_B, _M, _K, _N = 4, 256, 64, 512
_TEXT = (f"func.func @main(%a: tensor<{_B}x{_M}x{_K}xbf16>, %b: tensor<{_B}x{_K}x{_N}xbf16>)"
         f" -> tensor<{_B}x{_M}x{_N}xbf16> {{\n"
         f"  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], "
         f"contracting_dims = [2] x [1] : (tensor<{_B}x{_M}x{_K}xbf16>, "
         f"tensor<{_B}x{_K}x{_N}xbf16>) -> tensor<{_B}x{_M}x{_N}xbf16>\n"
         f"  return %0 : tensor<{_B}x{_M}x{_N}xbf16>\n}}\n")


def _args(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((_B, _M, _K)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((_B, _K, _N)).astype(ml_dtypes.bfloat16))


#: IEEE denormals: the widened f32 BLAS path on every machine (AMX-BF16 targets compute bf16
#: dots on their tiles in the ftz mode, with no wide copies: test_gemm_bf16.py).
_OPTS = {"denormal": "ieee"}


def test_bf16_dot_reuses_its_wide_buffers() -> None:
    cpu = xlapy.compile(_TEXT, backend="cpu", options=_OPTS)
    first = cpu(*_args(0))
    kept = first.copy()
    for seed in (1, 2):
        args = _args(seed)
        want = xlapy.compile(_TEXT, backend="cpu", options=_OPTS)(*args)  # a fresh one's 1st call
        tracemalloc.start()
        got = cpu(*args)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert got.tobytes() == want.tobytes()
        # the bf16 result itself is new; the f32 result (twice its size) is not
        assert peak < _B * _M * _N * 4, peak
    assert first.tobytes() == kept.tobytes()
