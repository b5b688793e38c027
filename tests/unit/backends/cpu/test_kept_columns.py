"""Reductions keeping several dimensions after their reduced run, the last narrow, reduced
with those merged (kept_columns.py): jnp.max(x, 0) of f32[300, 1000, 7] ran 3.2 ms (XLA
0.29-0.41) with 7 of 16 lanes behind a loop over 1000, now ~0.3; the interpreter's bits."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.kept_columns import _plan

RED = """
func.func @main(%x: tensor<{shape}x{t}>, %i: tensor<{t}>) -> tensor<{out}x{t}> {{
  %r = stablehlo.reduce(%x init: %i) applies stablehlo.{op} across dimensions = [{dims}]
    : (tensor<{shape}x{t}>, tensor<{t}>) -> tensor<{out}x{t}>
  return %r : tensor<{out}x{t}>
}}
"""
_DT = {"f32": np.float32, "i32": np.int32, "f64": np.float64}


def _text(shape: tuple[int, ...], dims: tuple[int, ...], t: str, op: str) -> str:
    out = [n for d, n in enumerate(shape) if d not in dims]
    return RED.format(shape="x".join(map(str, shape)), out="x".join(map(str, out)), t=t,
                      op=op, dims=", ".join(map(str, dims)))


@pytest.mark.parametrize(("shape", "dims"), [((300, 100, 7), (0,)), ((4, 50, 10, 3), (1,)),
                                             ((6, 5, 40, 2, 3), (1, 2)), ((37, 9, 5), (0,))])
@pytest.mark.parametrize(("t", "op"), [("f32", "maximum"), ("f32", "add"), ("i32", "add"),
                                       ("f64", "minimum")])
def test_merged_reductions_keep_their_bits(shape: tuple[int, ...], dims: tuple[int, ...],
                                           t: str, op: str) -> None:
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 100).astype(_DT[t])
    init = np.array(-3 if op == "maximum" else 0, _DT[t])
    text = _text(shape, dims, t, op)
    prog = xlapy.compile(text, backend="cpu")
    reduces = [i for i in prog._exe.comp.instructions if i.opcode == "reduce"]
    assert reduces and all(r.operands[0].shape.dimensions[-1] != shape[-1] for r in reduces)
    got = np.asarray(prog(x, init))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    if t == "f32" and op == "add":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
    else:
        np.testing.assert_array_equal(got, want)


def test_which_reductions_merge() -> None:
    from xlapy.stablehlo import parse_module

    def plan(shape: tuple[int, ...], dims: tuple[int, ...], t: str = "f32") -> object:
        m = parse_module(_text(shape, dims, t, "add"))
        (r,) = [i for i in m.entry.instructions if i.opcode == "reduce"]
        return _plan(r)

    assert plan((300, 1000, 7), (0,)) == (0, 1)
    assert plan((4, 300, 10, 3), (1,)) == (1, 2)
    assert plan((300, 7), (0,)) is None  # one kept dimension: narrow_columns'
    assert plan((300, 10, 16), (0,)) is None  # a whole vector of columns already
    assert plan((300, 10, 7), (0, 2)) is None  # not one run
    assert plan((300, 10, 7), (1,)) is None  # one kept dimension after the run
