"""Vector lanes through reshapes that split the lane's dimension (lane_split.py): group norm
([n, h, w, c] regrouped as [n, h, w, g, c / g] and back), kron, repeat and tile along the
last axis run in explicit lanes (they ran as scalar IR with a division and a remainder per
element: group norm 1.7x XLA's time) with the interpreter's bits, on 1 and 2 threads; a
split that does not divide the lanes evenly stays scalar and right."""

from __future__ import annotations

from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import lanes
from xlapy.backends.cpu.lanes import split_patterns, split_rule, vector_width

from .util import recorded


def _d(dims: tuple[int, ...]) -> str:
    return "x".join(map(str, dims))


def group_norm(n: int, hw: int, c: int, g: int, t: str = "f32") -> str:
    """JAX's group norm over NHWC (flax.linen.GroupNorm's reshapes), statistics in f32."""
    x4, x5, s5 = (n, hw, hw, c), (n, hw, hw, g, c // g), (n, 1, 1, g, 1)
    cnt = float(hw * hw * c // g)
    return f"""
func.func public @main(%x: tensor<{_d(x4)}x{t}>, %gamma: tensor<{c}x{t}>)
    -> tensor<{_d(x4)}x{t}> {{
  %xf = stablehlo.convert %x : (tensor<{_d(x4)}x{t}>) -> tensor<{_d(x4)}xf32>
  %x5 = stablehlo.reshape %xf : (tensor<{_d(x4)}xf32>) -> tensor<{_d(x5)}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x5 init: %z) applies stablehlo.add across dimensions = [1, 2, 4]
    : (tensor<{_d(x5)}xf32>, tensor<f32>) -> tensor<{n}x{g}xf32>
  %q = stablehlo.multiply %x5, %x5 : tensor<{_d(x5)}xf32>
  %ss = stablehlo.reduce(%q init: %z) applies stablehlo.add across dimensions = [1, 2, 4]
    : (tensor<{_d(x5)}xf32>, tensor<f32>) -> tensor<{n}x{g}xf32>
  %k = stablehlo.constant dense<{cnt}> : tensor<{n}x{g}xf32>
  %mean = stablehlo.divide %s, %k : tensor<{n}x{g}xf32>
  %m2 = stablehlo.divide %ss, %k : tensor<{n}x{g}xf32>
  %mm = stablehlo.multiply %mean, %mean : tensor<{n}x{g}xf32>
  %var = stablehlo.subtract %m2, %mm : tensor<{n}x{g}xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<{n}x{g}xf32>
  %ve = stablehlo.add %var, %eps : tensor<{n}x{g}xf32>
  %r = stablehlo.rsqrt %ve : tensor<{n}x{g}xf32>
  %mr = stablehlo.reshape %mean : (tensor<{n}x{g}xf32>) -> tensor<{_d(s5)}xf32>
  %rr = stablehlo.reshape %r : (tensor<{n}x{g}xf32>) -> tensor<{_d(s5)}xf32>
  %mb = stablehlo.broadcast_in_dim %mr, dims = [0, 1, 2, 3, 4]
    : (tensor<{_d(s5)}xf32>) -> tensor<{_d(x5)}xf32>
  %rb = stablehlo.broadcast_in_dim %rr, dims = [0, 1, 2, 3, 4]
    : (tensor<{_d(s5)}xf32>) -> tensor<{_d(x5)}xf32>
  %d = stablehlo.subtract %x5, %mb : tensor<{_d(x5)}xf32>
  %y5 = stablehlo.multiply %d, %rb : tensor<{_d(x5)}xf32>
  %y4 = stablehlo.reshape %y5 : (tensor<{_d(x5)}xf32>) -> tensor<{_d(x4)}xf32>
  %gf = stablehlo.convert %gamma : (tensor<{c}x{t}>) -> tensor<{c}xf32>
  %gb = stablehlo.broadcast_in_dim %gf, dims = [3] : (tensor<{c}xf32>) -> tensor<{_d(x4)}xf32>
  %y = stablehlo.multiply %y4, %gb : tensor<{_d(x4)}xf32>
  %i = stablehlo.iota dim = 3 : tensor<{_d(x5)}xf32>
  %i4 = stablehlo.reshape %i : (tensor<{_d(x5)}xf32>) -> tensor<{_d(x4)}xf32>
  %yi = stablehlo.add %y, %i4 : tensor<{_d(x4)}xf32>
  %o = stablehlo.convert %yi : (tensor<{_d(x4)}xf32>) -> tensor<{_d(x4)}x{t}>
  return %o : tensor<{_d(x4)}x{t}>
}}
"""


KRON = """
func.func public @main(%a: tensor<{m}x{m}xf32>, %b: tensor<{n}x{n}xf32>)
    -> tensor<{mn}x{mn}xf32> {{
  %ab = stablehlo.broadcast_in_dim %a, dims = [0, 2]
    : (tensor<{m}x{m}xf32>) -> tensor<{m}x{n}x{m}x{n}xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1, 3]
    : (tensor<{n}x{n}xf32>) -> tensor<{m}x{n}x{m}x{n}xf32>
  %p = stablehlo.multiply %ab, %bb : tensor<{m}x{n}x{m}x{n}xf32>
  %r = stablehlo.reshape %p : (tensor<{m}x{n}x{m}x{n}xf32>) -> tensor<{mn}x{mn}xf32>
  return %r : tensor<{mn}x{mn}xf32>
}}
"""

#: jnp.repeat(x, r, axis=1) and jnp.tile(x, (1, r)) (a square keeps the kernel a computation).
REPEAT = """
func.func public @main(%x: tensor<{a}x{c}xf32>) -> tensor<{a}x{rc}xf32> {{
  %e = stablehlo.multiply %x, %x : tensor<{a}x{c}xf32>
  %b = stablehlo.broadcast_in_dim %e, dims = {dims}
    : (tensor<{a}x{c}xf32>) -> tensor<{a}x{bd}xf32>
  %r = stablehlo.reshape %b : (tensor<{a}x{bd}xf32>) -> tensor<{a}x{rc}xf32>
  return %r : tensor<{a}x{rc}xf32>
}}
"""


@pytest.fixture
def splits() -> Iterator[list[bool]]:
    """Whether each explicit-lane kernel compiled meanwhile split its lanes."""
    with recorded(lanes.LaneCheck, "kernel", lambda c, ok: c.split if ok else None) as seen:
        yield seen


def _check(text: str, args: list[np.ndarray], threads: int, exact: bool = True) -> None:
    """The interpreter's bits (`exact`; else within float rounding: reductions sum in
    lanes), and the bits of the same kernels without split lanes."""
    opts = {"num_threads": threads, "split_cost": 1}
    got = np.asarray(xlapy.compile(text, backend="cpu", options=opts)(*args))
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    if exact:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32),
                                   rtol=2e-2 if got.dtype.itemsize == 2 else 2e-5, atol=1e-5)
    orig = lanes.split_patterns
    lanes.split_patterns = lambda *a: None  # type: ignore[assignment]
    try:
        plain = np.asarray(xlapy.compile(text, backend="cpu", options=opts)(*args))
    finally:
        lanes.split_patterns = orig
    np.testing.assert_array_equal(got, plain)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n,hw,c,g", [(2, 4, 64, 8), (1, 3, 32, 4), (2, 2, 64, 32),
                                      (1, 5, 32, 2), (3, 2, 128, 16), (1, 2, 24, 3)])
def test_group_norm_splits_lanes(n: int, hw: int, c: int, g: int, threads: int,
                                 splits: list[bool]) -> None:
    rng = np.random.default_rng(c + g)
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float32) * 2 + 1
    gamma = rng.standard_normal(c).astype(np.float32)
    _check(group_norm(n, hw, c, g), [x, gamma], threads, exact=False)
    w = vector_width()
    assert any(splits) == (c % w == 0 and split_patterns(
        (n, hw, hw, c), (n, hw, hw, g, c // g), 3, w) is not None)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_group_norm_half_types(t: str, splits: list[bool]) -> None:
    dt = ml_dtypes.bfloat16 if t == "bf16" else np.float16
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 3, 64)).astype(dt)
    _check(group_norm(2, 3, 64, 8, t), [x, rng.standard_normal(64).astype(dt)], 2, exact=False)
    assert any(splits)


@pytest.mark.parametrize("m,n", [(32, 32), (8, 16), (4, 8), (16, 2), (3, 16), (5, 3)])
def test_kron_splits_lanes(m: int, n: int) -> None:
    rng = np.random.default_rng(m * n)
    a, b = rng.standard_normal((m, m)).astype(np.float32), \
        rng.standard_normal((n, n)).astype(np.float32)
    text = KRON.format(m=m, n=n, mn=m * n)
    _check(text, [a, b], 2)
    np.testing.assert_array_equal(xlapy.compile(text, backend="cpu")(a, b), np.kron(a, b))


@pytest.mark.parametrize("a,c,r", [(64, 512, 2), (8, 8, 4), (5, 16, 3), (4, 4, 4),
                                   (3, 2, 8), (6, 12, 4)])
@pytest.mark.parametrize("how", ["repeat", "tile"])
def test_repeat_and_tile_along_the_lanes(a: int, c: int, r: int, how: str,
                                         splits: list[bool]) -> None:
    dims, bd = ("[0, 1]", f"{c}x{r}") if how == "repeat" else ("[0, 2]", f"{r}x{c}")
    text = REPEAT.format(a=a, c=c, rc=r * c, dims=dims, bd=bd)
    x = np.random.default_rng(c).standard_normal((a, c)).astype(np.float32)
    _check(text, [x], 2)
    w = vector_width()
    src = (a, c, r) if how == "repeat" else (a, r, c)
    assert any(splits) == ((r * c) % w == 0 and
                           split_patterns((a, r * c), src, 1, w) is not None)


def test_split_rules() -> None:
    """(lin // s) % n over lanes base + k, base a multiple of 16."""
    assert split_rule(16, 4, 16) == "uniform" and split_rule(3, 1, 16) == "uniform"
    assert split_rule(8, 8, 16) == "div" and split_rule(1, 64, 16) == "div"
    assert split_rule(1, 8, 16) == "periodic" and split_rule(2, 4, 16) == "periodic"
    assert split_rule(3, 8, 16) is None and split_rule(4, 3, 16) is None
    pats = split_patterns((2, 64), (2, 8, 8), 1, 16)
    assert pats == {1: tuple(k // 8 for k in range(16)), 2: tuple(k % 8 for k in range(16))}
    assert split_patterns((2, 24), (2, 3, 8), 1, 16) is None  # 24 is not whole vectors


SLICED = """
func.func @main(%x: tensor<2x10x8xf32>) -> tensor<2x{n}xf32> {{
  %s = stablehlo.slice %x [0:2, {lo}:{hi}, 0:8] : (tensor<2x10x8xf32>) -> tensor<2x{k}x8xf32>
  %m = stablehlo.multiply %s, %s : tensor<2x{k}x8xf32>
  %r = stablehlo.reshape %m : (tensor<2x{k}x8xf32>) -> tensor<2x{n}xf32>
  return %r : tensor<2x{n}xf32>
}}
"""


@pytest.mark.parametrize(("lo", "hi"), [(2, 10), (0, 8), (1, 9), (0, 10)])
def test_a_slice_under_split_lanes(lo: int, hi: int) -> None:
    """A slice read at pattern indices: from 0 it keeps the patterns; a start would shift
    them off their alignment (that kernel is scalar; it had failed to compile)."""
    k = hi - lo
    text = SLICED.format(lo=lo, hi=hi, k=k, n=8 * k)
    x = np.random.default_rng(lo).standard_normal((2, 10, 8)).astype(np.float32)
    _check(text, [x], 2)



#: Split lanes through transposes, broadcasts of a vector, iotas, three-way splits and
#: mixed types (the ones LaneCheck refuses stay scalar).
MIXED = {
"transpose": """
func.func @main(%x: tensor<2x8x8xf32>) -> tensor<2x64xf32> {
  %t = stablehlo.transpose %x, dims = [0, 2, 1] : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %m = stablehlo.multiply %t, %t : tensor<2x8x8xf32>
  %r = stablehlo.reshape %m : (tensor<2x8x8xf32>) -> tensor<2x64xf32>
  return %r : tensor<2x64xf32>
}""",
"bcast_vec": """
func.func @main(%x: tensor<2x64xf32>, %v: tensor<8xf32>) -> tensor<2x64xf32> {
  %r = stablehlo.reshape %x : (tensor<2x64xf32>) -> tensor<2x8x8xf32>
  %b = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<8xf32>) -> tensor<2x8x8xf32>
  %c = stablehlo.broadcast_in_dim %v, dims = [2] : (tensor<8xf32>) -> tensor<2x8x8xf32>
  %m = stablehlo.multiply %r, %b : tensor<2x8x8xf32>
  %n = stablehlo.add %m, %c : tensor<2x8x8xf32>
  %o = stablehlo.reshape %n : (tensor<2x8x8xf32>) -> tensor<2x64xf32>
  return %o : tensor<2x64xf32>
}""",
"iota_cmp": """
func.func @main(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %r = stablehlo.reshape %x : (tensor<4x32xf32>) -> tensor<4x4x8xf32>
  %i = stablehlo.iota dim = 1 : tensor<4x4x8xi32>
  %j = stablehlo.iota dim = 2 : tensor<4x4x8xi32>
  %c = stablehlo.compare GT, %i, %j : (tensor<4x4x8xi32>, tensor<4x4x8xi32>) -> tensor<4x4x8xi1>
  %z = stablehlo.constant dense<0.0> : tensor<4x4x8xf32>
  %s = stablehlo.select %c, %r, %z : tensor<4x4x8xi1>, tensor<4x4x8xf32>
  %o = stablehlo.reshape %s : (tensor<4x4x8xf32>) -> tensor<4x32xf32>
  return %o : tensor<4x32xf32>
}""",
"three_way": """
func.func @main(%x: tensor<3x128xf32>) -> tensor<3x128xf32> {
  %r = stablehlo.reshape %x : (tensor<3x128xf32>) -> tensor<3x2x8x8xf32>
  %e = stablehlo.exponential %r : tensor<3x2x8x8xf32>
  %o = stablehlo.reshape %e : (tensor<3x2x8x8xf32>) -> tensor<3x128xf32>
  return %o : tensor<3x128xf32>
}""",
"int_bf16": """
func.func @main(%x: tensor<4x64xi32>, %y: tensor<4x8xbf16>) -> tensor<4x64xbf16> {
  %r = stablehlo.reshape %x : (tensor<4x64xi32>) -> tensor<4x8x8xi32>
  %f = stablehlo.convert %r : (tensor<4x8x8xi32>) -> tensor<4x8x8xbf16>
  %b = stablehlo.broadcast_in_dim %y, dims = [0, 1] : (tensor<4x8xbf16>) -> tensor<4x8x8xbf16>
  %m = stablehlo.multiply %f, %b : tensor<4x8x8xbf16>
  %o = stablehlo.reshape %m : (tensor<4x8x8xbf16>) -> tensor<4x64xbf16>
  return %o : tensor<4x64xbf16>
}""",
}


@pytest.mark.parametrize("name", list(MIXED))
def test_split_lanes_through_other_ops(name: str) -> None:
    text = MIXED[name]
    rng = np.random.default_rng(len(name))
    ref = xlapy.compile(text, backend="interpreter")
    cpu = xlapy.compile(text, backend="cpu")
    args = []
    for p in cpu._exe.comp.parameters:
        a = rng.standard_normal(tuple(p.shape.dimensions))
        et = str(p.shape.element_type)
        args.append((a * 3).astype(np.int32) if et == "s32" else
                    a.astype(ml_dtypes.bfloat16) if et == "bf16" else a.astype(np.float32))
    got, want = np.asarray(cpu(*args)), np.asarray(ref(*args))
    if name == "three_way":  # (exp: the cpu's polynomial, within an ulp)
        np.testing.assert_allclose(got, want, rtol=3e-7)
    else:
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
