"""Documented limits the front doors enforce before doing anything large.

* `max_literal_bytes()`: the largest single constant a front door materializes
  (`XLAPY_MAX_LITERAL_BYTES`, default 1 GiB). A type over it is fine in a signature (it is
  only a shape); a `dense<...>` / HLO `constant(...)` over it is a ParseError naming the
  location and the size, raised before any allocation.
* `max_processes()`: replicas x partitions a program may ask for (`XLAPY_MAX_PROCESSES`,
  default 1024); the threaded grid starts one thread per process.
* `MAX_NESTING`: how deep types, attributes, constants and regions may nest in program text
  (deeper input is a ParseError, not a RecursionError).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from xlapy.errors import XlapyError

T = TypeVar("T", int, float)

DEFAULT_MAX_LITERAL_BYTES = 1 << 30
DEFAULT_MAX_PROCESSES = 1024
MAX_NESTING = 100


def env_number(name: str, default: T, parse: Callable[[str], T] = int,  # type: ignore[assignment]
               error: type[XlapyError] = XlapyError, allow_zero: bool = False) -> T:
    """`$name` parsed by `parse` (int or float), else `default`; a value that is not a
    number, negative, or zero unless `allow_zero`, is an `error` naming the variable."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = parse(text)
    except ValueError:
        kind = "an integer" if parse is int else "a number"
        raise error(f"{name}={text!r} is not {kind}") from None
    if value < 0 or (value == 0 and not allow_zero):
        raise error(f"{name}={text!r} must be {'non-negative' if allow_zero else 'positive'}")
    return value


def max_literal_bytes() -> int:
    return env_number("XLAPY_MAX_LITERAL_BYTES", DEFAULT_MAX_LITERAL_BYTES)


def max_processes() -> int:
    return env_number("XLAPY_MAX_PROCESSES", DEFAULT_MAX_PROCESSES)


def literal_size_problem(num_elements: int, itemsize: int, what: str) -> str:
    """'' when a literal of this size may be materialized, else the message saying why not."""
    size = num_elements * max(1, itemsize)
    cap = max_literal_bytes()
    if size <= cap:
        return ""
    return (f"{what} of {num_elements} element(s) ({size} bytes) is over the literal size "
            f"limit of {cap} bytes (XLAPY_MAX_LITERAL_BYTES)")


def process_count_problem(replicas: int, partitions: int) -> str:
    """'' when a replicas x partitions grid is allowed, else the message saying why not."""
    if replicas < 1 or partitions < 1:
        return f"replicas ({replicas}) and partitions ({partitions}) must be at least 1"
    cap = max_processes()
    if replicas * partitions <= cap:
        return ""
    return (f"{replicas} replica(s) x {partitions} partition(s) = {replicas * partitions} "
            f"processes is over the limit of {cap} (XLAPY_MAX_PROCESSES)")
