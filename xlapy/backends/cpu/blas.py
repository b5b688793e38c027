"""Direct BLAS: sgemm/dgemm function pointers, called through ctypes (the GIL is released;
arguments are plain pointers, so strided views need no copy).

The library is xlapy's own copy of OpenBLAS, the `scipy-openblas32` wheel (the build scipy
bundles, published on its own by the OpenBLAS project). Its SkylakeX SGEMM from 0.3.31 on was
10-15% faster on the benchmark GEMMs here than the 0.3.30 that scipy 1.17 bundles, and a
private copy can be set single-threaded for good without touching numpy's or scipy's. Without
the wheel, scipy.linalg.cython_blas's pointers are used, single-threaded per calling thread.

`gemm(a, b, out, beta)` computes out = a @ b + beta * out for 2-D float32/float64 (and
complex64/complex128: cgemm/zgemm, for complex dot_general) views with
one unit stride each (row- or column-contiguous: transposes become BLAS flags), as the
column-major product out^T = b^T a^T.

Threads: OpenBLAS's own threads busy-wait, and on a loaded machine they collapse (a 3 ms
convolution took 120 ms at load 5 on 2 cores). So each call runs single-threaded and big
products split over the backend's thread pool: by rows of the output (each thread packs only
its rows of a; with 0.3.34 rows beat columns, e.g. 1024x128x1024 0.92 vs 1.04 ms), by columns
only when there are too few rows, at chunk boundaries fixed by the shape (`gemm`).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

_P = ctypes.c_void_p
#: Multiply-adds below which a product is not split over threads.
SPLIT_FLOPS = 1 << 21
#: Rows (columns) per chunk at least of a split product: each chunk packs all of b (a) again.
MIN_CHUNK = 128
#: Columns per chunk at least of a product of fewer rows than two chunks, over 1024 columns
#: or more (at most 8 chunks): each chunk packs all of a again and is a call of its own, and
#: 512 columns route to gemm_f32 (2 threads, 128 -> 512+ columns: 64x1024x1024 0.83 -> 0.63 ms,
#: 128x1024x1024 1.35 -> 1.03, 64x4096x4096 11.1 -> 9.4; OpenBLAS alone 0.83 -> 0.66).
WIDE_CHUNK = 512
_local = threading.local()


@functools.cache
def _own_library() -> Any:
    """xlapy's OpenBLAS (scipy-openblas32), set single-threaded, or None. Found without
    importing the package, whose import reads its distribution's metadata (~9 ms of a
    program's first call, against ~1.3 ms to load the library)."""
    try:
        spec = importlib.util.find_spec("scipy_openblas32")
        lib_dir = os.path.join(os.path.dirname(spec.origin or ""), "lib") if spec else ""
        names = sorted(x for x in os.listdir(lib_dir) if x.startswith("libscipy_openblas"))
    except (ImportError, OSError, ValueError):
        return None
    try:
        lib = ctypes.CDLL(os.path.join(lib_dir, names[0]))
        lib.scipy_openblas_set_num_threads.argtypes = [ctypes.c_int]
        lib.scipy_openblas_set_num_threads(1)
        lib.scipy_sgemm_, lib.scipy_dgemm_  # noqa: B018  (both present, or fall back)
    except (OSError, AttributeError, IndexError):
        return None
    return lib


def _address(name: str) -> int:
    """The address of the Fortran-style BLAS routine `name` (sgemm, dgemv, ...): xlapy's own
    OpenBLAS, else scipy's cython_blas."""
    lib = _own_library()
    if lib is not None:
        return int(ctypes.cast(getattr(lib, f"scipy_{name}_"), ctypes.c_void_p).value)
    from scipy.linalg import cython_blas

    capsule = cython_blas.__pyx_capi__[name]
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    cname = ctypes.pythonapi.PyCapsule_GetName
    cname.restype = ctypes.c_char_p
    cname.argtypes = [ctypes.py_object]
    return int(get(capsule, cname(capsule)))


@functools.cache
def _fn(name: str) -> Any:
    """The 13-argument Fortran-style sgemm/dgemm/cgemm/zgemm."""
    return ctypes.CFUNCTYPE(None, *([_P] * 13))(_address(name))


@functools.cache
def _gemv(name: str) -> Any:
    """The 11-argument Fortran-style sgemv/dgemv."""
    return ctypes.CFUNCTYPE(None, *([_P] * 11))(_address(name))


@functools.cache
def _set_local_threads() -> Callable[[int], int] | None:
    """scipy's OpenBLAS per-thread thread count (only needed without xlapy's own copy)."""
    if _own_library() is not None:
        return None
    import scipy

    libs = os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs")
    for path in glob.glob(os.path.join(libs, "libscipy_openblas*.so")):
        try:
            f = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
        return f
    return None


def library() -> str:
    """Which BLAS gemm calls: for reports and tests."""
    lib = _own_library()
    if lib is None:
        return "scipy.linalg.cython_blas"
    lib.scipy_openblas_get_config.restype = ctypes.c_char_p
    return lib.scipy_openblas_get_config().decode()


def _single_thread() -> None:
    if getattr(_local, "single", False):
        return
    f = _set_local_threads()
    if f is not None:
        f(1)
    _local.single = True


def _op(x: np.ndarray) -> tuple[bytes, int, np.ndarray]:
    """(BLAS op of the column-major view, leading dimension, array) for a 2-D view."""
    it = x.itemsize
    r, c = x.shape
    if x.strides[1] == it or c <= 1:
        return b"N", max(x.strides[0] // it if r > 1 else c, c, 1), x
    if x.strides[0] == it or r <= 1:
        return b"T", max(x.strides[1] // it if c > 1 else r, r, 1), x
    x = np.ascontiguousarray(x)
    return b"N", max(c, 1), x


#: dtype char -> (routine, its real scalar type).
_ROUTINE = {"f": ("sgemm", ctypes.c_float), "d": ("dgemm", ctypes.c_double),
            "F": ("cgemm", ctypes.c_float), "D": ("zgemm", ctypes.c_double)}


def _gemm_args(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float
               ) -> tuple[Any, list[Any], list[Any]] | None:
    """(?gemm for a's dtype, its 13 by-reference arguments, objects to keep alive), or None for an
    empty product."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return None
    name, real = _ROUTINE[a.dtype.char]
    fn = _fn(name)

    def sc(v: float) -> Any:  # a scalar by reference: complex ones are (re, im) pairs
        return real(v) if name in ("sgemm", "dgemm") else (real * 2)(v, 0.0)
    ta, lda, b = _op(b)
    tb, ldb, a = _op(a)
    assert out.strides[1] == out.itemsize or n <= 1
    if name == "sgemm":  # wide row-major f32 weights (AVX-512, AVX2): our own kernel, same ABI
        from xlapy.backends.cpu import gemm_f32

        if gemm_f32.routes(m, n, k, ta, tb, beta):
            fn = gemm_f32.fortran()
    ldc = max(out.strides[0] // out.itemsize if m > 1 else n, n, 1)
    i = ctypes.c_int
    refs = [ctypes.c_char(ta), ctypes.c_char(tb), i(n), i(m), i(k), sc(1.0)]
    tail = [i(lda), i(ldb), sc(beta), i(ldc)]
    args = [*refs, _P(b.ctypes.data), tail[0], _P(a.ctypes.data), tail[1], tail[2],
            _P(out.ctypes.data), tail[3]]
    return fn, args, [a, b, out, *refs, *tail]


def _gemm1(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float) -> None:
    call = _gemm_args(a, b, out, beta)
    if call is None:
        return
    _single_thread()
    fn, args, _ = call
    fn(*[x if isinstance(x, _P) else ctypes.byref(x) for x in args])


_single_pool: Any = None


def _pool_single(pool: Any) -> None:
    """OpenBLAS single-threaded on every native worker too (once per pool)."""
    global _single_pool
    if _single_pool is pool:
        return
    f = _set_local_threads()
    if f is not None:
        pool.on_each(int(ctypes.cast(f, ctypes.c_void_p).value or 0), 1)
    _single_pool = pool


def ready(pool: Any) -> None:
    """BLAS single-threaded on this thread and the native workers (for JIT code that calls
    gemm itself: regions.py)."""
    _single_thread()
    _pool_single(pool)


def routine(dtype: np.dtype) -> str:
    """The ?gemm of a float32/64 or complex64/128 product."""
    return _ROUTINE[dtype.char][0]


def function_address(name: str) -> int:
    """The address of "sgemm" or "dgemm" (13 Fortran-style arguments), for native callers."""
    return int(ctypes.cast(_fn(name), ctypes.c_void_p).value or 0)


def columns(m: int, n: int) -> bool:
    """Whether a split m x n product is cut along its columns: when the rows are too few for
    two chunks, or when b is the wider (n > m): a chunk of rows packs all of b again, a chunk
    of columns all of a (the MLP's 256 x 4096 layers on 2 threads: 256x4096x4096 26.9 ms in
    column halves, 29.3 in row halves; 256x1024x4096 6.6 vs 7.2)."""
    return m < 2 * MIN_CHUNK or n > m


@functools.cache
def row_chunks() -> int:
    """Most chunks of a split product with rows for two (column chunks as many): twice the
    CPUs this process may use (at most parallel.MAX_CHUNKS). Each row chunk is a BLAS call
    that packs all of b again (a column chunk all of a): in 128-row
    chunks (16 of a 2048-row product) the packing cost 10-25% (Zen 4, 2 CPUs, against XLA:
    2048x2048x2048 1.12-1.15 -> 0.98-1.00 in 4 chunks, 1024x4096x1024 1.25 -> 1.00,
    768x3072x768 1.24 -> 1.04, 4096x1024x1024 1.01 -> 0.92). A property of the machine, not
    of the threads a program asks for, so the bits stay the same for any num_threads; a
    machine with more CPUs keeps its chunks up to MAX_CHUNKS."""
    from xlapy.backends.cpu import parallel

    return 2 * parallel.usable_cpus()


def split(m: int, n: int) -> list[int]:
    """The chunk boundaries of a split product (rows, or columns per `columns`): a function
    of the shape (and of the machine's CPUs: `row_chunks`) alone, so the bits never depend on
    the thread count. A wide product's column
    chunks are as many as its row chunks would be, so it keeps the same parallelism; a
    product of few rows has chunks of WIDE_CHUNK columns or more once it has 1024. Always a
    power of two of them (2 threads, 3 -> 2 chunks: 384x768x768 2.01 -> 1.51 ms, 384x768x384
    1.03 -> 0.80; 5 -> 4: 640x512x512 1.29 -> 1.04; 7 -> 4: 100x1000x1000 0.92 -> 0.82)."""
    from xlapy.backends.cpu import parallel

    if m < 2 * MIN_CHUNK:
        if n >= 2 * WIDE_CHUNK:
            return parallel.fixed_cuts(n, max(WIDE_CHUNK, n // 8), 16, pow2=True)
        return parallel.fixed_cuts(n, MIN_CHUNK, 16, pow2=True)
    if n <= m:
        return parallel.fixed_cuts(m, max(MIN_CHUNK, m // row_chunks()), 1, pow2=True)
    parts = min(parallel.MAX_CHUNKS, m // MIN_CHUNK, row_chunks())
    return parallel.fixed_cuts(n, max(MIN_CHUNK, n // parts), 16, pow2=True)


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float = 0.0,
         threads: int = 1) -> None:
    """out[m, n] = a[m, k] @ b[k, n] + beta * out (float32/64, complex64/128: plain
    transposes, never conjugates) on `threads` threads.

    A big product is cut into fixed chunks of rows or columns (`split`, `columns`) that
    depend only on its shape (parallel.fixed_cuts): OpenBLAS rounds a row differently
    depending on how many rows a call has, so the bits must not depend on the thread count;
    each thread takes the next chunk left. The calls (one a chunk) are planned once per shape
    and layout and run from native code (gemm_jobs.py; operands BLAS would copy keep the
    Python calls)."""

    m, k = a.shape
    n = b.shape[1]
    if m == 1 and k > 0 and n > 0 and a.dtype.char in "fd" and _vector_view(a[0]):
        _gemv_row(a, b, out, beta, threads)
        return
    by_rows = not columns(m, n)
    cuts = split(m, n) if m * n * k >= SPLIT_FLOPS else [0, m]
    chunks = len(cuts) - 1
    ks = k_cuts(m, n, k) if chunks < 2 and a.dtype.char in "fd" else None
    if ks is not None:
        _gemm_k(a, b, out, beta, threads, ks)
        return

    def part(j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo, hi = cuts[j], cuts[j + 1]
        if chunks < 2:
            return a, b, out
        return (a[lo:hi], b, out[lo:hi]) if by_rows else (a, b[:, lo:hi], out[:, lo:hi])

    from xlapy.backends.cpu import gemm_f32, gemm_jobs, target

    planned = gemm_jobs.table(a, b, out, beta, (target.current().name, gemm_f32._ON),
                              lambda: [part(j) for j in range(chunks)], _gemm_args)
    if planned is not None:  # planned once per shape: native calls (gemm_jobs.py)
        _run_planned(planned, threads)
        return
    if chunks < 2:
        _gemm1(a, b, out, beta)
        return
    if threads < 2:
        for j in range(chunks):
            _gemm1(*part(j), beta)
        return
    _shared([part(j) for j in range(chunks)], beta, threads)


#: Multiply-adds from which a product that rows and columns do not split (both under two
#: chunks) is cut along its contraction instead, and the contraction's cut at least.
K_SPLIT_MACS = 1 << 23
K_CHUNK = 1024


def k_cuts(m: int, n: int, k: int) -> list[int] | None:
    """The contraction's chunks of a deep product with few rows and columns (a weight
    gradient x^T g over many tokens), as many as CPUs (a power of two, each at least
    K_CHUNK), or None. A function of the shape and the machine, never of the threads a call
    gets: the bits do not change with them. One BLAS call ran 128 x 4096 x 128 on one
    thread (1.1 ms, XLA 1.1); cut in 2, 0.63."""
    from xlapy.backends.cpu import parallel

    if m * n * k < K_SPLIT_MACS or k < 2 * K_CHUNK:
        return None
    cuts = parallel.fixed_cuts(k, max(K_CHUNK, k // parallel.usable_cpus()), 16, pow2=True)
    return cuts if len(cuts) > 2 else None


def _gemm_k(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float, threads: int,
            cuts: list[int]) -> None:
    """out = a @ b + beta * out as partial products over the contraction's chunks `cuts`
    (each a BLAS call into a scratch matrix of its own, on the threads), summed in order."""
    from xlapy.backends.cpu import gemm_f32, gemm_jobs, target

    c, (m, n) = len(cuts) - 1, out.shape
    scratch = getattr(_local, "k_scratch", None)
    if scratch is None or scratch.shape != (c, m, n) or scratch.dtype != out.dtype:
        scratch = _local.k_scratch = np.empty((c, m, n), out.dtype)  # (reused: no faults)
    parts = [(a[:, lo:hi], b[lo:hi], scratch[j]) for j, (lo, hi) in
             enumerate(zip(cuts, cuts[1:]))]
    planned = gemm_jobs.table(a, b, scratch, 0.0, (target.current().name, gemm_f32._ON),
                              lambda: parts, _gemm_args)  # (keyed on scratch's shape too)
    if planned is not None:
        _run_planned(planned, threads)
    elif threads < 2:
        for part in parts:
            _gemm1(*part, 0.0)
    else:
        _shared(parts, 0.0, threads)
    total = np.add(scratch[0], scratch[1], out=scratch[0])
    for j in range(2, c):
        np.add(total, scratch[j], out=total)
    if beta:
        out *= beta
        out += total
    else:
        out[...] = total


def _run_planned(planned: tuple[np.ndarray, Any], threads: int) -> None:
    """The job table of gemm_jobs.table run single-threaded BLAS calls on `threads` threads
    (the plan, which holds what the table points at, kept until they have run)."""
    from xlapy.backends.cpu import parallel

    pool = parallel.pool(threads)
    if threads > 1:
        _pool_single(pool)
    _single_thread()
    pool.share_table(planned[0], threads, planned[1])


#: Matrix rows (or, transposed, output columns) per chunk at least of a split vector-matrix
#: product: each chunk is one ?gemv call over whole rows of the matrix as it lies in memory.
GEMV_CHUNK = 512


def _vector_view(x: np.ndarray) -> bool:
    """A 1-D view BLAS can read as a vector (a positive element stride)."""
    return x.strides[0] > 0 and x.strides[0] % x.itemsize == 0 or x.shape[0] == 1


def _gemv_row(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float,
              threads: int) -> None:
    """out[0, :] = a[0, :] @ b + beta * out as ?gemv (batch-1 inference: a 1 x K row times
    a K x N matrix is bound by reading the matrix; ?gemm packed all of it first: the
    1 x 4096 x 4096 layer of the batch-1 MLP 3x slower than XLA).

    Split so each call streams whole rows of the matrix as it lies in memory (?gemv over
    short row pieces ran at a third of the bandwidth): a row-major b by its rows, the K
    sum cut into fixed chunks whose partial rows are then summed (float order fixed by the
    shape); a transposed view by output columns. Chunks are parallel.fixed_cuts of the
    shape, so the bits never depend on the thread count; threads take the next one left.

    On x86-64 the JIT-compiled loops of gemv.py run instead (the MLP's batch-1 layers at
    the machine's read bandwidth on both threads, no ctypes marshalling per chunk)."""
    from xlapy.backends.cpu import gemv, parallel

    if gemv.available():
        gemv.gemv(a, b, out, beta, threads)
        return
    k, n = b.shape
    it = a.itemsize
    # column-major views of b: row-major [k, n] is "N" over (n x k, ld n), a transposed
    # view (unit row stride) is "T" over (k x n, ld k); a copy otherwise
    if b.strides[1] == it or n == 1:
        trans, ld = b"N", max(b.strides[0] // it if k > 1 else n, n, 1)
    elif b.strides[0] == it or k == 1:
        trans, ld = b"T", max(b.strides[1] // it if n > 1 else k, k, 1)
    else:
        b = np.ascontiguousarray(b)
        trans, ld = b"N", max(n, 1)
    x = a[0]
    incx = x.strides[0] // it if k > 1 else 1
    y = out[0]
    incy = y.strides[0] // it if n > 1 else 1
    assert incy > 0
    big = k * n >= SPLIT_FLOPS
    by_k = trans == b"N"  # the rows of b (the K sum) are cut; else the output columns
    cuts = parallel.fixed_cuts(k if by_k else n, GEMV_CHUNK) if big else [0, k if by_k else n]
    parts = None
    if by_k and len(cuts) > 2:  # each chunk's partial row, summed below in a fixed order
        parts = np.zeros((len(cuts) - 1, n), a.dtype)
    elif beta == 0.0:  # y may hold NaNs (arena, recycled outputs): ?scal by 0 keeps them
        y.fill(0)
    fn = _gemv("sgemv" if a.dtype.char == "f" else "dgemv")
    real = ctypes.c_float if a.dtype.char == "f" else ctypes.c_double
    i = ctypes.c_int
    one, zero, unit = real(1.0), real(0.0), i(1)
    shared = [ctypes.c_char(trans), i(ld), i(incx), real(beta), i(incy), one, zero, unit]
    jobs, keep = [], [a, b, out, x, y, parts, shared]
    for j, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        size = i(hi - lo)
        keep.append(size)
        if by_k:  # (n x size) at row lo of b, x[lo:hi]
            dims = (i(n), size)
            keep.append(dims)
            a_at, x_at = b.ctypes.data + lo * ld * it, x.ctypes.data + lo * incx * it
            if parts is None:
                y_at, bt, inc = y.ctypes.data, shared[3], shared[4]
            else:
                y_at, bt, inc = parts[j].ctypes.data, zero, unit
        else:  # (k x size) at output column lo
            dims = (i(k), size)
            keep.append(dims)
            a_at, x_at = b.ctypes.data + lo * ld * it, x.ctypes.data
            y_at, bt, inc = y.ctypes.data + lo * incy * it, shared[3], shared[4]
        jobs.append([shared[0], *dims, one, _P(a_at), shared[1], _P(x_at), shared[2], bt,
                     _P(y_at), inc])
    _single_thread()
    if threads < 2 or len(jobs) < 2:
        for args in jobs:
            fn(*[v if isinstance(v, _P) else ctypes.byref(v) for v in args])
    else:
        pool = parallel.pool(threads)
        _pool_single(pool)
        addr = int(ctypes.cast(fn, ctypes.c_void_p).value or 0)
        pool.share([(addr, tuple(int(v.value or 0) if isinstance(v, _P) else
                                 ctypes.addressof(v) for v in args)) for args in jobs],
                   threads, keep)
    if parts is not None:
        total = parts[0]
        for p in parts[1:]:
            total += p
        if beta == 0.0:
            y[...] = total
        else:
            y *= beta
            y += total


#: Multiply-adds per product below which a batch of up to 16 products is split over threads by
#: product rather than each product by rows: the transformer's 8-head attention dots
#: (256x64x256 each) took 0.62 ms split per head by rows, no faster than one thread
#: (0.56), and 0.34 ms with the heads shared out.
BATCH_SPLIT_FLOPS = 1 << 24


#: Products from which a batch runs as `batched_gemm` whatever their size: 8 of 512 x 512 x
#: 512 split each over 2 threads took 10.2 ms (XLA 7.5), 7.7 shared out; 8 of 256 x 1024 x
#: 256 4.8 -> 4.0 (4.2). (Fewer, big ones keep the split: 4 of 1024^3 gained 5%, and a
#: machine of many cores would leave most idle.)
BATCH_MANY = 8


def by_batch(nbatch: int, m: int, n: int, k: int) -> bool:
    """Whether a batch of `nbatch` m x k x n products runs as `batched_gemm` (each thread
    takes whole products) rather than one split `gemm` per product: many products, or
    several small ones. A function of the shape alone (so are the bits)."""
    return nbatch >= BATCH_MANY or (nbatch >= 2 and m * n * k < BATCH_SPLIT_FLOPS)


def batched_gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int = 1) -> None:
    """out[j] = a[j] @ b[j] for every batch j: one single-threaded BLAS call per batch (so a
    batch's bits never depend on the thread count), each thread taking the next batch left.
    NumPy's matmul would run NumPy's own OpenBLAS threads, outside `num_threads`, which
    spin against ours and collapse on a loaded machine (a 32-batch attention dot: 700 ms ->
    5.5 ms)."""
    from xlapy.backends.cpu import gemm_f32, gemm_jobs, target

    nb = a.shape[0]
    planned = gemm_jobs.table(a, b, out, 0.0, ("batch", target.current().name, gemm_f32._ON),
                              lambda: [(a[j], b[j], out[j]) for j in range(nb)], _gemm_args)
    if planned is not None:  # planned once per shape: native calls (gemm_jobs.py; preparing
        # each call in Python had cost ~15 us, ~0.5 ms of a 32-head attention product's 3.3)
        _run_planned(planned, threads)
        return
    if threads < 2 or nb < 2:
        for j in range(nb):
            _gemm1(a[j], b[j], out[j], 0.0)
        return
    _shared([(a[j], b[j], out[j]) for j in range(nb)], 0.0, threads)


def _shared(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], beta: float,
            threads: int) -> None:
    """out = a @ b + beta * out for every (a, b, out), each a single-threaded BLAS call, the
    threads taking the next one left (NativePool.share: no turns to wait for)."""
    from xlapy.backends.cpu import parallel

    pool = parallel.pool(threads)
    _pool_single(pool)
    jobs, keep = [], []
    for a, b, out in parts:
        call = _gemm_args(a, b, out, beta)
        if call is None:
            continue
        fn, args, held = call
        jobs.append((int(ctypes.cast(fn, ctypes.c_void_p).value or 0),
                     tuple(int(x.value or 0) if isinstance(x, _P) else ctypes.addressof(x)
                           for x in args)))
        keep.append(held)
    _single_thread()
    pool.share(jobs, threads, keep)


__all__ = ["batched_gemm", "by_batch", "gemm", "ready", "function_address", "routine", "library",
           "SPLIT_FLOPS", "MIN_CHUNK", "BATCH_SPLIT_FLOPS", "GEMV_CHUNK"]
