"""A select by one scalar predicate between arrays, one arm costly (select_emit.py): a branch
around the arms, only the taken one computed, with the bits of that arm's own kernel for
either predicate (the interpreter's within its ulps), on vector and scalar (residue) paths,
in 2-D kernels and inside a loop; cheap arms stay one select."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import select_emit

SELECT = """
func.func public @main(%p: tensor<i1>, %x: tensor<{shape}x{t}>) -> tensor<{shape}x{t}> {{
  %h = stablehlo.constant dense<{half}> : tensor<{shape}x{t}>
  %a = stablehlo.{op} %x : tensor<{shape}x{t}>
  %b = stablehlo.multiply %x, %h : tensor<{shape}x{t}>
  %s = "stablehlo.select"(%p, %a, %b)
    : (tensor<i1>, tensor<{shape}x{t}>, tensor<{shape}x{t}>) -> tensor<{shape}x{t}>
  return %{out} : tensor<{shape}x{t}>
}}
"""

#: lax.fori_loop(0, n, lambda i, w: lax.switch(i % 3, [w * 0.5, w + 1, sin(w)])) as JAX
#: lowers it after conditional_to_select: two nested scalar-predicate selects.
SWITCH_LOOP = """
func.func public @main(%v: tensor<256xf32>) -> tensor<256xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %w = %v) : tensor<i32>, tensor<256xf32>
  cond {
    %n = stablehlo.constant dense<30> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %k = stablehlo.remainder %i, %three : tensor<i32>
    %u = "stablehlo.case"(%k) ({
      %h = stablehlo.constant dense<0.5> : tensor<256xf32>
      %m = stablehlo.multiply %w, %h : tensor<256xf32>
      stablehlo.return %m : tensor<256xf32>
    }, {
      %o = stablehlo.constant dense<1.0> : tensor<256xf32>
      %s = stablehlo.add %w, %o : tensor<256xf32>
      stablehlo.return %s : tensor<256xf32>
    }, {
      %t = stablehlo.sine %w : tensor<256xf32>
      stablehlo.return %t : tensor<256xf32>
    }) : (tensor<i32>) -> tensor<256xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %u : tensor<i32>, tensor<256xf32>
  }
  return %r#1 : tensor<256xf32>
}
"""


def _count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = select_emit._branch

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(select_emit, "_branch", spy)
    return calls


def _values(shape: tuple[int, ...], dtype: object) -> np.ndarray:
    x = (np.random.default_rng(7).standard_normal(shape) * 4).astype(dtype)
    flat = x.reshape(-1)
    flat[:5] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype)
    if dtype == np.float32:
        flat[5] = np.float32(1e-40)  # a denormal (flushed alike on both sides)
    return x


def _check(shape: tuple[int, ...], t: str, op: str, x: np.ndarray, threads: int = 1) -> None:
    """The select's bits are its taken arm's (each arm compiled alone) for either
    predicate, and within the interpreter's ulps."""
    fmt = dict(shape="x".join(map(str, shape)), t=t, op=op, half="0.5")
    opts = {"num_threads": threads, "split_cost": 1}
    prog = xlapy.compile(SELECT.format(out="s", **fmt), backend="cpu", options=opts)
    ref = xlapy.compile(SELECT.format(out="s", **fmt), backend="interpreter")
    for p, arm in ((True, "a"), (False, "b")):
        alone = xlapy.compile(SELECT.format(out=arm, **fmt), backend="cpu", options=opts)
        got = prog(np.array(p), x)
        want = alone(np.array(p), x)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        np.testing.assert_allclose(got.astype(np.float64),
                                   ref(np.array(p), x).astype(np.float64), rtol=1e-2 if
                                   t == "bf16" else 1e-6, atol=0)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1024,), (37,), (33, 67)])
@pytest.mark.parametrize("op", ["sine", "exponential", "tanh"])
def test_scalar_select_branches_with_the_taken_arms_bits(
        threads: int, shape: tuple[int, ...], op: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    _check(shape, "f32", op, _values(shape, np.float32), threads)
    assert calls[0] >= 1  # the select was emitted as a branch


def test_bf16_arms_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    import ml_dtypes

    calls = _count(monkeypatch)
    _check((300,), "bf16", "sine", _values((300,), ml_dtypes.bfloat16))
    assert calls[0] >= 1


def test_cheap_arms_stay_one_select(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    _check((1024,), "f32", "negate", _values((1024,), np.float32))
    assert calls[0] == 0


def test_switch_in_a_loop_runs_natively_and_branches(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    v = _values((256,), np.float32)
    prog = xlapy.compile(SWITCH_LOOP, backend="cpu")
    np.testing.assert_array_equal(prog(v), xlapy.compile(SWITCH_LOOP,
                                                         backend="interpreter")(v))
    assert calls[0] >= 1 and not prog._exe.fallbacks()
