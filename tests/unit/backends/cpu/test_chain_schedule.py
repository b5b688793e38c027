"""chain_schedule.plan: a batch chain's intermediates in its own output where no row is
written yet, a few rows per thread in the arena; every row computed once; the blocks the
same on any thread count (so bits that depend on a GEMM's rows do not depend on threads);
and through the executable: results equal on 1-4 threads, the interpreter's within
rounding, and less arena than one batch of intermediates per thread."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xlapy
from tests.unit.backends.cpu.test_batch_chain import PLAIN, _chain_lines, _run, _text
from xlapy.backends.cpu import batch_chain, chain_schedule, gemm_bf16

CASES = [(32, 256, 1024, 256, 1), (32, 256, 1024, 256, 8), (32, 256, 512, 128, 32),
         (6, 40, 96, 32, 1), (12, 64, 256, 64, 8), (3, 40, 96, 32, 8), (7, 20, 40, 40, 1),
         (5, 16, 64, 4, 8)]


def _written_by(sched: chain_schedule.Schedule, m: int) -> dict[int, int]:
    """Flattened output row -> the thread that computes it."""
    rows: dict[int, int] = {}
    for p, bs in enumerate(sched.blocks):
        for b in bs:
            for r in range(b.batch * m + b.row, b.batch * m + b.row + b.rows):
                assert r not in rows, f"row {r} computed twice"
                rows[r] = p
    return rows


@pytest.mark.parametrize(("nb", "m", "need", "out", "granule"), CASES)
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_every_row_once_and_no_scratch_over_a_written_row(
        nb: int, m: int, need: int, out: int, granule: int, parts: int) -> None:
    _check(nb, m, need, out, parts, granule)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(1, 70), st.integers(1, 600), st.integers(1, 300),
       st.integers(1, 9), st.sampled_from([1, 2, 8, 32]), st.sampled_from([0, 512, 1 << 16]))
def test_any_shape_keeps_the_invariants(nb: int, m: int, need: int, out: int, parts: int,
                                        granule: int, stack: int) -> None:
    _check(nb, m, need, out, parts, granule, stack)


def _check(nb: int, m: int, need: int, out: int, parts: int, granule: int,
           stack: int = 0) -> None:
    s = chain_schedule.plan(nb, m, need, out, parts, granule, stack=stack)
    assert s.stack_bytes in (0, granule * need) and s.stack_bytes <= stack
    rows = _written_by(s, m)
    assert sorted(rows) == list(range(s.shared * m, nb * m))
    for p, bs in enumerate(s.blocks):
        done: set[int] = set()  # rows this thread has written so far
        for b in bs:
            first = b.batch * m + b.row
            here = set(range(first, first + b.rows))
            assert b.rows > 0 and (b.rows % granule == 0 or b.row + b.rows == m)
            if b.arena:
                assert b.rows * need <= (s.stack_bytes or s.arena_bytes)
                continue
            lo, hi = b.at, b.at + b.rows * need  # bytes of the output it takes
            covered = set(range(lo // out, -(-hi // out)))
            # only rows this thread computes later: not yet written, by no one else
            assert not covered & (done | here), (p, b)
            assert all(rows.get(r) == p for r in covered), (p, b)
            done |= here
    # the whole-batch scratch: inside the thread's own later rows, or in the arena
    for p, at in enumerate(s.reserve):
        if at is None or not s.shared:
            continue
        covered = set(range(at // out, -(-(at + m * need) // out)))
        assert all(rows.get(r) == p for r in covered)
    # each thread's arena scratch its own: [arena_at[p], arena_at[p + 1]) holds what it uses
    ends = [*s.arena_at[1:], s.arena_bytes]
    for p, (lo, hi) in enumerate(zip(s.arena_at, ends)):
        used = max([b.rows * need for b in s.blocks[p] if b.arena and not s.stack_bytes],
                   default=0)
        if s.reserve[p] is None and s.shared:
            used = max(used, m * need)
        assert lo + used <= hi


@pytest.mark.parametrize(("nb", "m", "need", "out", "granule"), CASES)
def test_the_blocks_do_not_depend_on_the_thread_count(
        nb: int, m: int, need: int, out: int, granule: int) -> None:
    cuts = {p: sorted((b.batch, b.row, b.rows) for bs in
                      chain_schedule.plan(nb, m, need, out, p, granule).blocks for b in bs)
            for p in (1, 2, 3, 4, 8)}
    assert all(c == cuts[1] for c in cuts.values())


def test_attention_arena_is_a_few_rows_per_thread() -> None:
    """The `attention` workload's chain on two threads: a row of f32 scores per thread
    (2 x 1 KB) where it held one head's (2 x 256 KB); bf16's 32-row AMX blocks: 2 x 16 KB."""
    f32 = chain_schedule.plan(32, 256, 1024, 256, 2, batch_chain.ROW_GRANULE)
    bf16 = chain_schedule.plan(32, 256, 512, 128, 2, gemm_bf16.BM)
    assert (f32.arena_bytes, bf16.arena_bytes) == (2 * 1024, 2 * 32 * 512)
    assert f32.shared == 24 and all(r is not None for r in f32.reserve)


def test_the_last_rows_take_the_stack() -> None:
    """With a stack allowance the same blocks' scratch is on each thread's stack: the
    attention chains take no arena at all (attention_bf16: 1.03 -> 1.00 MB, XLA's 1.00);
    scratch over the allowance stays in the arena."""
    for need, out, granule in ((1024, 256, batch_chain.ROW_GRANULE), (512, 128, gemm_bf16.BM)):
        plain = chain_schedule.plan(32, 256, need, out, 2, granule)
        s = chain_schedule.plan(32, 256, need, out, 2, granule,
                                stack=chain_schedule.STACK_BYTES)
        assert (s.arena_bytes, s.stack_bytes) == (0, granule * need)
        assert s.blocks == plain.blocks and s.reserve == plain.reserve
    big = chain_schedule.plan(32, 256, 512, 128, 2, gemm_bf16.BM, stack=8 << 10)
    assert (big.arena_bytes, big.stack_bytes) == (2 * 32 * 512, 0)
    whole = chain_schedule.plan(8, 256, 1024, 256, 2, 1, stack=chain_schedule.STACK_BYTES)
    assert (whole.arena_bytes, whole.stack_bytes) == (2 * 256 * 1024, 0)  # no blocks


def test_a_transformer_block_keeps_its_heads_whole() -> None:
    """8 heads of 256 rows: both groups would be all of them, in ever smaller blocks (~5%
    slower): one head's scores per thread in the arena instead, all batches whole."""
    s = chain_schedule.plan(8, 256, 1024, 256, 2, batch_chain.ROW_GRANULE)
    assert s.shared == 8 and s.reserve == [None, None] and s.arena_bytes == 2 * 256 * 1024
    assert s.blocks == [[], []]


def test_a_wide_intermediate_stays_in_the_arena() -> None:
    """Intermediates many times the output's width: whole batches in the arena (as before)."""
    s = chain_schedule.plan(8, 16, 64 * 4, 4, 2, 8)
    assert s.shared == 8 and s.reserve == [None, None] and s.arena_bytes == 2 * 16 * 256


@pytest.mark.parametrize("stacked", [False, True])
@pytest.mark.parametrize("dtype,f", [(np.float32, "f32"), (np.float64, "f64")])
def test_chain_results_do_not_depend_on_the_threads(dtype: type, f: str, stacked: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`stacked`: each thread's scratch on its stack (Chain.on_stack: no arena), else in
    the arena; the same bits either way and on any thread count."""
    t, s_, d = 64, 64, 16
    text = _text(PLAIN, t=t, s=s_, d=d, f=f)
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(shape).astype(dtype)
            for shape in ((2, 3, t, d), (2, 3, s_, d), (2, 3, s_, d))]
    got = {}
    monkeypatch.setattr(chain_schedule, "MAX_BLOCKED_SHARE", 1.0)  # 4 of 6 batches in blocks
    if not stacked:
        monkeypatch.setattr(chain_schedule, "THREAD_STACK_BYTES", 0)
    for threads in (1, 2, 3, 4):
        got[threads], exe = _run(text, args, threads, True, monkeypatch)
        assert _chain_lines(exe)
        ch = exe.chains[0]  # type: ignore[attr-defined]
        parts = exe._chain_parts[ch.name]  # type: ignore[attr-defined]
        scratch = ch.scratch_bytes(parts)
        # one group here (6 batches, 4 per group): its thread holds a few rows on its
        # stack, any other a batch in the arena (as every thread did before)
        batch = t * s_ * np.dtype(dtype).itemsize
        assert scratch == (0 if stacked else (threads - 1) * batch)
        assert ch.on_stack(parts) == stacked and ch.schedule(parts).stack_bytes > 0
    for threads in (2, 3, 4):
        np.testing.assert_array_equal(got[threads][0], got[1][0])
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got[1][0], want, rtol=1e-5 if f == "f32" else 1e-12,
                               atol=1e-5 if f == "f32" else 1e-12)


def test_chain_into_a_temporary(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain's output an arena temporary (another op reads it), not a result: its
    intermediates lie there as well, the results those of every thread count."""
    from tests.unit.backends.cpu.test_batch_chain import ATTENTION

    t, s_, d = 64, 64, 16
    text = ATTENTION.format(
        between="%vv = stablehlo.negate %v : tensor<2x3x64x16xf32>", t=t, s=s_, d=d, f="f32",
        ret="tensor<2x3x64x16xf32>", results="%14 : tensor<2x3x64x16xf32>").replace(
        "  return %14 : tensor<2x3x64x16xf32>",
        "  %15 = stablehlo.tanh %14 : tensor<2x3x64x16xf32>\n"
        "  return %15 : tensor<2x3x64x16xf32>")
    assert "stablehlo.tanh" in text
    rng = np.random.default_rng(4)
    args = [rng.standard_normal((2, 3, n, d)).astype(np.float32) for n in (t, s_, s_)]
    got = {}
    for threads in (1, 2, 3):
        got[threads], exe = _run(text, args, threads, True, monkeypatch)
        assert _chain_lines(exe)
    for threads in (2, 3):
        np.testing.assert_array_equal(got[threads][0], got[1][0])
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got[1][0], want, rtol=1e-5, atol=1e-5)
