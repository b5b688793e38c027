"""The compile cache (cache.py) never runs what it finds: planted, swapped, truncated or
corrupted entries, FIFOs and symlinks, unsafe directories and full disks all end in a
recompile with the right result (or a warning), never in running foreign code or a hang."""

from __future__ import annotations

import errno
import os
import random
import stat
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, llvm_util, rtlib, runtime_lib, target

PROGRAM = """
func.func @main(%x: tensor<{n}xf32>, %y: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = stablehlo.{op} %x, %y : tensor<{n}xf32>
  %1 = stablehlo.{op} %0, %y : tensor<{n}xf32>
  return %1 : tensor<{n}xf32>
}}
"""
X = np.arange(64, dtype=np.float32) - 20.0
Y = np.full(64, 3.0, dtype=np.float32)
EXPECTED = {"add": X + Y + Y, "multiply": X * Y * Y}


@pytest.fixture
def cdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(d))
    monkeypatch.delenv("XLAPY_CACHE_MAX_BYTES", raising=False)
    cache.clear_memory()
    yield d
    cache.clear_memory()


def _compile(op: str, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, list[str]]:
    """Compile and run `op` twice over (x, y); (result, keys the compile put: not those of
    once.py's builds, whose thread may still be writing them as the compile returns)."""
    keys: list[str] = []
    real = cache.put
    caller = threading.get_ident()

    def recording(k: str, obj: bytes) -> None:
        real(k, obj)
        if threading.get_ident() == caller:
            keys.append(k)

    monkeypatch.setattr(cache, "put", recording)
    try:
        prog = xlapy.compile(PROGRAM.format(op=op, n=64), backend="cpu")
    finally:
        monkeypatch.setattr(cache, "put", real)
    return np.asarray(prog(X, Y)), keys


def _kernel_key(op: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The key of `op`'s kernel module, its entry written to the cache directory."""
    out, keys = _compile(op, monkeypatch)
    np.testing.assert_array_equal(out, EXPECTED[op])
    assert len(keys) >= 1
    return keys[-1]


def _entry(d: Path, k: str) -> Path:
    return d / f"{k}.o"


def _recompiles(op: str, d: Path, k: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh process (memory cleared) compiling `op` recompiles it, gets the right result
    and leaves a valid entry for `k` and no temporary file."""
    cache.clear_memory()
    out, keys = _compile(op, monkeypatch)
    np.testing.assert_array_equal(out, EXPECTED[op])
    assert k in keys, "the entry was not recompiled"
    assert stat.S_ISREG(os.lstat(_entry(d, k)).st_mode)
    cache.clear_memory()
    assert cache.get(k) is not None
    assert not list(d.glob("*.tmp"))


def _header(k: str, obj: bytes) -> bytes:
    return cache._HEADER.pack(cache.MAGIC, cache.FILE_VERSION, len(obj), cache._digest(k, obj))


def test_cache_hit_reuses_the_entry(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    k = _kernel_key("add", monkeypatch)
    assert stat.S_IMODE(os.stat(cdir).st_mode) == 0o700
    cache.clear_memory()
    out, keys = _compile("add", monkeypatch)
    np.testing.assert_array_equal(out, EXPECTED["add"])
    assert k not in keys  # loaded, not recompiled


def test_cache_planted_other_programs_entry(cdir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    add = _kernel_key("add", monkeypatch)
    mul = _kernel_key("multiply", monkeypatch)
    _entry(cdir, add).write_bytes(_entry(cdir, mul).read_bytes())
    _recompiles("add", cdir, add, monkeypatch)


def test_cache_planted_raw_object(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare object file (no header: the old format, or planted) is never loaded."""
    add = _kernel_key("add", monkeypatch)
    mul = _kernel_key("multiply", monkeypatch)
    cache.clear_memory()
    raw = cache.get(mul)
    assert raw is not None
    _entry(cdir, add).write_bytes(raw)
    _recompiles("add", cdir, add, monkeypatch)


def _system_object(name: str, marker: Path) -> bytes:
    """An object defining kernel `name` that calls system("touch marker")."""
    cmd = f"touch {marker}\0".encode()
    escaped = "".join(f"\\{b:02X}" for b in cmd)
    text = f"""
@cmd = private constant [{len(cmd)} x i8] c"{escaped}"
declare i32 @system(ptr)
define void @{name}(ptr %t, i64 %b, i64 %e) {{
  %r = call i32 @system(ptr @cmd)
  ret void
}}
"""
    t = target.current()
    ctm = llvm_util._codegen_machine(t)
    ref = llvm_util.verify(text)
    ref.triple = t.triple
    ref.data_layout = str(ctm.target_data)
    return ctm.emit_object(ref)


def test_cache_planted_system_call_with_valid_header(
        cdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even an entry whose header matches (written by someone who computed the hash) is
    refused by the symbol check, discarded and recompiled; the planted code never runs."""
    from xlapy.backends.cpu import objfile

    add = _kernel_key("add", monkeypatch)
    cache.clear_memory()
    real = cache.get(add)
    assert real is not None
    names = [s.name for s in objfile.symbols(real) if s.defined and s.binding == 1]
    marker = tmp_path / "planted-code-ran"
    evil = _system_object(names[0], marker)
    _entry(cdir, add).write_bytes(_header(add, evil) + evil)
    _recompiles("add", cdir, add, monkeypatch)
    assert not marker.exists()
    cache.clear_memory()
    assert b"system" not in (cache.get(add) or b"system")


def test_cache_swapped_entries(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add = _kernel_key("add", monkeypatch)
    mul = _kernel_key("multiply", monkeypatch)
    a, m = _entry(cdir, add), _entry(cdir, mul)
    tmp = cdir / "swap"
    os.rename(a, tmp)
    os.rename(m, a)
    os.rename(tmp, m)
    _recompiles("add", cdir, add, monkeypatch)
    _recompiles("multiply", cdir, mul, monkeypatch)


@pytest.mark.parametrize("keep", [0, 10, 51, -1])
def test_cache_truncated_entry(cdir: Path, monkeypatch: pytest.MonkeyPatch, keep: int) -> None:
    add = _kernel_key("add", monkeypatch)
    data = _entry(cdir, add).read_bytes()
    _entry(cdir, add).write_bytes(data[:keep])
    _recompiles("add", cdir, add, monkeypatch)


def test_cache_corrupted_entry(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add = _kernel_key("add", monkeypatch)
    data = bytearray(_entry(cdir, add).read_bytes())
    rng = random.Random(0)
    for _ in range(16):
        data[rng.randrange(cache._HEADER.size, len(data))] ^= 0xFF
    _entry(cdir, add).write_bytes(bytes(data))
    _recompiles("add", cdir, add, monkeypatch)


def test_cache_fifo_does_not_hang(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add = _kernel_key("add", monkeypatch)
    _entry(cdir, add).unlink()
    os.mkfifo(_entry(cdir, add))
    done: list[BaseException | None] = []

    def work() -> None:
        try:
            _recompiles("add", cdir, add, monkeypatch)
            done.append(None)
        except BaseException as e:  # reported in the test's thread
            done.append(e)

    th = threading.Thread(target=work, daemon=True)
    th.start()
    th.join(120)
    assert done, "compiling with a FIFO at the cache entry's path hung"
    if done[0] is not None:
        raise done[0]


def test_cache_symlink_is_not_followed(cdir: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    add = _kernel_key("add", monkeypatch)
    outside = tmp_path / "outside.o"
    outside.write_bytes(_entry(cdir, add).read_bytes())  # a valid entry, reached by a link
    _entry(cdir, add).unlink()
    _entry(cdir, add).symlink_to(outside)
    cache.clear_memory()
    assert cache.get(add) is None
    _recompiles("add", cdir, add, monkeypatch)
    assert not _entry(cdir, add).is_symlink()
    assert outside.read_bytes()  # the link's target is left alone


def _assert_memory_only(cdir: Path, reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = sorted(p.name for p in cdir.iterdir()) if cdir.exists() else None
    with pytest.warns(RuntimeWarning, match=reason) as rec:
        out, _ = _compile("multiply", monkeypatch)
    np.testing.assert_array_equal(out, EXPECTED["multiply"])
    assert str(cdir) in str(rec[0].message)
    after = sorted(p.name for p in cdir.iterdir()) if cdir.exists() else None
    assert after == before  # nothing read or written (not even made)


def test_cache_dir_owned_by_another_user(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add = _kernel_key("add", monkeypatch)
    os.chown(cdir, 65534, 65534)
    cache.clear_memory()
    with pytest.warns(RuntimeWarning, match="owned by uid 65534"):
        assert cache.get(add) is None  # a valid entry, but in a directory not ours
    cache.clear_memory()  # warns again
    _assert_memory_only(cdir, "owned by uid 65534", monkeypatch)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_cache_dir_writable_by_others(cdir: Path, monkeypatch: pytest.MonkeyPatch,
                                      mode: int) -> None:
    _kernel_key("add", monkeypatch)
    os.chmod(cdir, mode)
    cache.clear_memory()
    _assert_memory_only(cdir, "other users can write", monkeypatch)


@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_cache_dir_under_a_parent_others_can_write(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   mode: int) -> None:
    """Another user who can write to a parent can swap the whole cache directory."""
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chmod(parent, mode)
    d = parent / "cache"
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(d))
    cache.clear_memory()
    _assert_memory_only(d, f"other users can write to its parent {parent}", monkeypatch)
    cache.clear_memory()


def test_cache_dir_under_a_sticky_or_foreign_parent(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "sticky"
    parent.mkdir()
    os.chmod(parent, 0o1777)  # as /tmp: others cannot rename what is ours
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(parent / "cache"))
    cache.clear_memory()
    k = _kernel_key("add", monkeypatch)
    assert _entry(parent / "cache", k).exists()
    if os.geteuid() == 0:  # only root can give a directory away
        other = tmp_path / "other"
        other.mkdir()
        os.chown(other, 65534, 65534)
        monkeypatch.setenv("XLAPY_CACHE_DIR", str(other / "cache"))
        cache.clear_memory()
        _assert_memory_only(other / "cache", f"its parent {other} is owned by uid 65534",
                            monkeypatch)
    cache.clear_memory()


def test_cache_dir_whose_parents_do_not_exist_yet(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh home has no ~/.cache: the first put makes the whole path, silently (it warned
    "its parents cannot be read" and cached in memory only)."""
    d = tmp_path / "home" / ".cache" / "xlapy" / "cpu"
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(d))
    cache.clear_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = _kernel_key("add", monkeypatch)
    assert _entry(d, k).exists()
    cache.clear_memory()


def test_cache_dir_warns_once(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cdir.mkdir(mode=0o777)
    os.chmod(cdir, 0o777)
    with pytest.warns(RuntimeWarning) as rec:
        for k in ("a" * 64, "b" * 64):
            cache.put(k, b"obj")
            assert cache.get(k) == b"obj"  # the memory cache still works
    assert len(rec) == 1


@pytest.mark.parametrize("call", ["write", "replace"])
def test_cache_full_disk(cdir: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    cdir.mkdir(mode=0o700)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, call, full)
    out, keys = _compile("add", monkeypatch)
    monkeypatch.undo()
    np.testing.assert_array_equal(out, EXPECTED["add"])
    assert keys
    assert list(cdir.iterdir()) == []  # no entry, no .tmp file


def _join_scans() -> None:
    """Wait for the cache's first-scan threads (cache._account)."""
    for t in threading.enumerate():
        if t.name == "xlapy-cache-scan":
            t.join(30)


def test_cache_eviction_keeps_dir_under_bound(cdir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    size = 10_000
    bound = 5 * (size + cache._HEADER.size)
    monkeypatch.setenv("XLAPY_CACHE_MAX_BYTES", str(bound))
    keys = [f"{i:064x}" for i in range(30)]
    for i, k in enumerate(keys):
        cache.put(k, bytes([i]) * size)
        _join_scans()  # (the first put's scan runs on a thread: the bound holds once it ends)
        total = sum(p.stat().st_size for p in cdir.iterdir())
        assert total <= bound
    cache.clear_memory()
    assert cache.get(keys[-1]) == bytes([29]) * size  # the newest entry is kept
    assert cache.get(keys[0]) is None


def test_cache_eviction_is_least_recently_used(cdir: Path) -> None:
    keys = [f"{i:064x}" for i in range(4)]
    for i, k in enumerate(keys):
        cache.put(k, bytes(1000))
        os.utime(_entry(cdir, k), (1000 + i, 1000 + i))
    cache.clear_memory()
    assert cache.get(keys[0]) is not None  # a hit: now the most recently used
    cache.evict(cdir, 3 * (1000 + cache._HEADER.size))
    left = {p.stem for p in cdir.glob("*.o")}
    assert keys[0] in left and keys[1] not in left
    assert keys[3] in left


def test_cache_first_put_scans_aside(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's first put leaves the scan of a full directory to a thread (the put
    itself returns first), which still brings it under the bound."""
    size = 1000 + cache._HEADER.size
    monkeypatch.setenv("XLAPY_CACHE_MAX_BYTES", str(8 * size))
    cdir.mkdir(mode=0o700)
    for i in range(20):  # another process's entries, over the bound
        (cdir / f"{i:064x}.o").write_bytes(bytes(size))
    release = threading.Event()
    evict = cache.evict
    monkeypatch.setattr(cache, "evict", lambda d, b: release.wait(30) and evict(d, b))
    cache.put("f" * 64, bytes(1000))  # returns while the scan waits
    assert len(list(cdir.glob("*.o"))) == 21
    release.set()
    _join_scans()
    assert sum(p.stat().st_size for p in cdir.glob("*.o")) <= 8 * size


def test_cache_stale_tmp_files_removed(cdir: Path) -> None:
    cdir.mkdir(mode=0o700)
    stale = cdir / ".xlapy-dead.tmp"
    stale.write_bytes(b"x")
    os.utime(stale, (1, 1))
    foreign = cdir / "notes.txt"
    foreign.write_bytes(b"y")
    cache.evict(cdir, 1 << 30)
    assert not stale.exists() and foreign.exists()


def test_cache_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(cache, "MEMORY_MAX_BYTES", 3000)
    cache.clear_memory()
    try:
        keys = [f"{i:064x}" for i in range(10)]
        for k in keys:
            cache.put(k, bytes(1000))
            assert cache._memory_bytes <= 3000
        assert cache.get(keys[0]) is None and cache.get(keys[-1]) is not None
    finally:
        cache.clear_memory()


def test_cache_runtime_object_bad_entry(cdir: Path) -> None:
    """A cached runtime library that is not one (here a kernel object) is recompiled."""
    t = target.host_target()
    text = str(rtlib.module(t.triple))
    with target.use(t):
        k = cache.key(text, "rtlib")
    other = runtime_lib.runtime_object(t)  # this process's (maybe from the real cache)
    bogus = b"\x7fELF" + bytes(200)
    cdir.mkdir(mode=0o700)
    _entry(cdir, k).write_bytes(_header(k, bogus) + bogus)
    fresh = runtime_lib.runtime_object.__wrapped__(t)
    assert fresh != bogus and runtime_lib._runtime_object_ok(fresh, t)
    assert runtime_lib._runtime_object_ok(other, t)
    cache.clear_memory()
    assert cache.get(k) == fresh
