"""A small sample of jax_ulp_complex's comparison with jax.jit (the full histogram: `python -m
tests.differential.jax_ulp_complex`): the ops on XLA's formulas match it exactly, edge pairs
(infinite, NaN, huge parts) included, and the two xlapy backends agree."""

from __future__ import annotations

from tests.differential import jax_ulp_complex


def test_complex_sample_against_jax() -> None:
    n = 300
    result = jax_ulp_complex.compare(n, ["sign", "square"])
    for (name, dt, backend), counts in result.items():
        assert sum(counts) == n, (name, dt, backend)
        assert counts[0] == n, (name, dt, backend, counts)
