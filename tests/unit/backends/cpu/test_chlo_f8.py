"""chlo element-wise ops on the f8 types run natively on cpu (computed in f32 and rounded
back: passes/chlo_narrow.py; next_after on the 8-bit patterns) with the interpreter's bits,
on every f8 value (unary) and every pair of values (next_after). polygamma and zeta: the
cpu's f32 forms (XLA's series, passes/chlo_special.py) and the interpreter's scipy already
differ in f32 at edges (polygamma(1, inf): NaN / 0; zeta(0, 0): inf / NaN), so their f8
results are checked against the cpu's own f32 results rounded to f8 (the widening exact)."""

from __future__ import annotations

import ml_dtypes  # noqa: F401  (the f8 numpy dtypes)
import numpy as np
import pytest

from tests.fallbacks import fallback_ops
from tests.unit.backends.cpu.util import module, op, run_both
from xlapy.backends.cpu import CpuBackend
from xlapy.types import ElementType as ET
from xlapy.types import Shape

F8 = (ET.F8E3M4, ET.F8E4M3, ET.F8E4M3B11FNUZ, ET.F8E4M3FN, ET.F8E4M3FNUZ, ET.F8E5M2,
      ET.F8E5M2FNUZ)
UNARY = ("chlo.acos", "chlo.acosh", "chlo.asin", "chlo.asinh", "chlo.atan", "chlo.atanh",
         "chlo.bessel_i1e", "chlo.cosh", "chlo.digamma", "chlo.erf_inv", "chlo.erfc",
         "chlo.lgamma", "chlo.sinh", "chlo.square")
BINARY = ("chlo.next_after", "chlo.polygamma", "chlo.zeta")


def _all(t: ET) -> np.ndarray:
    return np.arange(256, dtype=np.uint8).view(t.dtype)


def _check(name: str, t: ET, args: list[np.ndarray], via_f32: bool = False) -> None:
    mod = module([Shape.array(t, args[0].shape)] * len(args), lambda c, p: op(c, name, p))
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, args)
        if via_f32:
            wide = module([Shape.array(ET.F32, args[0].shape)] * len(args),
                          lambda c, p: op(c, name, p))
            ref = np.asarray(CpuBackend().compile(wide).run(
                [a.astype(np.float32) for a in args])).astype(t.dtype)
    assert not fallback_ops(exe), fallback_ops(exe)
    ref, got = np.asarray(ref), np.asarray(got)
    nan = np.isnan(ref.astype(np.float32)) & np.isnan(got.astype(np.float32))
    bad = (ref.view(np.uint8) != got.view(np.uint8)) & ~nan
    assert not bad.any(), [(*(a[bad][:5] for a in args), ref[bad][:5], got[bad][:5])]


@pytest.mark.parametrize("t", F8, ids=lambda t: t.value)
@pytest.mark.parametrize("name", UNARY)
def test_unary_on_every_f8_value(name: str, t: ET) -> None:
    _check(name, t, [_all(t)])


@pytest.mark.parametrize("t", F8, ids=lambda t: t.value)
@pytest.mark.parametrize("name", BINARY)
def test_binary_on_f8_pairs(name: str, t: ET) -> None:
    v = _all(t)
    if name != "chlo.next_after":  # polygamma / zeta: 64 values (every 4th bit pattern)
        v = v[::4]
    x, y = np.repeat(v, len(v)), np.tile(v, len(v))
    _check(name, t, [x, y], via_f32=name != "chlo.next_after")
