"""The batch chains' native runtime (chain_runtime.chain_run) is a build-once module cached
on disk like the others (cache.engine): a later process loads its object instead of ~6-12 ms
of LLVM in a program's first run."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlapy.backends.cpu import cache, chain_runtime, parallel_compile


def test_the_runtime_object_comes_from_the_disk_cache(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    compiled: list[bool] = []
    real = parallel_compile.compile_here

    def spy(*a: object, **k: object) -> object:
        compiled.append(True)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel_compile, "compile_here", spy)
    build = chain_runtime.runtime.__wrapped__  # type: ignore[attr-defined]
    for widen in (True, False):  # with widen steps (light, -O3 codegen) or without (-O0)
        compiled.clear()
        first, addr = build(widen)
        assert compiled == [True] and addr
        cache.clear_memory()  # as a new process: only the disk holds it
        second, addr2 = build(widen)
        assert compiled == [True] and addr2 and second.object == first.object
