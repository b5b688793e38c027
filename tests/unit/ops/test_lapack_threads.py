"""LAPACK calls of moderate size on one OpenBLAS thread (ops/lapack_threads.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack

import xlapy
from xlapy.ops import lapack_threads

pytestmark = pytest.mark.skipif(not lapack_threads._setters(),
                                reason="no bundled OpenBLAS with per-thread counts")


def _threads() -> list[int]:
    """The calling thread's count in each library (set and put back)."""
    out = []
    for s in lapack_threads._setters():
        n = s(1)
        s(n)
        out.append(n)
    return out


def _potrf_program(n: int) -> str:
    t = f"tensor<{n}x{n}xf64>"
    return f"""
func.func @main(%a: {t}) -> {t} {{
  %r:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%a) {{mhlo.backend_config = {{uplo = 76 : ui8}},
    operand_layouts = [dense<[0, 1]> : tensor<2xindex>],
    result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]}}
    : ({t}) -> ({t}, tensor<i32>)
  return %r#0 : {t}
}}"""


def _spd(n: int) -> np.ndarray:
    a = np.random.default_rng(3).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _one_thread(fn, *args):  # type: ignore[no-untyped-def]
    sets = lapack_threads._setters()
    old = [s(1) for s in sets]
    try:
        return fn(*args)
    finally:
        for s, n in zip(sets, old):
            s(n)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_potrf_runs_on_one_thread_and_restores_the_count(backend: str) -> None:
    """A 512 x 512 potrf gives OpenBLAS's one-thread bits on any machine (its split over
    threads changes them: on 2 cores the default count's differ), and the caller's count
    is what it was."""
    before = _threads()
    a = _spd(512)
    got = xlapy.compile(_potrf_program(512), backend=backend)(a)
    assert _threads() == before
    # (LAPACK reads the row-major a as its transpose: the upper factor, custom_call_targets'
    # potrf_uplo; a is symmetric, so that is U with a = U^T U, and L = U^T)
    want = _one_thread(lambda x: lapack.dpotrf(x, lower=0, clean=0)[0].T, np.asfortranarray(a))
    np.testing.assert_array_equal(np.tril(got), np.tril(want))


def test_serial_range_and_exceptions() -> None:
    def f() -> list[int]:
        return _threads()

    assert lapack_threads.serial(f, lapack_threads.SERIAL_FROM - 1) is f
    assert lapack_threads.serial(f, lapack_threads.SERIAL_BELOW) is f
    before = _threads()
    inside = lapack_threads.serial(f, 256 * 256)()
    assert inside == [1] * len(before)

    def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        lapack_threads.serial(boom, 256 * 256)()
    assert _threads() == before


def test_matrix_elements() -> None:
    assert lapack_threads.matrix_elements((7, 3, 5)) == 15
    assert lapack_threads.matrix_elements((9,)) == 9
    assert lapack_threads.matrix_elements(()) == 1
