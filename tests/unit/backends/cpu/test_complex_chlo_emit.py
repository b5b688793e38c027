"""Complex chlo.asin / acos / asinh / acosh / atanh / atan compile to native kernels
(complex_chlo_emit.py) with the interpreter's bits (ops/complex_chlo.py): every pair of
edge parts (0, -0, +-1, 1 -+ ulp, the smallest normal, denormals, the largest finite,
huge, tiny, +-inf, NaN: the axes, branch cuts and overflow corners), then random parts over
every magnitude and in [-2, 2]^2."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fallbacks import fallback_ops
from tests.unit.backends.cpu.util import module, op, run_both
from xlapy.types import ElementType as ET
from xlapy.types import Shape

OPS = ("chlo.asin", "chlo.acos", "chlo.asinh", "chlo.acosh", "chlo.atanh", "chlo.atan")


def _inputs(dt: type, n: int = 2000) -> np.ndarray:
    part = np.float32 if dt == np.complex64 else np.float64
    f = np.finfo(part)
    eps = float(f.eps)
    edge = [0.0, -0.0, 1.0, -1.0, 1 + eps, 1 - eps / 2, -1 - eps, 0.5, -0.5, 2.0, 1e-3,
            float(f.tiny), -float(f.tiny), float(f.tiny) / 2, float(f.max), -float(f.max),
            float(np.sqrt(f.max)), 1e-20, 1e20, np.inf, -np.inf, np.nan]
    re = np.repeat(edge, len(edge))
    im = np.tile(edge, len(edge))
    rng = np.random.default_rng(15)
    top = int(np.log10(f.max))

    def spread() -> np.ndarray:
        return rng.standard_normal(n) * 10.0 ** rng.integers(-top, top, n)

    z = np.empty(len(re) + 2 * n, dt)
    z.real = np.concatenate([re, spread(), rng.uniform(-2, 2, n)])
    z.imag = np.concatenate([im, spread(), rng.uniform(-2, 2, n)])
    return z


@pytest.mark.parametrize("t", [ET.C64, ET.C128], ids=lambda t: t.value)
@pytest.mark.parametrize("name", OPS)
def test_native_and_bit_exact(name: str, t: ET) -> None:
    x = _inputs(t.dtype.type)
    mod = module([Shape.array(t, x.shape)], lambda c, p: op(c, name, p))
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, [x])
    assert not fallback_ops(exe)
    ref, got = np.asarray(ref), np.asarray(got)
    ints = np.int32 if t is ET.C64 else np.int64
    for part in ("real", "imag"):
        g, w = np.ascontiguousarray(getattr(got, part)), np.ascontiguousarray(getattr(ref, part))
        ok = (g.view(ints) == w.view(ints)) | (np.isnan(g) & np.isnan(w))
        assert ok.all(), (part, x[~ok][:5], w[~ok][:5], g[~ok][:5])
