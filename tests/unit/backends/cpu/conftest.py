"""Fixtures shared by the cpu backend's tests."""

from __future__ import annotations

import pytest

from xlapy.backends.cpu import small_lu


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of small_lu's functions looked up (a thunk's first run, a native step):
    small_lu.py's and small_qr.py's JIT functions."""
    kinds: list[str] = []
    real = small_lu.function
    monkeypatch.setattr(small_lu, "function", lambda kind, *a: (kinds.append(kind),
                                                                 real(kind, *a))[1])
    return kinds


@pytest.fixture
def jit_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batch ranges small_lu's functions ran on this thread from a thunk (hi - lo of
    each call)."""
    ran: list[int] = []
    real = small_lu.call
    monkeypatch.setattr(small_lu, "call", lambda fn, *a: (ran.append(a[-1] - a[-2]),
                                                           real(fn, *a))[1])
    return ran
