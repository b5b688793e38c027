"""Element-wise kernels with long dependent chains run several vectors per loop iteration
(interleave_emit.INTERLEAVE, HEAVY_INTERLEAVE from HEAVY_WEIGHT on: the GELU chain); a
value's result does not depend on its position (vector lanes, interleaved parts, the tail)
and matches the interpreter's, for lengths that the wider groups divide or not."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import interleave_emit


def _tanh_chain(n: int, depth: int) -> str:
    lines = [f"func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{"]
    prev = "%x"
    for i in range(depth):
        lines.append(f"  %t{i} = stablehlo.tanh {prev} : tensor<{n}xf32>")
        lines.append(f"  %v{i} = stablehlo.add %t{i}, {prev} : tensor<{n}xf32>")
        prev = f"%v{i}"
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


def test_vectors_per_iteration_grow_with_the_chain() -> None:
    """One tanh: one vector a lane group; two: INTERLEAVE; seven: HEAVY_INTERLEAVE (the
    kernel's split alignment is its lane group)."""
    from xlapy.backends.cpu.lanes import vector_width

    w = vector_width()
    if not w:
        pytest.skip("scalar kernels on this target")
    aligns = [xlapy.compile(_tanh_chain(1 << 15, d), "cpu")._exe.kernel_specs[0].align
              for d in (1, 2, 7)]
    assert aligns == [w, interleave_emit.INTERLEAVE * w, interleave_emit.HEAVY_INTERLEAVE * w]
