"""fft_lib: which library runs each precision, and the threaded split of a big transform."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import fft_lib


def _rfft_text(rows: int, n: int, ty: str) -> str:
    cty = "complex<f32>" if ty == "f32" else "complex<f64>"
    ti, to = f"tensor<{rows}x{n}x{ty}>", f"tensor<{rows}x{n // 2 + 1}x{cty}>"
    return (f"func.func @main(%x: {ti}) -> {to} {{\n"
            f'  %r = "stablehlo.fft"(%x) {{fft_type = #stablehlo<fft_type RFFT>, '
            f"fft_length = array<i64: {n}>}} : ({ti}) -> {to}\n  return %r : {to}\n}}\n")


@pytest.mark.parametrize(("ty", "dt"), [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("rows", [3, 300])  # 300 x 4000: PARALLEL_FFT, split over the threads
def test_library_per_precision(ty: str, dt: type, rows: int,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Both precisions run DUCC's r2c (XLA's FFT library) where fft_jit does not (a length
    not a power of two; double precision always), never scipy's pocketfft (double precision
    did until session 69: 1.1-2x ducc0's time), on the pool's threads from PARALLEL_FFT,
    within log2(n) eps / 2 of each row's norm of the interpreter's (numpy's) result."""
    import ducc0
    import scipy.fft

    n = 4000
    calls: list[tuple[str, int]] = []

    def spy(mod: Any, name: str, key: str, label: str) -> None:
        real = getattr(mod, name)

        def wrapped(*a: Any, **k: Any) -> Any:
            calls.append((label, int(k.get(key, 1))))
            return real(*a, **k)
        monkeypatch.setattr(mod, name, wrapped)

    spy(ducc0.fft, "r2c", "nthreads", "ducc0")
    spy(scipy.fft, "rfft", "workers", "scipy")
    x = np.random.default_rng(3).standard_normal((rows, n)).astype(dt)
    text = _rfft_text(rows, n, ty)
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    got = prog(x)
    assert [c[0] for c in calls] == ["ducc0"]
    assert calls[0][1] == (2 if rows * n >= fft_lib.PARALLEL_FFT else 1)
    want = xlapy.compile(text, backend="interpreter")(x)
    assert got.dtype == want.dtype
    err = np.linalg.norm(got.astype(np.complex128) - want, axis=1)
    bound = np.log2(n) / 2 * np.finfo(dt).eps * np.linalg.norm(want, axis=1)
    assert np.all(err <= bound)


@pytest.mark.parametrize("n", [16, 64])  # 64^3 x 18 passes: PARALLEL_FFT_WORK
def test_3d_transform_threads_by_work(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3-D transform (DUCC's c2c: fft_jit takes one or two axes) of 64 x 64 x 64 goes to
    the threads by its work (elements x passes), though under PARALLEL_FFT elements; a small
    one stays on one."""
    import ducc0

    calls: list[int] = []
    real = ducc0.fft.c2c

    def wrapped(*a: Any, **k: Any) -> Any:
        calls.append(int(k.get("nthreads", 1)))
        return real(*a, **k)
    monkeypatch.setattr(ducc0.fft, "c2c", wrapped)
    ty = f"tensor<{n}x{n}x{n}xcomplex<f32>>"
    text = (f"func.func @main(%x: {ty}) -> {ty} {{\n"
            f'  %r = "stablehlo.fft"(%x) {{fft_type = #stablehlo<fft_type FFT>, '
            f"fft_length = array<i64: {n}, {n}, {n}>}} : ({ty}) -> {ty}\n"
            f"  return %r : {ty}\n}}\n")
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((n, n, n)) + 1j * rng.standard_normal((n, n, n))).astype(np.complex64)
    got = xlapy.compile(text, backend="cpu", options={"num_threads": 2})(x)
    assert calls == [2 if n == 64 else 1]
    assert n ** 3 < fft_lib.PARALLEL_FFT <= n ** 3 * 18 or n < 64
    want = np.fft.fftn(x.astype(np.complex128))
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err < 3 * np.log2(n ** 3) * np.finfo(np.float32).eps


def _fft_text(rows: int, n: int, kind: str) -> str:
    c = "complex<f32>"
    ti, to = {"FFT": (f"{n}x{c}", f"{n}x{c}"), "IFFT": (f"{n}x{c}", f"{n}x{c}"),
              "RFFT": (f"{n}xf32", f"{n // 2 + 1}x{c}"),
              "IRFFT": (f"{n // 2 + 1}x{c}", f"{n}xf32")}[kind]
    ti, to = f"tensor<{rows}x{ti}>", f"tensor<{rows}x{to}>"
    return (f"func.func @main(%x: {ti}) -> {to} {{\n"
            f'  %r = "stablehlo.fft"(%x) {{fft_type = #stablehlo<fft_type {kind}>, '
            f"fft_length = array<i64: {n}>}} : ({ti}) -> {to}\n  return %r : {to}\n}}\n")


@pytest.mark.parametrize(("kind", "n", "aliasing"), [
    ("FFT", 1536, True), ("IFFT", 2560, True), ("RFFT", 3072, True), ("IRFFT", 3072, True),
    ("RFFT", 1536, False), ("FFT", 1000, False)])
def test_aliasing_rows_go_row_by_row_through_scipy(kind: str, n: int, aliasing: bool) -> None:
    """Rows whose byte stride is a multiple of 4 KB share cache sets in ducc0's vectorized
    passes (c2c of 256 x 1536: 2.2x XLA's time, 1.9x through padded copies): such
    transforms run scipy's pocketfft row by row, with its bits (XLA's), others ducc0's;
    a result the next call does not overwrite while the caller holds it."""
    import ducc0
    import scipy.fft as sfft

    from xlapy.ops.linalg import FftType

    assert fft_lib._aliasing(FftType[kind], n) == aliasing
    rows = 24
    text = _fft_text(rows, n, kind)
    rng = np.random.default_rng(n)
    m = n // 2 + 1 if kind == "IRFFT" else n
    x = rng.standard_normal((rows, m)).astype(np.float32)
    if kind != "RFFT":
        x = (x + 1j * rng.standard_normal((rows, m))).astype(np.complex64)
    prog = xlapy.compile(text, backend="cpu")
    f = ducc0.fft
    want = {"FFT": lambda v: f.c2c(v, axes=(1,), forward=True),
            "IFFT": lambda v: f.c2c(v, axes=(1,), forward=False, inorm=2),
            "RFFT": lambda v: f.r2c(v, axes=(1,), forward=True),
            "IRFFT": lambda v: f.c2r(v, axes=(1,), lastsize=n, forward=False, inorm=2)}[kind]
    if aliasing:
        want = {"FFT": sfft.fft, "IFFT": sfft.ifft, "RFFT": sfft.rfft,
                "IRFFT": lambda v: sfft.irfft(v, n)}[kind]
    first = prog(x)
    assert first.dtype == (np.float32 if kind == "IRFFT" else np.complex64)
    np.testing.assert_array_equal(first, want(x))
    kept = np.array(first, copy=True)
    second = prog(x * 2)
    np.testing.assert_array_equal(first, kept)  # (held: not recycled under the caller)
    np.testing.assert_array_equal(second, want(x * 2))
