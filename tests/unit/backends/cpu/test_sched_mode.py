"""sched_mode.py: fused kernels' modules are scheduled without register-pressure tracking on
16-register x86 targets (their long chains interleaved), the rest with it; the two settings'
code generation never overlaps, and the results' bits are the same either way."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, sched_mode, target


def _polyval() -> str:
    """jnp.polyval of degree 19 as JAX lowers it: one long multiply-add chain per element."""
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda x: jnp.polyval(jnp.arange(20.0, dtype=jnp.float32), x)).lower(
        np.zeros(1 << 16, np.float32)).as_text()


def _objects(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], object]:
    monkeypatch.setattr(sched_mode, "ENABLED", enabled)
    cache.clear_memory()
    prog = xlapy.compile(_polyval(), backend="cpu", options={"target": "x86-64-v3"})
    return [e.object for e in prog._exe.engines], prog  # type: ignore[attr-defined]


@pytest.mark.usefixtures("jax_x32")
@pytest.mark.skipif(not target.resolve("x86-64-v3").runs_here, reason="needs AVX2")
def test_kernels_are_scheduled_apart_with_the_same_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    off, p_off = _objects(True, monkeypatch)
    on, p_on = _objects(False, monkeypatch)
    assert off != on  # the option took effect: other instruction order
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, 1 << 16).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(p_off(x)).view(np.uint32),  # type: ignore
                                  np.asarray(p_on(x)).view(np.uint32))  # type: ignore


def test_only_16_register_x86_targets_are_marked() -> None:
    with target.use("x86-64-v3"):
        assert sched_mode.marked("x").startswith(sched_mode.MARK)
        assert sched_mode.marked(sched_mode.marked("x")) == sched_mode.MARK + "x"
    for name in ("skylake-avx512", "aarch64-linux-gnu"):
        with target.use(name):
            assert sched_mode.marked("x") == "x"
    assert sched_mode.tracks_pressure("x") and not sched_mode.tracks_pressure(
        sched_mode.MARK + "x") and sched_mode.tracks_pressure(None)


def test_the_two_settings_never_overlap() -> None:
    """Threads with one setting run together; one with the other waits for them all."""
    inside: dict[bool, int] = {True: 0, False: 0}
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def job(pressure: bool) -> None:
        for _ in range(20):
            with sched_mode.use(pressure):
                with lock:
                    inside[pressure] += 1
                    seen.append((inside[True], inside[False]))
                time.sleep(0.0005)
                with lock:
                    inside[pressure] -= 1

    threads = [threading.Thread(target=job, args=(k % 2 == 0,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen and all(a == 0 or b == 0 for a, b in seen)
    assert any(a > 1 or b > 1 for a, b in seen)  # same-setting threads did share
    with sched_mode.use(True):  # (the process's setting back to LLVM's default)
        pass
