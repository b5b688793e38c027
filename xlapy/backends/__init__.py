"""Layer 8: backends by name. `compile(module, options) -> Executable`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from xlapy.errors import XlapyError

_BACKENDS: dict[str, Callable[[], Any]] = {}


def register_backend(name: str, factory: Callable[[], Any]) -> None:
    _BACKENDS[name] = factory


def get_backend(name: str) -> Any:
    if name not in _BACKENDS:
        _load_builtin()
    try:
        return _BACKENDS[name]()
    except KeyError:
        raise XlapyError(
            f"unknown backend '{name}'; available: {', '.join(sorted(_BACKENDS))}"
        ) from None


#: The backend Client(), xlapy.compile and `xlapy run` use when none is named.
DEFAULT_BACKEND = "cpu"


def default_backend() -> str:
    """`$XLAPY_BACKEND` if set, else DEFAULT_BACKEND."""
    return os.environ.get("XLAPY_BACKEND") or DEFAULT_BACKEND


def available_backends() -> list[str]:
    _load_builtin()
    return sorted(_BACKENDS)


def _load_builtin() -> None:
    from xlapy.backends import (
        cpu,  # noqa: F401
        gpu,  # noqa: F401
        interpreter,  # noqa: F401
    )
