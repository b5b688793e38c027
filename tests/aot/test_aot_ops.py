"""The loops xlapy/aot emits itself (GEMM, convolution, triangular_solve, FFT, sort, control
flow) on JAX-lowered programs covering their variants, one object each, one driver, compared
with the interpreter (tests/aot/compare.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.aot.compare import mismatch
from tests.differential.compare import jax_x64
from xlapy.aot import compile as aot_compile
from xlapy.aot import driver

pytestmark = pytest.mark.skipif(driver.tool("gcc") is None,
                                reason="gcc is not installed (Debian: gcc)")


def _solve(left: bool, lower: bool, unit: bool, transpose: str, b: tuple[int, int]) -> str:
    """A triangular_solve program (JAX lowers its own to a LAPACK custom call)."""
    t = f"tensor<{b[0]}x{b[1]}xf32>"
    flag = lambda v: "true" if v else "false"  # noqa: E731
    return (f"func.func @main(%a: tensor<5x5xf32>, %b: {t}) -> {t} {{\n"
            f'  %0 = "stablehlo.triangular_solve"(%a, %b) {{left_side = {flag(left)}, '
            f"lower = {flag(lower)}, unit_diagonal = {flag(unit)}, "
            f"transpose_a = #stablehlo<transpose {transpose}>}} : (tensor<5x5xf32>, {t}) -> {t}\n"
            f"  return %0 : {t}\n}}\n")


def _programs() -> list[tuple[str, object, tuple[np.ndarray, ...]]]:
    jax = jax_x64()
    jnp, lax = jax.numpy, jax.lax
    rng = np.random.default_rng(7)

    def f(*s: int, dt: object = np.float32) -> np.ndarray:
        return rng.standard_normal(s).astype(dt)

    tri = np.tril(f(5, 5)) + 4 * np.eye(5, dtype=np.float32)
    conv = lax.conv_general_dilated
    return [
        ("fft2", lambda x: jnp.fft.fftn(x, axes=(1, 2)),
         ((f(2, 4, 6) + 1j * f(2, 4, 6)).astype(np.complex64),)),
        ("ifft", lambda x: jnp.fft.ifft(x), ((f(3, 5) + 1j * f(3, 5)).astype(np.complex128),)),
        ("rfft2", lambda x: jnp.fft.rfftn(x, axes=(0, 1)), (f(4, 6),)),
        ("irfft", lambda x: jnp.fft.irfft(x, n=7),
         ((f(2, 4) + 1j * f(2, 4)).astype(np.complex64),)),
        ("trsm_left_lower", _solve(True, True, False, "NO_TRANSPOSE", (5, 3)), (tri, f(5, 3))),
        ("trsm_right_upper_t", _solve(False, False, False, "TRANSPOSE", (3, 5)),
         (tri.T.copy(), f(3, 5))),
        ("trsm_unit_adjoint", _solve(True, True, True, "ADJOINT", (5, 2)), (tri, f(5, 2))),
        ("conv_groups", lambda x, w: conv(x, w, (2, 1), [(1, 2), (0, 1)], rhs_dilation=(1, 2),
                                          feature_group_count=2,
                                          dimension_numbers=("NCHW", "OIHW", "NHWC")),
         (f(2, 4, 7, 6), f(6, 2, 3, 2))),
        ("conv_lhs_dilated", lambda x, w: conv(x, w, (1,), [(2, 2)], lhs_dilation=(2,),
                                               dimension_numbers=("NWC", "WIO", "NWC")),
         (f(2, 5, 3), f(3, 3, 4))),
        ("conv_batch_groups", lambda x, w: conv(x, w, (1,), [(0, 0)], batch_group_count=2,
                                                dimension_numbers=("NWC", "WIO", "NWC")),
         (f(4, 6, 3), f(2, 3, 4))),
        ("conv_int", lambda x, w: conv(x, w, (1,), [(1, 1)],
                                       dimension_numbers=("NWC", "WIO", "NWC"),
                                       preferred_element_type=jnp.int32),
         (rng.integers(-9, 9, (2, 5, 3)).astype(np.int8),
          rng.integers(-9, 9, (3, 3, 2)).astype(np.int8))),
        ("dot_int8", lambda a, b: lax.dot(a, b, preferred_element_type=jnp.int32),
         (rng.integers(-100, 100, (7, 9)).astype(np.int8),
          rng.integers(-100, 100, (9, 5)).astype(np.int8))),
        ("dot_bf16", lambda a, b: a @ b, (f(6, 8).astype(jnp.bfloat16),
                                         f(8, 3).astype(jnp.bfloat16))),
        ("dot_c64", lambda a, b: a @ b, ((f(4, 6) + 1j * f(4, 6)).astype(np.complex64),
                                         (f(6, 3) - 1j * f(6, 3)).astype(np.complex64))),
        ("conv_c128", lambda x, w: conv(x, w, (1,), [(1, 1)],
                                        dimension_numbers=("NWC", "WIO", "NWC")),
         ((f(2, 5, 3) + 1j * f(2, 5, 3)).astype(np.complex128),
          (f(3, 3, 2) + 1j * f(3, 3, 2)).astype(np.complex128))),
        ("einsum_batched", lambda a, b: jnp.einsum("bkm,bnk->bmn", a, b),
         (f(3, 4, 5, dt=np.float64), f(3, 6, 4, dt=np.float64))),
        ("sort_pairs", lambda k, v: lax.sort((k, v), dimension=0, num_keys=1),
         (rng.integers(0, 4, (9, 3)).astype(np.int32), f(9, 3))),
        ("argsort", lambda x: jnp.argsort(x, axis=-1), (f(4, 11),)),
        ("switch", lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda y: y * 2], x),
         (np.array(1, np.int32), f(5))),
        ("cond", lambda p, x: lax.cond(p, lambda y: y + 1, lambda y: y - 1, x),
         (np.array(False), f(3, 2))),
        ("fori", lambda x: lax.fori_loop(0, 6, lambda i, y: y * 0.5 + jnp.tanh(y) + i, x),
         (f(4, 8),)),
    ]


def test_emitted_loops_match_the_interpreter(tmp_path: Path) -> None:
    jax = jax_x64()
    objs, texts, inputs = [], [], {}
    for name, fn, args in _programs():
        text = fn if isinstance(fn, str) else jax.jit(fn).lower(*args).as_text()
        objs.append(aot_compile(text, name=name))
        texts.append(text)
        inputs[name] = [np.asarray(a) for a in args]
    exe = driver.build(objs, tmp_path)
    got = driver.run(objs, inputs, tmp_path, exe)
    bad = []
    for o, text in zip(objs, texts):
        ref = xlapy.compile(text, backend="interpreter")(*inputs[o.name])
        ref = ref if isinstance(ref, tuple) else (ref,)
        for j, (g, r) in enumerate(zip(got[o.name], ref)):
            m = mismatch(g, r)
            if m is not None:
                bad.append(f"{o.name} result {j}: {m}")
    assert not bad, "\n".join(bad)
