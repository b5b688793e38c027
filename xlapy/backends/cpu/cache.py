"""Compile cache: object code in memory and on disk, keyed by the optimized-input IR text,
the compile options and the target (triple, CPU name and features: target.py), so another
CPU or target never loads code built for this one. A disk entry is never trusted: it is
loaded only from a directory the user alone can write, only from a regular file, and only
if its header's sha256 over (key, object) matches; anything else is a miss (recompile).
"""

from __future__ import annotations

import collections
import errno
import hashlib
import os
import stat
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import llvmlite

from xlapy.backends.cpu import llvm_util, target
from xlapy.backends.cpu.llvm_util import OPT_LEVEL, Engine
from xlapy.errors import XlapyError

#: Bump when code generation or the entry format changes in a way the IR text would not show
#: (6: entries carry a header; older xlapy builds, which read format-5 keys as bare objects,
#: never see these files).
FORMAT = "6"
#: A disk entry: MAGIC, the file format, the object's length, sha256(key \0 object), object.
MAGIC = b"XLAPYOBJ"
FILE_VERSION = 1
_HEADER = struct.Struct("<8sIQ32s")
#: A file larger than this is not read (no object of ours comes near it).
MAX_FILE_BYTES = 256 << 20
#: Default bound of the disk cache (`$XLAPY_CACHE_MAX_BYTES`).
DEFAULT_MAX_BYTES = 1 << 30
#: Bound of the in-memory cache (least recently used entries dropped first).
MEMORY_MAX_BYTES = 256 << 20
#: The directory is scanned for eviction every SCAN_EVERY puts (other processes write to it
#: too), or sooner when this process's running estimate passes the bound; eviction goes down
#: to 3/4 of the bound so a full cache is not rescanned on every put.
SCAN_EVERY = 64
#: A temporary file older than this is left over from a killed process: removed by a scan.
STALE_TMP_SECONDS = 3600
_TMP_PREFIX = ".xlapy-"

_MEMORY: collections.OrderedDict[str, bytes] = collections.OrderedDict()
_memory_bytes = 0
_LOCK = threading.Lock()
_WARNED: set[str] = set()
#: Per directory: (estimated bytes, puts since the last scan); None until the first scan.
_DISK: dict[str, list[int]] = {}


def cache_dir() -> Path | None:
    """`$XLAPY_CACHE_DIR`, else ~/.cache/xlapy/cpu; `XLAPY_CACHE_DIR=""` turns the disk off."""
    env = os.environ.get("XLAPY_CACHE_DIR")
    if env == "":
        return None
    return Path(env) if env else Path.home() / ".cache" / "xlapy" / "cpu"


def max_bytes() -> int:
    """`$XLAPY_CACHE_MAX_BYTES` (default 1 GiB): the disk cache's bound."""
    env = os.environ.get("XLAPY_CACHE_MAX_BYTES", "")
    try:
        return max(0, int(env)) if env else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


def key(ir_text: str, options: str = "") -> str:
    h = hashlib.sha256()
    for part in (FORMAT, llvmlite.__version__, str(OPT_LEVEL), target.current().key, options,
                 ir_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _digest(k: str, obj: bytes) -> bytes:
    return hashlib.sha256(k.encode() + b"\0" + obj).digest()


def _remember(k: str, obj: bytes) -> None:
    global _memory_bytes
    with _LOCK:
        old = _MEMORY.pop(k, None)
        if old is not None:
            _memory_bytes -= len(old)
        _MEMORY[k] = obj
        _memory_bytes += len(obj)
        while _memory_bytes > MEMORY_MAX_BYTES and len(_MEMORY) > 1:
            _, dropped = _MEMORY.popitem(last=False)
            _memory_bytes -= len(dropped)


def _forget(k: str) -> None:
    global _memory_bytes
    with _LOCK:
        old = _MEMORY.pop(k, None)
        if old is not None:
            _memory_bytes -= len(old)


def _usable_dir(create: bool) -> Path | None:
    """The cache directory if it is safe to use: created 0700 if missing (on a put), a
    directory owned by this user that no group or other user can write. Otherwise None, with
    one warning per directory naming it and the reason. Its parents are checked first (no
    directory is made where another user could replace it)."""
    d = cache_dir()
    if d is None:
        return None
    reason = _unsafe_parent(d)
    if reason:
        _warn(d, reason)
        return None
    try:
        if create:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(d)
    except OSError as e:
        if create and e.errno not in (errno.ENOENT, errno.ENOTDIR):
            _warn(d, f"it cannot be created or read ({e.strerror})")
        return None
    if not stat.S_ISDIR(st.st_mode):
        reason = "it is not a directory"
    elif st.st_uid != os.geteuid():
        reason = f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        reason = f"other users can write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    else:
        return d
    _warn(d, reason)
    return None


def _unsafe_parent(d: Path) -> str:
    """Why another user could replace the directory through one of its parents (as
    OpenSSH's StrictModes): a parent not owned by this user or root, or writable by others
    without the sticky bit (/tmp, mode 1777, is fine); '' when none can."""
    me = os.geteuid()
    try:
        parents = d.resolve().parents
        for p in parents:
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue  # made by this user on the first put (a fresh home has no ~/.cache)
            mode = stat.S_IMODE(st.st_mode)
            if st.st_uid not in (0, me):
                return f"its parent {p} is owned by uid {st.st_uid}"
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
                return f"other users can write to its parent {p} (mode {mode:04o})"
    except OSError as e:
        return f"its parents cannot be read ({e.strerror})"
    return ""


def _warn(d: Path, reason: str) -> None:
    with _LOCK:
        if str(d) in _WARNED:
            return
        _WARNED.add(str(d))
    warnings.warn(f"xlapy: not using the compile cache directory {d}: {reason}; compiled "
                  f"code is cached in memory only (chmod 700 it, or set XLAPY_CACHE_DIR)",
                  RuntimeWarning, stacklevel=3)


def _read_entry(path: Path, k: str) -> bytes | None:
    """The object of a valid entry for `k` at `path`, else None; a regular file whose content
    is not a valid entry for `k` is removed (the directory is ours: _usable_dir)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None  # missing, a symlink (ELOOP), unreadable: a put replaces it
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None  # a FIFO, device or huge file: never read (a put replaces it)
        chunks = []
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        obj = _parse(data, k)
        if obj is None:
            _remove_if_same(path, st)
            return None
        try:
            os.utime(fd)  # least recently used eviction goes by mtime
        except OSError:
            pass
        return obj
    except OSError:
        return None
    finally:
        os.close(fd)


def _parse(data: bytes, k: str) -> bytes | None:
    if len(data) < _HEADER.size:
        return None
    magic, version, length, digest = _HEADER.unpack_from(data)
    obj = data[_HEADER.size:]
    if magic != MAGIC or version != FILE_VERSION or length != len(obj):
        return None
    if digest != _digest(k, obj):
        return None  # corrupted, or another key's entry moved here
    return obj


def _remove_if_same(path: Path, st: os.stat_result) -> None:
    """Remove `path` if it is still the file `st` describes (not a fresh entry another
    process renamed into place meanwhile)."""
    try:
        now = os.lstat(path)
        if (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
            os.unlink(path)
    except OSError:
        pass


def get(k: str) -> bytes | None:
    """The object cached under `k`, or None (compile it and `put` it)."""
    with _LOCK:
        hit = _MEMORY.get(k)
        if hit is not None:
            _MEMORY.move_to_end(k)
            return hit
    d = _usable_dir(create=False)
    if d is None:
        return None
    obj = _read_entry(d / f"{k}.o", k)
    if obj is not None:
        _remember(k, obj)
    return obj


def put(k: str, obj: bytes) -> None:
    """Cache `obj` under `k` in memory and, where the directory is usable, on disk. A failed
    write (read-only or full disk) only costs recompiles and leaves no temporary file."""
    _remember(k, obj)
    d = _usable_dir(create=True)
    if d is None:
        return
    data = _HEADER.pack(MAGIC, FILE_VERSION, len(obj), _digest(k, obj)) + obj
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=_TMP_PREFIX, suffix=".tmp")  # mode 0600
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, d / f"{k}.o")
        tmp = None
    except OSError:
        return  # a read-only or full disk only costs recompiles
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    _account(d, len(data))


def discard(k: str) -> None:
    """Drop the entry for `k` from memory and disk (its object proved unusable)."""
    _forget(k)
    d = _usable_dir(create=False)
    if d is not None:
        try:
            os.unlink(d / f"{k}.o")
        except OSError:
            pass


def reject(obj: bytes, fresh: bytes | None = None) -> None:
    """An object `get` returned failed to load: drop its entry, and cache `fresh` (the
    object recompiled from the IR) under the same key instead."""
    with _LOCK:
        found = [k for k, v in _MEMORY.items() if v is obj]
    for k in found:
        discard(k)
        if fresh is not None:
            put(k, fresh)


def _account(d: Path, n: int) -> None:
    """Count a put of `n` bytes into `d`; scan and evict when due. A process's first put
    into `d` scans on a thread of its own: a full cache is some 100k entries, whose scan
    (0.2 s) was a first compile's largest part after LLVM's."""
    bound = max_bytes()
    with _LOCK:
        state = _DISK.get(str(d))
        if state is None:
            state = _DISK[str(d)] = [n, 1]
            threading.Thread(target=_first_scan, args=(d, bound, state), daemon=True,
                             name="xlapy-cache-scan").start()
            return
        state[0] += n
        state[1] += 1
        if state[0] <= bound and state[1] < SCAN_EVERY:
            return
    total = evict(d, bound)
    with _LOCK:
        _DISK[str(d)] = [total, 0]


def _first_scan(d: Path, bound: int, state: list[int]) -> None:
    """`_account`'s first scan of `d`: evict, then add what the directory held to the
    estimate (this process's puts meanwhile may count twice: a rescan comes sooner)."""
    total = evict(d, bound)
    with _LOCK:
        if _DISK.get(str(d)) is state:
            state[0] += total


def evict(d: Path, bound: int) -> int:
    """Remove least recently used entries (by mtime) of `d` until its entries total at most
    3/4 of `bound` if they exceed `bound`, and stale temporary files; returns the total left.
    Only files named like ours are counted or removed."""
    entries: list[tuple[float, int, str]] = []
    now = time.time()
    try:
        with os.scandir(d) as it:
            for e in it:
                name = e.name
                ours = (name.endswith(".o") and len(name) == 66) or (
                    name.startswith(_TMP_PREFIX) and name.endswith(".tmp"))
                if not ours or not e.is_file(follow_symlinks=False):
                    continue
                st = e.stat(follow_symlinks=False)
                if name.endswith(".tmp"):
                    if now - st.st_mtime > STALE_TMP_SECONDS:
                        _unlink(e.path)
                    continue
                entries.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        return 0
    total = sum(size for _, size, _ in entries)
    if total <= bound:
        return total
    entries.sort()
    for _, size, path in entries:
        if total <= bound * 3 // 4:
            break
        if _unlink(path):
            total -= size
    return total


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def clear_memory() -> None:
    """Forget the in-memory entries and the per-directory state (tests; the disk stays)."""
    global _memory_bytes
    with _LOCK:
        _MEMORY.clear()
        _memory_bytes = 0
        _DISK.clear()
        _WARNED.clear()


def engine(mod: Any, mode: str, vectorize: bool = True, light: bool = False, *,
           exports: Sequence[str]) -> Engine:
    """An Engine of `mod` (a module or its text) whose object comes from the disk cache under
    the text and `mode` (the pipeline's name in the key) when it is there, else is compiled
    and put there: the build-once library modules (gemv, gemm_small, the int8 GEMMs, the
    while driver, the direct convolution) load in a later process instead of compiling."""
    text = llvm_util.module_text(mod)  # printed once: key and compile read the same text
    k = key(text, mode)
    obj = get(k)
    if obj is not None:
        return Engine(text, obj=obj, vectorize=vectorize, light=light, exports=exports)
    from xlapy.backends.cpu import parallel_compile

    eng = Engine(compiled=parallel_compile.compile_here(text, vectorize, light),
                 vectorize=vectorize, light=light, exports=exports)
    put(k, eng.object)
    return eng


def _fingerprint() -> str:
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted([*here.glob("*.py"), here.parents[1] / "denormal.py"]):
        st = p.stat()
        h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


#: Taken as the backend is imported (~0.5 ms), so it describes the code this process runs:
#: taken later, a file edited meanwhile would file this process's objects under the
#: edited code's key.
_SOURCES = _fingerprint()


def sources() -> str:
    """A fingerprint of the code that emits the build-once library modules: name, size and
    modification time of the backend's Python files and xlapy/denormal.py (what Python's
    .pyc files check of theirs), as this process imported them. Any edit there changes it,
    and so every `library_engine` key: a changed emitter never loads an object of the old
    one."""
    return _SOURCES


def library_key(ident: tuple[Any, ...], mode: str) -> str:
    """`library_engine`'s key: the builder's `ident`, the target (`key`), the denormal mode,
    the lanes and the emitting code's fingerprint (`sources`)."""
    from xlapy import denormal
    from xlapy.backends.cpu import lanes

    return key(f"library\0{ident!r}\0{denormal.flushing()}\0{lanes.vector_width()}\0"
               f"{sources()}", mode)


def _load_library(k: str, exports: Sequence[str], vectorize: bool, light: bool
                  ) -> Engine | None:
    """The engine of the library object cached under `k`, or None: none there, or one that
    does not load (dropped, so the caller emits and compiles it again)."""
    obj = get(k)
    if obj is None:
        return None
    try:
        return Engine(None, obj=obj, vectorize=vectorize, light=light, exports=exports)
    except XlapyError:
        discard(k)
        return None


def library_engine(ident: tuple[Any, ...], emit: Callable[[], Any], mode: str, *,
                   light: bool = False, vectorize: bool = True, o0: bool = False,
                   exports: Sequence[str]) -> Engine:
    """A build-once library module's engine (the while driver, the runners, the GEMM
    modules), first looked up under `ident` (its builder and arguments), the target, the
    denormal mode, the lanes and the emitting code (`sources`), so a later process loads
    the object without emitting and printing the module: a warm first run's largest part
    (scan_rnn's gemm_small: ~11 ms of its ~16). Else `emit()` (a module or its text) goes
    through `engine` (`o0`: `o0_engine`), and the object is cached under both keys."""
    k = library_key(ident, mode)
    found = _load_library(k, exports, vectorize and not o0, light or o0)
    if found is not None:
        return found
    if o0:
        eng = o0_engine(llvm_util.module_text(emit()), mode, exports=exports)
    else:
        eng = engine(emit(), mode, vectorize, light, exports=exports)
    put(k, eng.object)
    return eng


def library_job(ident: tuple[Any, ...], emit: Callable[[], Any], mode: str, *,
                exports: Sequence[str], o0: bool = False,
                vectorize: bool = True) -> Callable[[], Engine]:
    """As `library_engine` (the light pipeline, -O3, `vectorize`d or not; `o0`:
    unvectorized, -O0 code generation, as o0_engine), the compile on a compile thread
    (parallel_compile.submit) while the caller goes on: the returned call waits for it and
    gives the engine (each call a new one). The GEMM modules compile so while the compile
    that needs them plans."""
    k = library_key(ident, mode)
    vectorize = vectorize and not o0
    found = _load_library(k, exports, vectorize, True)
    if found is not None:
        return lambda: found
    from xlapy.backends.cpu import parallel_compile

    job = parallel_compile.submit(llvm_util.module_text(emit()), vectorize, True, opt=0 if o0
                                  else parallel_compile.OPT_LEVEL)

    def result() -> Engine:
        eng = Engine(compiled=job.result(), vectorize=vectorize, light=True, exports=exports)
        put(k, eng.object)
        return eng

    return result


def o0_engine(text: str, mode: str, *, exports: Sequence[str]) -> Engine:
    """As `engine`, for a module optimized by the light pipeline without loop vectorization
    and emitted by LLVM's -O0 code generator (llvm_util.o0_machine: the AMX tile kernels,
    whose time is in the tile instructions, which no register allocator changes). An object
    from the cache that fails to load is recompiled (light, -O3) by Engine."""
    k = key(text, mode)
    obj = get(k)
    if obj is not None:
        return Engine(text, obj=obj, vectorize=False, light=True, exports=exports)
    from xlapy.backends.cpu import parallel_compile

    obj, ref = parallel_compile.compile_here(text, False, True, opt=0)
    put(k, obj)
    return Engine(compiled=(obj, ref), exports=exports)
