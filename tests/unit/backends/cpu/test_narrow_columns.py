"""Column reductions of a narrow last dimension through whole vectors (narrow_columns.py):
`jnp.mean(points, 0)` over [262144, 3] summed each column down its rows one element at a
time (1.1 ms, XLA 0.2-0.7; max 2.8 ms). The interpreter's bits for integer ops and float
max/min (NaN, -0/+0, a non-identity init used once), float sums within rounding; rows past
the last whole group, leading kept dimensions and several reduced dimensions."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.narrow_columns import FoldNarrowColumns, _plan
from xlapy.stablehlo import parse_module

RED = """
func.func @main(%x: tensor<{shape}x{t}>, %i: tensor<{t}>) -> tensor<{out}x{t}> {{
  %r = stablehlo.reduce(%x init: %i) applies stablehlo.{op} across dimensions = [{dims}]
    : (tensor<{shape}x{t}>, tensor<{t}>) -> tensor<{out}x{t}>
  return %r : tensor<{out}x{t}>
}}
"""

_DT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "ui8": np.uint8,
       "i64": np.int64, "complex<f32>": np.complex64, "complex<f64>": np.complex128}


def _program(shape: tuple[int, ...], dims: tuple[int, ...], t: str, op: str) -> str:
    out = [n for d, n in enumerate(shape) if d not in dims]
    return RED.format(shape="x".join(map(str, shape)), out="x".join(map(str, out)), t=t,
                      op=op, dims=", ".join(map(str, dims)))


def _data(shape: tuple[int, ...], t: str, op: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dt = _DT[t]
    if t[0] in "iu":
        hi = 200 if t == "ui8" else 1 << 20
        return rng.integers(0, hi, shape).astype(dt), np.array(3 if op != "minimum" else 250,
                                                                 dt)
    x = rng.standard_normal(shape).astype(dt)
    if t.startswith("complex"):
        return (x + 1j * rng.standard_normal(shape)).astype(dt), np.array(5.0 - 2j, dt)
    if op in ("maximum", "minimum"):
        x[..., 1, 1] = np.nan  # one column is NaN; another holds only zeros of both signs
        x[..., 0] = -0.0
        x[..., ::3, 0] = 0.0
        return x, np.array(0.25, dt)
    if op == "multiply":
        return (1 + x / 64).astype(dt), np.array(1.5, dt)
    return x, np.array(5.0, dt)


@pytest.mark.parametrize("c", [2, 3, 5, 6, 7, 12, 15])
@pytest.mark.parametrize(("t", "op"), [("f32", "add"), ("f32", "maximum"), ("f64", "minimum"),
                                       ("f32", "multiply"), ("i32", "add"), ("ui8", "minimum"),
                                       ("i64", "xor")])
def test_narrow_column_reductions(c: int, t: str, op: str) -> None:
    rows = 4096 + 37  # (37 rows past the last whole group)
    shape = (rows, c)
    x, init = _data(shape, t, op, c)
    text = _program(shape, (0,), t, op)
    prog = xlapy.compile(text, backend="cpu")
    got = np.asarray(prog(x, init))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    if t[0] == "f" and op in ("add", "multiply"):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-3)
    else:
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize(("shape", "dims"), [((4, 1000, 3), (1,)), ((40, 50, 6), (0, 1)),
                                             ((2, 8, 64, 5), (1, 2))])
def test_leading_kept_and_several_reduced_dimensions(shape: tuple[int, ...],
                                                     dims: tuple[int, ...]) -> None:
    for op in ("add", "maximum"):
        x, init = _data(shape, "f32", op, len(shape))
        text = _program(shape, dims, "f32", op)
        got = np.asarray(xlapy.compile(text, backend="cpu")(x, init))
        want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
        if op == "add":
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)
        else:
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _plan_of(shape: tuple[int, ...], dims: tuple[int, ...], t: str = "f32",
             op: str = "add") -> tuple[int, int, int] | None:
    mod = parse_module(_program(shape, dims, t, op))
    return _plan(next(i for i in mod.entry.instructions if i.opcode == "reduce"))


def test_which_reductions_are_rewritten() -> None:
    assert _plan_of((4096, 3), (0,)) == (0, 4096, 16)  # [256, 48], then [16, 3]
    assert _plan_of((4096, 3), (0,), "complex<f32>") == (0, 4096, 8)  # (8 bytes an element)
    assert _plan_of((4096, 3), (0,), "complex<f32>", "multiply") is None
    assert _plan_of((4096, 3), (0,), "f64") == (0, 4096, 8)
    assert _plan_of((4096, 5), (0,), "ui8") == (0, 4096, 64)
    assert _plan_of((4096, 16), (0,)) is None  # a whole vector already
    assert _plan_of((4096, 3), (1,)) is None  # a row reduction
    assert _plan_of((200, 3), (0,)) is None  # too few rows for the groups
    assert _plan_of((64, 64, 3), (0,)) is None  # not the dimensions next to the last


def test_the_pass_splits_the_reduce() -> None:
    mod = parse_module(_program((4096 + 37, 3), (0,), "f32", "maximum"))
    assert FoldNarrowColumns().run(mod)
    kinds = [i.opcode for i in mod.entry.instructions]
    assert kinds.count("reduce") == 3 and "slice" in kinds


#: (x[:, None] ** e[None, :]) summed down its rows: the value broadcast along the columns
#: and the rows, no buffer of its shape (np.polyfit's column norms of a Vandermonde matrix).
VANDER = """
func.func @main(%x: tensor<{n}xf32>, %e: tensor<{c}xf32>) -> tensor<{c}xf32> {{
  %xb = stablehlo.broadcast_in_dim %x, dims = [0] : (tensor<{n}xf32>) -> tensor<{n}x{c}xf32>
  %eb = stablehlo.broadcast_in_dim %e, dims = [1] : (tensor<{c}xf32>) -> tensor<{n}x{c}xf32>
  %p = stablehlo.power %xb, %eb : tensor<{n}x{c}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%p init: %z) applies stablehlo.add across dimensions = [0]
    : (tensor<{n}x{c}xf32>, tensor<f32>) -> tensor<{c}xf32>
  return %r : tensor<{c}xf32>
}}
"""


@pytest.mark.parametrize("c", [3, 6, 10])
def test_broadcast_columns_are_summed_in_rows(c: int) -> None:
    """Its columns are row reductions of the transposed value (rows in lanes: x contiguous,
    e uniform); regrouped into k * c columns each broadcast split its lanes unevenly and the
    kernel ran scalar (c = 6: 0.70 ms, now 0.07; XLA 0.16)."""
    n = 4096 + 5
    text = VANDER.format(n=n, c=c)
    prog = xlapy.compile(text, backend="cpu")
    red = [i for i in prog._exe.comp.instructions if i.opcode == "reduce"]
    assert len(red) == 1 and red[0].operands[0].shape.dimensions == (c, n)
    rng = np.random.default_rng(c)
    x = rng.uniform(-1.5, 1.5, n).astype(np.float32)
    e = np.arange(c, dtype=np.float32)[::-1].copy()
    want = (x.astype(np.float64)[:, None] ** e[None, :]).sum(0)
    np.testing.assert_allclose(prog(x, e), want, rtol=2e-5)
    np.testing.assert_allclose(prog(x, e), xlapy.compile(text, backend="interpreter")(x, e),
                               rtol=2e-5)


def test_a_buffer_of_the_columns_shape_keeps_the_regrouping() -> None:
    """x * 2 of an [n, 3] buffer reads the buffer down its columns if transposed (stride 3):
    regrouped into [n / 16, 48] as before."""
    text = _program((4096, 3), (0,), "f32", "add").replace(
        "%r = stablehlo.reduce(%x", "%two = stablehlo.add %x, %x : tensor<4096x3xf32>\n"
        "  %r = stablehlo.reduce(%two")
    prog = xlapy.compile(text, backend="cpu")
    assert sum(i.opcode == "reduce" for i in prog._exe.comp.instructions) >= 2
    x, init = _data((4096, 3), "f32", "add", 1)
    np.testing.assert_allclose(prog(x, init), 2 * x.astype(np.float64).sum(0) + 5, rtol=1e-5)


@pytest.mark.parametrize(("c", "t"), [(2, "complex<f32>"), (3, "complex<f32>"),
                                      (7, "complex<f32>"), (2, "complex<f64>"),
                                      (3, "complex<f64>")])
def test_narrow_complex_column_sums(c: int, t: str) -> None:
    """Complex sums regroup too (their parts add apart, in any order): a c64[256K, 2] mean
    down its rows took 1.0 ms (XLA 0.19), now 0.40; [256K, 3] 2.1x -> 0.68x XLA's time."""
    shape = (4096 + 37, c)
    x, init = _data(shape, t, "add", c)
    text = _program(shape, (0,), t, "add")
    prog = xlapy.compile(text, backend="cpu")
    assert sum(i.opcode == "reduce" for i in prog._exe.comp.instructions) >= 2
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    np.testing.assert_allclose(np.asarray(prog(x, init)), want, rtol=2e-5, atol=1e-3)


def test_regrouped_rows_read_the_buffer_through_one_reshape() -> None:
    """A narrow column sum long enough for column_sums' two levels regroups the buffer twice
    ([n, 4] -> [n / 4, 16] -> [blocks, block, 16]): one reshape of the buffer, not a chain
    whose kernel divided its index into each shape (scalar code: f32[1M, 4].sum(0) 3.3 ms,
    XLA 2.8; one reshape: 0.8)."""
    text = _program((1 << 14, 4), (0,), "f32", "add")
    prog = xlapy.compile(text, backend="cpu")
    comp = prog._exe.comp
    assert sum(i.opcode == "reduce" for i in comp.instructions) >= 3
    assert not [i for i in comp.instructions
                if i.opcode == "reshape" and i.operands[0].opcode == "reshape"]
    assert " udiv " not in prog._exe.kernel_ir and " urem " not in prog._exe.kernel_ir
    x, init = _data((1 << 14, 4), "f32", "add", 2)
    np.testing.assert_allclose(prog(x, init), x.astype(np.float64).sum(0) + 5, rtol=1e-5)


@pytest.mark.parametrize("t", ["f32", "i32", "complex<f32>"])
def test_rows_past_the_groups_leave_the_buffer_undivided(t: str) -> None:
    """Rows not a multiple of the group (the usual case: [300007, 3]) slice the whole groups
    off the buffer before regrouping them: the kernel read that prefix of the buffer
    through the slice, dividing each index into its shape and back (f32 0.39 ms -> 0.08,
    i32 4.7x XLA's time -> 0.3x, c64[100003, 3] 0.24 -> 0.055 ms)."""
    shape = (3 * 4096 + 7, 3)
    text = _program(shape, (0,), t, "add")
    prog = xlapy.compile(text, backend="cpu")
    assert any(i.opcode == "slice" for i in prog._exe.comp.instructions)
    assert " udiv " not in prog._exe.kernel_ir and " urem " not in prog._exe.kernel_ir
    x, init = _data(shape, t, "add", 5)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    np.testing.assert_allclose(np.asarray(prog(x, init)), want, rtol=2e-5)
