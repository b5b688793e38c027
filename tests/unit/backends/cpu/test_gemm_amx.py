"""gemm_amx.py: s8 x s8 and u8 x u8 dot_generals on AMX-INT8 tiles, the interpreter's bits
(exact sums wrapped to the result width) for shapes off every tile size (m, n not multiples
of 16 or 32, k not of 4 or 64), the extremes (-128 everywhere: past f32's mantissa; k large
enough to wrap 2^32), batches, narrower results, column and row splits over 1-3 threads,
and outputs that are not 64-byte aligned or not contiguous; skipped where the target lacks
AMX-INT8 or Linux refuses the tiles. Routing: which targets take the tiles."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import gemm_amx, target

needs_amx = pytest.mark.skipif(
    not gemm_amx.available(),
    reason=f"no AMX-INT8 tiles on target {target.current()} (CPU, target or kernel)")
_NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "ui8": np.uint8, "ui16": np.uint16,
       "ui32": np.uint32}


def _text(b: int, m: int, k: int, n: int, it: str, ot: str) -> str:
    lt, rt, out = f"tensor<{b}x{m}x{k}x{it}>", f"tensor<{b}x{k}x{n}x{it}>", \
        f"tensor<{b}x{m}x{n}x{ot}>"
    return (f"func.func @main(%x: {lt}, %y: {rt}) -> {out} {{\n"
            f"  %z = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], "
            f"contracting_dims = [2] x [1] : ({lt}, {rt}) -> {out}\n"
            f"  return %z : {out}\n}}\n")


def _operands(b: int, m: int, k: int, n: int, it: str, seed: int
              ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lo, hi = (-128, 128) if it == "i8" else (0, 256)
    x = rng.integers(lo, hi, (b, m, k)).astype(_NP[it])
    y = rng.integers(lo, hi, (b, k, n)).astype(_NP[it])
    if m and k and n:
        x[:, 0, :] = lo if it == "i8" else 255  # a row and a column at the extreme
        y[:, :, 0] = lo if it == "i8" else 255
    return x, y


@needs_amx
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("b", "m", "k", "n", "it", "ot"), [
    (1, 64, 128, 64, "i8", "i32"),  # whole blocks
    (1, 1, 1, 1, "i8", "i32"),
    (2, 33, 65, 17, "i8", "i32"),  # one past a block, a k step, under a tile
    (1, 47, 6, 95, "i8", "i32"),  # k not a multiple of 4
    (1, 300, 200, 40, "i8", "i32"),  # few columns: rows split over threads
    (1, 100, 300, 330, "i8", "i32"),  # columns split, a partial 64-column group
    (2, 3, 0, 5, "i8", "i32"),  # k = 0: zeros
    (1, 33, 1030, 20, "i8", "i32"),  # -128 * -128 * 1030 > 2^24
    (1, 9, 300001, 3, "i8", "i32"),  # 128 * 128 * 300001 wraps 2^32
    (3, 5, 12, 48, "i8", "i16"), (1, 4, 8, 16, "i8", "i8"),  # narrower results wrap
    (1, 70, 129, 90, "ui8", "ui32"), (1, 9, 70000, 5, "ui8", "ui32"),  # 255^2 70000 wraps
    (2, 17, 33, 19, "ui8", "ui16"),
])
def test_int8_dot_on_tiles_matches_the_interpreter(b: int, m: int, k: int, n: int, it: str,
                                                   ot: str, threads: int) -> None:
    x, y = _operands(b, m, k, n, it, k + n)
    text = _text(b, m, k, n, it, ot)
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    assert "int gemm (amx)" in cpu._exe.explain()
    assert not cpu._exe.fallbacks()
    got, want = cpu(x, y), xlapy.compile(text, backend="interpreter")(x, y)
    assert got.dtype == want.dtype == _NP[ot]
    np.testing.assert_array_equal(got, want)


def _reference(a: np.ndarray, b: np.ndarray, dtype: type) -> np.ndarray:
    return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(dtype)


@needs_amx
def test_splits_over_threads_give_the_same_bits() -> None:
    """Column splits (even 32-blocks per job), row splits and one job: equal results."""
    for m, k, n in [(257, 300, 200), (300, 77, 33), (64, 64, 1000),
                    (64, 512, 2048), (100, 700, 330), (1100, 1000, 70)]:
        a, bm = _operands(1, m, k, n, "i8", m)
        want = _reference(a, bm, np.int32)
        for threads in (1, 2, 3):
            c = np.empty((1, m, n), np.int32)
            gemm_amx.igemm8(threads)(a, bm, c)
            np.testing.assert_array_equal(c, want, err_msg=f"{(m, k, n)} x{threads}")


@needs_amx
def test_batches_in_one_call_split_over_threads() -> None:
    """The batch loop runs in the kernel: batches split over threads when there are enough
    (5 over 2 and 3 jobs), else each batch's rows or columns; batches whose C rows are off
    a 64-byte line (5 x 3 s32: 60 bytes a batch) take the block scratch. Equal bits."""
    for nb, m, k, n in [(5, 64, 1024, 64), (64, 32, 512, 32), (7, 5, 70, 3), (2, 300, 200, 40),
                        (512, 16, 64, 16), (3, 33, 1030, 20)]:
        a, bm = _operands(nb, m, k, n, "i8", nb + m)
        want = _reference(a, bm, np.int32)
        for threads in (1, 2, 3):
            c = np.empty((nb, m, n), np.int32)
            gemm_amx.igemm8(threads)(a, bm, c)
            np.testing.assert_array_equal(c, want, err_msg=f"{(nb, m, k, n)} x{threads}")


@needs_amx
@pytest.mark.parametrize("offset", [4, 16, 32])
def test_output_off_a_64_byte_boundary(offset: int) -> None:
    """C rows that tile stores cannot hit aligned go through the block scratch."""
    m, k, n = 70, 100, 64
    a, bm = _operands(1, m, k, n, "i8", offset)
    raw = np.zeros(m * n * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    c = raw[start:start + m * n * 4].view(np.int32).reshape(1, m, n)
    gemm_amx.igemm8(2)(a, bm, c)
    np.testing.assert_array_equal(c, _reference(a, bm, np.int32))
    assert not raw[:start].any() and not raw[start + m * n * 4:].any()  # nothing outside


@needs_amx
def test_non_contiguous_output_and_unsigned_kernel() -> None:
    a, bm = _operands(2, 40, 90, 50, "ui8", 3)
    big = np.zeros((2, 40, 100), np.uint32)
    c = big[:, :, ::2]
    gemm_amx.igemm8(1, signed=False)(a, bm, c)
    np.testing.assert_array_equal(c, _reference(a, bm, np.uint32))
    assert not big[:, :, 1::2].any()


@pytest.mark.parametrize("name", ["x86-64-v3", "x86-64-v4", "icelake-server", "aarch64"])
def test_targets_without_amx_int8_never_take_the_tiles(name: str) -> None:
    with target.use(name):
        assert not gemm_amx.available()


def test_jax_int8_matmul_on_the_host() -> None:
    """The benchmark's program (s8 512 x 512 @ 512 x 512 -> s32) is exact on whatever path
    the host takes (tiles where it has them)."""
    x, y = _operands(1, 512, 512, 512, "i8", 5)
    text = ("func.func public @main(%a: tensor<512x512xi8>, %b: tensor<512x512xi8>) -> "
            "tensor<512x512xi32> {\n  %0 = stablehlo.dot_general %a, %b, contracting_dims "
            "= [1] x [0] : (tensor<512x512xi8>, tensor<512x512xi8>) -> tensor<512x512xi32>\n"
            "  return %0 : tensor<512x512xi32>\n}\n")
    cpu = xlapy.compile(text, backend="cpu")
    if gemm_amx.available():
        assert "int gemm (amx)" in cpu._exe.explain()
    np.testing.assert_array_equal(cpu(x[0], y[0]), _reference(x[0], y[0], np.int32))


@needs_amx
def test_scratch_reused_across_calls_shapes_and_python_threads() -> None:
    """One kernel function keeps its scratch between calls: shapes alternate, and calls
    from several Python threads at once each take a buffer of their own."""
    from concurrent.futures import ThreadPoolExecutor

    f = gemm_amx.igemm8(2)
    cases = [_operands(1, m, k, n, "i8", m + k + n)
             for m, k, n in [(64, 128, 96), (33, 700, 20), (512, 512, 512), (5, 3, 7)]]

    def one(i: int) -> bool:
        a, bm = cases[i % len(cases)]
        c = np.empty((1, a.shape[1], bm.shape[2]), np.int32)
        f(a, bm, c)
        return bool(np.array_equal(c, _reference(a, bm, np.int32)))

    assert all(one(i) for i in range(8))
    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(one, range(32)))


@needs_amx
def test_kernel_object_goes_through_the_disk_cache(tmp_path, monkeypatch) -> None:
    """Compiled once, the module's object is cached on disk under its IR text's key (as
    every kernel); the next process (here: a fresh key and memory) links it unchanged."""
    from xlapy.backends.cpu import cache

    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    first, _ = gemm_amx._compiled(True, "disk-cache-test-compile")
    assert list(tmp_path.glob("*.o"))
    cache.clear_memory()
    again, addr = gemm_amx._compiled(True, "disk-cache-test-load")
    assert again.object == first.object and again.linked and addr
    cache.clear_memory()


@needs_amx
def test_kernel_is_built_on_the_first_run_not_in_the_compile(monkeypatch) -> None:
    """The module is a library routine compiled once per process on first use: a program's
    compile does not build it, its first run does (for the compile's target)."""
    seen: list[tuple[bool, str]] = []
    real = gemm_amx._compiled

    def spy(signed: bool, key: str) -> object:
        seen.append((signed, key))
        return real(signed, key)

    monkeypatch.setattr(gemm_amx, "_compiled", spy)
    text = _text(1, 40, 70, 50, "ui8", "ui32")
    cpu = xlapy.compile(text, backend="cpu", options={"target": "sapphirerapids"})
    assert "int gemm (amx)" in cpu._exe.explain() and not seen
    x, y = _operands(1, 40, 70, 50, "ui8", 9)
    np.testing.assert_array_equal(cpu(x, y), _reference(x, y, np.uint32))
    assert seen == [(False, target.resolve("sapphirerapids").key)]
    cpu(x, y)
    assert len(seen) == 1
