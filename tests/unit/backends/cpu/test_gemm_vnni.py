"""gemm_vnni.py: s8 x s8 dot_generals with AVX-512 VNNI, the interpreter's bits (exact sums
wrapped to the result width) over shapes that pad k to 4 and n to 16, rows that leave a
tile rest, the extremes (-128 everywhere: the largest sums, past f32's mantissa), batches,
narrower results, and 1 or 2 threads; skipped where the target lacks VNNI. Where the host
has AMX-INT8 (gemm_amx.py takes these dots) the programs compile for icelake-server, which
has VNNI and no tiles."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import gemm_amx, gemm_vnni, target
from xlapy.backends.cpu.gemm_vnni import MR, NV

pytestmark = pytest.mark.skipif(not gemm_vnni.available(),
                                reason=f"no AVX-512 VNNI on target {target.current()}")
_NP = {"i8": np.int8, "i32": np.int32, "i16": np.int16}
#: A target with VNNI and without AMX-INT8 where the current one has the tiles.
_TARGET = {"target": "icelake-server"} if gemm_amx.available() else {}


def _text(b: int, m: int, k: int, n: int, ot: str) -> str:
    lt, rt, out = f"tensor<{b}x{m}x{k}xi8>", f"tensor<{b}x{k}x{n}xi8>", \
        f"tensor<{b}x{m}x{n}x{ot}>"
    return (f"func.func @main(%x: {lt}, %y: {rt}) -> {out} {{\n"
            f"  %z = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], "
            f"contracting_dims = [2] x [1] : ({lt}, {rt}) -> {out}\n"
            f"  return %z : {out}\n}}\n")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("b", "m", "k", "n", "ot"), [
    (1, 2 * MR + 1, 64, NV * 16 * 2 + 16, "i32"),  # tiles, a row rest, a 16-column block
    (2, 7, 37, 70, "i32"),  # k padded to 40, n to 80
    (1, 1, 1, 1, "i32"), (2, 3, 0, 5, "i32"),  # k = 0: zeros
    (1, 33, 1030, 20, "i32"),  # sums of -128 * -128 * 1030 > 2^24: not exact in f32
    (1, 9, 600000, 3, "i32"),  # 128 * 128 * 600000 wraps 2^32
    (3, 5, 12, 48, "i16"), (1, 4, 8, 16, "i8"),
])
def test_int8_dot_with_vnni_matches_the_interpreter(b: int, m: int, k: int, n: int, ot: str,
                                                    threads: int) -> None:
    rng = np.random.default_rng(k + n)
    x = rng.integers(-128, 128, (b, m, k)).astype(np.int8)
    y = rng.integers(-128, 128, (b, k, n)).astype(np.int8)
    x[:, 0, :] = -128  # one row and one column at the extreme
    y[:, :, 0] = -128
    text = _text(b, m, k, n, ot)
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads, **_TARGET})
    assert "int gemm (vnni)" in cpu._exe.explain()
    got, want = cpu(x, y), xlapy.compile(text, backend="interpreter")(x, y)
    assert got.dtype == want.dtype == _NP[ot]
    np.testing.assert_array_equal(got, want)


def test_kernel_splits_rows_over_threads_bit_for_bit() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (1, 257, 300)).astype(np.int8)
    bm = rng.integers(-128, 128, (1, 300, 200)).astype(np.int8)
    outs = []
    for threads in (1, 2, 3):
        c = np.empty((1, 257, 200), np.int32)
        gemm_vnni.igemm8(threads)(a, bm, c)
        outs.append(c)
    want = np.matmul(a.astype(np.int64), bm.astype(np.int64)).astype(np.int32)
    for c in outs:
        np.testing.assert_array_equal(c, want)


def test_kernel_is_built_on_the_first_run_not_in_the_compile(monkeypatch) -> None:
    """The module is a library routine compiled once per process on first use: a program's
    compile does not build it, its first run does (for the compile's target)."""
    seen: list[str] = []
    real = gemm_vnni._compiled

    def spy(key: str) -> object:
        seen.append(key)
        return real(key)

    monkeypatch.setattr(gemm_vnni, "_compiled", spy)
    text = _text(1, 12, 40, 20, "i32")
    cpu = xlapy.compile(text, backend="cpu", options=_TARGET)
    assert "int gemm (vnni)" in cpu._exe.explain() and not seen
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 12, 40)).astype(np.int8)
    y = rng.integers(-128, 128, (1, 40, 20)).astype(np.int8)
    want = np.matmul(x.astype(np.int64), y.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(cpu(x, y), want)
    cpu(x, y)
    name = _TARGET.get("target")
    assert seen == [(target.resolve(name) if name else target.current()).key]


@pytest.mark.parametrize(("nb", "m", "k", "n"), [(512, 16, 64, 16), (33, 5, 37, 70),
                                                 (7, 1, 1, 1), (4, 64, 256, 160)])
def test_a_batch_of_small_products_as_job_tables(nb: int, m: int, k: int, n: int) -> None:
    """A batch of small products runs as two job tables (every rhs packed into its own
    buffer, then every product), on 1-3 threads: the exact products, padding of k and n
    included; so do products past SPLIT_MACS when there are as many as threads (4 x 64 x
    256 x 160: each on one thread, not split)."""
    rng = np.random.default_rng(nb + k)
    a = rng.integers(-128, 128, (nb, m, k)).astype(np.int8)
    bm = rng.integers(-128, 128, (nb, k, n)).astype(np.int8)
    a[:, 0, :] = -128
    want = np.matmul(a.astype(np.int64), bm.astype(np.int64)).astype(np.int32)
    for threads in (1, 2, 3):
        c = np.empty((nb, m, n), np.int32)
        gemm_vnni.igemm8(threads)(a, bm, c)
        np.testing.assert_array_equal(c, want, err_msg=f"x{threads}")
