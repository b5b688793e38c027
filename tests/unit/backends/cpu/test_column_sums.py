"""column_sums.py: long float column sums are summed per block, then the block sums, so their
error grows like sqrt(rows) ulps, not like rows (a batch-norm statistic over 262144 rows was
45x further from the f64 sum than XLA's)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.column_sums import MIN_ROWS, SplitColumnSums, block
from xlapy.passes.hlo_builder import HloBuilder

pytestmark = pytest.mark.usefixtures("jax_x32")  # f32 programs from jax


def _sum(shape: tuple[int, ...], dims: tuple[int, ...], et: str = "f32",
         init: float = 0.0) -> HloBuilder:
    g = HloBuilder()
    x = g.param(f"{et}[{','.join(map(str, shape))}]")
    g.build(g.reduce(x, g.const(init, et), dims, g.scalar_fn("add", et)))
    return g


def _reduces(g: HloBuilder) -> list[tuple[int, ...]]:
    return [tuple(i.operands[0].shape.dimensions) for i in g.comp.instructions
            if i.opcode == "reduce"]


def test_block_is_a_divisor_near_the_square_root() -> None:
    assert block(8192) == 64 and block(4096) == 64 and block(1000) == 25
    assert block(4099) is None  # a prime: no block


@pytest.mark.parametrize("shape,dims", [((64, 4096, 16), (0, 1)), ((1 << 18, 4), (0,)),
                                        ((8, 32, 32, 32), (0, 1, 2)), ((8, 4096, 16), (1,))])
def test_long_column_sums_are_accurate(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    g = _sum(shape, dims)
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    got = np.asarray(xlapy.compile(g.module, backend="cpu")(x), np.float64)
    exact = x.astype(np.float64).sum(dims)
    # ~2 sqrt(rows) ulps at worst; in order it was up to 45x the f64-rounded error
    assert np.abs(got - exact).max() / np.abs(exact).max() < 3e-7
    assert SplitColumnSums().run(g.module) and len(_reduces(g)) >= 2


def test_the_init_is_added_once() -> None:
    g = _sum((1024, 8), (0,), init=5.0)
    x = np.ones((1024, 8), np.float32)
    np.testing.assert_array_equal(xlapy.compile(g.module, backend="cpu")(x),
                                  np.full(8, 1029.0, np.float32))


@pytest.mark.parametrize("shape,dims,et", [
    ((MIN_ROWS - 1, 16), (0,), "f32"),  # too few rows
    ((4099, 16), (0,), "f32"),          # no block divides the rows
    ((1024, 16), (1,), "f32"),          # a row sum (accumulator chains already)
    ((4096,), (0,), "f32"),             # a full sum (likewise)
    ((8, 1024, 16), (0, 2), "f32"),     # not consecutive
    ((4096, 16), (0,), "f64"),          # accurate enough in order
])
def test_other_sums_stay(shape: tuple[int, ...], dims: tuple[int, ...], et: str) -> None:
    assert not SplitColumnSums().run(_sum(shape, dims, et).module)


def test_integer_and_max_reductions_stay() -> None:
    g = HloBuilder()
    x = g.param("f32[4096,16]")
    g.build(g.reduce(x, g.const(-np.inf), (0,), g.scalar_fn("maximum")))
    assert not SplitColumnSums().run(g.module)
    assert not SplitColumnSums().run(_sum((4096, 16), (0,), "s32").module)


def test_bf16_column_sum_from_jax() -> None:
    jax = pytest.importorskip("jax")
    import ml_dtypes

    x = np.random.default_rng(1).random((4096, 64)).astype(ml_dtypes.bfloat16)
    text = jax.jit(lambda v: jax.numpy.sum(v, 0, dtype=v.dtype)).lower(x).as_text()
    got = np.asarray(xlapy.compile(text, backend="cpu")(x), np.float64)
    exact = x.astype(np.float64).sum(0)
    assert np.abs(got - exact).max() / np.abs(exact).max() < 2e-2  # a few bf16 ulps
