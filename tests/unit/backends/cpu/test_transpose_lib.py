"""Kernels that are one transpose of a buffer call transpose_lib's routine: the bits of
NumPy's transpose (NaN payloads, -0, every element size) on every shape it takes, edges
that are not multiples of its 8 x 8 blocks, batches, and any thread count; LAPACK's
Fortran-order copies go through it too."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import transpose_lib
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET
from xlapy.types import Shape

TYPES = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "i8": np.int8,
         "i1": np.bool_, "c64": np.complex64, "c128": np.complex128, "u16": np.uint16}
MLIR = {"c64": "complex<f32>", "c128": "complex<f64>", "u16": "ui16"}


def _program(shape: tuple[int, ...], t: str, perm: tuple[int, ...]) -> str:
    out = tuple(shape[p] for p in perm)
    t = MLIR.get(t, t)
    x, y = (f"tensor<{'x'.join(map(str, s))}x{t}>" for s in (shape, out))
    return f"""
func.func @main(%x: {x}) -> {y} {{
  %t = stablehlo.transpose %x, dims = {list(perm)} : ({x}) -> {y}
  return %t : {y}
}}
"""


def _values(shape: tuple[int, ...], t: str) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    if t == "i1":
        return rng.integers(0, 2, shape).astype(np.bool_)
    x = (rng.standard_normal(shape) * 1000).astype(TYPES[t])
    if t == "c64":
        x = x + 1j * x[..., ::-1]
    if t == "f32":  # NaN payloads, -0 and denormals come through as bits
        flat = x.reshape(-1).view(np.uint32)
        flat[::7] = np.uint32(0x7FC0_1234)
        flat[1::11] = np.uint32(0x8000_0000)
        flat[2::13] = np.uint32(0x0000_0042)
    return x


def _pattern(dims: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...] | None:
    x = Instruction("parameter", [], Shape.array(ET.F32, list(dims)), None, (), "x")
    out = Shape.array(ET.F32, [dims[p] for p in perm])
    from xlapy.ops.shape import TransposeAttrs

    return transpose_lib.pattern(Instruction("transpose", [x], out, TransposeAttrs(perm), (),
                                             "t"))


def test_patterns() -> None:
    # (leading kept dimensions, batch, rows, cols)
    assert _pattern((5, 7), (1, 0)) == (0, 1, 5, 7)
    assert _pattern((2, 5, 7), (0, 2, 1)) == (1, 2, 5, 7)
    assert _pattern((2, 3, 5, 7), (0, 1, 3, 2)) == (2, 6, 5, 7)
    assert _pattern((2, 3, 5), (2, 0, 1)) == (0, 1, 6, 5)  # [I I J] -> [J I I]
    assert _pattern((2, 3, 5), (1, 2, 0)) == (0, 1, 2, 15)  # [I J J] -> [J J I]
    # the innermost dimension stays (rows are copied whole), or not two swapped groups
    assert _pattern((2, 3, 5), (1, 0, 2)) is None
    assert _pattern((2, 3, 5, 7), (1, 0, 3, 2)) is None
    assert _pattern((2, 3, 5), (2, 1, 0)) is None
    assert _pattern((2, 3), (0, 1)) is None


@pytest.mark.parametrize(("shape", "perm"), [
    ((256, 256), (1, 0)), ((1031, 517), (1, 0)), ((9, 300), (1, 0)), ((300, 9), (1, 0)),
    ((3, 70, 133), (0, 2, 1)), ((2, 3, 41, 67), (0, 1, 3, 2)), ((6, 10, 35), (2, 0, 1)),
    ((16, 12, 40), (1, 2, 0)), ((64, 40, 3), (0, 2, 1)), ((512, 64, 8), (2, 0, 1)),
    ((4000, 12), (1, 0)), ((130, 70), (1, 0))])
@pytest.mark.parametrize("t", list(TYPES))
def test_transposes_call_the_routine_bit_for_bit(shape: tuple[int, ...],
                                                 perm: tuple[int, ...], t: str) -> None:
    x = _values(shape, t)
    want = np.ascontiguousarray(np.transpose(x, perm))
    for threads in (1, 2, 3):
        prog = xlapy.compile(_program(shape, t, perm), "cpu",
                             options={"num_threads": threads})
        routine = "transpose routine" in prog._exe.explain()
        thin = min(shape[-1], shape[-2]) < 8  # (only the last case: its kernel runs faster)
        assert routine == (x.dtype.itemsize in transpose_lib.ELEMENT_BYTES and not thin)
        got = np.asarray(prog(x))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_small_fused_or_nested_transposes_keep_their_kernels() -> None:
    small = xlapy.compile(_program((8, 16), "f32", (1, 0)), "cpu")
    assert "transpose routine" not in small._exe.explain()
    x = np.arange(128, dtype=np.float32).reshape(8, 16)
    np.testing.assert_array_equal(np.asarray(small(x)), x.T)
    fused = _program((64, 32), "f32", (1, 0)).replace(
        "return %t", "%n = stablehlo.negate %t : tensor<32x64xf32>\n  return %n")
    prog = xlapy.compile(fused, "cpu")
    assert "transpose routine" not in prog._exe.explain()
    y = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    np.testing.assert_array_equal(np.asarray(prog(y)), -y.T)
    root = Instruction("parameter", [], Shape.array(ET.F32, [64, 64]), None, (), "x")
    from xlapy.ops.shape import TransposeAttrs

    t = Instruction("transpose", [root], Shape.array(ET.F32, [64, 64]),
                    TransposeAttrs((1, 0)), (), "t")
    assert transpose_lib.takes(t, {id(root): 0}, routines=True)
    assert not transpose_lib.takes(t, {id(root): 0}, routines=False)  # (xlapy.aot's objects)


MASKED = """
func.func @main(%x: tensor<256x192xf32>) -> tensor<192x256xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<256x192xi32>
  %1 = stablehlo.iota dim = 1 : tensor<256x192xi32>
  %2 = stablehlo.compare GE, %0, %1, SIGNED : (tensor<256x192xi32>, tensor<256x192xi32>)
    -> tensor<256x192xi1>
  %z = stablehlo.constant dense<0.0> : tensor<256x192xf32>
  %3 = stablehlo.select %2, %x, %z : tensor<256x192xi1>, tensor<256x192xf32>
  %4 = stablehlo.transpose %3, dims = [1, 0] : (tensor<256x192xf32>) -> tensor<192x256xf32>
  return %4 : tensor<192x256xf32>
}
"""


def test_a_transposed_expression_is_computed_then_moved_by_the_routine() -> None:
    """JAX's triangle mask around a LAPACK call: the select in its own order (vectorized),
    then the routine (a fused kernel read x down its columns a scalar at a time: 110 us
    against 32 for 256 x 256)."""
    prog = xlapy.compile(MASKED, "cpu")
    hows = [how for _, _, how in prog._exe.report]
    assert hows == ["kernel k0", "kernel k1 (transpose routine)"], hows
    x = _values((256, 192), "f32")
    want = np.ascontiguousarray(np.where(np.tril(np.ones((256, 192), bool)), x, 0).T)
    np.testing.assert_array_equal(np.asarray(prog(x)).view(np.uint32), want.view(np.uint32))
    aot = xlapy.compile(MASKED, "cpu", options={"routines": False})  # (xlapy.aot's options)
    assert [how for _, _, how in aot._exe.report] == ["kernel k0"]
    np.testing.assert_array_equal(np.asarray(aot(x)).view(np.uint32), want.view(np.uint32))


def test_loop_bodies_call_the_routine() -> None:
    jax = pytest.importorskip("jax")
    m = _values((64, 48), "f32")[:48]

    def f(a: object) -> object:
        return jax.lax.fori_loop(0, 3, lambda i, x: (x * 1.5 + 1.0).T, a)

    text = jax.jit(f).lower(m[:, :48]).as_text()
    prog = xlapy.compile(text, "cpu")
    assert "native while loop" in prog._exe.explain()
    assert "transpose routine" in prog._exe.explain()
    want = xlapy.compile(text, "interpreter")(m[:, :48])
    np.testing.assert_array_equal(np.asarray(prog(m[:, :48])).view(np.uint32),
                                  np.asarray(want).view(np.uint32))


@pytest.mark.parametrize(("shape", "perm", "bands"), [
    ((512, 64, 8), (2, 0, 1), True), ((4000, 12), (1, 0), True), ((130, 70), (1, 0), False)])
def test_few_columns_split_by_bands_of_rows(shape: tuple[int, ...], perm: tuple[int, ...],
                                            bands: bool) -> None:
    """A transpose with no batch dimensions and fewer than NARROW_COLUMNS input columns
    splits over bands of ROW_BAND input rows (its kernel's outer range), not over columns
    (a few each: the routine's scalar edges, 5x slower)."""
    prog = xlapy.compile(_program(shape, "f32", perm), "cpu", options={"num_threads": 2})
    rows = int(np.prod([shape[d] for d in range(len(shape)) if d not in perm[:1]]))
    spec = prog._exe.kernel_specs[0]
    want = -(-rows // transpose_lib.ROW_BAND) if bands else shape[perm[0]]
    assert spec.outer == want and spec.splittable


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("shape", [(256, 256), (3, 17, 40), (4, 4), (1, 300)])
def test_swap_last_is_numpys(shape: tuple[int, ...], t: str) -> None:
    x = _values(shape, t)
    want = np.ascontiguousarray(np.swapaxes(x, -1, -2))
    got = transpose_lib.swap_last(x)
    assert got.flags.c_contiguous and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    view = x[..., ::2]  # not contiguous: numpy's copy
    np.testing.assert_array_equal(transpose_lib.swap_last(view),
                                  np.swapaxes(view, -1, -2))


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("shape", [(2, 128, 4, 64), (3, 5, 7, 9), (1, 300, 20), (2, 3, 4, 5, 6)])
def test_gathered_is_numpys_copy_of_the_transpose(shape: tuple[int, ...], t: str) -> None:
    """gathered(x, perm): x.transpose(perm)'s values on any thread count; copied by the
    routine (C order) wherever the innermost axis moves and the routine takes the element
    size, else the view itself."""
    x = _values(shape, t)
    for perm in itertools.permutations(range(len(shape))):
        want = np.ascontiguousarray(x.transpose(perm))
        routine = perm[-1] != len(shape) - 1 and x.size >= transpose_lib.MIN_ELEMENTS and \
            x.itemsize in transpose_lib.ELEMENT_BYTES
        for threads in (1, 2):
            got = transpose_lib.gathered(x, perm, threads)
            assert got.shape == want.shape
            assert got.flags.c_contiguous if routine else np.shares_memory(got, x)
            np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                          want.view(np.uint8))


def test_c_order() -> None:
    x = _values((3, 40, 24), "f32")
    assert transpose_lib.c_order(x) is x
    for view in (np.swapaxes(x, -1, -2), x[:, ::2], x.transpose(2, 0, 1)):
        got = transpose_lib.c_order(view)
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got.view(np.uint32), np.ascontiguousarray(view).view(
            np.uint32))


def test_dot_reading_an_operand_transposed_never_copies_it_with_numpy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """dot_general(g, w) contracting w's last dimension (JAX's g @ W^T in a backward pass)
    gives the bits of dot(g, transpose(w)); w is read in place (BLAS's transpose flag) or
    copied through the routine, never with numpy's column-at-a-time copy (0.3 ms of a 1.2
    ms 512 x 512 x 512 product)."""
    slow = []
    real = np.ascontiguousarray
    monkeypatch.setattr(np, "ascontiguousarray", lambda x, *a, **k: (
        slow.append(x.shape) if isinstance(x, np.ndarray) and x.ndim == 2 and
        not x.flags.c_contiguous else None) or real(x, *a, **k))
    t = "tensor<256x512xf32>"
    direct = f"""
func.func @main(%g: {t}, %w: {t}) -> tensor<256x256xf32> {{
  %d = stablehlo.dot_general %g, %w, contracting_dims = [1] x [1]
      : ({t}, {t}) -> tensor<256x256xf32>
  return %d : tensor<256x256xf32>
}}
"""
    rng = np.random.default_rng(3)
    g, w = (rng.standard_normal((256, 512)).astype(np.float32) for _ in range(2))
    got = np.asarray(xlapy.compile(direct, "cpu")(g, w))
    assert not slow, slow
    explicit = f"""
func.func @main(%g: {t}, %w: {t}) -> tensor<256x256xf32> {{
  %wt = stablehlo.transpose %w, dims = [1, 0] : ({t}) -> tensor<512x256xf32>
  %d = stablehlo.dot_general %g, %wt, contracting_dims = [1] x [0]
      : ({t}, tensor<512x256xf32>) -> tensor<256x256xf32>
  return %d : tensor<256x256xf32>
}}
"""
    want = np.asarray(xlapy.compile(explicit, "cpu")(g, w))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_kernel_text_is_the_same_in_every_process() -> None:
    """The stub reads the routine's address from a global set after linking: its module's
    text (the compile cache's key) does not change with where the routine was loaded, so a
    later process finds the kernels in the disk cache; a cached object gets its global set
    too (the values are right either way)."""
    import subprocess
    import sys

    script = ("import sys, numpy as np, xlapy\n"
              "p = xlapy.compile(sys.stdin.read(), 'cpu')\n"
              "x = np.arange(300 * 200, dtype=np.float32).reshape(300, 200)\n"
              "assert (np.asarray(p(x)) == x.T).all()\n"
              "print(p._exe.kernel_ir)\n")
    text = _program((300, 200), "f32", (1, 0))
    runs = [subprocess.run([sys.executable, "-c", script], input=text, capture_output=True,
                           text=True, check=True).stdout for _ in range(2)]
    assert '@"k0_routine" = global i64 0' in runs[0]
    assert runs[0] == runs[1]
    here = xlapy.compile(text, "cpu")._exe.kernel_ir
    assert here.strip() == runs[0].strip()
