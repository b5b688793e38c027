"""Complex atan2, cbrt and remainder in cpu kernels (elementwise_complex.py) against the
interpreter on the special-value grid of test_complex.py and 1000 random values, and never
on the interpreter fallback.

The kernels follow the interpreter's formulas step by step, but not bit for bit: numpy's
complex multiply loop contracts to FMA on hosts with FMA (the kernels' products are
textbook, as XLA's), its float32 sin/cos are its own, and a kernel runs with DAZ/FTZ where
numpy keeps denormal intermediates (those points are left out). Measured on the Zen 3
(normwise error, in ulp of the part type; c64 / c128): atan2 2.0 / 1.8 relative to
max(|result|, 1); cbrt 0.96 / 0 relative to |result|; remainder 0.92 / 0.75 relative to
max(|x|, |y|) where no part of x / y is within 1e-3 of an integer (trunc jumps there).
The bound is 16 ulp.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.backends.cpu.test_complex import TYPES, _ctype, _grid, _run, _tensor


def _values(name: str) -> tuple[np.ndarray, np.ndarray]:
    dt = TYPES[name][0]
    x, y = _grid(dt)
    rng = np.random.default_rng(11)
    r = [(rng.standard_normal(1000) * 4 + 1j * rng.standard_normal(1000) * 4).astype(dt)
         for _ in range(2)]
    return np.concatenate([x, r[0]]), np.concatenate([y, r[1]])


def _scale(opcode: str, x: np.ndarray, y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    if opcode == "atan2":
        return np.maximum(np.abs(ref), 1.0)
    if opcode == "cbrt":
        return np.abs(ref)
    return np.maximum(np.abs(x), np.abs(y))


def _compared(opcode: str, x: np.ndarray, y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Where the interpreter's result is finite and no input part is denormal (flushed by
    the kernel, kept by numpy); for remainder, where trunc(x / y) is not at a jump."""
    tiny = np.finfo(x.real.dtype).tiny
    parts = [x.real, x.imag, y.real, y.imag]
    keep = np.isfinite(ref.real) & np.isfinite(ref.imag)
    keep &= ~np.any([(p != 0) & (np.abs(p) < tiny) for p in parts], axis=0)
    with np.errstate(all="ignore"):
        if opcode == "atan2":  # the products in x x + y y (FTZ flushes a denormal one)
            prods = [a.astype(np.float64) * b for a in parts for b in parts]
            keep &= ~np.any([(p != 0) & (np.abs(p) < tiny) for p in prods], axis=0)
        if opcode == "remainder":
            q = x.astype(np.complex128) / y
            near = np.minimum(np.abs(q.real - np.round(q.real)), np.abs(q.imag - np.round(q.imag)))
            keep &= near > 1e-3
            # numpy's division scales by 1 / (c + d r): denormal (flushed) for huge y
            keep &= np.abs(y.astype(np.complex128)) < 0.25 / tiny
        big = np.abs(ref.astype(np.complex128)) > 1e-6 if opcode == "cbrt" else True
    return keep & big


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("opcode", ["atan2", "remainder", "cbrt"])
def test_matches_interpreter(name: str, opcode: str) -> None:
    x, y = _values(name)
    t = _tensor(x.shape, _ctype(name))
    if opcode == "cbrt":
        args, sig, operands = [x], f"%a: {t}", "%a"
    else:
        args, sig, operands = [x, y], f"%a: {t}, %b: {t}", "%a, %b"
    text = (f"func.func @main({sig}) -> {t} {{\n"
            f"  %r = stablehlo.{opcode} {operands} : {t}\n  return %r : {t}\n}}")
    (got,), (ref,) = _run(text, args, [opcode])
    keep = _compared(opcode, x, y, ref)
    assert keep[-1000:].mean() > 0.9
    g, r = got.astype(np.complex128)[keep], ref.astype(np.complex128)[keep]
    err = np.abs(g - r) / _scale(opcode, x[keep], y[keep], r) / np.finfo(x.real.dtype).eps
    worst = int(np.argmax(err))
    assert err[worst] <= 16, (f"{opcode} {name}: {err[worst]:.1f} ulp at {x[keep][worst]}, "
                              f"{y[keep][worst]}: ours {g[worst]} interpreter {r[worst]}")
