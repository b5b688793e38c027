"""The denormal (subnormal) float mode a program runs in, honoured alike by every backend.

* `ftz` (the default): XLA CPU's behaviour, so jax's results are matched. f32/f64 (and
  complex parts) denormal inputs of arithmetic read as signed zero (DAZ) and denormal results
  become signed zero (FTZ); bit-level ops (negate, abs, select, copies) keep them.
* `ieee`: the StableHLO spec's IEEE-754 arithmetic (its math tests keep subnormals:
  `sqrt(1.4e-45)` is 3.74e-23): nothing is flushed.

A compile takes the mode from its options (`{"denormal": "ieee"}`: `xlapy.compile`, `Client`,
`xlapy run --denormal ieee`); the interpreter's ops and the cpu backend's emitters read it
from `current()`, which the executables set while they compile and run (a context variable,
so threads of a process grid see the mode of the call that started them only where they are
started with a copy of its context).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from xlapy.errors import XlapyError

FTZ = "ftz"
IEEE = "ieee"
MODES = (FTZ, IEEE)
#: The key in compile options.
OPTION = "denormal"

_mode: contextvars.ContextVar[str] = contextvars.ContextVar("xlapy_denormal", default=FTZ)


def current() -> str:
    """The mode in force here: `ftz` unless an executable or `use` set another."""
    return _mode.get()


def flushing() -> bool:
    """Whether denormals are flushed (the `ftz` mode)."""
    return _mode.get() == FTZ


def from_options(options: dict[str, Any] | None) -> str:
    """The mode compile options ask for (`denormal`), else the one in force; a loud error for
    an unknown name."""
    mode = (options or {}).get(OPTION)
    if mode is None:
        return current()
    if mode not in MODES:
        raise XlapyError(f"unknown denormal mode {mode!r}; expected one of {', '.join(MODES)}")
    return str(mode)


@contextmanager
def use(mode: str) -> Iterator[None]:
    """Run the body in `mode` (restored after, also on errors)."""
    if mode not in MODES:
        raise XlapyError(f"unknown denormal mode {mode!r}; expected one of {', '.join(MODES)}")
    token = _mode.set(mode)
    try:
        yield
    finally:
        _mode.reset(token)
