"""Element-wise kernels with long dependent chains run several vectors per loop iteration
(interleave_emit.INTERLEAVE, HEAVY_INTERLEAVE from HEAVY_WEIGHT on: the GELU chain); a
value's result does not depend on its position (vector lanes, interleaved parts, the tail)
and matches the interpreter's, for lengths that the wider groups divide or not."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import interleave_emit


def _tanh_chain(n: int, depth: int, wide: bool = False) -> str:
    """`depth` times x = tanh(x) + x over f32 x; `wide`: in f64, rounded to f32 at the end."""
    t = "f64" if wide else "f32"
    lines = [f"func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{"]
    prev = "%x"
    if wide:
        lines.append(f"  %w = stablehlo.convert %x : (tensor<{n}xf32>) -> tensor<{n}xf64>")
        prev = "%w"
    for i in range(depth):
        lines.append(f"  %t{i} = stablehlo.tanh {prev} : tensor<{n}x{t}>")
        lines.append(f"  %v{i} = stablehlo.add %t{i}, {prev} : tensor<{n}x{t}>")
        prev = f"%v{i}"
    if wide:
        lines.append(f"  %r = stablehlo.convert {prev} : (tensor<{n}xf64>) -> tensor<{n}xf32>")
        prev = "%r"
    return "\n".join([*lines, f"  return {prev} : tensor<{n}xf32>", "}"])


@pytest.mark.parametrize("n", [1 << 15, (1 << 15) + 32, (1 << 15) + 7])
@pytest.mark.parametrize("depth", [2, 7])
def test_heavy_chains_are_position_independent(n: int, depth: int) -> None:
    text = _tanh_chain(n, depth)
    prog = xlapy.compile(text, "cpu")
    assert not prog._exe.fallbacks()
    rng = np.random.default_rng(n + depth)
    x = rng.uniform(-3, 3, n).astype(np.float32)
    x[::97] = np.float32(0.7)  # one value at many positions
    got = np.asarray(prog(x))
    assert len(set(got[::97].tolist())) == 1
    want = np.asarray(xlapy.compile(text, "interpreter")(x))
    np.testing.assert_allclose(got, want, rtol=2e-6 * depth, atol=2e-6 * depth)


@pytest.mark.parametrize("wide", [False, True], ids=["f32", "in_f64"])
def test_vectors_per_iteration_grow_with_the_chain(wide: bool) -> None:
    """One tanh: INTERLEAVE_AVX2 vectors a lane group on 16 registers (a transcendental
    alone is a long chain), else INTERLEAVE; two: the target's medium count (INTERLEAVE,
    INTERLEAVE_AVX2 on 16 registers); seven: HEAVY_INTERLEAVE; at most WIDE_INTERLEAVE where
    the chain runs in f64 for an f32 result (the kernel's split alignment is its lane
    group)."""
    from xlapy.backends.cpu.lanes import vector_width

    w = vector_width()
    if not w:
        pytest.skip("scalar kernels on this target")
    aligns = [xlapy.compile(_tanh_chain(1 << 15, d, wide), "cpu")._exe.kernel_specs[0].align
              for d in (1, 2, 7)]
    one = interleave_emit.INTERLEAVE_AVX2 if interleave_emit.sixteen_registers() else \
        interleave_emit.INTERLEAVE
    counts = [one, interleave_emit.medium_interleave(), interleave_emit.HEAVY_INTERLEAVE]
    if wide:
        counts = [min(c, interleave_emit.WIDE_INTERLEAVE) for c in counts]
    assert aligns == [c * w for c in counts]


def test_short_kernels_interleave_only_for_a_transcendental() -> None:
    """A short chain of cheap ops keeps one vector a lane group; sine and f32 power alone
    take at most their OP_INTERLEAVE count (more spilled), exp and f32 remainder the
    16-register count, f64 power (libm a lane) one, f64 exp at most WIDE_INTERLEAVE."""
    from xlapy.backends.cpu.lanes import vector_width

    w = vector_width()
    if not w:
        pytest.skip("scalar kernels on this target")
    n = 1 << 15

    def align(body: str, et: str = "f32") -> int:
        text = (f"func.func @main(%x: tensor<{n}x{et}>) -> tensor<{n}x{et}> {{\n{body}\n"
                f"  return %y : tensor<{n}x{et}>\n}}")
        return xlapy.compile(text, "cpu")._exe.kernel_specs[0].align

    one = interleave_emit.INTERLEAVE_AVX2 if interleave_emit.sixteen_registers() else \
        interleave_emit.INTERLEAVE
    t = f"tensor<{n}xf32>"
    assert align(f"  %a = stablehlo.add %x, %x : {t}\n  %y = stablehlo.multiply %a, %x : {t}") \
        == w
    assert align(f"  %y = stablehlo.exponential %x : {t}") == one * w
    assert align(f"  %y = stablehlo.sine %x : {t}") == \
        min(one, interleave_emit.OP_INTERLEAVE["sine"]) * w
    assert align(f"  %y = stablehlo.power %x, %x : {t}") == \
        min(one, interleave_emit.OP_INTERLEAVE["power"]) * w
    assert align(f"  %y = stablehlo.remainder %x, %x : {t}") == one * w
    assert align(f"  %y = stablehlo.power %x, %x : tensor<{n}xf64>", "f64") == w
    assert align(f"  %y = stablehlo.exponential %x : tensor<{n}xf64>", "f64") == \
        min(one, interleave_emit.WIDE_INTERLEAVE) * w  # (f64 roots: at most 2)


@pytest.mark.parametrize("depth", [2, 7])
def test_wide_chains_match_the_interpreter(depth: int) -> None:
    n = (1 << 15) + 5
    text = _tanh_chain(n, depth, wide=True)
    prog = xlapy.compile(text, "cpu")
    assert not prog._exe.fallbacks()
    x = np.random.default_rng(depth).uniform(-3, 3, n).astype(np.float32)
    want = np.asarray(xlapy.compile(text, "interpreter")(x))
    np.testing.assert_allclose(np.asarray(prog(x)), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("text", "arg", "lanes"), [
    ("func.func @main(%x: tensor<512x256xi8>) -> tensor<256xi8> {\n"
     "  %c = stablehlo.constant dense<-128> : tensor<i8>\n"
     "  %r = stablehlo.reduce(%x init: %c) applies stablehlo.maximum across dimensions = [0]"
     " : (tensor<512x256xi8>, tensor<i8>) -> tensor<256xi8>\n  return %r : tensor<256xi8>\n}",
     np.arange(512 * 256).reshape(512, 256).astype(np.int8), "x i8>"),
    ("func.func @main(%x: tensor<512x256xbf16>) -> tensor<512x256xbf16> {\n"
     "  %r = stablehlo.reverse %x, dims = [0] : tensor<512x256xbf16>\n"
     "  return %r : tensor<512x256xbf16>\n}",
     np.arange(512 * 256).reshape(512, 256).astype(np.float32), "x i16>")])
def test_narrow_values_take_as_many_bytes_a_step(text: str, arg: np.ndarray, lanes: str) -> None:
    """A kernel whose values are 1 or 2 bytes as computed (ints, moved bf16 / f8) runs 4 or 2
    times the f32 lanes (interleave_emit._narrow_lanes: an int8 column max ran 16 bytes a
    step, 1.2-1.9x XLA's time), the interpreter's values."""
    import ml_dtypes

    from xlapy.backends.cpu.lanes import vector_width

    x = arg.astype(ml_dtypes.bfloat16) if "bf16" in text else arg
    prog = xlapy.compile(text, "cpu")
    want = np.asarray(xlapy.compile(text, "interpreter")(x))
    np.testing.assert_array_equal(np.asarray(prog(x)), want)
    wide = vector_width() * (4 if "i8" in lanes else 2)
    assert f"<{wide} {lanes}" in prog._exe.kernel_ir
