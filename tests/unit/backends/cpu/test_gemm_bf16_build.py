"""When gemm_bf16's AMX kernels are built: not in a program's compile (attention_bf16's cold
compile paid ~26 ms of LLVM for two of them) but on the first run that needs one, once per
process and target, through the disk cache as every kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_batch_chain import PLAIN, _text
from xlapy.backends.cpu import cache, gemm_bf16

BF = ml_dtypes.bfloat16
pytestmark = pytest.mark.skipif(not gemm_bf16.available(), reason="no AMX-BF16 or AVX512-BF16 here")

_DOT = """
func.func public @main(%a: tensor<64x96xbf16>, %b: tensor<96x128xbf16>) -> tensor<64x128xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
       : (tensor<64x96xbf16>, tensor<96x128xbf16>) -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}
"""


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool]]:
    seen: list[tuple[bool, bool]] = []
    real = gemm_bf16._compiled

    def spy(key: str, transposed: bool, bf16_out: bool) -> object:
        seen.append((transposed, bf16_out))
        return real(key, transposed, bf16_out)

    monkeypatch.setattr(gemm_bf16, "_compiled", spy)
    return seen


def test_a_dot_builds_its_kernel_on_the_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    cache.clear_memory()
    prog = xlapy.compile(_DOT, backend="cpu")
    assert "bf16 gemm" in prog._exe.explain() and not seen  # type: ignore[attr-defined]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 96)).astype(BF)
    b = rng.standard_normal((96, 128)).astype(BF)
    got = np.asarray(prog(a, b))
    assert seen == [(False, False)]
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-5, atol=1e-5)


def test_a_chain_builds_its_kernels_on_the_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    cache.clear_memory()
    text = _text(PLAIN, t=64, s=96, d=32, f="bf16")
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2, "split_cost": 1})
    assert "batch chain" in prog._exe.explain() and not seen  # type: ignore[attr-defined]
    rng = np.random.default_rng(5)
    args = [(rng.standard_normal(s) * 0.5).astype(BF)
            for s in ((2, 3, 64, 32), (2, 3, 96, 32), (2, 3, 96, 32))]
    got = np.asarray(prog(*args)).astype(np.float64)
    assert set(seen) == {(True, True), (False, True)}
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args)).astype(np.float64)
    assert np.linalg.norm(got - want) <= 1e-2 * np.linalg.norm(want)


def test_kernel_object_goes_through_the_disk_cache(tmp_path, monkeypatch) -> None:
    """Compiled once, the module's object is cached on disk under its IR text's key; a
    later process (here: a fresh `once` key and memory) links it unchanged."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    first, _ = gemm_bf16._compiled("bf16-disk-cache-test-compile", True, False)
    assert list(tmp_path.glob("*.o"))
    cache.clear_memory()
    again, addr = gemm_bf16._compiled("bf16-disk-cache-test-load", True, False)
    assert again.object == first.object and again.linked and addr
    cache.clear_memory()
