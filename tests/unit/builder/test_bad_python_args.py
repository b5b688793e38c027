"""Builder ops given values of the wrong Python type report a BuilderError naming the op
(found by tests/fuzz/builder_fuzz.py), never a TypeError/AttributeError from inside xlapy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from xlapy.builder import XlaBuilder, ops
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape

F32_2 = Shape.array(ElementType.F32, (2,))


def _add() -> Any:
    b = XlaBuilder("add")
    ops.Add(ops.Parameter(b, 0, Shape.array(ElementType.F32, ())),
            ops.Parameter(b, 1, Shape.array(ElementType.F32, ())))
    return b.build()


CASES: list[tuple[str, Callable[[XlaBuilder, Any], Any]]] = [
    ("CollectivePermute", lambda b, x: ops.CollectivePermute(x, [1, 2])),
    ("Send", lambda b, x: ops.Send(x, F32_2)),
    ("RecvFromHost", lambda b, x: ops.RecvFromHost(ops.CreateToken(b), F32_2, None)),
    ("Call", lambda b, x: ops.Call(b, _add(), x)),
    ("LogicalOr", lambda b, x: ops.LogicalOr(x, {})),
    ("CollectiveBroadcast", lambda b, x: ops.CollectiveBroadcast(x, (), [1])),
    ("Clamp", lambda b, x: ops.Clamp((), x, x)),
    ("Composite", lambda b, x: ops.Composite(b, [x], "c", _add(), (), None)),
]


@pytest.mark.parametrize("name, call", CASES, ids=[c[0] for c in CASES])
def test_wrong_python_value_is_a_builder_error_naming_the_op(name: str, call: Any) -> None:
    b = XlaBuilder("t")
    x = ops.Parameter(b, 0, F32_2)
    call(b, x)  # recorded for build(), as shape errors are
    with pytest.raises(BuilderError, match=f"^{name}: "):
        b.build()
    b2 = XlaBuilder("t2")
    b2.set_die_immediately_on_error(True)
    with pytest.raises(BuilderError, match=f"^{name}: "):
        call(b2, ops.Parameter(b2, 0, F32_2))


def test_no_builder_among_the_arguments_raises_at_once() -> None:
    with pytest.raises(BuilderError, match="^Parameter: bad argument"):
        ops.Parameter(None, 0, F32_2)
    with pytest.raises(BuilderError, match="^Neg: bad argument"):
        ops.Neg(None)


def test_wrong_number_of_arguments_stays_a_type_error() -> None:
    b = XlaBuilder("t")
    with pytest.raises(TypeError):
        ops.Add(ops.Parameter(b, 0, F32_2))  # type: ignore[call-arg]
    assert b.first_error is None


def test_same_padding_with_a_zero_stride_is_a_builder_error() -> None:
    """Found by the builder fuzzer: a ZeroDivisionError inside make_padding."""
    import pytest

    from xlapy.builder import XlaBuilder, ops
    from xlapy.errors import XlapyError
    from xlapy.types import ElementType, Shape

    b = XlaBuilder("conv")
    x = ops.Parameter(b, 0, Shape.array(ElementType.F32, [1, 1, 5, 5]))
    k = ops.Parameter(b, 1, Shape.array(ElementType.F32, [1, 1, 3, 3]))
    ops.Conv(x, k, [0, 1], "SAME")
    with pytest.raises(XlapyError, match="strides >= 1"):
        b.build()


def test_constant_r1_of_an_absurd_length_is_refused_before_allocating() -> None:
    """Found by the builder fuzzer: ConstantR1(b, 2**31, v) allocated (MemoryError, or a
    multi-second hang)."""
    import pytest

    from xlapy.builder import XlaBuilder, ops
    from xlapy.errors import XlapyError

    b = XlaBuilder("big")
    ops.ConstantR1(b, 2 ** 31, 1.0)
    with pytest.raises(XlapyError, match="XLAPY_MAX_LITERAL_BYTES"):
        b.build()
    b = XlaBuilder("negative")
    ops.ConstantR1(b, -3, 1.0)
    with pytest.raises(XlapyError, match="negative"):
        b.build()


def test_constants_that_overflow_their_type_are_builder_errors() -> None:
    """`ConstantR0(b, 1e300, F16)` was inf with only a numpy warning (as out-of-range float
    literals in program text were); inf itself and values that fit stay valid."""
    import numpy as np
    import pytest

    from xlapy.builder import XlaBuilder, ops
    from xlapy.errors import XlapyError
    from xlapy.types import ElementType

    for value, et in [(1e300, ElementType.F16), (1e300, None), (70000, ElementType.F16),
                      (np.array([1.0, 3.5e38]), ElementType.F32)]:
        b = XlaBuilder("big")
        ops.Constant(b, value, et) if isinstance(value, np.ndarray) else \
            ops.ConstantR0(b, value, et)
        with pytest.raises(XlapyError, match="out of range"):
            b.build()
    for value, et in [(np.inf, ElementType.F16), (65504.0, ElementType.F16),
                      (1e-30, ElementType.F16), (-np.inf, None)]:
        b = XlaBuilder("fits")
        ops.ConstantR0(b, value, et)
        b.build()
