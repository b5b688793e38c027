"""A small sample of jax_ulp's comparison with jax.jit (the full histogram: `python -m
tests.differential.jax_ulp`): correctly rounded ops match XLA exactly, the polynomials
within a few ulp, and the histogram accounts for every input."""

from __future__ import annotations

import numpy as np

from tests.differential import jax_ulp


def test_histogram_sample_against_jax() -> None:
    n = 300
    result = jax_ulp.compare(n, ["sqrt", "exp", "tanh"])
    for (name, dt, backend), counts in result.items():
        assert sum(counts) == n, (name, dt, backend)
        if name == "sqrt":
            assert counts[0] == n, (dt, backend, counts)
        else:  # 0..4 ulp; the subnormal-input edges aside (XLA's DAZ corners)
            assert sum(counts[:4]) >= n - 8 and counts[-1] == 0, (name, dt, backend, counts)


def test_histogram_buckets() -> None:
    want = np.array([1.0, 1.0, 1.0, 1.0, np.nan], np.float32)
    got = np.array([1.0, np.nextafter(np.float32(1), np.float32(2)), 1.0000005, 2.0, 1.0],
                   np.float32)
    counts = jax_ulp.histogram(got, want)
    assert counts == [1, 1, 0, 1, 0, 0, 1, 1]
