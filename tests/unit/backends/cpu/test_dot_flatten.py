"""dot_flatten.py and dot_shapes.plain_dot's `flat` case: unbatched higher-rank f32/f64 dots
laid out as 2-D products run on the GEMM routes (top level and native loops), small operands
transposed into that layout first; values as the interpreter's (to rounding: the GEMM's sum
order)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.dot_flatten import MAX_RHS_TRANSPOSED, MAX_TRANSPOSED, FlattenDots
from xlapy.backends.cpu.dot_shapes import plain_dot
from xlapy.passes.hlo_builder import HloBuilder

pytestmark = pytest.mark.usefixtures("jax_x32")  # f32 programs from jax

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax


def _dot(lhs: str, rhs: str, lc: tuple[int, ...], rc: tuple[int, ...]) -> HloBuilder:
    g = HloBuilder()
    a, b = g.param(lhs), g.param(rhs)
    g.build(g.op("dot_general", a, b, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
                 lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc))
    return g


def _args(g: HloBuilder, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.shape.dimensions).astype(p.shape.dtype)
            for p in g.comp.parameters]


def _report(g: HloBuilder) -> tuple[list[tuple[str, str]], Any]:
    prog = xlapy.compile(g.module, backend="cpu")
    return [(op, how) for _, op, how in prog._exe.report], prog


@pytest.mark.parametrize("lhs,rhs,lc,rc,moved", [
    ("f32[4,8,32]", "f32[32,16]", (2,), (0,), 0),        # x[b, t, d] @ w[d, h]: in place
    ("f64[4,2,3,5]", "f64[3,5,6]", (2, 3), (0, 1), 0),   # two contracting dimensions
    ("f32[128,8,16]", "f32[8,16]", (1,), (0,), 1),       # lhs contracting a middle one
    ("f32[6,5,7]", "f32[3,7]", (2,), (1,), 1),           # rhs [n, k]: moved to [k, n]
    ("f32[5,6,7]", "f32[2,7,3]", (2,), (1,), 1),         # rhs contracting its middle
])
def test_flat_dots_take_the_gemm_route(lhs: str, rhs: str, lc: tuple[int, ...],
                                       rc: tuple[int, ...], moved: int) -> None:
    g = _dot(lhs, rhs, lc, rc)
    how, prog = _report(g)
    assert [h for op, h in how if op == "dot_general"] == ["library jit gemm"]
    assert sum(h.startswith("kernel") for op, h in how if op == "transpose") == moved
    args = _args(g)
    want = xlapy.compile(g.module, backend="interpreter")(*args)
    tol = 1e-5 if "f32" in lhs else 1e-12
    np.testing.assert_allclose(prog(*args), want, rtol=tol, atol=tol)


def test_plain_dot_reads_the_flat_layout() -> None:
    g = _dot("f32[4,8,32]", "f32[32,16]", (2,), (0,))
    d = g.comp.root
    assert plain_dot(d) is None and plain_dot(d, flat=True) == (32, 16, 32, False, False)
    t = _dot("f32[4,8,32]", "f32[16,32]", (2,), (1,)).comp.root
    assert plain_dot(t, flat=True) == (32, 16, 32, True, False)
    mid = _dot("f32[4,32,8]", "f32[32,16]", (1,), (0,)).comp.root
    assert plain_dot(mid, flat=True) is None


def test_big_operands_are_not_copied() -> None:
    n = MAX_TRANSPOSED  # lhs [2, n // 16, 16] contracting its middle: over the bound
    g = _dot(f"f32[2,{n // 16},16]", f"f32[{n // 16},4]", (1,), (0,))
    assert not FlattenDots().run(g.module)
    m = MAX_RHS_TRANSPOSED // 16  # a weight [2m, 16] read as [N, K] in place by BLAS
    w = _dot("f32[2,4,16]", f"f32[{2 * m},16]", (2,), (1,))
    assert not FlattenDots().run(w.module)


def test_jax_image_resize() -> None:
    """jax.image.resize's dots contracting the middle of a [128, 8, 64, 3] lhs and of the
    image: transposed by kernels into 2-D product layout (numpy's copies and BLAS were 2.4x
    slower on the first)."""
    x = np.random.default_rng(4).standard_normal((8, 64, 64, 3)).astype(np.float32)
    text = jax.jit(lambda v: jax.image.resize(v, (8, 128, 128, 3), "bilinear")).lower(
        x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    dots = [i for i in prog._exe.comp.instructions if i.opcode == "dot_general"]
    assert len(dots) == 2 and all(plain_dot(d, flat=True) is not None for d in dots)
    np.testing.assert_allclose(prog(x), xlapy.compile(text, backend="interpreter")(x),
                               rtol=1e-5, atol=1e-5)


def test_an_rnn_step_on_3d_state_is_a_native_gemm_step() -> None:
    """tanh(h @ w) on a [4, 8, 32] state in a fori_loop: a GEMM step of the native loop
    (small_dots.py had made it a reduce kernel reading w by columns, 9x slower)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 32)).astype(np.float32)
    w = (rng.standard_normal((32, 32)) * 0.1).astype(np.float32)
    text = jax.jit(lambda x, w: lax.fori_loop(0, 20, lambda i, h: jnp.tanh(h @ w), x)).lower(
        x, w).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert any(h.startswith("native while loop") for _, _, h in prog._exe.report)
    body = [s for _, s in prog._exe.subexecs if s.comp.name.startswith("while_body")][0]
    assert "library jit gemm" in [h for _, _, h in body.report]
    np.testing.assert_allclose(prog(x, w), xlapy.compile(text, backend="interpreter")(x, w),
                               rtol=1e-5, atol=1e-6)


def test_hessian_from_jax() -> None:
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    fn = jax.hessian(lambda x: jnp.sum(jnp.tanh(x @ x.T)))
    text = jax.jit(fn).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert "library blas" not in [h for _, _, h in prog._exe.report]
    np.testing.assert_allclose(prog(x), xlapy.compile(text, backend="interpreter")(x),
                               rtol=1e-5, atol=1e-5)
