"""Scatters with one-element windows at sorted positions keep the element of a run in a
register (scatter_emit._Run): the interpreter's bits for segment max / min / sum / product in
f32 and bf16, with NaN and -0 updates, positions out of bounds (skipped), runs of every
length and positions that are not sorted after all (the attribute is a promise the result
does not depend on)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import scatter_emit, target

jax = pytest.importorskip("jax")
jnp = jax.numpy

OPS = {"max": jax.ops.segment_max, "min": jax.ops.segment_min, "sum": jax.ops.segment_sum,
       "prod": jax.ops.segment_prod}


def _ids(n: int, segments: int, rng: np.random.Generator, shuffled: bool) -> np.ndarray:
    ids = np.sort(rng.integers(-3, segments + 3, n)).astype(np.int32)
    ids[: n // 8] = np.repeat(np.arange(n // 64), 8)[: n // 8]  # short runs first
    ids = np.sort(ids)
    return rng.permutation(ids) if shuffled else ids


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op", list(OPS))
def test_sorted_segment_reductions_keep_the_interpreters_bits(op: str, dtype: type,
                                                               shuffled: bool) -> None:
    rng = np.random.default_rng(7)
    n, segments = 4096, 100
    data = rng.standard_normal(n).astype(np.float32)
    data[::97] = np.nan
    data[::89] = -0.0
    if op == "prod":
        data = 1 + 0.01 * data
    data = data.astype(dtype)
    ids = _ids(n, segments, rng, shuffled)
    text = jax.jit(lambda d, s: OPS[op](d, s, segments, indices_are_sorted=True)).lower(
        data, ids).as_text()
    assert "indices_are_sorted = true" in text
    cpu = xlapy.compile(text, backend="cpu")
    got = np.asarray(cpu(data, ids))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(data, ids))
    assert not cpu._exe.fallbacks()
    assert "run_at" in cpu._exe.kernel_ir  # the run's register path, not a store per update
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize("op", ["add", "max", "min", "multiply"])
def test_sorted_scatter_into_denormal_elements(op: str, mode: str) -> None:
    """x.at[sorted ids].op(u): operand elements and updates that are denormal, so whether
    the run's register value and the reloaded element are flushed decides the bits (the
    register holds a result of the op, flushed; a reloaded element is flushed by the op)."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(64) * 1e-39).astype(np.float32)  # denormal and normal
    x[::5] = -0.0
    u = (rng.standard_normal(2048) * 1e-38).astype(np.float32)
    u[::7] = np.float32(3e-39) * np.sign(u[::7])
    u[::11] = 0.0
    if op == "multiply":
        u = (1 + 0.5 * rng.standard_normal(2048)).astype(np.float32)
    ids = np.sort(rng.integers(0, 64, 2048)).astype(np.int32)
    upd = {"add": lambda a: a.add, "max": lambda a: a.max, "min": lambda a: a.min,
           "multiply": lambda a: a.multiply}[op]
    text = jax.jit(lambda x, i, u: upd(x.at[i])(u, indices_are_sorted=True)).lower(
        x, ids, u).as_text()
    opts = {"denormal": mode}
    cpu = xlapy.compile(text, backend="cpu", options=opts)
    got = np.asarray(cpu(x, ids, u))
    want = np.asarray(xlapy.compile(text, backend="interpreter", options=opts)(x, ids, u))
    assert "run_at" in cpu._exe.kernel_ir
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["max", "min"])
def test_sorted_segment_max_min_chain_is_compares_and_selects(op: str, dtype: type) -> None:
    """The run's max / min is llvm_util.scalar_maximum, not the scalar llvm.maximum whose x86
    lowering tests a sign through a general register on the loop-carried chain (2.4x slower
    on Zen 4): the interpreter's bits for NaNs of several payloads and signs, zeros of both
    signs, infinities and denormals, in every order within a run."""
    rng = np.random.default_rng(3)
    it = np.uint64 if dtype == np.float64 else np.uint32
    pool = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, 1e-310 if dtype == np.float64
                     else 1e-40, -2.0], dtype)
    nans = (np.array([0x7FC00001, 0xFFC00002, 0x7FA00003], np.uint32) if dtype == np.float32
            else np.array([0x7FF8000000000001, 0xFFF8000000000002], np.uint64)).view(dtype)
    data = rng.choice(np.concatenate([pool, nans]), 4096).astype(dtype)
    ids = np.sort(rng.integers(0, 300, 4096)).astype(np.int32)
    text = jax.jit(lambda d, s: OPS[op](d, s, 300, indices_are_sorted=True)).lower(
        data.astype(np.float32), ids).as_text()
    if dtype == np.float64:  # (without turning on jax's x64 mode for the worker's tests)
        text = text.replace("f32", "f64").replace("0xFF800000", "0xFFF0000000000000") \
            .replace("0x7F800000", "0x7FF0000000000000")
    cpu = xlapy.compile(text, backend="cpu")
    name = "llvm.maximum" if op == "max" else "llvm.minimum"
    assert name not in cpu._exe.kernel_ir
    got = np.asarray(cpu(data, ids)).view(it)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(data, ids)).view(it)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize(("cols", "dtype"), [(8, np.float32), (16, np.float32),
                                             (16, np.float64)])
@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("op", ["max", "min", "sum"])
def test_row_windows_keep_the_run_in_registers(op: str, shuffled: bool, cols: int,
                                               dtype: type, mode: str) -> None:
    """Windows of one row of whole vectors, unsplit (segment max/min over rows of up to 31
    elements, scatter_emit._VectorRun; rows of 16 f64 are two AVX-512 vectors): the row
    updated last stays in registers while positions repeat it, with the interpreter's bits
    for NaNs, zeros of both signs, denormals and runs of every length, sorted or not
    (segment_max of 2^18 rows of 16 f32: 1.49 -> 1.04 ms, XLA 0.91-0.99)."""
    rng = np.random.default_rng(cols)
    n, segments = 2048, 70
    data = rng.standard_normal((n, cols)).astype(dtype)
    flat = data.reshape(-1)
    flat[::97] = np.nan  # (one payload: which of two NaNs a vector max keeps is open)
    flat[::89] = -0.0
    flat[::83] = 3e-39 if dtype == np.float32 else 3e-309
    ids = _ids(n, segments, rng, shuffled)
    text = jax.jit(lambda d, s: OPS[op](d, s, segments)).lower(
        data.astype(np.float32), ids).as_text()
    if dtype == np.float64:  # (without turning on jax's x64 mode for the worker's tests)
        text = text.replace("f32", "f64").replace("0xFF800000", "0xFFF0000000000000") \
            .replace("0x7F800000", "0x7FF0000000000000")
    opts = {"denormal": mode}
    cpu = xlapy.compile(text, backend="cpu", options=opts)
    it = np.uint64 if dtype == np.float64 else np.uint32
    got = np.asarray(cpu(data, ids)).view(it)
    want = np.asarray(xlapy.compile(text, backend="interpreter", options=opts)(
        data, ids)).view(it)
    assert not cpu._exe.fallbacks()
    # (sums store each row; a row of more than scatter_emit.VECTOR_RUN_MOST vectors too:
    # 16 f64 on SSE)
    held = op != "sum" and cols * data.itemsize * 8 <= \
        scatter_emit.VECTOR_RUN_MOST * target.current().vector_bits
    assert ("vrun_at" in cpu._exe.kernel_ir) == held
    np.testing.assert_array_equal(got, want)
