"""kernel_collapse.merge_reduced: a reduce kernel folds its operand's trailing reduced
dimensions as one (f32[1M, 4].sum() ran a 4-element row behind an outer loop of 1M: 5.7x
XLA's time, now 0.7x); complex sums split across threads like real ones; partial outputs
of split reductions sit on cache lines of their own (thunks._partial_rows)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import parallel
from xlapy.backends.cpu.kernel_collapse import merge_reduced
from xlapy.backends.cpu.thunks import CACHE_LINE, _partial_rows
from xlapy.stablehlo import parse_module

jax = pytest.importorskip("jax")
jnp = jax.numpy

CASES: dict[str, tuple[Any, tuple[int, ...], Any]] = {
    "sum_all": (lambda x: x.sum(), (1000, 4), np.float32),
    "sum_all_3d": (lambda x: x.sum(), (7, 300, 3), np.float32),
    "sum_trailing": (lambda x: x.sum((1, 2)), (6, 500, 3), np.float32),
    "csum_all": (lambda x: x.sum(), (1000, 4), np.complex64),
    "csum_trailing": (lambda x: x.sum((1, 2)), (5, 700, 3), np.complex64),
    "c128_sum": (lambda x: x.sum(), (333, 5), np.complex128),
    "exp_sum": (lambda x: (jnp.exp(x) * 2.0).sum(), (1000, 3), np.float32),
    "pad_sum": (lambda x: jnp.pad(x, ((1, 2), (0, 0)), constant_values=1.0).sum(),
                (100, 3), np.float32),
    "slice_sum": (lambda x: x[2:, :].sum(), (101, 3), np.float32),
    "bcast_sum": (lambda x: (x * jnp.arange(3.0)).sum(), (999, 3), np.float32),
    "max_all": (lambda x: x.max(), (300, 4, 2), np.float32),
    "int_sum": (lambda x: x.sum(), (1000, 5), np.int32),
    "not_trailing": (lambda x: x.sum((0, 2)), (50, 6, 3), np.float32),
}


def _arg(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-100, 100, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _merges(text: str) -> bool:
    mod = parse_module(text)
    leaves = {id(p): k for k, p in enumerate(mod.entry.parameters)}
    return merge_reduced(mod.entry.root, leaves) is not None


@pytest.mark.parametrize("case", sorted(CASES))
def test_reductions_of_merged_dimensions_match_the_interpreter(case: str) -> None:
    fn, shape, dtype = CASES[case]
    x = _arg(shape, dtype, len(case))
    with jax.enable_x64(dtype == np.complex128):
        text = jax.jit(fn).lower(x).as_text()
    got = np.asarray(xlapy.compile(text, backend="cpu")(x))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    if case in ("max_all", "int_sum"):
        np.testing.assert_array_equal(got, want)
    else:  # (another fold order: the rounding of a sum, not its value)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.sqrt(x.size))


def test_what_merges() -> None:
    """Trailing reduced dimensions merge (whatever the element type and the producers that
    move whole rows); a reduce with a kept dimension after its reduced ones does not."""
    x = np.zeros((10, 4), np.float32)
    for fn in (lambda x: x.sum(), lambda x: (x * 2).max(), lambda x: x[1:].sum()):
        assert _merges(jax.jit(fn).lower(x).as_text())
    assert _merges(jax.jit(lambda x: x.sum()).lower(x.astype(np.complex64)).as_text())
    for fn in (lambda x: x.sum(0), lambda x: x.sum(1), lambda x: x[:, 1:].sum(),
               lambda x: jnp.flip(x, 1).sum()):
        assert not _merges(jax.jit(fn).lower(x).as_text())


def test_a_full_sum_of_short_rows_runs_one_long_loop() -> None:
    """The kernel's outer range is every element, split across threads as partial sums:
    complex sums too (they ran on one thread)."""
    for dtype in (np.float32, np.complex64):
        x = _arg((1 << 14, 4), dtype, 3)
        prog = xlapy.compile(jax.jit(lambda x: x.sum()).lower(x).as_text(), backend="cpu")
        (spec,) = prog._exe.kernel_specs
        assert (spec.outer, spec.partial) == (1 << 16, "add")
        np.testing.assert_allclose(prog(x), x.astype(np.complex128).sum(), rtol=1e-5)


def test_partial_outputs_share_no_cache_line() -> None:
    for dims, dtype in (((), np.float32), ((4,), np.complex64), ((3, 5), np.float64),
                        ((64,), np.int8)):
        stack = _partial_rows(5, dims, dtype)
        assert stack.shape == (5, *dims) and stack.dtype == dtype
        row = stack[0].nbytes
        assert stack.strides[0] % CACHE_LINE == 0 and stack.strides[0] >= row + CACHE_LINE
        stack[...] = np.arange(5).reshape((5,) + (1,) * len(dims))  # (a view: writes land)
        assert np.shares_memory(stack, stack.base)


def test_a_complex_column_sum_split_in_partials() -> None:
    x = _arg((1 << 16, 4), np.complex64, 5)
    text = jax.jit(lambda x: x.sum(0)).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert prog._exe.kernel_specs[0].partial == "add"
    np.testing.assert_allclose(prog(x), x.astype(np.complex128).sum(0), rtol=1e-4)


def test_a_small_complex_sum_keeps_its_loop_fused() -> None:
    """Only complex sums of PARTIAL_COMPLEX elements or more split into partial sums: a loop
    fuses no partial kernel (loop_fused.py), and a loop over c64[64] summing it each step
    ran as its kernels called in turn once complex sums split."""
    z = (np.arange(64) * (1 + 0.5j)).astype(np.complex64) / 64

    def fn(z: Any) -> Any:
        return jax.lax.fori_loop(0, 100, lambda i, z: z * 0.5 + z.sum() * 0.01, z)

    prog = xlapy.compile(jax.jit(fn).lower(z).as_text(), backend="cpu")
    assert "fused into one function" in prog._exe.explain()
    np.testing.assert_allclose(prog(z), fn(z), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["max", "min"])
def test_float_max_min_split_in_partials_keep_their_bits(op: str, dtype: Any) -> None:
    """A big float max / min over rows splits into partial outputs too (reduce_emit
    .PARTIAL_FLOAT; f32[65536, 64].max(0) ran on one thread, 1.9x XLA's time), combined as
    the kernels fold (thunks.ordered_combine): -0 < +0 whichever chunk holds which, a NaN's
    payload kept, the interpreter's bits on 1 and 2 threads (which of several NaNs in one
    column a kernel keeps is its x86 lowering's: one a column here)."""
    x = _arg((1 << 19, 8), dtype, 7)  # (4 chunks)
    bits = x.view(f"u{x.itemsize}")
    x[:, 0] = 0.0
    x[300, 0] = -0.0  # ties of zeros across chunks (numpy keeps the later one)
    x[:, 1] = -0.0
    x[400, 1] = 0.0
    nan = np.array([np.nan], dtype).view(bits.dtype)[0]
    bits[450000, 2], bits[100, 3] = nan | 2, nan | 3
    text = jax.jit(lambda a: getattr(a, op)(0)).lower(x).as_text()
    runs = [xlapy.compile(text, backend="cpu", options={"num_threads": t}) for t in (1, 2)]
    spec = runs[0]._exe.kernel_specs[0]
    assert spec.partial == {"max": "maximum", "min": "minimum"}[op]
    assert len(parallel.partial_cuts(spec.outer, spec.cost, 16, spec.align)) > 2
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x)).view(bits.dtype)
    for prog in runs:
        np.testing.assert_array_equal(np.asarray(prog(x)).view(bits.dtype), want)
