"""Every element-wise op of the op table, on every element type it accepts, compiles on
the cpu backend with no interpreter fallback outside tests/fallbacks.py's ALLOWED (issue
13: a fallback is a missing feature). One small module per (op, type); a new op or type
without a kernel fails here, by name.

f8e8m0fnu (no sign, no zero: a power of two or NaN) has no kernel storage yet
(elementwise.SUPPORTED: every op on it falls back, converts included); it is listed in
NOT_NATIVE and checked to still fall back on `add`, so that making it native shows up here
as a test to update (chlo.conj, identity on reals, is native for it: no instruction
remains). The other MX types (f4e2m1fn, f6e2m3fn, f6e3m2fn) are native (test_mx_types.py)."""

from __future__ import annotations

import warnings

import pytest

from tests.fallbacks import allowed, fallback_ops
from tests.unit.backends.cpu.util import module, op
from xlapy.backends.cpu import CpuBackend
from xlapy.ops.base import OPS
from xlapy.ops.elementwise import ElementwiseOp
from xlapy.types import ElementType as ET
from xlapy.types import Shape

#: Types no cpu kernel stores yet (see the module docstring).
NOT_NATIVE = frozenset({ET.F8E8M0FNU})
ELEMENTWISE = sorted(name for name, d in OPS.items() if isinstance(d, ElementwiseOp))


def _fallbacks(name: str, t: ET) -> list[str]:
    d = OPS[name]
    mod = module([Shape.array(t, (4,))] * d.arity, lambda c, p: op(c, name, p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = CpuBackend().compile(mod)
    return [key for _, key in fallback_ops(exe) if not allowed(key)]


def test_the_table_has_elementwise_ops() -> None:
    assert len(ELEMENTWISE) > 50 and {"add", "chlo.asin", "popcnt"} <= set(ELEMENTWISE)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_no_fallback_for_any_type(name: str) -> None:
    types = sorted(OPS[name].types, key=lambda t: t.value)
    bad = {t.value: fb for t in types if t not in NOT_NATIVE and (fb := _fallbacks(name, t))}
    assert not bad, f"{name} runs on the interpreter inside the cpu backend for {bad}"


@pytest.mark.parametrize("t", sorted(NOT_NATIVE, key=lambda t: t.value), ids=lambda t: t.value)
def test_not_native_types_still_fall_back(t: ET) -> None:
    """When a kernel learns one of these types, drop it from NOT_NATIVE (and this fails)."""
    assert _fallbacks("add", t)
