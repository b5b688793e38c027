"""Batch chains (batch_chain.py) of bf16 attention on AMX-BF16: q k^T, the bf16 softmax kernel
and p v run batch by batch per thread, each product through gemm_bf16's BLAS-convention entry
(the library thunk's own kernel, so the same bits as the three thunks on 1-3 threads), with one
batch of bf16 scores per thread in the arena. Shapes that are not whole 32-blocks are left to
the thunks (padded there)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_batch_chain import PLAIN, _chain_lines, _run, _text
from xlapy.backends.cpu import gemm_bf16

BF = ml_dtypes.bfloat16
pytestmark = pytest.mark.skipif(not gemm_bf16.available(), reason="no AMX-BF16 or AVX512-BF16 here")


def _args(t: int, s: int, d: int) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [(rng.standard_normal(shape) * 0.5).astype(BF)
            for shape in ((2, 3, t, d), (2, 3, s, d), (2, 3, s, d))]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bf16_chain_bits_equal_the_three_thunks(threads: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text(PLAIN, t=64, s=96, d=32, f="bf16")
    args = _args(64, 96, 32)
    got, exe = _run(text, args, threads, True, monkeypatch)
    want, ref = _run(text, args, threads, False, monkeypatch)
    assert _chain_lines(exe) and not _chain_lines(ref)
    kinds = [ln for ln in exe.explain().splitlines() if "dot_general" in ln]
    assert all("bf16 gemm" in ln for ln in kinds), kinds
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))
    assert exe._arena_plan[1] < ref._arena_plan[1]  # type: ignore[attr-defined]
    # vs the interpreter: sums in another order move a score by a bf16 ulp, which the
    # softmax and the second product carry on (a few ulps; the workload's normwise 3e-2)
    interp = np.asarray(xlapy.compile(text, backend="interpreter")(*args)).astype(np.float64)
    g = got[0].astype(np.float64)
    assert np.linalg.norm(g - interp) <= 1e-2 * np.linalg.norm(interp)
    assert np.abs(g - interp).max() <= 2.0 ** -5 * np.abs(interp).max()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bf16_blocks_with_scores_on_the_stack(threads: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The last batches in 32-row blocks (chain_schedule.py), their last rows' scores in a
    buffer on the thread's stack: the bits of the three thunks, no arena for the blocks."""
    from xlapy.backends.cpu import chain_schedule

    monkeypatch.setattr(chain_schedule, "MAX_BLOCKED_SHARE", 1.0)
    text = _text(PLAIN, t=128, s=96, d=32, f="bf16")
    args = _args(128, 96, 32)
    got, exe = _run(text, args, threads, True, monkeypatch)
    want, _ = _run(text, args, threads, False, monkeypatch)
    ch = exe.chains[0]  # type: ignore[attr-defined]
    sched = ch.schedule(exe._chain_parts[ch.name])  # type: ignore[attr-defined]
    assert sched.stack_bytes == 32 * 96 * 2 and any(b.arena for bs in sched.blocks for b in bs)
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))


def test_no_bf16_chain_off_the_32_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text(PLAIN, t=40, s=48, d=24, f="bf16")
    args = _args(40, 48, 24)
    got, exe = _run(text, args, 2, True, monkeypatch)
    assert not _chain_lines(exe)
    want, _ = _run(text, args, 2, False, monkeypatch)
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))


def test_blas_entry_matches_the_thunk_kernel() -> None:
    """gemm_bf16's BLAS-convention entry (column-major out^T = b^T a^T, the chain's call)
    gives the bits of `gemm` for both B layouts and result types."""
    import ctypes

    rng = np.random.default_rng(9)
    m, k, n = 64, 96, 128
    a = rng.standard_normal((m, k)).astype(BF)
    bt = rng.standard_normal((n, k)).astype(BF)
    fn_type = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))

    def i32(v: int) -> object:
        return ctypes.byref(ctypes.c_int32(v))

    for transposed in (False, True):
        b = bt if transposed else np.ascontiguousarray(bt.T)
        for out in (BF, np.float32):
            c = np.zeros((m, n), out)
            f = fn_type(gemm_bf16.blas_address(transposed, out == BF))
            f(ctypes.c_char_p(b"T" if transposed else b"N"), ctypes.c_char_p(b"N"), i32(n),
              i32(m), i32(k), None, b.ctypes.data, i32(k if transposed else n), a.ctypes.data,
              i32(k), None, c.ctypes.data, i32(n))
            want = np.empty((1, m, n), out)
            gemm_bf16.gemm(1)(a[None], (bt.T if transposed else b)[None], want)
            np.testing.assert_array_equal(c.view(np.uint8), want[0].view(np.uint8))
