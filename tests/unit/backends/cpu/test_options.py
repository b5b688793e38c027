"""CpuOptions (issue 13, "typed, layered backend"): one frozen value made from the compile's
options mapping flows to the pipeline, the fusion and every executable; the environment only
gives defaults, read once when the options are made."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import options, target
from xlapy.backends.cpu.fusion_plan import FusionLimits
from xlapy.backends.cpu.options import CpuOptions
from xlapy.errors import XlapyError

from .test_pipeline import SHARED

LOOP = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<64xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %w = stablehlo.sine %v : tensor<64xf32>
      stablehlo.return %j, %w : tensor<i32>, tensor<64xf32>
    }
  return %r#1 : tensor<64xf32>
}
"""


def test_made_from_a_mapping() -> None:
    o = CpuOptions.make({"num_threads": 3, "target": "x86-64-v2", "dup_ops": 2,
                         "split_cost": 5})
    assert (o.num_threads, o.target.name, o.split_cost) == (3, "x86-64-v2", 5)
    assert o.fusion == FusionLimits(dup_ops=2)
    assert CpuOptions.make(o) is o
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.num_threads = 4  # type: ignore[misc]


def test_an_unknown_option_is_an_error() -> None:
    with pytest.raises(XlapyError, match="unknown cpu compile option.*num_thread\\b"):
        xlapy.compile(SHARED, "cpu", options={"num_thread": 2})


def test_environment_defaults_are_read_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CPU_LANES", "0")
    monkeypatch.setenv("XLAPY_NUM_THREADS", "3")
    monkeypatch.setenv("XLAPY_CPU_TARGET", "x86-64-v2")
    made = CpuOptions.make()
    assert (made.lanes, made.num_threads, made.target.name) == (0, 3, "x86-64-v2")
    assert CpuOptions.make({"lanes": 4, "num_threads": 1}).lanes == 4
    monkeypatch.delenv("XLAPY_CPU_LANES")
    monkeypatch.delenv("XLAPY_NUM_THREADS")
    monkeypatch.delenv("XLAPY_CPU_TARGET")
    assert made.lanes == 0 and made.target.name == "x86-64-v2"  # (a value, not a lookup)
    assert CpuOptions.make().lanes is None


def test_lanes_option_picks_scalar_kernels() -> None:
    """lanes=0 is $XLAPY_CPU_LANES=0 as an option: scalar IR, the same values."""
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    vec = xlapy.compile(SHARED, "cpu")
    scalar = xlapy.compile(SHARED, "cpu", options={"lanes": 0})
    assert not any(k.explicit for k in scalar._exe.kernel_specs)  # type: ignore[attr-defined]
    if target.current().vector_bits >= 128:
        assert all(k.explicit for k in vec._exe.kernel_specs)  # type: ignore[attr-defined]
    for a, b in zip(vec(x, x), scalar(x, x)):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


SLICES = """
func.func @main(%x: tensor<2x12x12x3xf32>) -> (tensor<2x8x8x3xf32>, tensor<2x8x8x3xf32>) {
  %0 = stablehlo.slice %x [0:2, 2:10, 2:10, 0:3] : (tensor<2x12x12x3xf32>) -> tensor<2x8x8x3xf32>
  %1 = stablehlo.slice %x [0:2, 1:9, 3:11, 0:3] : (tensor<2x12x12x3xf32>) -> tensor<2x8x8x3xf32>
  %2 = stablehlo.multiply %1, %1 : tensor<2x8x8x3xf32>
  return %0, %2 : tensor<2x8x8x3xf32>, tensor<2x8x8x3xf32>
}
"""


def test_lanes_option_zero_compiles_slices() -> None:
    """lanes=0 with slices (the lane check's alignment test divided by the width: a
    ZeroDivisionError from `XLAPY_CPU_LANES=0` on any kernel slicing along its rows)."""
    x = np.arange(2 * 12 * 12 * 3, dtype=np.float32).reshape(2, 12, 12, 3)
    scalar = xlapy.compile(SLICES, "cpu", options={"lanes": 0})
    assert not any(k.explicit for k in scalar._exe.kernel_specs)  # type: ignore[attr-defined]
    a, b = scalar(x)
    np.testing.assert_array_equal(a, x[:, 2:10, 2:10])
    np.testing.assert_array_equal(b, x[:, 1:9, 3:11] ** 2)


def test_fusion_limits_reach_the_fusion_pass() -> None:
    """dup_ops=0: the shared exp/tanh chain is no longer recomputed in both kernels but gets
    a buffer of its own (one more kernel); the values do not change."""
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    default = xlapy.compile(SHARED, "cpu")
    strict = xlapy.compile(SHARED, "cpu", options={"dup_ops": 0})
    exe = strict._exe  # type: ignore[attr-defined]
    assert len(default._exe.kernel_specs) == 2  # type: ignore[attr-defined]
    assert len(exe.kernel_specs) == 3
    assert "  kernel %t (tanh): %e" in exe.fusions()
    for a, b in zip(default(x, x), strict(x, x)):
        np.testing.assert_array_equal(a, b)


def test_nested_executables_get_the_same_options() -> None:
    prog = xlapy.compile(LOOP, "cpu", options={"num_threads": 2, "split_cost": 7})
    exe = prog._exe  # type: ignore[attr-defined]
    subs = [sub for _, sub in exe.subexecs]
    assert subs and all(s.options == dataclasses.replace(exe.options, nested=True,
                                                         loop_part=True)
                        for s in subs)  # (LOOP's while: its cond and body)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    want = xlapy.compile(LOOP, "interpreter")(x)
    np.testing.assert_allclose(prog(x), want, rtol=2e-6, atol=1e-6)


def test_stream_threshold_is_the_last_level_cache(tmp_path: Path) -> None:
    """Non-temporal stores start at the largest cache's size (a 9.6 MB result in a 32 MB L3
    went to memory at 2.6x XLA's time); 8 MiB where sysfs says nothing usable."""
    for i, size in enumerate(["32K", "1024K", "32768K"]):
        (tmp_path / f"index{i}").mkdir()
        (tmp_path / f"index{i}" / "size").write_text(size + "\n")
    assert options.stream_default.__wrapped__(str(tmp_path)) == 32 << 20
    (tmp_path / "index3").mkdir()
    (tmp_path / "index3" / "size").write_text("96M\n")
    assert options.stream_default.__wrapped__(str(tmp_path)) == 96 << 20
    assert options.stream_default.__wrapped__(str(tmp_path / "missing")) == 8 << 20
    assert CpuOptions.make().stream_bytes == options.stream_default()


def test_results_beside_a_big_read_stream_from_a_quarter_of_the_cache() -> None:
    """An entry result streams from `stream_bytes`, or from a quarter of it while the kernel
    reads a buffer of `stream_bytes` or more (an embedding table); never below 1 MiB."""
    from xlapy.types import ElementType as ET
    from xlapy.types import Shape

    opts = CpuOptions.make({"stream_bytes": 32 << 20})

    def f32(*dims: int) -> Shape:
        return Shape.array(ET.F32, dims)

    table, rows = f32(50000, 512), f32(8192, 512)  # 100 MB, 16 MB
    assert opts.streams(rows, [table, f32(8192)])
    assert not opts.streams(rows, [rows])  # x * 2 + 1 of 16 MB: ordinary stores
    assert opts.streams(f32(8192, 1024), [f32(8192, 1024)])  # 32 MB
    assert opts.streams(f32(2048, 1024), [table])  # 8 MB: a quarter
    assert not opts.streams(f32(1024, 1024), [table])  # 4 MB
    tiny = CpuOptions.make({"stream_bytes": 2 << 20})
    assert not tiny.streams(f32(128, 1024), [f32(1024, 1024)])  # 512 KB < 1 MiB
    assert not opts.streams(Shape.tuple([rows]), [table])
