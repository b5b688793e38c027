"""gemm_bf16_dp.py: the bf16 GEMM kernels on AVX512-BF16's vdpbf16ps, run for cooperlake
(AVX-512 with BF16, no AMX: Zen 4's combination) on any machine that runs its code, so an AMX
host tests them too - f32 sums within f32 accumulation error, a bf16 result rounded once,
the same bits on any thread count, both B layouts, padded shapes, specials; and routing: a
bf16 program for such a target keeps its bf16 operands (no convert kernels), in a batch
chain too, and matches the interpreter and the AMX-less widened path."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_batch_chain import PLAIN, _chain_lines, _run, _text
from tests.unit.backends.cpu.test_gemm_bf16 import (
    _ATTN,
    BF,
    _attn_args,
    _bound,
    _close_in_bf16,
    _kinds,
    _operands,
)
from xlapy.backends.cpu import gemm_bf16, target

COOPER = target.resolve("cooperlake")
pytestmark = pytest.mark.skipif(not COOPER.runs_here, reason="cooperlake code cannot run here")


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("shape", [(1, 32, 32, 32), (2, 64, 96, 64), (3, 7, 33, 9),
                                   (2, 50, 70, 45), (1, 5, 3, 1), (4, 256, 64, 256),
                                   (1, 96, 512, 64), (2, 33, 1, 40), (1, 300, 64, 96)])
def test_sums_within_f32_error_rounded_once_any_threads(shape: tuple[int, ...],
                                                         transposed: bool) -> None:
    a, b = _operands(*shape, transposed, seed=3)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    outs = {}
    with target.use(COOPER):
        assert gemm_bf16.available() and not gemm_bf16.tiles()
        runs = {t: gemm_bf16.gemm(t) for t in (1, 2)}
    for threads, run in runs.items():
        c = np.full(exact.shape, np.nan, np.float32)
        run(a, b, c)
        assert np.all(np.abs(c - exact) <= _bound(a, b)), shape
        h = np.zeros(exact.shape, BF)
        run(a, b, h)
        np.testing.assert_array_equal(h.view(np.uint16), c.astype(BF).view(np.uint16))
        outs[threads] = c
    np.testing.assert_array_equal(outs[1].view(np.uint32), outs[2].view(np.uint32))


def test_specials_propagate() -> None:
    a, b = _operands(1, 64, 64, 64, False, seed=5)
    a[0, 3, 7], a[0, 10, 0], b[0, 5, 9] = np.inf, np.nan, -np.inf
    c = np.empty((1, 64, 64), np.float32)
    with target.use(COOPER):
        run = gemm_bf16.gemm(1)
    run(a, b, c)
    with np.errstate(invalid="ignore"):
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(c), np.isinf(want))


def test_program_keeps_bf16_operands_and_matches() -> None:
    """Before gemm_bf16_dp, an AMX-less target widened both dots to f32 BLAS."""
    opts = {"target": "cooperlake"}
    prog = xlapy.compile(_ATTN, backend="cpu", options=opts)
    kinds = _kinds(prog)
    dots = [k for op, k in kinds if op == "dot_general"]
    assert dots == ["library bf16 gemm (avx512-bf16)"] * 2, kinds
    assert not any(op == "convert" for op, _ in kinds), kinds
    args = _attn_args()
    got = prog(*args)
    _close_in_bf16(got, xlapy.compile(_ATTN, backend="interpreter")(*args))
    wide = xlapy.compile(_ATTN, backend="cpu", options={**opts, "denormal": "ieee"})
    _close_in_bf16(got, wide(*args))


def test_batch_chain_steps_on_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch chain (batch_chain.py) of a bf16 attention takes these kernels as its GEMM
    steps (their BLAS-convention entry): the same bits as the three thunks."""
    monkeypatch.setenv("XLAPY_CPU_TARGET", "cooperlake")
    text = _text(PLAIN, t=64, s=96, d=32, f="bf16")
    rng = np.random.default_rng(2)
    args = [(rng.standard_normal(shape) * 0.5).astype(BF)
            for shape in ((2, 3, 64, 32), (2, 3, 96, 32), (2, 3, 96, 32))]
    got, exe = _run(text, args, 2, True, monkeypatch)
    want, ref = _run(text, args, 2, False, monkeypatch)
    assert _chain_lines(exe) and not _chain_lines(ref)
    assert "bf16 gemm (avx512-bf16)" in exe.explain()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))
