"""chain_widen: where bf16 dots are widened f32 BLAS products (no AMX-BF16: x86-64-v3, or the
`ieee` denormal mode), a batch chain widens its bf16 operands block by block instead of
reading whole f32 copies: the convert kernels are dropped, the bits are those of the chain
without widening (the same f32 values), on any thread count."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_batch_chain import PLAIN, _text
from xlapy.backends.cpu import cache, chain_widen

BF = ml_dtypes.bfloat16
#: v itself (a no-op reshape) instead of a negate of it: all three operands are plain
#: converts of parameters
DIRECT = {**PLAIN, "between": "%vv = stablehlo.reshape %v : (tensor<2x3x{s}x{d}x{f}>) "
                              "-> tensor<2x3x{s}x{d}x{f}>"}
OPTIONS = [{"target": "x86-64-v3"}, {"denormal": "ieee"}]


def _args(t: int, s: int, d: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    args = [(rng.standard_normal(shape) * 0.5).astype(BF)
            for shape in ((2, 3, t, d), (2, 3, s, d), (2, 3, s, d))]
    args[0].reshape(-1)[:3] = np.array([1e-39, -3e-40, np.nan], np.float32).astype(BF)
    return args


def _run(text: str, args: list[np.ndarray], options: dict[str, object], threads: int
         ) -> tuple[np.ndarray, object]:
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu",
                         options={**options, "num_threads": threads, "split_cost": 1})
    out = np.asarray(prog(*args)).copy()
    np.testing.assert_array_equal(np.asarray(prog(*args)).view(np.uint16), out.view(np.uint16))
    return out, prog._exe  # type: ignore[attr-defined]


@pytest.mark.parametrize("stacked", [True, False])
@pytest.mark.parametrize("options", OPTIONS, ids=["v3", "ieee"])
@pytest.mark.parametrize(("t", "s", "d"), [(40, 24, 8), (64, 64, 16), (33, 20, 12)])
def test_widened_chain_bits_equal_the_unwidened_chain(
        options: dict[str, object], t: int, s: int, d: int, stacked: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`stacked`: the widening buffers and scores on each thread's stack (Chain.on_stack:
    no arena, attention_bf16's peak 2.0 -> 1.0 MB), else in the arena."""
    from xlapy.backends.cpu import chain_schedule

    if not stacked:
        monkeypatch.setattr(chain_schedule, "THREAD_STACK_BYTES", 0)
    text = _text(PLAIN, t=t, s=s, d=d, f="bf16")
    args = _args(t, s, d)
    got = {}
    for threads in (1, 2, 3):
        got[threads], exe = _run(text, args, options, threads)
        ch = exe.chains  # type: ignore[attr-defined]
        assert ch and len(ch[0].widen) >= 2, "q and k widened in the chain"
        np.testing.assert_array_equal(got[threads].view(np.uint16), got[1].view(np.uint16))
    arena = exe._arena_plan[1]  # type: ignore[attr-defined]
    monkeypatch.setattr(chain_widen, "find", lambda *a, **k: [])
    want, ref = _run(text, args, options, 3)
    assert not ref.chains[0].widen  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got[1].view(np.uint16), want.view(np.uint16))
    assert arena < ref._arena_plan[1]  # type: ignore[attr-defined]
    parts = exe._chain_parts[ch[0].name]  # type: ignore[attr-defined]
    assert ch[0].on_stack(parts) == stacked and (ch[0].scratch_bytes(parts) == 0) == stacked
    interp = np.asarray(xlapy.compile(text, backend="interpreter", options=options)(*args))
    g, w = got[1].astype(np.float64), interp.astype(np.float64)
    ok = np.isfinite(w)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    assert np.abs(g[ok] - w[ok]).max() <= 2.0 ** -5 * np.abs(w[ok]).max()


@pytest.mark.parametrize("options", OPTIONS, ids=["v3", "ieee"])
def test_all_three_operands_widened(options: dict[str, object]) -> None:
    """q, k and v parameters: each read through a plain convert, each widened."""
    text = _text(DIRECT, t=64, s=48, d=16, f="bf16")
    args = _args(64, 48, 16)
    got, exe = _run(text, args, options, 2)
    widen = exe.chains[0].widen  # type: ignore[attr-defined]
    assert [(w.gemm, w.lhs) for w in widen] == [(0, True), (0, False), (1, False)]
    kernels = [ln for ln in exe.explain().splitlines() if " convert " in ln]  # type: ignore[attr-defined]
    assert kernels  # the convert kernels are compiled, their thunks dropped
    interp = np.asarray(xlapy.compile(text, backend="interpreter", options=options)(*args))
    g, w = got.astype(np.float64), interp.astype(np.float64)
    ok = np.isfinite(w)
    assert np.abs(g[ok] - w[ok]).max() <= 2.0 ** -5 * np.abs(w[ok]).max()


@pytest.mark.parametrize("options", OPTIONS, ids=["v3", "ieee"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_products_rounding_runs_in_the_chain(options: dict[str, object], threads: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The widened p @ v's f32 result is rounded to bf16 by its kernel block by block inside
    the chain (Chain.tail, the kernel emitted flat over rows), not written whole and
    rounded after: less arena, the bits of the three thunks."""
    from xlapy.backends.cpu import batch_chain

    text = _text(PLAIN, t=64, s=64, d=16, f="bf16")
    args = _args(64, 64, 16)
    got, exe = _run(text, args, options, threads)
    ch = exe.chains[0]  # type: ignore[attr-defined]
    assert ch.tail is not None and len(ch.instrs) == 4 and ch.tail.outer == 2 * 3 * 64
    assert ch.out == ch.tail.output and ch.second.out not in exe.temp_slots  # type: ignore
    monkeypatch.setattr(batch_chain, "TAILS", False)
    untailed, ref = _run(text, args, options, threads)
    assert ref.chains and ref.chains[0].tail is None  # type: ignore[attr-defined]
    assert exe._arena_plan[1] < ref._arena_plan[1]  # type: ignore[attr-defined]
    monkeypatch.setattr(batch_chain, "ENABLED", False)
    want, _ = _run(text, args, options, threads)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(untailed.view(np.uint16), want.view(np.uint16))
