"""The batch chains' native runtime (chain_runtime.chain_run) is a build-once module cached
on disk like the others (cache.engine): a later process loads its object instead of ~6-12 ms
of LLVM in a program's first run."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlapy.backends.cpu import cache, chain_runtime, llvm_util


def test_the_runtime_object_comes_from_the_disk_cache(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    compiled: list[bool] = []
    real = llvm_util.Engine._compile

    def spy(self: llvm_util.Engine, *a: object, **k: object) -> bytes:
        compiled.append(True)
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(llvm_util.Engine, "_compile", spy)
    build = chain_runtime.runtime.__wrapped__  # type: ignore[attr-defined]
    first, addr = build()
    assert compiled == [True] and addr
    cache.clear_memory()  # as a new process: only the disk holds it
    second, addr2 = build()
    assert compiled == [True] and addr2 and second.object == first.object
