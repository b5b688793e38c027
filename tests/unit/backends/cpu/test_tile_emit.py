"""Kernels that read a big operand through a transpose of its last two dimensions run their
last two loops in blocks (tile_emit.py): the same values as NumPy's transpose on every
shape (sides that are not multiples of the block, batched, fused ops), type and thread
count; small operands keep the plain loops."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import tile_emit

TYPES = {"f32": np.float32, "f64": np.float64, "bf16": None, "i8": np.int8}


def _program(shape: tuple[int, ...], t: str, perm: tuple[int, ...]) -> str:
    out = tuple(shape[p] for p in perm)
    x, y = (f"tensor<{'x'.join(map(str, s))}x{t}>" for s in (shape, out))
    return f"""
func.func @main(%x: {x}) -> {y} {{
  %t = stablehlo.transpose %x, dims = {list(perm)} : ({x}) -> {y}
  %a = stablehlo.add %t, %t : {y}
  return %a : {y}
}}
"""


def _tiled(prog: object) -> bool:
    return "ti.body" in prog._exe.kernel_ir  # type: ignore[attr-defined]


@pytest.mark.parametrize(("shape", "perm"), [((1031, 517), (1, 0)), ((4096, 300), (1, 0)),
                                             ((3, 700, 333), (0, 2, 1)),
                                             ((2, 3, 260, 1100), (1, 0, 3, 2))])
@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "i8"])
def test_blocked_transposes_match_numpy(shape: tuple[int, ...], perm: tuple[int, ...],
                                        t: str) -> None:
    import ml_dtypes

    dtype = TYPES[t] or ml_dtypes.bfloat16
    rng = np.random.default_rng(len(shape) * 7 + shape[-1])
    x = (rng.standard_normal(shape) * 40).astype(dtype)
    want = np.transpose(x, perm) + np.transpose(x, perm)
    big = x.nbytes >= tile_emit.MIN_BYTES
    for threads in (1, 2, 3):
        prog = xlapy.compile(_program(shape, t, perm), "cpu",
                             options={"num_threads": threads})
        assert _tiled(prog) == big
        np.testing.assert_array_equal(np.asarray(prog(x)), want)


def test_small_or_inner_preserving_transposes_keep_the_plain_loops() -> None:
    # 16 KB: stays in L1 either way
    assert not _tiled(xlapy.compile(_program((64, 64), "f32", (1, 0)), "cpu"))
    # the innermost dimension stays innermost: rows are read whole already
    y = np.arange(4 * 512 * 256, dtype=np.float32).reshape(4, 512, 256)
    prog = xlapy.compile(_program((4, 512, 256), "f32", (1, 0, 2)), "cpu")
    assert not _tiled(prog)
    np.testing.assert_array_equal(np.asarray(prog(y)), 2 * np.transpose(y, (1, 0, 2)))


@pytest.mark.parametrize("shape", [(65536, 3, 3), (65536, 4, 6), (8192, 15, 15)])
def test_batches_of_matrices_smaller_than_a_block_keep_the_plain_loops(
        shape: tuple[int, ...]) -> None:
    """Big operands of small matrices: each is read whole by the plain loops, which the
    block loops (side 16) only slowed (1.3-1.6x)."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    assert x.nbytes >= tile_emit.MIN_BYTES
    prog = xlapy.compile(_program(shape, "f32", (0, 2, 1)), "cpu")
    assert not _tiled(prog)
    np.testing.assert_array_equal(np.asarray(prog(x)), 2 * np.transpose(x, (0, 2, 1)))


def _staged(prog: object) -> bool:
    return "%\"stage\"" in prog._exe.kernel_ir  # type: ignore[attr-defined]


@pytest.mark.parametrize(("shape", "perm"), [((1031, 517), (1, 0)), ((4096, 1024), (1, 0)),
                                             ((3, 700, 333), (0, 2, 1)),
                                             ((2, 3, 260, 1100), (1, 0, 3, 2))])
@pytest.mark.parametrize("t", ["f32", "i32", "f64"])
def test_staged_blocks_bit_for_bit(shape: tuple[int, ...], perm: tuple[int, ...],
                                   t: str) -> None:
    """4-byte elements through a transpose of the last two dimensions only are staged
    (whole blocks through register transposes, edge blocks as before): the interpreter's
    bits, NaN payloads and denormals included, on any thread count."""
    dtype = {"f32": np.float32, "i32": np.int32, "f64": np.float64}[t]
    rng = np.random.default_rng(shape[-1])
    x = (rng.standard_normal(shape) * 1000).astype(dtype)
    if t == "f32":
        flat = x.reshape(-1).view(np.uint32)
        flat[::97] = 0x7FC01234  # a NaN payload
        flat[5::89] = 0x00000123  # a denormal
    text = _program(shape, "i32" if t == "i32" else t, perm).replace("add", "multiply")
    want = np.asarray(xlapy.compile(text, "interpreter")(x))
    for threads in (1, 2):
        prog = xlapy.compile(text, "cpu", options={"num_threads": threads})
        assert _staged(prog) == (t != "f64" and perm[-2:] == (len(shape) - 1, len(shape) - 2)
                                 and list(perm[:-2]) == list(range(len(shape) - 2)))
        np.testing.assert_array_equal(np.asarray(prog(x)).view(np.uint8), want.view(np.uint8))


def test_staged_only_where_read_at_its_own_element() -> None:
    """A kernel reading the transposed leaf at another element too (reversed along its
    rows) keeps the scalar blocks: a staged block holds the current elements only."""
    y = "tensor<512x1040xf32>"
    text = f"""
func.func @main(%x: tensor<1040x512xf32>) -> {y} {{
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<1040x512xf32>) -> {y}
  %r = stablehlo.reverse %t, dims = [0] : {y}
  %a = stablehlo.subtract %t, %r : {y}
  %n = stablehlo.negate %t : {y}
  %b = stablehlo.multiply %a, %n : {y}
  return %b : {y}
}}
"""
    x = np.random.default_rng(0).standard_normal((1040, 512)).astype(np.float32)
    prog = xlapy.compile(text, "cpu")
    assert _tiled(prog) and not _staged(prog)
    np.testing.assert_array_equal(np.asarray(prog(x)), (x.T - x.T[::-1]) * -x.T)
    text = text.replace("%r = stablehlo.reverse %t, dims = [0]", "%r = stablehlo.abs %t")
    plain = xlapy.compile(text, "cpu")
    assert _staged(plain)
    want = np.asarray(xlapy.compile(text, "interpreter")(x))
    np.testing.assert_array_equal(np.asarray(plain(x)), want)


def test_plain_transpose_root_calls_the_routine() -> None:
    """The transpose itself as the kernel's root (a layout copy) calls transpose_lib's
    routine instead of a staged loop nest of its own (nested compiles keep the staged one:
    test_transpose_lib.py)."""
    y = "tensor<1024x4096xi32>"
    text = f"""
func.func @main(%x: tensor<4096x1024xi32>, %y: {y}) -> ({y}, {y}) {{
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<4096x1024xi32>) -> {y}
  %a = stablehlo.add %t, %y : {y}
  return %t, %a : {y}, {y}
}}
"""
    rng = np.random.default_rng(5)
    x = rng.integers(-1 << 31, 1 << 31, (4096, 1024), dtype=np.int64).astype(np.int32)
    y = rng.integers(-1000, 1000, (1024, 4096)).astype(np.int32)
    prog = xlapy.compile(text, "cpu")
    assert not _staged(prog) and "transpose routine" in prog._exe.explain()
    t, a = (np.asarray(v) for v in prog(x, y))
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(a, x.T + y)
