"""XLAPY_PERF_MAP names JIT-compiled kernels for Linux perf (perf_map.py): each linked
kernel's address range, as perf reads /tmp/perf-<pid>.map; nothing is written unset."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import objfile, perf_map

PROGRAM = """
func.func @main(%x: tensor<4096xf32>) -> tensor<4096xf32> {
  %e = stablehlo.exponential %x : tensor<4096xf32>
  %y = stablehlo.multiply %e, %x : tensor<4096xf32>
  return %y : tensor<4096xf32>
}
"""


def _compile(tag: float) -> xlapy.CompiledProgram:
    # (a constant unique to the test keeps the disk cache from answering with no compile)
    return xlapy.compile(PROGRAM.replace("%y = stablehlo.multiply %e, %x", (
        f"%c = stablehlo.constant dense<{tag}> : tensor<4096xf32>\n"
        "  %y = stablehlo.multiply %e, %c")), backend="cpu")


def test_kernels_are_named_in_the_perf_map(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    where = tmp_path / "perf.map"
    monkeypatch.setattr(perf_map, "path", lambda: str(where))
    monkeypatch.setenv("XLAPY_PERF_MAP", "1")
    tag = float(np.float32(np.random.default_rng().uniform(1, 2)))
    prog = _compile(tag)
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    np.testing.assert_allclose(prog(x), np.exp(x) * np.float32(tag), rtol=1e-6)
    lines = [line.split() for line in where.read_text().splitlines()]
    kernels = [(int(a, 16), int(n, 16)) for a, n, name in lines if name == "xlapy:k0"]
    assert kernels and all(a and 16 < n < 1 << 20 for a, n in kernels)
    code = ctypes.string_at(kernels[-1][0], 16)  # (readable, the kernel's own bytes)
    assert code != bytes(16)


def test_nothing_is_written_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    where = tmp_path / "perf.map"
    monkeypatch.setattr(perf_map, "path", lambda: str(where))
    monkeypatch.delenv("XLAPY_PERF_MAP", raising=False)
    _compile(np.random.default_rng().uniform(2, 3))
    assert not where.exists()


def test_object_symbols_carry_their_sizes() -> None:
    prog = _compile(3.5)
    (name, obj), *_ = prog._exe.all_objects()
    sizes = {s.name: s.size for s in objfile.symbols(obj) if s.defined}
    assert sizes.get(name, 0) > 16
