"""test_interpret.FTZ_EXPECTED against XLA itself: each conformance chunk whose expected
values the ftz mode replaces with XLA CPU's is run by XLA's CPU backend (its check op turned
into the function's result), and XLA's result must be the replaced expected value, bit for
bit (NaN == NaN)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.conformance import test_interpret as conf
from tests.differential.compare import jax_x64

_CHECK_CONST = re.compile(
    r"^\s*check\.expect_\w+_const (%\w+), (dense<.*>) : (tensor<[^>]*>)\s*$", re.M)
_FUNC = re.compile(r"func\.func @\w+\(\)")


def _xla_result(text: str) -> np.ndarray:
    """Run the chunk's function on XLA CPU, returning the value its check op checks."""
    jax_x64()
    from jax._src.lib import xla_client as xc
    from jax.extend import backend

    (value, _, ty), = [m.groups() for m in _CHECK_CONST.finditer(text)]
    body = _CHECK_CONST.sub(f"  func.return {value} : {ty}", text)
    body = re.sub(r"^\s*func\.return\s*$", "", body, flags=re.M)
    body = _FUNC.sub(f"func.func public @main() -> {ty}", body, count=1)
    be = backend.get_backend()
    exe = be.compile_and_load(body, xc.DeviceList(tuple(be.devices()[:1])),
                              xc.CompileOptions())
    return np.asarray(exe.execute([])[0])


def _literal(text: str) -> np.ndarray:
    """The ftz mode's expected value of the chunk, read by xlapy."""
    import xlapy

    (_, lit, ty), = [m.groups() for m in _CHECK_CONST.finditer(text)]
    module = (f"func.func @main() -> {ty} {{\n  %0 = stablehlo.constant {lit} : {ty}\n"
              f"  func.return %0 : {ty}\n}}")
    return np.asarray(xlapy.compile(module, backend="interpreter")())


@pytest.mark.parametrize("cid", sorted(conf.FTZ_EXPECTED))
def test_ftz_expected_is_xlas_result(cid: str) -> None:
    text = next(t for c, t, _ in conf.CHUNKS if c == cid)
    got = _xla_result(text)
    want = _literal(conf.ftz_text(cid, text))
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (np.isnan(g) & np.isnan(w)) | (g == w)
    assert same.all(), f"{cid}: XLA gives {got}, FTZ_EXPECTED says {want}"
    # ... and the spec's expected value is not XLA's (the entry is needed).
    spec = _literal(text).astype(np.float64)
    assert not ((np.isnan(g) & np.isnan(spec)) | (g == spec)).all()
