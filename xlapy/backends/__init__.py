"""Layer 8: backends by name. `compile(module, options) -> Executable`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from xlapy.errors import XlapyError
from xlapy.passes.pipelines import register_pipeline

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


def _cpu_pipeline(**kwargs: Any) -> Any:
    """The cpu backend's pipeline (what CpuBackend.compile runs), for `make_pipeline("cpu")`;
    imported on use, so `import xlapy` does not load LLVM."""
    from xlapy.backends.cpu.pipeline import cpu_pipeline

    return cpu_pipeline(**kwargs)


register_pipeline("cpu", _cpu_pipeline)

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
