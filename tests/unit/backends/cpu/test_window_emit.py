"""Native reduce_window and select_and_scatter (window_emit.py): bit-exact against the
interpreter for every type and window configuration (cumulative float windows longer than 16
fold in XLA CPU's order instead: test_cumulative_emit.py), and never an interpreter
fallback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.types import ElementType as ET

from .util import values

TYPES = [ET.F32, ET.F64, ET.S32, ET.BF16, ET.F16]
MLIR = {ET.F32: "f32", ET.F64: "f64", ET.S32: "i32", ET.BF16: "bf16", ET.F16: "f16",
        ET.S8: "i8", ET.U32: "ui32", ET.PRED: "i1", ET.S64: "i64"}


def data(t: ET, dims: Sequence[int], seed: int = 0) -> np.ndarray:
    n = int(np.prod(dims))
    v = values(t, max(n, 32), np.random.default_rng(seed), small=t.is_integer)
    return np.random.default_rng(seed + 1).permutation(v)[:n].reshape(dims)


def tensor(t: ET, dims: Sequence[int]) -> str:
    return f"tensor<{''.join(f'{d}x' for d in dims)}{MLIR[t]}>"


def same(got: Any, ref: Any) -> None:
    """Equal bit for bit, except that a NaN matches any NaN (its sign and payload are the
    hardware's, as for every kernel: util.ulp_error's convention); tuples element-wise."""
    if isinstance(ref, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(ref)
        for g, r in zip(got, ref):
            same(g, r)
        return
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    g, r = got.reshape(-1), ref.reshape(-1)
    if g.dtype.kind == "f" or g.dtype == ml_dtypes.bfloat16:
        nan = np.isnan(g.astype(np.float64)) & np.isnan(r.astype(np.float64))
        g, r = g[~nan], r[~nan]
    np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8))


def check(text: str, args: Sequence[Any], opcode: str, **options: Any) -> Any:
    """Both backends on `text`: equal bit for bit, the op native on cpu."""
    ref = xlapy.compile(text)(*args)
    exe = xlapy.compile(text, backend="cpu", options=options or None)
    got = exe(*args)
    same(got, ref)
    assert opcode not in {o for _, o in exe._exe.fallbacks()}, exe._exe.explain()
    return got


def arr(v: Sequence[Any]) -> str:
    return f"array<i64: {', '.join(map(str, v))}>" if v else "array<i64>"


def reduce_window(t: ET, dims: Sequence[int], op: str, window: Sequence[int],
                  strides: Sequence[int] | None = None, base: Sequence[int] | None = None,
                  wdil: Sequence[int] | None = None,
                  padding: Sequence[tuple[int, int]] | None = None) -> str:
    r = len(dims)
    strides = strides or [1] * r
    base = base or [1] * r
    wdil = wdil or [1] * r
    padding = padding or [(0, 0)] * r
    out = []
    for n, w, s, bd, wd, (lo, hi) in zip(dims, window, strides, base, wdil, padding):
        dilated = 0 if n == 0 else (n - 1) * bd + 1
        padded = lo + dilated + hi
        dw = (w - 1) * wd + 1
        out.append(0 if padded <= 0 or dw > padded else (padded - dw) // s + 1)
    pad = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    pads = f"dense<[{pad}]> : tensor<{r}x2xi64>" if r else "dense<> : tensor<0x2xi64>"
    e = MLIR[t]
    return f"""
func.func @main(%x: {tensor(t, dims)}, %init: tensor<{e}>) -> {tensor(t, out)} {{
  %0 = "stablehlo.reduce_window"(%x, %init) <{{base_dilations = {arr(base)},
      padding = {pads}, window_dilations = {arr(wdil)}, window_dimensions = {arr(window)},
      window_strides = {arr(strides)}}}> ({{
  ^bb0(%a: tensor<{e}>, %b: tensor<{e}>):
    %1 = stablehlo.{op} %a, %b : tensor<{e}>
    stablehlo.return %1 : tensor<{e}>
  }}) : ({tensor(t, dims)}, tensor<{e}>) -> {tensor(t, out)}
  return %0 : {tensor(t, out)}
}}"""


def scalar(t: ET, v: Any) -> np.ndarray:
    if t is ET.BF16:
        return np.asarray(v, np.float32).astype(ml_dtypes.bfloat16)
    return np.asarray(v).astype(t.dtype)


IDENTITY = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf}

#: (dims, window, strides, base dilations, window dilations, padding)
CONFIGS = [
    ((2, 6, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), None, None, None),            # NHWC pool
    ((2, 3, 7, 5), (1, 1, 3, 3), (1, 1, 2, 2), None, None, [(0, 0), (0, 0), (1, 1), (1, 1)]),
    ((5, 7), (3, 2), (2, 1), (2, 1), (1, 2), [(2, 1), (0, 3)]),             # dilations
    ((4, 9), (2, 3), (1, 2), None, None, [(-1, 2), (1, -2)]),                # negative padding
    ((13,), (13,), None, None, None, [(12, 0)]),                             # cumulative
    ((4, 6), (1, 6), None, None, None, [(0, 0), (5, 0)]),                    # cumsum axis 1
    ((6, 4), (6, 1), None, None, None, [(0, 5), (0, 0)]),                    # reverse
    ((0, 5), (1, 2), None, None, None, [(1, 1), (0, 0)]),                    # empty operand
    ((3, 0), (1, 1), None, None, None, None),                                # empty result
    ((4,), (7,), (2,), None, None, [(3, 3)]),                                # window > operand
]


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op", ["add", "maximum", "minimum", "multiply"])
@pytest.mark.parametrize("k", range(len(CONFIGS)))
def test_reduce_window(t: ET, op: str, k: int) -> None:
    dims, window, strides, base, wdil, padding = CONFIGS[k]
    init = IDENTITY[op]
    if t.is_integer:
        init = {np.inf: 2 ** 31 - 1, -np.inf: -2 ** 31}.get(init, init)
    x = data(t, dims, seed=k)
    text = reduce_window(t, dims, op, window, strides, base, wdil, padding)
    check(text, [x, scalar(t, init)], "reduce_window")


@pytest.mark.parametrize("t", [ET.F32, ET.S32, ET.BF16])
@pytest.mark.parametrize("init", [5, -0.0, 0.0])
def test_cumulative_any_init(t: ET, init: float) -> None:
    """A non-identity init counts once per padding position (no running scan then); -0.0 is
    not idempotent under add on floats either (-0 + -0 = -0, but +0 init differs)."""
    x = data(t, (3, 9), seed=3)
    text = reduce_window(t, (3, 9), "add", (1, 9), padding=[(0, 0), (8, 0)])
    check(text, [x, scalar(t, init)], "reduce_window")


@pytest.mark.parametrize("op", ["and", "or"])
@pytest.mark.parametrize("t", [ET.PRED, ET.S8, ET.U32])
def test_reduce_window_bitwise(op: str, t: ET) -> None:
    x = data(t, (5, 6), seed=7)
    init = scalar(t, 0 if op == "or" else (True if t is ET.PRED else -1 if t.is_signed
                                           else 2 ** 32 - 1))
    text = reduce_window(t, (5, 6), op, (2, 3), (1, 2), padding=[(1, 0), (0, 2)])
    check(text, [x, init], "reduce_window")


def test_rank0_reduce_window() -> None:
    text = reduce_window(ET.F32, (), "add", ())
    check(text, [np.float32(2.5), np.float32(1.25)], "reduce_window")


def test_pooling_threads_do_not_change_bits() -> None:
    """A big pooling splits over threads; the bits never depend on the thread count."""
    dims = (8, 64, 64, 16)
    x = data(ET.F32, dims, seed=1)
    text = reduce_window(ET.F32, dims, "add", (1, 3, 3, 1), (1, 2, 2, 1),
                         padding=[(0, 0), (1, 1), (1, 1), (0, 0)])
    one = check(text, [x, np.float32(0)], "reduce_window", num_threads=1)
    two = check(text, [x, np.float32(0)], "reduce_window", num_threads=2)
    same(one, two)


def test_reduce_window_explain_names_it_native() -> None:
    text = reduce_window(ET.F32, (4, 4), "maximum", (2, 2), (2, 2))
    exe = xlapy.compile(text, backend="cpu")
    assert "native reduce_window" in exe._exe.explain()


VARIADIC = """
func.func @main(%x: tensor<{n}x6xf32>, %y: tensor<{n}x6xi32>)
    -> (tensor<{m}x6xf32>, tensor<{m}x6xi32>) {{
  %c = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %d = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = "stablehlo.reduce_window"(%x, %y, %c, %d) <{{window_dimensions = array<i64: {w}, 1>,
      padding = dense<[[{lo}, 0], [0, 0]]> : tensor<2x2xi64>}}> ({{
  ^bb0(%a: tensor<f32>, %b: tensor<i32>, %e: tensor<f32>, %f: tensor<i32>):
    %1 = stablehlo.compare GE, %a, %e, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %1, %a, %e : tensor<i1>, tensor<f32>
    %3 = stablehlo.select %1, %b, %f : tensor<i1>, tensor<i32>
    stablehlo.return %2, %3 : tensor<f32>, tensor<i32>
  }}) : (tensor<{n}x6xf32>, tensor<{n}x6xi32>, tensor<f32>, tensor<i32>)
      -> (tensor<{m}x6xf32>, tensor<{m}x6xi32>)
  return %0#0, %0#1 : tensor<{m}x6xf32>, tensor<{m}x6xi32>
}}"""


@pytest.mark.parametrize(("n", "w", "lo"), [(9, 3, 0), (9, 9, 8), (12, 2, 1)])
def test_variadic_reduce_window(n: int, w: int, lo: int) -> None:
    """Several operands (a windowed argmax; the cumulative form too): a TupleKernel."""
    m = lo + n - w + 1
    x = (data(ET.F32, (n, 6), seed=n) % 3).astype(np.float32)
    y = np.arange(n * 6, dtype=np.int32).reshape(n, 6)
    check(VARIADIC.format(n=n, m=m, w=w, lo=lo), [x, y], "reduce_window")


COMPLEX_WINDOW = """
func.func @main(%x: tensor<4xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
  %c = stablehlo.constant dense<(OP_INIT, 0.0)> : tensor<complex<f32>>
  %0 = "stablehlo.reduce_window"(%x, %c) <{window_dimensions = array<i64: 2>,
      window_strides = array<i64: 2>}> ({
  ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
    %1 = stablehlo.OP %a, %b : tensor<complex<f32>>
    stablehlo.return %1 : tensor<complex<f32>>
  }) : (tensor<4xcomplex<f32>>, tensor<complex<f32>>) -> tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>
}"""


def test_complex_add_window_runs_as_windows_of_its_parts() -> None:
    """An adding complex window is two real ones (passes/complex_windows.py): native, the
    interpreter's bits (it ran on the interpreter before)."""
    text = COMPLEX_WINDOW.replace("OP_INIT", "0.0").replace("OP", "add")
    x = (np.arange(4) + 1j * np.arange(4)[::-1]).astype(np.complex64)
    exe = xlapy.compile(text, backend="cpu")
    same(exe(x), xlapy.compile(text)(x))
    assert not exe._exe.fallbacks()


def test_complex_multiply_window_falls_back_loudly() -> None:
    """Windows the emitters do not handle (a complex product) stay an interpreter fallback,
    listed by fallbacks()."""
    text = COMPLEX_WINDOW.replace("OP_INIT", "1.0").replace("OP", "multiply")
    x = (np.arange(4) + 1j).astype(np.complex64)
    exe = xlapy.compile(text, backend="cpu")
    same(exe(x), xlapy.compile(text)(x))
    assert "reduce_window" in {o for _, o in exe._exe.fallbacks()}


# ---- select_and_scatter ----
def select_and_scatter(t: ET, dims: Sequence[int], window: Sequence[int],
                       strides: Sequence[int], padding: Sequence[tuple[int, int]],
                       direction: str = "GE") -> tuple[str, list[int]]:
    src = []
    for n, w, s, (lo, hi) in zip(dims, window, strides, padding):
        padded = lo + n + hi
        src.append(0 if padded <= 0 or w > padded else (padded - w) // s + 1)
    e = MLIR[t]
    kind = "SIGNED" if t.is_integer else "FLOAT"
    pad = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    text = f"""
func.func @main(%x: {tensor(t, dims)}, %s: {tensor(t, src)}, %i: tensor<{e}>)
    -> {tensor(t, dims)} {{
  %0 = "stablehlo.select_and_scatter"(%x, %s, %i) <{{
      padding = dense<[{pad}]> : tensor<{len(dims)}x2xi64>,
      window_dimensions = {arr(window)}, window_strides = {arr(strides)}}}> ({{
  ^bb0(%a: tensor<{e}>, %b: tensor<{e}>):
    %1 = stablehlo.compare {direction}, %a, %b, {kind} : (tensor<{e}>, tensor<{e}>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }}, {{
  ^bb0(%a: tensor<{e}>, %b: tensor<{e}>):
    %1 = stablehlo.add %a, %b : tensor<{e}>
    stablehlo.return %1 : tensor<{e}>
  }}) : ({tensor(t, dims)}, {tensor(t, src)}, tensor<{e}>) -> {tensor(t, dims)}
  return %0 : {tensor(t, dims)}
}}"""
    return text, src


SAS_CONFIGS = [
    ((2, 6, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), [(0, 0)] * 4),
    ((2, 7, 5, 3), (1, 3, 3, 1), (1, 2, 2, 1), [(0, 0), (1, 1), (1, 1), (0, 0)]),  # overlap
    ((6, 5), (3, 2), (1, 1), [(2, 0), (0, 1)]),
    ((4, 4), (5, 5), (1, 1), [(1, 0), (0, 1)]),                                 # > operand
    ((0, 4), (1, 2), (1, 2), [(0, 0), (0, 0)]),
]


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("direction", ["GE", "GT"])
@pytest.mark.parametrize("k", range(len(SAS_CONFIGS)))
def test_select_and_scatter(t: ET, direction: str, k: int) -> None:
    dims, window, strides, padding = SAS_CONFIGS[k]
    text, src = select_and_scatter(t, dims, window, strides, padding, direction)
    x = data(t, dims, seed=k)
    if t.is_integer:  # ties: the earlier window position wins with GE, the later with GT
        x = (x % 3).astype(x.dtype)
    s = data(t, src, seed=k + 10)
    check(text, [x, s, scalar(t, 1)], "select_and_scatter")


def test_max_pool_gradient_from_jax() -> None:
    jax = pytest.importorskip("jax")
    from jax import lax

    x = data(ET.F32, (2, 9, 9, 4), seed=2)

    def f(a: Any) -> Any:
        return jax.numpy.sum(lax.reduce_window(a, -np.inf, lax.max, (1, 3, 3, 1),
                                               (1, 2, 2, 1), "SAME") ** 2)

    text = jax.jit(jax.grad(f)).lower(x).as_text()
    check(text, [x], "select_and_scatter")


def test_select_and_scatter_threads_do_not_change_bits() -> None:
    """Overlapping 3x3 windows (several updates to one target, applied in source order) over
    a batch that splits over threads: the interpreter's bits for any thread count."""
    dims, window, strides = (8, 33, 33, 16), (1, 3, 3, 1), (1, 2, 2, 1)
    text, src = select_and_scatter(ET.F32, dims, window, strides, [(0, 0)] * 4)
    x = (data(ET.F32, dims, seed=3) * 4).round()  # ties: the earlier position wins
    s = data(ET.F32, src, seed=4)
    one = check(text, [x, s, np.float32(0)], "select_and_scatter", num_threads=1)
    two = check(text, [x, s, np.float32(0)], "select_and_scatter", num_threads=2)
    same(one, two)


@pytest.mark.parametrize(("t", "op"), [(ET.F32, "add"), (ET.F64, "multiply"), (ET.S32, "add"),
                                       (ET.F32, "maximum"), (ET.BF16, "minimum")])
def test_reverse_cumulative_is_a_suffix_scan(t: ET, op: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """jnp.cumsum(reverse=True) (high padding n - 1): the scan path, not a fold of every
    suffix (300 x 70 f32: n^2 / 2 adds a column; jax's 1024 x 512 ran 17.9 ms against XLA's
    1.9, now 0.57). Exact for integers; floats fold in XLA CPU's order (cumulative_emit.py:
    test_cumulative_emit holds the bits), max/min exact, add/multiply within the
    interpreter's left-fold error."""
    from xlapy.backends.cpu import window_emit

    calls: list[bool] = []
    real = window_emit.ReduceWindowEmitter._scan

    def spy(self, axis, rev, *a):  # type: ignore[no-untyped-def]
        calls.append(rev)
        return real(self, axis, rev, *a)

    monkeypatch.setattr(window_emit.ReduceWindowEmitter, "_scan", spy)
    n = 300
    x = data(t, (n, 70), seed=11)
    if op == "multiply":
        x = (1 + np.asarray(x) * 1e-3).astype(x.dtype)
    init = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf}[op]
    text = reduce_window(t, (n, 70), op, (n, 1), padding=[(0, n - 1), (0, 0)])
    got = xlapy.compile(text, backend="cpu")(x, scalar(t, init))
    want = xlapy.compile(text)(x, scalar(t, init))
    assert calls == [True]
    if t.is_float and op in ("add", "multiply"):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-5 if t is ET.F32 else 1e-12, atol=1e-4)
    else:
        same(got, want)


def test_reverse_cumulative_with_a_non_identity_init_folds_exactly() -> None:
    """init op init != init: every padding position counts (the per-element fold): bits."""
    x = data(ET.F32, (3, 9), seed=4)
    text = reduce_window(ET.F32, (3, 9), "add", (1, 9), padding=[(0, 0), (0, 8)])
    check(text, [x, scalar(ET.F32, 5)], "reduce_window")


#: Wide last dimensions, windowed: columns fold a vector at a time (window_emit
#: _fold_vectors: a contiguous load, every stride-th element), the rest one at a time.
#: (dims, window, strides, window dilations, padding)
WIDE = [
    ((2, 3, 9, 67), (1, 1, 3, 3), (1, 1, 2, 2), None, [(0, 0), (0, 0), (0, 1), (0, 1)]),
    ((3, 70), (2, 3), (1, 3), None, [(1, 0), (2, 2)]),
    ((2, 83), (1, 4), (1, 4), None, [(0, 0), (3, 0)]),
    ((2, 75), (2, 2), (1, 1), (1, 3), [(0, 1), (1, 1)]),
    ((2, 61), (1, 3), (1, 2), (1, 2), None),
]


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16])
@pytest.mark.parametrize("op", ["maximum", "minimum", "add", "multiply"])
@pytest.mark.parametrize("k", range(len(WIDE)))
def test_wide_rows_fold_as_vectors(t: ET, op: str, k: int) -> None:
    """NCHW max pooling 3 x 3 / 2 ran its columns one at a time (2.9 ms against XLA's 2.2
    for 16 x 32 x 64 x 64): bit for bit the interpreter's fold, NaN, +-0 and infinities
    included (util.values), with strides 1-4 and dilated windows on the last dimension."""
    from xlapy.backends.cpu.lanes import vector_width

    dims, window, strides, wdil, padding = WIDE[k]
    x = data(t, dims, seed=k + 40)
    text = reduce_window(t, dims, op, window, strides, None, wdil, padding)
    check(text, [x, scalar(t, IDENTITY[op])], "reduce_window")
    check(text, [x, scalar(t, -0.0)], "reduce_window")
    ir_text = xlapy.compile(text, backend="cpu")._exe.kernel_ir  # type: ignore[attr-defined]
    vectors = t in (ET.F32, ET.F64) and vector_width() >= 4
    assert ('"jv.body"' in ir_text) == vectors
