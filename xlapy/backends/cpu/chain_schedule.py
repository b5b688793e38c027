"""Where a batch chain's intermediates live (batch_chain.py): in its own output, not yet
written, wherever that can hold them, and in a small per-thread scratch of the arena only for
the last rows of each thread.

Why: attention's chain held one head's scores per thread in the arena (2 x 256 KB on two
threads, f32): 2.5 MB of peak memory against XLA's 2.0 (its output). The output is written
batch by batch, so most of it is free while the chain runs. Each thread reserves the output
of the last batches (enough for one batch's intermediates) and runs the other batches whole,
claimed from a shared counter, their intermediates in its reserved output. It then computes
its reserved batches itself, in blocks of rows whose intermediates lie in the reserved
output past the block (written later); a block shrinks as the free output does, and the rows
left when not even `granule` rows fit take the arena scratch, `granule` rows at a time.

That last scratch (`granule` rows of intermediates: 16 KB of bf16 scores for a 32-row AMX
block) goes on the thread's own stack where it is small (`STACK_BYTES`), as the AMX step's
packed panels and BLAS's packing buffers do: the last rows of a thread have no free output
left to hold them, and attention_bf16's arena was then 2 x 16 KB over XLA's peak (its
output alone).

A block of rows is the same GEMMs over fewer rows and the same kernel over its rows: every
element of a result is the same sum (the GEMMs' per-element order does not depend on the
rows; batch_chain's tests check the bits against the three thunks).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Intermediate bytes per row above this many times the output's bytes per row: the
#: output cannot hold a useful block, the whole batches take the arena scratch.
MAX_RATIO = 8
#: Groups of last batches computed in blocks (`plan`): one per thread of a 2-core machine.
#: More threads than groups hold their whole batches in the arena (as many groups would cut
#: that many more batches in small blocks, which run slower on any thread count).
GROUPS = 2
#: Most of the batches that may run in blocks: blocks shrink to a few rows (small GEMMs), and
#: where the groups were all of a transformer block's 8 heads its attention ran ~5% slower
#: than with a batch of scores per thread in the arena (attention's 32: 8 in blocks, 2.0 MB
#: of peak instead of 2.5). More would be blocked: the chain takes the arena scratch.
MAX_BLOCKED_SHARE = 0.25
#: Most bytes of block scratch (`granule` rows of intermediates) a thread takes on its stack
#: instead of the arena (thread stacks are megabytes; the AMX step's packed B already takes
#: up to 512 KB there).
STACK_BYTES = 64 << 10
#: Most bytes of all of a thread's scratch (whole batches, widening buffers, blocks) that go
#: on its stack instead of the arena (batch_chain.Chain.on_stack): attention_bf16's 320 KB
#: of scores and 192 KB of widened operands a thread, where XLA's fused attention keeps its
#: scratch out of its temporaries too (peak 2.0 -> 1.0 MB, the output alone). Python's
#: threads and the main thread have ulimit -s (8 MB) stacks; AMX's packed B adds 512 KB.
THREAD_STACK_BYTES = 768 << 10


@dataclass(frozen=True)
class Block:
    """Rows [row, row + rows) of batch `batch`, its intermediates at byte `at` of the output
    (or at the thread's scratch, `arena`: in the arena, or on its stack where the schedule's
    `stack_bytes` is not 0)."""

    batch: int
    row: int
    rows: int
    at: int
    arena: bool


@dataclass(frozen=True)
class Schedule:
    """Batches [0, shared) run whole, each thread taking the next one left, its
    intermediates at byte reserve[p] of the output (or of the arena scratch when
    reserve[p] is None); then thread p runs blocks[p]. Thread p's arena scratch starts at
    byte arena_at[p] of the chain's arena bytes, `arena_bytes` in all; its block scratch is a
    buffer of `stack_bytes` on its stack instead where that is not 0."""

    shared: int
    reserve: list[int | None]
    blocks: list[list[Block]]
    arena_at: list[int]
    arena_bytes: int
    stack_bytes: int = 0


def plan(nbatch: int, m: int, need_row: int, out_row: int, parts: int, granule: int,
         groups: int = GROUPS, stack: int = 0) -> Schedule:
    """The schedule of `nbatch` batches of `m` rows on `parts` threads: a row's
    intermediates take `need_row` bytes, its output `out_row`; blocks are multiples of
    `granule` rows (m one too, or the batch's last rows). The last batches form `groups`
    groups, each just big enough to hold one batch's intermediates in its output; thread p
    computes groups p, p + parts, ... (each cut the same way on any thread count, so the
    bits of a GEMM that depend on its row count do not depend on the threads) and holds its
    whole batches' intermediates in its first group's output. A thread with no group (more
    threads than groups, or groups over MAX_BLOCKED_SHARE of the batches) holds them in the
    arena. Block scratch of at most `stack` bytes is on each thread's stack, not in the arena."""
    parts = max(1, min(parts, nbatch))
    per = -(-need_row // out_row) if 0 < out_row and need_row <= MAX_RATIO * out_row else 0
    ngroups = min(groups, nbatch // per) if per else 0
    if ngroups * per > MAX_BLOCKED_SHARE * nbatch:
        ngroups = 0
    shared = nbatch - ngroups * per
    reserve: list[int | None] = []
    blocks: list[list[Block]] = []
    arena_at: list[int] = []
    total = 0
    on_stack = 0 < granule * need_row <= stack
    for p in range(parts):
        mine = list(range(p, ngroups, parts))
        firsts = [shared + g * per for g in mine]
        reserve.append(firsts[0] * m * out_row if firsts else None)
        blocks.append([b for f in firsts
                       for b in _blocks(f, f + per, m, need_row, out_row, granule)])
        arena_at.append(total)
        if not firsts and shared:
            total += m * need_row
        elif any(b.arena for b in blocks[-1]) and not on_stack:
            total += granule * need_row
    scratch = any(b.arena for bs in blocks for b in bs)
    return Schedule(shared, reserve, blocks, arena_at, total,
                    granule * need_row if on_stack and scratch else 0)


def _blocks(first: int, last: int, m: int, need_row: int, out_row: int, granule: int
            ) -> list[Block]:
    """Batches [first, last) in blocks of rows: each the most rows whose intermediates fit
    in the output past it (up to the range's end), else `granule` rows in the arena."""
    out: list[Block] = []
    g, end = first * m, last * m  # rows of the flattened output
    while g < end:
        batch, row = divmod(g, m)
        left = m - row
        fit = min((end - g) * out_row // (need_row + out_row), left)
        rows = fit if fit == left else fit - fit % granule
        if rows > 0:
            out.append(Block(batch, row, rows, (g + rows) * out_row, False))
        else:
            rows = min(granule, left)
            out.append(Block(batch, row, rows, 0, True))
        g += rows
    return out


__all__ = ["Block", "Schedule", "GROUPS", "MAX_BLOCKED_SHARE", "MAX_RATIO", "STACK_BYTES",
           "plan"]
