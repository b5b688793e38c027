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
