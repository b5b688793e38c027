"""xla_client's overloaded builder ops (`Iota(builder, shape, iota_dimension)` or
`Iota(builder, type, size)`), bound by position or by keyword as pybind/nanobind does: the
first overload whose parameter names take the call wins.

An op function built on this carries `overloads` (each overload's parameter names, in order),
which the surface test compares with xla_client's signature list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: A default that an overload's parameter may be left at (its name -> the value).
Defaults = dict[str, Any]


def bind_overload(api: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                  overloads: Sequence[tuple[Sequence[str], Defaults]],
                  accepts: Callable[[int, dict[str, Any]], bool] | None = None
                  ) -> tuple[int, dict[str, Any]]:
    """(index of the overload taken, its arguments by name); a TypeError naming `api` and
    every overload when none takes the call's arguments by number and name. `accepts(index,
    bound)` can refuse an overload whose names fit but whose values do not (a type check, as
    nanobind's dispatch); when it refuses every one that fits, the first that fits is taken,
    so a value of the wrong type is reported by the op (a BuilderError), not as a TypeError."""
    fitting: list[tuple[int, dict[str, Any]]] = []
    for index, (names, defaults) in enumerate(overloads):
        if len(args) > len(names) or any(k not in names for k in kwargs):
            continue
        bound = dict(zip(names, args))
        if any(k in bound for k in kwargs):
            continue
        bound.update(kwargs)
        for name in names:
            if name not in bound and name in defaults:
                bound[name] = defaults[name]
        if all(name in bound for name in names):
            if accepts is None or accepts(index, bound):
                return index, bound
            fitting.append((index, bound))
    if fitting:
        return fitting[0]
    forms = " or ".join(f"{api}({', '.join(names)})" for names, _ in overloads)
    raise TypeError(f"{api} takes {forms}")


def names_of(overloads: Sequence[tuple[Sequence[str], Defaults]]) -> tuple[tuple[str, ...], ...]:
    """The `overloads` attribute: each overload's parameter names."""
    return tuple(tuple(names) for names, _ in overloads)
