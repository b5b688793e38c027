"""fft_jit / fft_emit: the JIT power-of-two FFTs against double-precision references, on the
target's vector width (CI runs this file again for AVX2 and SSE targets)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import fft_emit, fft_jit, target

KINDS = {"FFT": fft_emit.FFT, "IFFT": fft_emit.IFFT, "RFFT": fft_emit.RFFT,
         "IRFFT": fft_emit.IRFFT}


def _text(kind: str, batch: tuple[int, ...], n: int) -> str:
    lead = "x".join(map(str, batch)) + "x" if batch else ""
    m = n // 2 + 1
    ti = {"RFFT": f"{n}xf32", "IRFFT": f"{m}xcomplex<f32>"}.get(kind, f"{n}xcomplex<f32>")
    to = {"RFFT": f"{m}xcomplex<f32>", "IRFFT": f"{n}xf32"}.get(kind, f"{n}xcomplex<f32>")
    ti, to = f"tensor<{lead}{ti}>", f"tensor<{lead}{to}>"
    return (f"func.func @main(%x: {ti}) -> {to} {{\n"
            f'  %r = "stablehlo.fft"(%x) {{fft_type = #stablehlo<fft_type {kind}>, '
            f"fft_length = array<i64: {n}>}} : ({ti}) -> {to}\n  return %r : {to}\n}}\n")


def _input(kind: str, batch: tuple[int, ...], n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "RFFT":
        return rng.standard_normal((*batch, n)).astype(np.float32)
    m = n // 2 + 1 if kind == "IRFFT" else n
    shape = (*batch, m)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _reference(kind: str, x: np.ndarray, n: int) -> np.ndarray:
    x = x.astype(np.complex128 if x.dtype == np.complex64 else np.float64)
    return {"FFT": lambda: np.fft.fft(x), "IFFT": lambda: np.fft.ifft(x),
            "RFFT": lambda: np.fft.rfft(x), "IRFFT": lambda: np.fft.irfft(x, n)}[kind]()


def _check(got: np.ndarray, want: np.ndarray, n: int) -> None:
    """Within log2(n) eps / 2 of each row's norm (test_lapack.test_fft's bound; measured:
    0.8-1.2 eps for 128-16384 points)."""
    err = np.linalg.norm((got - want).reshape(-1, want.shape[-1]), axis=1)
    bound = np.log2(n) / 2 * np.finfo(np.float32).eps * np.linalg.norm(
        want.reshape(-1, want.shape[-1]), axis=1)
    assert np.all(err <= bound), (err / np.maximum(bound, 1e-30)).max()


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("n", [64, 128, 256, 1024, 2048, 4096, 8192, 16384, 1 << 17])
def test_transform(kind: str, n: int) -> None:
    """Every kind on every length it takes (and the jit is what runs: `plan` not None)."""
    batch = (3,)
    dims = (3, n // 2 + 1) if kind == "RFFT" else (3, n)
    out = np.dtype(np.float32 if kind == "IRFFT" else np.complex64)
    run = fft_jit.plan(KINDS[kind], n, out, dims, 1)
    if run is None:  # a length this kind leaves to DUCC
        real = kind in ("RFFT", "IRFFT")
        nc = n // 2 if real else n
        assert nc > (fft_jit.MAX_REAL if real else fft_jit.MAX_COMPLEX) or nc < max(
            fft_jit.MIN_CORE, 2 * fft_jit.width(target.current()))
        return
    x = _input(kind, batch, n)
    got = run(x)
    assert got.shape == dims and got.dtype == out
    _check(got, _reference(kind, x, n), n)


def test_program_rows_and_threads() -> None:
    """A program's transforms over [8, 5, n]: the same bits on 1 and 2 threads (each row on
    one thread; 2 threads split the rows: SPLIT_ELEMENTS), within the reference's bound."""
    n = 4096
    for kind in ("RFFT", "IRFFT", "FFT", "IFFT"):
        text = _text(kind, (8, 5), n)
        x = _input(kind, (8, 5), n, seed=1)
        dims = (8, 5, n // 2 + 1) if kind == "RFFT" else (8, 5, n)
        out = np.dtype(np.float32 if kind == "IRFFT" else np.complex64)
        split = fft_jit.plan(KINDS[kind], n, out, dims, 2)
        assert split is not None and not hasattr(split, "fft_step")  # (rows split: 2 parts)
        outs = [xlapy.compile(text, backend="cpu", options={"num_threads": t})(x)
                for t in (1, 2)]
        np.testing.assert_array_equal(outs[0], outs[1])
        _check(outs[0], _reference(kind, x, n), n)


def test_irfft_reads_real_parts_of_ends() -> None:
    """c2r ignores the imaginary parts of X[0] and X[N] (numpy's and XLA's c2r)."""
    n = 256
    x = _input("IRFFT", (2,), n, seed=2)
    run = fft_jit.plan(fft_emit.IRFFT, n, np.dtype(np.float32), (2, n), 1)
    assert run is not None
    clean = x.copy()
    clean[:, 0] = clean[:, 0].real
    clean[:, -1] = clean[:, -1].real
    np.testing.assert_array_equal(run(x), run(clean))
    _check(run(x), np.fft.irfft(clean.astype(np.complex128), n), n)


def test_strided_operand() -> None:
    """A transposed (non-contiguous) operand is read as its values."""
    n = 512
    x = _input("FFT", (n,), 6).T  # [6, n] viewed from [n, 6]
    run = fft_jit.plan(fft_emit.FFT, n, np.dtype(np.complex64), (6, n), 1)
    assert run is not None and not x.flags.c_contiguous
    _check(run(x), np.fft.fft(x.astype(np.complex128)), n)


@pytest.mark.parametrize(("n", "taken"), [(1000, False), (32, False), (1 << 22, False),
                                          (1024, True)])
def test_lengths_taken(n: int, taken: bool) -> None:
    """Not a power of two, a core under MIN_CORE or over MAX_REAL: left to DUCC."""
    run = fft_jit.plan(fft_emit.RFFT, n, np.dtype(np.complex64), (2, n // 2 + 1), 1)
    assert (run is not None) == taken


def test_table_values() -> None:
    """Twiddles: stage entry Ns + k is exp(-2 pi i k / 2Ns) forward, conjugated inverse; the
    small stages' periodic w1 w2 w3; the real transforms' and radix-4 w3 regions."""
    w, nc = 8, 64
    fwd, inv = fft_jit.table(nc, False, w), fft_jit.table(nc, True, w)
    size = nc + 3 * 3 * w
    cplx = fwd[:size] + 1j * fwd[size:2 * size]
    for ns in (8, 16, 32):
        k = np.arange(ns)
        np.testing.assert_allclose(cplx[ns:2 * ns], np.exp(-2j * np.pi * k / (2 * ns)),
                                   atol=1e-7)
    for t, ns in enumerate((1, 2, 4)):
        k = np.arange(w) % ns
        for r, a in enumerate((k / (4 * ns), k / (2 * ns), 3 * k / (4 * ns))):
            at = nc + (3 * t + r) * w
            np.testing.assert_allclose(cplx[at:at + w], np.exp(-2j * np.pi * a), atol=1e-7)
    np.testing.assert_array_equal(inv[size:2 * size], -fwd[size:2 * size])
    rest = fwd[2 * size:]
    post = rest[:nc] + 1j * rest[nc:2 * nc]
    np.testing.assert_allclose(post, np.exp(-2j * np.pi * np.arange(nc) / (2 * nc)), atol=1e-7)
    w3 = rest[2 * nc:3 * nc] + 1j * rest[3 * nc:]
    for ns in (4, 16):
        k = np.arange(ns)
        np.testing.assert_allclose(w3[ns:2 * ns], np.exp(-2j * np.pi * 3 * k / (4 * ns)),
                                   atol=1e-7)


def test_unbatched_program() -> None:
    """A rank-1 operand: one row."""
    n = 1024
    text = _text("FFT", (), n)
    x = _input("FFT", (), n, seed=5)
    got = xlapy.compile(text, backend="cpu")(x)
    _check(got, np.fft.fft(x.astype(np.complex128)), n)


def test_loop_runs_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """jnp.fft.ifft(jnp.fft.fft(c)) in a fori_loop: the transforms are native steps of the
    loop (fft_jit.entry), not Python callbacks (loop_callback.entry), with the Python loop's
    bits (the same function)."""
    jax = pytest.importorskip("jax")
    from xlapy.backends.cpu import loop_callback, native_loop

    def fn(x: object) -> object:
        return jax.lax.fori_loop(0, 6, lambda i, c: jax.numpy.fft.ifft(
            jax.numpy.fft.fft(c) * 0.99), x)

    x = _input("FFT", (), 1024, seed=7)
    text = jax.jit(fn).lower(x).as_text()
    seen: list[str] = []
    for mod, name in ((fft_jit, "entry"), (loop_callback, "entry")):
        real = getattr(mod, name)

        def spy(*a: object, _real: object = real, _label: str = mod.__name__) -> object:
            seen.append(_label.rsplit(".", 1)[1])
            return _real(*a)  # type: ignore[operator]
        monkeypatch.setattr(mod, name, spy)
    got = xlapy.compile(text, backend="cpu")(x)
    assert seen == ["fft_jit", "fft_jit"]
    monkeypatch.setattr(native_loop, "plan_native_while", lambda *a: None)
    want = xlapy.compile(text, backend="cpu")(x)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), np.asarray(want).view(np.uint8))


def test_results_recycled_only_once_dropped() -> None:
    """A big result's buffer is written again by the next call only once nothing holds it
    (recycle.output): a held result never changes under its holder."""
    n = 4096
    run = fft_jit.plan(fft_emit.RFFT, n, np.dtype(np.complex64), (64, n // 2 + 1), 1)
    assert run is not None
    a, b = _input("RFFT", (64,), n, seed=8), _input("RFFT", (64,), n, seed=9)
    first = run(a)
    keep = first.copy()
    second = run(b)
    np.testing.assert_array_equal(first, keep)
    assert not np.shares_memory(first, second)
    address = second.__array_interface__["data"][0]
    del second
    third = run(b)
    assert third.__array_interface__["data"][0] == address
    _check(third, _reference("RFFT", b, n), n)


def _text2(kind: str, lead: tuple[int, ...], r: int, c: int) -> str:
    pre = "".join(f"{d}x" for d in lead)
    half = c // 2 + 1
    cin = {"RFFT": f"{r}x{c}xf32", "IRFFT": f"{r}x{half}xcomplex<f32>"}.get(
        kind, f"{r}x{c}xcomplex<f32>")
    cout = {"RFFT": f"{r}x{half}xcomplex<f32>", "IRFFT": f"{r}x{c}xf32"}.get(
        kind, f"{r}x{c}xcomplex<f32>")
    ti, to = f"tensor<{pre}{cin}>", f"tensor<{pre}{cout}>"
    return (f"func.func @main(%x: {ti}) -> {to} {{\n"
            f'  %r = "stablehlo.fft"(%x) {{fft_type = #stablehlo<fft_type {kind}>, '
            f"fft_length = array<i64: {r}, {c}>}} : ({ti}) -> {to}\n  return %r : {to}\n}}\n")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("lead", "r", "c"), [((), 64, 128), ((3,), 128, 256), ((2,), 256, 256)])
def test_two_axes(kind: str, lead: tuple[int, ...], r: int, c: int) -> None:
    """fft2 / ifft2 / rfft2 / irfft2 (fft_length of two) through plan2: two passes of rows
    with blocked transposes between, within the bound of the reference for r * c points;
    the report names the jit; the same bits on 1 and 2 threads."""
    rng = np.random.default_rng(r + c)
    half = c // 2 + 1
    if kind == "RFFT":
        x: np.ndarray = rng.standard_normal((*lead, r, c)).astype(np.float32)
        ref = np.fft.rfft2(x.astype(np.float64))
    elif kind == "IRFFT":
        x = np.fft.rfft2(rng.standard_normal((*lead, r, c))).astype(np.complex64)
        ref = np.fft.irfft2(x.astype(np.complex128), s=(r, c))
    else:
        shape = (*lead, r, c)
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        ref = (np.fft.fft2 if kind == "FFT" else np.fft.ifft2)(x.astype(np.complex128))
    text = _text2(kind, lead, r, c)
    progs = [xlapy.compile(text, backend="cpu", options={"num_threads": t}) for t in (1, 2)]
    assert "library fft (jit)" in progs[0]._exe.explain()
    outs = [np.asarray(p(x)) for p in progs]
    np.testing.assert_array_equal(outs[0], outs[1])
    assert outs[0].shape == ref.shape and (half if kind == "RFFT" else c) == ref.shape[-1]
    flat, want = outs[0].reshape(-1, r * ref.shape[-1]), ref.reshape(-1, r * ref.shape[-1])
    bound = np.log2(r * c) / 2 * np.finfo(np.float32).eps * np.linalg.norm(want, axis=1)
    assert np.all(np.linalg.norm(flat - want, axis=1) <= bound)
