"""A batch chain reuses its per-thread descriptors from one call to the next (batch_chain
chain_thunk: the Python that built them was ~3% of a transformer's attention). What a
native run changes in them (the GEMM steps' row counts, a widen step's last batch) is
restored each call: new arguments give the bits a fresh executable gives, f32 and widened
bf16 chains, 1-3 threads, and concurrent callers (private tables) too."""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_batch_chain import PLAIN, _text
from xlapy.backends.cpu import cache

BF = ml_dtypes.bfloat16


def _compile(text: str, threads: int, options: dict[str, object]) -> xlapy.CompiledProgram:
    cache.clear_memory()
    return xlapy.compile(text, backend="cpu",
                         options={**options, "num_threads": threads, "split_cost": 1})


def _args(seed: int, dtype: type, batch: tuple[int, int] = (2, 3), t: int = 40, s: int = 24,
          d: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype)
            for shape in ((*batch, t, d), (*batch, s, d), (*batch, s, d))]


def _bits(x: object) -> np.ndarray:
    a = np.asarray(x).copy()
    return a.view(np.uint16) if a.dtype == BF else a


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("batch", [(2, 3), (1, 2)])  # two batches: a call may start where the
# last ended (a widen step whose last batch were kept would skip widening the new k)
@pytest.mark.parametrize(("f", "dtype", "options"), [
    ("f32", np.float32, {}),
    ("bf16", BF, {"target": "x86-64-v3"}),  # widened operands (chain_widen.py)
], ids=["f32", "bf16-widened"])
def test_new_arguments_each_call(threads: int, batch: tuple[int, int], f: str, dtype: type,
                                 options: dict[str, object]) -> None:
    text = _text(PLAIN, f=f).replace("2x3x", f"{batch[0]}x{batch[1]}x")
    prog = _compile(text, threads, options)
    assert prog._exe.chains  # type: ignore[attr-defined]
    calls = [_args(seed, dtype, batch) for seed in (1, 2, 1, 3)]
    got = [_bits(prog(*a)) for a in calls]
    for a, g in zip(calls, got):
        np.testing.assert_array_equal(g, _bits(_compile(text, threads, options)(*a)))
    np.testing.assert_array_equal(got[0], got[2])
    assert not np.array_equal(got[0], got[1])


def test_concurrent_callers() -> None:
    """Callers racing on one executable: one reuses the descriptors, the others build their
    own over their private tables; every result is its arguments' bits."""
    text = _text(PLAIN)
    prog = _compile(text, 2, {})
    calls = [_args(seed, np.float32) for seed in range(4)]
    want = [_bits(prog(*a)) for a in calls]
    errors: list[str] = []

    def work(k: int) -> None:
        for _ in range(30):
            if not np.array_equal(_bits(prog(*calls[k])), want[k]):
                errors.append(f"caller {k}")
                return

    ths = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors
