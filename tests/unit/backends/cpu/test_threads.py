"""Native worker pool (threads.py): jobs run with their arguments, hand-offs survive the
futex sleep path, concurrent submitters never lose a job, busy workers mean inline runs."""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np

from xlapy.backends.cpu import threads
from xlapy.backends.cpu.executable import _pool

_LIBC = ctypes.CDLL(None)
MEMSET = threads.fn_address(_LIBC.memset)
#: Memory a test's worker thread keeps using after the test (it never exits).
_KEEP: list[object] = []


def test_jobs_run_on_workers_and_after_sleeping() -> None:
    pool = _pool()
    buf = np.zeros(64, np.uint8)
    for k in range(50):
        pool.submit(MEMSET, buf.ctypes.data + k % 8, k + 1, 8).result()
        assert buf[k % 8: k % 8 + 8].tolist() == [k + 1] * 8
    time.sleep(threads.SPIN_US * 5e-6)  # the worker is asleep on its futex now
    t0 = time.perf_counter()
    pool.submit(MEMSET, buf.ctypes.data, 99, 64).result()
    assert (buf == 99).all() and time.perf_counter() - t0 < 1.0


def test_concurrent_submitters_and_inline_fallback() -> None:
    pool = _pool()
    bufs = [np.zeros(4096, np.uint8) for _ in range(4)]
    errors: list[str] = []

    def hammer(j: int) -> None:
        for k in range(200):
            h = pool.submit(MEMSET, bufs[j].ctypes.data, (j * 7 + k) % 251, 4096)
            h.result()
            if not (bufs[j] == (j * 7 + k) % 251).all():
                errors.append(f"{j}/{k}")

    ths = [threading.Thread(target=hammer, args=(j,)) for j in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors
    # All workers busy: the second job runs inline, both complete.
    a, b = np.zeros(16, np.uint8), np.zeros(16, np.uint8)
    h1 = pool.submit(MEMSET, a.ctypes.data, 1, 16)
    h2 = pool.submit(MEMSET, b.ctypes.data, 2, 16)
    h2.result()
    h1.result()
    assert (a == 1).all() and (b == 2).all()


def test_caller_takes_back_a_job_no_worker_started() -> None:
    """A posted job no worker has claimed runs on the waiting caller (a loaded machine whose
    worker has no core yet); the worker that wakes later sees it claimed and skips it."""
    _, post, wait, worker, _ = threads._native()
    slot = np.zeros(threads._SLOT_WORDS, np.int64)
    slot[threads._ROUNDS] = 64
    buf = np.zeros(32, np.uint8)
    _KEEP.extend((slot, buf))
    addr = slot.ctypes.data

    def job(value: int) -> None:
        slot[threads._FN] = MEMSET
        slot[threads._ARGS:threads._ARGS + 3] = [buf.ctypes.data, value, 16]
        post(addr)

    job(7)  # no worker serves this slot: without taking the job back, wait never returns
    wait(addr, 1, 1)
    assert (buf[:16] == 7).all() and slot[threads._CLAIMED] & 0xFFFFFFFF == 1
    buf[:] = 0
    th = threading.Thread(target=threads._VOIDP(worker), args=(addr,), daemon=True)
    th.start()
    job(9)  # the worker claims job 2 (and never reruns job 1)
    wait(addr, 2, 0)
    assert (buf[:16] == 9).all() and (buf[16:] == 0).all()
    assert slot[threads._FINISHED] & 0xFFFFFFFF == 2


def test_share_runs_every_job_once() -> None:
    """share: the caller and the workers take the next job left until none is; every job
    runs exactly once (here: each memset writes its own byte), with more jobs than threads,
    and when every worker is busy (the caller then runs them all)."""
    pool = _pool()
    for n in (1, 3, 40):
        buf = np.zeros(n, np.uint8)
        pool.share([(MEMSET, (buf.ctypes.data + j, j % 250 + 1, 1)) for j in range(n)],
                   pool.workers + 1)
        assert buf.tolist() == [j % 250 + 1 for j in range(n)]
    a = np.zeros(16, np.uint8)
    busy = [pool.submit(MEMSET, a.ctypes.data, 1, 16) for _ in range(pool.workers)]
    buf = np.zeros(8, np.uint8)
    pool.share([(MEMSET, (buf.ctypes.data + j, 5, 1)) for j in range(8)], pool.workers + 1)
    for h in busy:
        h.result()
    assert (buf == 5).all() and (a == 1).all()


def test_run_all_runs_every_job_in_order_on_this_thread() -> None:
    """run_all: one native call over a job table (claim_run, no worker): every job once, in
    order (overlapping memsets: the last one wins), one job and none alike."""
    for n in (0, 1, 2, 37):
        buf = np.zeros(n + 4, np.uint8)
        threads.run_all([(MEMSET, (buf.ctypes.data + j, j % 250 + 1, 4)) for j in range(n)])
        want = [0] * (n + 4)
        for j in range(n):
            want[j:j + 4] = [j % 250 + 1] * 4
        assert buf.tolist() == want


def test_strided_table_is_the_job_table_of_its_calls() -> None:
    """strided_table: call j's argument i is first[i] + j * step[i], the table job_table
    makes of those calls; run on this thread and shared over the pool, every call once."""
    first, step = [100, 7, 0, -3], [24, 0, 1, -5]
    for n in (1, 2, 37):
        want = threads.job_table([(MEMSET, tuple(f + j * d for f, d in zip(first, step)))
                                  for j in range(n)])
        np.testing.assert_array_equal(threads.strided_table(MEMSET, first, step, n), want)
    pool = _pool()
    for n in (1, 40):
        buf = np.zeros(n * 3, np.uint8)
        threads.run_table(threads.strided_table(MEMSET, [buf.ctypes.data, 9, 2], [3, 0, 0],
                                                n))
        assert buf.tolist() == [9, 9, 0] * n
        buf[:] = 0
        pool.share_table(threads.strided_table(MEMSET, [buf.ctypes.data + 1, 4, 2],
                                               [3, 0, 0], n), pool.workers + 1)
        assert buf.tolist() == [0, 4, 4] * n


def test_parked_workers_stop_spinning_and_still_take_jobs() -> None:
    """A worker spinning for its next job goes to sleep once the pool is parked (it re-reads
    its spin bound: 0 while parked), jobs posted meanwhile still run, and the bound comes
    back after the block (nested blocks too)."""
    pool = _pool()
    slots = pool.slots
    rounds, ws, rd = pool._rounds, 2, 4  # the slot's worker-sleeping and spin-bound words
    buf = np.zeros(16, np.uint8)
    try:
        pool._rounds = 1 << 40  # spin "forever" after a job
        slots[:, rd] = pool._rounds
        pool.submit(MEMSET, buf.ctypes.data, 1, 16).result()
        deadline = time.perf_counter() + 2.0  # (a sleeping worker wakes for the post even
        while (slots[:, ws] != 0).all() and time.perf_counter() < deadline:  # if the
            time.sleep(0.001)  # caller took the job back)
        k = int(np.argmin(slots[:, ws]))
        time.sleep(0.02)
        assert slots[k, ws] == 0  # still spinning
        with threads.parked():
            with threads.parked():
                deadline = time.perf_counter() + 2.0
                while slots[k, ws] == 0 and time.perf_counter() < deadline:
                    time.sleep(0.001)
                assert slots[k, ws] == 1 and (slots[:, rd] == 0).all()
                pool.submit(MEMSET, buf.ctypes.data, 7, 16).result()
                assert (buf == 7).all()
            assert (slots[:, rd] == 0).all()
        assert (slots[:, rd] == 1 << 40).all()
    finally:
        pool._rounds = rounds
        slots[:, rd] = rounds
        pool.submit(MEMSET, buf.ctypes.data, 0, 16).result()  # back to the usual bound


def test_a_lender_posts_to_its_reserved_workers() -> None:
    """Inside `lending(ks)` a submit that finds no free worker posts to a reserved one (its
    sequence taken from the slot: the native caller posted there meanwhile), inline once
    every lent worker is in use; outside the block inline again, the workers reserved
    until `release`, then the pool's own again."""
    pool = _pool()
    ks = pool.reserve(pool.workers)
    assert ks, "every worker is held (no other test runs in this process meanwhile)"
    _, post, wait, _, _ = threads._native()
    bufs = [np.zeros(16, np.uint8) for _ in range(len(ks) + 3)]
    try:
        for k in ks:  # the native caller's own jobs, posted to the slots directly
            pool.slots[k, threads._FN] = MEMSET
            pool.slots[k, threads._ARGS:threads._ARGS + 3] = [bufs[0].ctypes.data, 3, 16]
            post(pool.addrs[k])
            wait(pool.addrs[k], int(pool.slots[k, threads._POSTED]) & 0xFFFFFFFF, 0)
        assert (bufs[0] == 3).all()
        assert pool.submit(MEMSET, bufs[1].ctypes.data, 4, 16).pool is None
        with pool.lending(ks):
            hs = [pool.submit(MEMSET, bufs[2 + j].ctypes.data, 5 + j, 16)
                  for j in range(len(ks))]
            assert all(h.pool is pool for h in hs)
            assert pool.submit(MEMSET, bufs[1].ctypes.data, 6, 16).pool is None
            for h in hs:
                h.result()
            again = pool.submit(MEMSET, bufs[1].ctypes.data, 7, 16)
            assert again.pool is pool
            again.result()
        assert all(pool.busy[k] for k in ks)
        assert pool.submit(MEMSET, bufs[1].ctypes.data, 8, 16).pool is None
    finally:
        pool.release(ks)
    assert [int(b[0]) for b in bufs[1:-1]] == [8] + [5 + j for j in range(len(ks))]
    for _ in range(3):
        h = pool.submit(MEMSET, bufs[-1].ctypes.data, 9, 16)
        assert h.pool is pool
        h.result()
    assert (bufs[-1] == 9).all()
