"""BufferPool: buffers come back only when the result and every view derived from it are gone."""

from __future__ import annotations

import gc
from collections.abc import Callable

import numpy as np
import pytest

from xlapy.distributed.buffers import BufferPool


def test_reuses_a_dropped_result() -> None:
    pool = BufferPool()
    a = pool.take(np.float32, (4, 3))
    assert a.shape == (4, 3) and a.dtype == np.float32 and a.flags.writeable
    del a
    gc.collect()
    b = pool.take(np.float32, (4, 3))
    assert pool.allocated == 1
    c = pool.take(np.float32, (4, 3))  # b is alive: a new buffer
    assert pool.allocated == 2 and not np.shares_memory(b, c)


DERIVE = [lambda a: a[2:], lambda a: a.reshape(2, 3).T, lambda a: a.view(np.uint64)[::2],
          lambda a: np.asarray(a), lambda a: a[1:][1:].reshape(2, 2)]


@pytest.mark.parametrize("derive", DERIVE)
def test_derived_views_keep_the_buffer(derive: Callable[[np.ndarray], np.ndarray]) -> None:
    pool = BufferPool()
    a = pool.take(np.int64, (6,))
    a[:] = 7
    v = derive(a)
    del a
    gc.collect()
    b = pool.take(np.int64, (6,))
    b[:] = -1  # must not show through the live view
    assert (v.view(np.int64) == 7).all()
    assert pool.allocated == 2
    del v, b
    gc.collect()
    pool.take(np.int64, (6,))
    assert pool.allocated == 2


def test_keys_and_limits() -> None:
    pool = BufferPool(per_key=1)
    xs = [pool.take(np.float64, (5,)) for _ in range(3)]
    del xs
    gc.collect()
    assert pool.take(np.float32, (5,)).dtype == np.float32  # other dtype: another key
    before = pool.allocated
    held = [pool.take(np.float64, (5,)), pool.take(np.float64, (5,))]  # only one was kept
    assert pool.allocated == before + 1
    pool.enabled = False
    held.append(pool.take(np.float64, (5,)))
    assert pool.allocated == before + 1
    assert pool.take(np.float32, (0, 3)).shape == (0, 3)
