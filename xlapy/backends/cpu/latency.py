"""Whether the code being emitted waits on latency rather than throughput: a native loop's
body kernel over a few elements, whose carry waits on every dependent operation (math_poly's
sin / cos / tan then evaluate their polynomials by Estrin's scheme)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

#: Most elements a loop body's kernel walks for its sin / cos / tan to evaluate their
#: polynomials by Estrin's scheme (`latency_bound`).
LATENCY_ELEMENTS = 64
_LATENCY: contextvars.ContextVar[bool] = contextvars.ContextVar("xlapy_math_latency",
                                                                default=False)


def in_loop(env_arg: bool, elements: int) -> contextlib.AbstractContextManager[None]:
    """`latency_bound` for a kernel walking `elements` that a native loop's body runs
    (`env_arg`: fp_env.kernel_mxcsr's), when they are few."""
    return latency_bound(env_arg and elements <= LATENCY_ELEMENTS)


@contextlib.contextmanager
def latency_bound(on: bool) -> Iterator[None]:
    """Inside, sin / cos / tan (f32) evaluate their polynomials by Estrin's scheme: half the
    dependent operations of Horner's rule (a scan stepping a few floats through sin waits on
    it: 22 -> 19.6 ns a step) for two more multiplies (an array's sin, throughput-bound, ran
    ~20 % slower). The bits are Horner's but for a few results in 2^32."""
    token = _LATENCY.set(on)
    try:
        yield
    finally:
        _LATENCY.reset(token)


def bound() -> bool:
    """Whether the kernel being emitted is latency-bound (`latency_bound`)."""
    return _LATENCY.get()


__all__ = ["LATENCY_ELEMENTS", "bound", "in_loop", "latency_bound"]
