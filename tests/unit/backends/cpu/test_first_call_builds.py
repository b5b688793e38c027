"""The library modules a program's first run builds (the while driver, GEMM modules, region
and chain runners: cache.engine / cache.o0_engine) compile on the calling thread with their
long LLVM calls outside llvmlite's process-wide lock (parallel_compile.compile_here), into
the very objects the serial Engine path makes; the while driver goes through the light
pipeline and -O0 code generation (issue 14: first-call latency)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_once_ahead import WHILE_LOOP
from xlapy.backends.cpu import cache, gemm_small, llvm_util, target, while_driver

LOOP = WHILE_LOOP  # a while loop of kernels: the native driver runs it


@pytest.fixture
def no_disk_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    cache.clear_memory()


def _small_gemm_text() -> str:
    with target.use(target.host_target()):
        return llvm_util.module_text(gemm_small._emit("xlapy_sgemm_small_t", False))


def test_cache_engine_compiles_the_serial_engines_object(no_disk_cache: None) -> None:
    text = _small_gemm_text()
    with target.use(target.host_target()):
        ours = cache.engine(text, "light", light=True, exports=["xlapy_sgemm_small_t_direct"])
        serial = llvm_util.Engine(text, light=True, exports=["xlapy_sgemm_small_t_direct"])
    assert ours.object == serial.object
    assert ours.pipeline == serial.pipeline == "light"
    assert ours.address("xlapy_sgemm_small_t_direct")


def test_o0_engine_compiles_the_o0_machines_object(no_disk_cache: None) -> None:
    with target.use(target.host_target()):
        text = llvm_util.module_text(while_driver._emit_driver())
        ours = cache.o0_engine(text, "test-O0", exports=["xlapy_while"])
        t = target.current()
        tm = llvm_util.o0_machine(t)
        with llvm_util._LOCK:
            ref = llvm_util.verify(text)
            ref.triple = t.triple
            ref.data_layout = str(tm.target_data)
            llvm_util.optimize(ref, tm, vectorize=False, light=True)
            want = tm.emit_object(ref)
    assert ours.object == want and ours.address("xlapy_while")


def test_the_while_driver_is_built_light(monkeypatch: pytest.MonkeyPatch,
                                         no_disk_cache: None) -> None:
    """The driver's iteration loop is the whole cost of a loop of tiny kernels: the normal
    code generator, not the -O0 one's stack slots."""
    modes: list[tuple[str, bool, bool]] = []
    real = cache.engine

    def spy(mod: Any, mode: str, vectorize: bool = True, light: bool = False,
            **k: Any) -> Any:
        modes.append((mode, vectorize, light))
        return real(mod, mode, vectorize, light, **k)

    monkeypatch.setattr(cache, "engine", spy)
    eng, run = while_driver.driver_for.__wrapped__("ftz")  # type: ignore[attr-defined]
    assert modes == [("while-driver-light", False, True)] and eng.address("xlapy_while") and run
    assert eng.pipeline == "light"


def test_a_native_loop_runs_on_the_driver() -> None:
    prog = xlapy.compile(LOOP, backend="cpu")
    assert any("native while loop" in how for _, _, how in prog._exe.report)
    x = np.arange(8, dtype=np.float32) - 3.5
    n, v = prog(x, np.int32(5))
    assert int(n) == 5
    np.testing.assert_array_equal(v, x * np.float32(0.5 ** 5))


def test_module_text_prints_llvmlites_text() -> None:
    """module_text prints an llvmlite module with ir_print's printer: llvmlite's own text
    character for character (it is the module's cache key and what LLVM compiles)."""
    with target.use(target.host_target()):
        mods = [while_driver._emit_driver(), gemm_small._emit("xlapy_sgemm_small_t", False),
                gemm_small._emit("xlapy_dgemm_small_t", True, gemm_small.columns(13, True))]
        for mod in mods:
            assert llvm_util.module_text(mod) == llvm_util.module_text(str(mod))


def test_the_region_runner_and_the_pool_build_light(monkeypatch: pytest.MonkeyPatch,
                                                    no_disk_cache: None) -> None:
    """The region runner (light, -O0) and the worker pool's code (light) go through the
    cache's lock-light path like the other first-run builds."""
    from xlapy.backends.cpu import regions, threads

    modes: list[tuple[str, bool]] = []
    real_o0, real = cache.o0_engine, cache.engine

    def spy_o0(text: str, mode: str, **k: Any) -> Any:
        modes.append((mode, True))
        return real_o0(text, mode, **k)

    def spy(mod: Any, mode: str, vectorize: bool = True, light: bool = False, **k: Any) -> Any:
        modes.append((mode, light))
        return real(mod, mode, vectorize, light, **k)

    monkeypatch.setattr(cache, "o0_engine", spy_o0)
    monkeypatch.setattr(cache, "engine", spy)
    eng, run, gemm_rows = regions._runtime.__wrapped__()  # type: ignore[attr-defined]
    assert eng.address("region_run") and gemm_rows and run
    pool = threads._native.__wrapped__()  # type: ignore[attr-defined]
    assert pool[0].address("worker")
    assert modes == [("regions-O0", True), ("thread-pool-light", True)]


def test_the_chain_runtime_without_widen_steps_builds_at_o0(monkeypatch: pytest.MonkeyPatch,
                                                            no_disk_cache: None) -> None:
    """A chain runtime for chains without widen steps only calls BLAS and kernels: -O0;
    with them (bf16 operands widened in the chain) its vector loop gets -O3 codegen."""
    from xlapy.backends.cpu import chain_runtime

    modes: list[str] = []
    real_o0, real = cache.o0_engine, cache.engine

    def spy_o0(text: str, mode: str, **k: Any) -> Any:
        modes.append(mode)
        return real_o0(text, mode, **k)

    def spy(mod: Any, mode: str, *a: Any, **k: Any) -> Any:
        modes.append(mode)
        return real(mod, mode, *a, **k)

    monkeypatch.setattr(cache, "o0_engine", spy_o0)
    monkeypatch.setattr(cache, "engine", spy)
    build = chain_runtime.runtime.__wrapped__  # type: ignore[attr-defined]
    plain, wide = build(False), build(True)
    assert plain[1] and wide[1] and plain[0].object != wide[0].object
    assert modes == ["chain-O0", "light"]


def _driver_text_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = while_driver._emit_driver

    def counting() -> Any:
        calls.append(1)
        return real()

    monkeypatch.setattr(while_driver, "_emit_driver", counting)
    return calls


def test_a_library_module_on_disk_loads_without_being_emitted(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """cache.library_engine: a later process (memory cleared) finds the object under the
    builder's arguments and the sources' fingerprint, without emitting the module."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    emitted = _driver_text_calls(monkeypatch)
    first, _ = while_driver.driver_for.__wrapped__("ftz")  # type: ignore[attr-defined]
    assert emitted == [1]
    cache.clear_memory()  # as a new process
    second, run = while_driver.driver_for.__wrapped__("ftz")  # type: ignore[attr-defined]
    assert emitted == [1] and second.object == first.object and run
    # an edit of the backend's sources changes the key: emitted and compiled again
    monkeypatch.setattr(cache, "sources", lambda: "edited")
    cache.clear_memory()
    while_driver.driver_for.__wrapped__("ftz")  # type: ignore[attr-defined]
    assert emitted == [1, 1]


def test_a_library_object_that_does_not_load_is_emitted_again(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    emitted = _driver_text_calls(monkeypatch)
    with target.use(target.host_target()):
        k = cache.library_key(("while-driver",), "while-driver-light")
        cache.put(k, b"not an object")
    eng, run = while_driver.driver_for.__wrapped__("ftz")  # type: ignore[attr-defined]
    assert emitted == [1] and eng.address("xlapy_while") and run
    assert cache.get(k) == eng.object


def test_library_job_compiles_beside_the_caller_and_loads_from_disk(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """cache.library_job: the object compile_here makes (on a compile thread), put under the
    library key; a later process loads it without emitting; an entry that does not load is
    emitted and compiled again."""
    from xlapy.backends.cpu import parallel_compile

    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    text = _small_gemm_text()
    emitted: list[int] = []

    def emit() -> str:
        emitted.append(1)
        return text

    name = ["xlapy_sgemm_small_t_direct"]
    with target.use(target.host_target()):
        first = cache.library_job(("test-job",), emit, "light", exports=name)()
        want, _ = parallel_compile.compile_here(llvm_util.module_text(text), True, True)
        assert first.object == want and first.address(name[0]) and emitted == [1]
        cache.clear_memory()  # as a new process
        second = cache.library_job(("test-job",), emit, "light", exports=name)()
        assert second.object == want and second.address(name[0]) and emitted == [1]
        cache.put(cache.library_key(("test-job",), "light"), b"not an object")
        cache.clear_memory()
        third = cache.library_job(("test-job",), emit, "light", exports=name)()
        assert third.object == want and emitted == [1, 1]
        o0 = cache.library_job(("test-job-o0",), emit, "light", exports=name, o0=True)()
        want0, _ = parallel_compile.compile_here(llvm_util.module_text(text), False, True,
                                                 opt=0)
        assert o0.object == want0 and o0.address(name[0])
