"""gemm_i16.py: s8 x s8 and u8 x u8 dot_generals through pmaddwd on s16 pairs (x86 targets
without AMX-INT8 or VNNI), the interpreter's bits for shapes off every tile size (m not a
multiple of MR, n of the panel width, odd k), the extremes (-128 * -128 pairs: what
pmaddubsw would saturate; k wrapping 2^32), batches, narrower results, row splits over 1-3
threads, for each vector width (SSE, AVX2, AVX-512 targets; dots route to it from AVX2 up).
Routing: which target takes which int8 kernel."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import gemm_amx, gemm_i16, gemm_vnni, target

_NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "ui8": np.uint8, "ui32": np.uint32}
#: Targets (runnable on any x86-64-v4 host) for each pmaddwd width: SSE, AVX2, AVX-512.
_WIDTHS = {"x86-64-v2": 4, "x86-64-v3": 8, "x86-64-v4": 16}


def _runs(name: str) -> bool:
    t = target.resolve(name)
    return t.is_x86 and t.runs_here


def _text(b: int, m: int, k: int, n: int, it: str, ot: str) -> str:
    lt, rt, out = f"tensor<{b}x{m}x{k}x{it}>", f"tensor<{b}x{k}x{n}x{it}>", \
        f"tensor<{b}x{m}x{n}x{ot}>"
    return (f"func.func @main(%x: {lt}, %y: {rt}) -> {out} {{\n"
            f"  %z = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], "
            f"contracting_dims = [2] x [1] : ({lt}, {rt}) -> {out}\n"
            f"  return %z : {out}\n}}\n")


def _operands(shape_a: tuple[int, ...], shape_b: tuple[int, ...], it: str, seed: int
              ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lo, hi = (-128, 128) if it == "i8" else (0, 256)
    x = rng.integers(lo, hi, shape_a).astype(_NP[it])
    y = rng.integers(lo, hi, shape_b).astype(_NP[it])
    if x.size and y.size:
        x[..., 0, :] = lo if it == "i8" else 255  # a row and a column at the extreme
        y[..., :, 0] = lo if it == "i8" else 255
    return x, y


@pytest.mark.parametrize("name", ["x86-64-v3", "x86-64-v4"])
@pytest.mark.parametrize(("b", "m", "k", "n", "it", "ot"), [
    (1, 1, 1, 1, "i8", "i32"),
    (2, 13, 7, 37, "i8", "i32"),  # MR rest, odd k, a partial panel
    (1, 100, 301, 70, "i8", "i32"),  # chunks of A rows, odd k
    (1, 33, 1030, 20, "i8", "i32"),  # sums past f32's mantissa
    (1, 7, 300001, 3, "i8", "i32"),  # 128 * 128 * 300001 wraps 2^32
    (3, 5, 12, 48, "i8", "i16"), (1, 4, 8, 16, "i8", "i8"),  # narrower results wrap
    (1, 70, 129, 90, "ui8", "ui32"), (1, 9, 70000, 5, "ui8", "ui32"),
])
def test_int8_dot_on_pmaddwd_matches_the_interpreter(name: str, b: int, m: int, k: int,
                                                     n: int, it: str, ot: str) -> None:
    """AVX2 and AVX-512 widths through compiled programs (dots route here from AVX2 up)."""
    if not _runs(name):
        pytest.skip(f"{name} code does not run on this host")
    x, y = _operands((b, m, k), (b, k, n), it, k + n)
    text = _text(b, m, k, n, it, ot)
    cpu = xlapy.compile(text, backend="cpu", options={"target": name, "num_threads": 2})
    assert "int gemm (pmaddwd)" in cpu._exe.explain()
    assert not cpu._exe.fallbacks()
    got, want = cpu(x, y), xlapy.compile(text, backend="interpreter")(x, y)
    assert got.dtype == want.dtype == _NP[ot]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(_WIDTHS))
@pytest.mark.parametrize(("m", "k", "n", "it"), [(257, 300, 200, "i8"), (13, 7, 37, "i8"),
                                                 (1, 1, 1, "i8"), (70, 129, 90, "ui8")])
def test_kernel_at_each_width_and_split(name: str, m: int, k: int, n: int, it: str) -> None:
    """The kernel itself at every width (SSE too, which dots do not route to), 1-3 threads:
    the same exact bits."""
    if not _runs(name):
        pytest.skip(f"{name} code does not run on this host")
    a, bm = _operands((1, m, k), (1, k, n), it, m + k)
    dt = np.int32 if it == "i8" else np.uint32
    want = np.matmul(a.astype(np.int64), bm.astype(np.int64)).astype(dt)
    with target.use(name):
        assert gemm_i16.lanes() == _WIDTHS[name]
        assert gemm_i16.available() == (_WIDTHS[name] >= 8)
        for threads in (1, 2, 3):
            c = np.empty((1, m, n), dt)
            gemm_i16.igemm8(threads, signed=it == "i8")(a, bm, c)
            np.testing.assert_array_equal(c, want, err_msg=f"x{threads}")


@pytest.mark.parametrize("name", sorted(_WIDTHS))
def test_row_splits_give_the_same_bits(name: str) -> None:
    if not _runs(name):
        pytest.skip(f"{name} code does not run on this host")
    a, bm = _operands((1, 257, 300), (1, 300, 200), "i8", 1)
    want = np.matmul(a.astype(np.int64), bm.astype(np.int64)).astype(np.int32)
    with target.use(name):
        assert gemm_i16.lanes() == _WIDTHS[name]
        for threads in (1, 2, 3):
            c = np.empty((1, 257, 200), np.int32)
            gemm_i16.igemm8(threads)(a, bm, c)
            np.testing.assert_array_equal(c, want, err_msg=f"x{threads}")


def test_non_contiguous_output() -> None:
    if not _runs("x86-64-v3"):
        pytest.skip("x86-64-v3 code does not run on this host")
    a, bm = _operands((2, 40, 90), (2, 90, 50), "ui8", 3)
    big = np.zeros((2, 40, 100), np.uint32)
    with target.use("x86-64-v3"):
        gemm_i16.igemm8(1, signed=False)(a, bm, big[:, :, ::2])
    np.testing.assert_array_equal(big[:, :, ::2],
                                  np.matmul(a.astype(np.int64), bm.astype(np.int64))
                                  .astype(np.uint32))
    assert not big[:, :, 1::2].any()


@pytest.mark.parametrize("name", ["x86-64-v2", "x86-64-v3", "x86-64-v4", "icelake-server",
                                  "sapphirerapids", "aarch64"])
def test_each_target_takes_its_fastest_int8_kernel(name: str) -> None:
    with target.use(name):
        runs = target.current().runs_here
        amx, vnni = gemm_amx.available(), gemm_vnni.available()
        text = _text(1, 8, 64, 16, "i8", "i32")
        cpu = xlapy.compile(text, backend="cpu", options={"target": name})
        how = cpu._exe.explain()
    if not runs:
        return  # objects for another machine: never run
    if name == "x86-64-v2":  # SSE only: BLAS in f32 where exact
        assert "exact in float32" in how, how
        return
    want = "(amx)" if amx else "(vnni)" if vnni else "(pmaddwd)"
    assert f"int gemm {want}" in how, how


def test_scratch_reused_across_calls_shapes_and_python_threads() -> None:
    """One kernel function keeps its scratch between calls: shapes alternate, and calls
    from several Python threads at once each take a buffer of their own."""
    from concurrent.futures import ThreadPoolExecutor

    if not _runs("x86-64-v3"):
        pytest.skip("x86-64-v3 code does not run on this host")
    with target.use("x86-64-v3"):
        f = gemm_i16.igemm8(2)
    cases = [_operands((1, m, k), (1, k, n), "i8", m + k + n)
             for m, k, n in [(64, 128, 96), (33, 701, 20), (300, 300, 300), (5, 3, 7)]]

    def one(i: int) -> bool:
        a, bm = cases[i % len(cases)]
        c = np.empty((1, a.shape[1], bm.shape[2]), np.int32)
        f(a, bm, c)
        want = np.matmul(a.astype(np.int64), bm.astype(np.int64)).astype(np.int32)
        return bool(np.array_equal(c, want))

    assert all(one(i) for i in range(8))
    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(one, range(32)))


def test_kernel_object_goes_through_the_disk_cache(tmp_path, monkeypatch) -> None:
    from xlapy.backends.cpu import cache

    if not _runs("x86-64-v3"):
        pytest.skip("x86-64-v3 code does not run on this host")
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    with target.use("x86-64-v3"):
        first = gemm_i16._compiled(8, True, "disk-cache-test-compile")[0]
        assert list(tmp_path.glob("*.o"))
        cache.clear_memory()
        again, addr, pack = gemm_i16._compiled(8, True, "disk-cache-test-load")
    assert again.object == first.object and again.linked and addr and pack
    cache.clear_memory()


@pytest.mark.parametrize("name", sorted(_WIDTHS))
@pytest.mark.parametrize(("nb", "m", "k", "n", "it"), [(512, 16, 64, 16, "i8"),
                                                       (33, 5, 37, 70, "ui8"),
                                                       (7, 1, 1, 1, "i8"),
                                                       (4, 64, 256, 160, "i8")])
def test_a_batch_of_small_products_as_job_tables(name: str, nb: int, m: int, k: int, n: int,
                                                 it: str) -> None:
    """A batch of small products runs as two job tables (every rhs packed, then every
    product, each with scratch of its own), at every width, on 1-3 threads: exact."""
    if not _runs(name):
        pytest.skip(f"{name} code does not run on this host")
    a, bm = _operands((nb, m, k), (nb, k, n), it, nb + k)
    dt = np.int32 if it == "i8" else np.uint32
    want = np.matmul(a.astype(np.int64), bm.astype(np.int64)).astype(dt)
    with target.use(name):
        for threads in (1, 2, 3):
            c = np.empty((nb, m, n), dt)
            gemm_i16.igemm8(threads, signed=it == "i8")(a, bm, c)
            np.testing.assert_array_equal(c, want, err_msg=f"x{threads}")
