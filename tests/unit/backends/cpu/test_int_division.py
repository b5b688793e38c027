"""int_division.py: integer divide and remainder kernels of 8-32-bit lanes divide in f32 / f64
(no scalar idiv a lane) and give the interpreter's bits on every type, sign, zero divisor and
the smallest signed value over -1; 64-bit lanes and constant divisors keep the integer ops."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

TYPES = {"s8": np.int8, "u8": np.uint8, "s16": np.int16, "u16": np.uint16, "s32": np.int32,
         "u32": np.uint32, "s64": np.int64, "u64": np.uint64}


def _operands(dtype: type, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random values of the whole range, small divisors, zeros, -1, the extremes; and every
    pair of the extremes and small values against each other."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    edge = np.array(sorted({info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2, 3, 7,
                            info.max // 2, info.max // 3} | ({-1, -2, -3, -7, info.min // 3}
                                                            if info.min else set())), dtype)
    x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    small = rng.integers(max(info.min, -40), 41, n // 2).astype(dtype)
    y[: n // 2] = small  # quotients of every size
    ex, ey = (g.ravel() for g in np.meshgrid(edge, edge))
    return np.concatenate([x, ex]), np.concatenate([y, ey])


def _program(op: str, t: str, n: int, constant: int | None = None) -> str:
    rhs = f"%y = {t}[{n}] parameter(1)" if constant is None else \
        f"%c = {t}[] constant({constant})\n  %y = {t}[{n}] broadcast(%c), dimensions={{}}"
    return (f"HloModule m\nENTRY e {{\n  %x = {t}[{n}] parameter(0)\n  {rhs}\n"
            f"  ROOT %r = {t}[{n}] {op}(%x, %y)\n}}\n")


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("op", ["divide", "remainder"])
def test_the_interpreters_bits(op: str, t: str) -> None:
    x, y = _operands(TYPES[t], 4000)
    n = x.size
    text = _program(op, t, n)
    cpu = xlapy.compile(text, backend="cpu")
    want = xlapy.compile(text, backend="interpreter")(x, y)
    np.testing.assert_array_equal(cpu(x, y), want)
    assert not cpu._exe.fallbacks()
    ir_text = cpu._exe.kernel_ir
    wide = np.dtype(TYPES[t]).itemsize == 8
    floated = "fdiv <" in ir_text  # the vector loop divides floats
    assert floated != wide, ir_text[:2000]
    if not wide:  # (the scalar remainder loop keeps the integer instruction)
        assert f"{'s' if t[0] == 's' else 'u'}div <" not in ir_text


@pytest.mark.parametrize(("t", "c"), [("s32", 7), ("u16", 3), ("s8", -5)])
def test_a_constant_divisor_keeps_the_integer_op(t: str, c: int) -> None:
    """LLVM turns a constant divisor into a multiply and shifts, faster than a division."""
    x, _ = _operands(TYPES[t], 1000)
    text = _program("divide", t, x.size, c)
    cpu = xlapy.compile(text, backend="cpu")
    np.testing.assert_array_equal(cpu(x), xlapy.compile(text, backend="interpreter")(x))
    assert "fdiv <" not in cpu._exe.kernel_ir
