"""gemm_small's modules hold the column loops of one pattern (gemm_small.Columns: blocks of
V vectors, the whole vectors left as one block, the rest's set bits), that of the n they are
built for: every column of every n is written, with the bits of the module that has all the
loops, on each x86 target (issue 14: the module is built on a program's first run)."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy import denormal
from xlapy.backends.cpu import gemm_small, target
from xlapy.backends.cpu.llvm_util import Engine, module_text

TARGETS = ["host", "x86-64-v3", "x86-64-v2"]


def _generic(f64: bool) -> tuple[Engine, object]:
    """The module with every column loop (the pre-pattern one), its direct function."""
    name = f"xlapy_{'d' if f64 else 's'}gemm_small_all"
    with denormal.use(denormal.FTZ):
        eng = Engine(module_text(gemm_small._emit(name, f64)), light=True,
                     exports=[f"{name}_direct"])
    return eng, gemm_small._DIRECT(eng.address(f"{name}_direct"))


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("f64", [False, True])
def test_every_n_runs_its_patterns_module_with_the_generic_bits(name: str, f64: bool) -> None:
    t = target.resolve(name)
    if not t.runs_here:
        pytest.skip(f"{name} does not run here")
    dt = np.float64 if f64 else np.float32
    rng = np.random.default_rng(0)
    m, k = 11, 7
    with target.use(t):
        eng, generic = _generic(f64)
        lanes = t.vector_bits // (64 if f64 else 32)
        step = 3 * lanes if t.vector_bits >= 256 else 2 * lanes
        seen: set[gemm_small.Columns] = set()
        for n in range(1, 2 * step + lanes):
            x = rng.standard_normal((m, k)).astype(dt)
            y = rng.standard_normal((k, n)).astype(dt)
            want = np.full((m, n), np.nan, dt)
            generic(x.ctypes.data, y.ctypes.data, want.ctypes.data, n, k, 0, m)
            s = gemm_small.GemmShape(m, n, k, f64)
            got = np.full((m, n), np.nan, dt)
            gemm_small.compiled(s).direct(x.ctypes.data, y.ctypes.data, got.ctypes.data,
                                          n, k, 0, m)
            np.testing.assert_array_equal(got, want, err_msg=f"n={n}")
            seen.add(gemm_small.columns(n, f64))
    assert eng  # alive until here
    # the patterns reached: with and without full blocks, singles and each rest width
    assert {c.full for c in seen} == {True, False}
    assert {w for c in seen for w in c.rest} == {lanes >> j for j in
                                                 range(1, lanes.bit_length())}


def test_columns_of_n() -> None:
    with target.use(target.resolve("host")):
        if target.current().vector_bits != 512:
            pytest.skip("AVX-512 blocking")
        # f32, 16 lanes, blocks of 3 vectors (48 columns)
        assert gemm_small.columns(256, False) == gemm_small.Columns(True, 1, ())
        assert gemm_small.columns(48, False) == gemm_small.Columns(True, 0, ())
        assert gemm_small.columns(32, False) == gemm_small.Columns(False, 2, ())
        assert gemm_small.columns(32, False).suffix == "_s2"
        assert gemm_small.columns(13, False) == gemm_small.Columns(False, False, (8, 4, 1))
        assert gemm_small.columns(13, False).suffix == "_r8r4r1"


def test_the_vectors_left_run_as_one_block() -> None:
    """32 columns (two vectors, fewer than a block's three) are one pass over the lhs with
    2 x R accumulators, not two passes of R (a broadcast load an FMA: 1024x1024x32 ran at
    1.19x XLA's time, now 0.83)."""
    with target.use(target.resolve("host")):
        if target.current().vector_bits != 512:
            pytest.skip("AVX-512 blocking")
        text = module_text(gemm_small._emit("two", False, gemm_small.Columns(False, 2, ())))
    # blocks of 8, 4, 2 and 1 rows, each 2 vectors wide
    assert text.count("call <16 x float> @\"llvm.fmuladd.v16f32\"") == 2 * (8 + 4 + 2 + 1)
