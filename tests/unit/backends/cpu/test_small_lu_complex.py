"""small_lu_complex.py: batches of small complex getrf / left trsm calls as JIT loops (4096
4 x 4 c64 solves 1.2x XLA's time before): the pivots (|re| + |im| as icamax) and info, a
pivot below the smallest normal divided, not scaled, native loop steps. (Inverses, solves
and every left-solve option, the conjugate transpose too: test_small_lu.py's, over the
complex types as well.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.backends.cpu.test_small_lu import _compare
from xlapy.backends.cpu import small_lu

jax = pytest.importorskip("jax")
jnp = jax.numpy
jsl = jax.scipy.linalg

def _data(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)


def test_pivots_and_info(jit_runs: list[int]) -> None:
    """icamax's |re| + |im| picks the pivot (1 + 1j over 1.3, where the modulus would
    not), the first of a tie; info the first zero pivot."""
    a = _data((3, 5, 5), np.complex64, 2)
    a[0, :, 0] = [0.5, 1.3, 1 + 1j, -0.2j, 1.3]
    a[1, :, 2] = 0.0  # a zero column: info 3
    a[2] = 0.0
    got, _ = _compare(lambda m: jsl.lu_factor(m), [a])
    assert jit_runs
    assert np.asarray(got[1])[0, 0] == 2  # (0-based: the 1 + 1j)


@pytest.mark.parametrize("t", ["c", "z"])
def test_a_pivot_below_the_smallest_normal_divides(t: str) -> None:
    """A pivot whose modulus is subnormal (IEEE mode, as the thunk is called here) divides
    its column, as the reference cgetf2 does (its reciprocal would overflow; OpenBLAS's
    getf2 leaves such a column unscaled, small_lu's real getrf divides too). Here every
    multiplier is exactly 1: p / p with p = tiny (1 + 0.5i)."""
    dt = np.complex64 if t == "c" else np.complex128
    p = np.finfo(dt).tiny / 8 * (1 + 0.5j)
    a = np.tril(np.full((1, 5, 5), p, dt))
    lu, piv, info = small_lu.getrf(t, 5, 5, lambda i: i)(a)
    np.testing.assert_array_equal(np.tril(lu[0], -1), np.tril(np.ones((5, 5), dt), -1))
    np.testing.assert_array_equal(np.diag(lu[0]), np.full(5, p, dt))
    assert list(piv[0]) == [1, 2, 3, 4, 5] and info[0] == 0


def test_native_steps_run_it_too(built: list[str], jit_runs: list[int]) -> None:
    """A loop body solving small complex systems each step (loop_lapack.py's steps)."""
    a = _data((32, 4, 4), np.complex64, 8) + 3 * np.eye(4, dtype=np.complex64)
    b = _data((32, 4), np.complex64, 9)

    def loop(m: Any, r: Any) -> Any:
        return jax.lax.fori_loop(0, 5, lambda i, x: jax.vmap(jnp.linalg.solve)(m, x + r), r)
    import xlapy

    text = jax.jit(loop).lower(a, b).as_text()
    got = np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": 1})(a, b))
    assert "getrf" in built and "trsm" in built and not jit_runs
    want = np.asarray(xlapy.compile(text, backend="interpreter")(a, b))
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    assert small_lu.takes("potrf", "c", [(4, 4)], (True,)) is None  # (not taken: LAPACK)
