"""Element-wise kernels over a last dimension shorter than a vector run over one flat
dimension (kernel_flat.py): vector lanes (they ran scalar), the interpreter's bits on 1 and 2
threads at any element count (rows split as before, each thread's rows walked flat: a
rest after the last whole vector even where the element count is whole vectors); the
kernel stays a row member of a region (the MLP's last bias add)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import kernel_flat
from xlapy.backends.cpu.lanes import vector_width
from xlapy.stablehlo import parse_module

CLIP_U8 = """
func.func public @main(%x: tensor<{d}x{t}>, %p: tensor<i1>) -> tensor<{d}xui8> {{
  %k = stablehlo.constant dense<255.0> : tensor<{t}>
  %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<{t}>) -> tensor<{d}x{t}>
  %z = stablehlo.constant dense<0.0> : tensor<{t}>
  %m = stablehlo.multiply %x, %kb : tensor<{d}x{t}>
  %e = stablehlo.exponential %x : tensor<{d}x{t}>
  %s = "stablehlo.select"(%p, %m, %e) : (tensor<i1>, tensor<{d}x{t}>, tensor<{d}x{t}>)
    -> tensor<{d}x{t}>
  %c = stablehlo.clamp %z, %s, %k : (tensor<{t}>, tensor<{d}x{t}>, tensor<{t}>) -> tensor<{d}x{t}>
  %u = stablehlo.convert %c : (tensor<{d}x{t}>) -> tensor<{d}xui8>
  return %u : tensor<{d}xui8>
}}
"""

PER_CHANNEL = """
func.func public @main(%x: tensor<{d}xf32>) -> tensor<{d}xf32> {{
  %c = stablehlo.constant dense<[0.5, 2.0, -1.0]> : tensor<3xf32>
  %b = stablehlo.broadcast_in_dim %c, dims = [{last}] : (tensor<3xf32>) -> tensor<{d}xf32>
  %y = stablehlo.multiply %x, %b : tensor<{d}xf32>
  return %y : tensor<{d}xf32>
}}
"""


def _dims(dims: tuple[int, ...]) -> str:
    return "x".join(map(str, dims))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dims", [(8, 37, 3), (1000, 3), (5, 2), (2, 7, 5), (32, 3),
                                  (64, 6, 4)])
@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_short_last_dimension_runs_flat(threads: int, dims: tuple[int, ...], t: str) -> None:
    text = CLIP_U8.format(d=_dims(dims), t=t)
    dt = np.float32 if t == "f32" else ml_dtypes.bfloat16
    x = (np.random.default_rng(1).standard_normal(dims) * 3).astype(dt)
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads,
                                                       "split_cost": 1})
    ref = xlapy.compile(text, backend="interpreter")
    for p in (True, False):
        np.testing.assert_array_equal(prog(x, np.array(p)), ref(x, np.array(p)))
    if np.prod(dims) >= vector_width():
        assert f"<{vector_width()} x float>" in prog._exe.kernel_ir  # lanes, not scalars


#: (x / 255 - mean) / std over NHWC with per-channel [c] mean and std, broadcast as JAX does
#: ([c] -> [1, 1, 1, c] -> the image), and a transcendental to interleave the lanes.
NORM = """
func.func public @main(%x: tensor<{d}xf32>, %s: tensor<{c}xf32>) -> tensor<{d}xf32> {{
  %m = stablehlo.constant dense<[{mean}]> : tensor<{c}xf32>
  %k = stablehlo.constant dense<255.0> : tensor<f32>
  %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<f32>) -> tensor<{d}xf32>
  %y = stablehlo.divide %x, %kb : tensor<{d}xf32>
  %m1 = stablehlo.broadcast_in_dim %m, dims = [{last}] : (tensor<{c}xf32>) -> tensor<{ones}xf32>
  %mb = stablehlo.broadcast_in_dim %m1, dims = [{all}] : (tensor<{ones}xf32>) -> tensor<{d}xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [{last}] : (tensor<{c}xf32>) -> tensor<{d}xf32>
  %z = stablehlo.subtract %y, %mb : tensor<{d}xf32>
  %q = stablehlo.divide %z, %sb : tensor<{d}xf32>
  %t = stablehlo.tanh %q : tensor<{d}xf32>
  return %t : tensor<{d}xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dims", [(2, 9, 11, 3), (1000, 5), (7, 2), (3, 4, 7), (32, 3)])
def test_per_channel_values_run_flat(threads: int, dims: tuple[int, ...],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-channel [c] values broadcast along the last dimension: x[i mod c] in the flat
    kernel (a table of their period), the bits of the kernel in its own shape (image
    normalization ran scalar: 6x XLA's time) and the interpreter's within tanh's ulps."""
    c = dims[-1]
    r = len(dims)
    text = NORM.format(d=_dims(dims), c=c, mean=", ".join(f"{0.1 * j + 0.05}" for j in range(c)),
                       last=r - 1, ones="x".join(["1"] * (r - 1) + [str(c)]),
                       all=", ".join(map(str, range(r))))
    rng = np.random.default_rng(3)
    x = (rng.random(dims) * 255).astype(np.float32)
    s = (rng.random(c) * 0.3 + 0.1).astype(np.float32)
    opts = {"num_threads": threads, "split_cost": 1}
    prog = xlapy.compile(text, backend="cpu", options=opts)
    got = prog(x, s)
    np.testing.assert_allclose(got, xlapy.compile(text, backend="interpreter")(x, s),
                               rtol=1e-6, atol=1e-7)
    if np.prod(dims) >= vector_width():
        assert f"<{vector_width()} x float>" in prog._exe.kernel_ir
    from xlapy.backends.cpu.kernels import KernelEmitter

    monkeypatch.setattr(KernelEmitter, "FLAT", False)
    shaped = xlapy.compile(text, backend="cpu", options=opts)
    np.testing.assert_array_equal(got.view(np.uint32), shaped(x, s).view(np.uint32))


def test_a_broadcast_along_another_dimension_keeps_the_shape() -> None:
    text = PER_CHANNEL.format(d="3x64", last=0)
    x = np.random.default_rng(2).standard_normal((3, 64)).astype(np.float32)
    np.testing.assert_array_equal(xlapy.compile(text, backend="cpu")(x),
                                  xlapy.compile(text, backend="interpreter")(x))


def test_flat_copy_reads_leaves_at_flat_indices() -> None:
    root = parse_module(CLIP_U8.format(d="9x3", t="f32")).entry.root
    x, p = root.parent.parameters
    got = kernel_flat.flatten(root, {id(x): 0, id(p): 1}, ())
    assert got is not None
    flat, leaves = got
    assert flat.shape.dimensions == (27,) and flat is not root
    assert sorted(set(leaves.values())) == [0, 1]  # the same buffers
    # rows (a row reduction's kernel) or a long last dimension: not flattened
    assert kernel_flat.flatten(root, {id(x): 0, id(p): 1}, [root]) is None
    long = parse_module(CLIP_U8.format(d=f"3x{vector_width()}", t="f32")).entry.root
    lx, lp = long.parent.parameters
    assert kernel_flat.flatten(long, {id(lx): 0, id(lp): 1}, ()) is None


PER_ROW = """
func.func public @main(%p: tensor<{d}x{t}>, %s: tensor<{r}x{t}>) -> tensor<{d}x{t}> {{
  %b = stablehlo.broadcast_in_dim %s, dims = [{keep}] : (tensor<{r}x{t}>) -> tensor<{d}x{t}>
  %y = stablehlo.multiply %p, %b : tensor<{d}x{t}>
  %z = stablehlo.subtract %y, %b : tensor<{d}x{t}>
  return %z : tensor<{d}x{t}>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dims", [(1000, 3), (4099, 6), (37, 5), (8, 21, 10), (3, 7),
                                  (500, 2), (64, 15)])
@pytest.mark.parametrize("t", ["f32", "f64", "i32", "bf16", "ui8"])
def test_per_row_values_run_flat(threads: int, dims: tuple[int, ...], t: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Values broadcast across the last dimension (points scaled per point, [n, 3] *
    s[:, None]): x[i // c] in the flat kernel, the rows' values selected by lane from a
    table of offsets, where the kernel ran a masked vector a row; every thread split and
    tail, the bits of the kernel in its own shape and the interpreter's."""
    r = dims[:-1]
    text = PER_ROW.format(d=_dims(dims), r=_dims(r), t=t,
                          keep=", ".join(map(str, range(len(r)))))
    rng = np.random.default_rng(len(dims) + dims[-1])
    dt = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "bf16": ml_dtypes.bfloat16,
          "ui8": np.uint8}[t]
    p = (rng.standard_normal(dims) * 100).astype(dt)
    s = (rng.standard_normal(r) * 100).astype(dt)
    opts = {"num_threads": threads, "split_cost": 1}
    prog = xlapy.compile(text, backend="cpu", options=opts)
    got = prog(p, s)
    np.testing.assert_array_equal(got, xlapy.compile(text, backend="interpreter")(p, s))
    if np.prod(dims) >= 4 * vector_width() and dims[-1] < vector_width():
        assert "rowwise" in prog._exe.kernel_ir
    from xlapy.backends.cpu.kernels import KernelEmitter

    monkeypatch.setattr(KernelEmitter, "FLAT", False)
    np.testing.assert_array_equal(got, xlapy.compile(text, backend="cpu", options=opts)(p, s))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_root_with_leading_unit_dimensions_splits_its_rows(threads: int) -> None:
    """jnp.tile(x, (1, 3)) broadcasts x into [1, R, 3, C] and reshapes that to [R, 3 C]:
    the reshape's operand was not walked (its outer dimension, one element, would leave
    threads nothing to split), so each element's index was divided into [1, R, 3, C] (3.7x
    XLA's time); walked as [R, 3, C], its rows split and its lanes run along C."""
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(0).standard_normal((2048, 341)).astype(np.float32)
    text = jax.jit(lambda a: jax.numpy.tile(a, (1, 3))).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    (spec,) = prog._exe.kernel_specs
    assert spec.outer == 2048
    assert " udiv " not in prog._exe.kernel_ir and " urem " not in prog._exe.kernel_ir
    np.testing.assert_array_equal(prog(x), np.tile(x, (1, 3)))
