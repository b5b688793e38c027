"""xla_client's enums for the `ops` namespace, with xla_client's member names and values
(`ops.RandomAlgorithm.RNG_THREE_FRY`, `ops.TriangularSolveOptions_Transpose.ADJOINT`, ...).

The ops take these, the IR's own enums (`RngAlgorithm`, `Transpose`) or their names; the IR
keeps its own enums, so these are only the builder's spelling.
"""

from __future__ import annotations

import enum

__all__ = ["RandomAlgorithm", "TriangularSolveOptions_Transpose", "CustomCallSchedule",
           "CustomCallApiVersion"]


class RandomAlgorithm(enum.IntEnum):
    """XLA RandomAlgorithm (RngBitGenerator's `algorithm`)."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


class TriangularSolveOptions_Transpose(enum.IntEnum):  # noqa: N801 (xla_client's name)
    """XLA TriangularSolveOptions::Transpose; TRANSPOSE_INVALID is refused by the op."""

    TRANSPOSE_INVALID = 0
    NO_TRANSPOSE = 1
    TRANSPOSE = 2
    ADJOINT = 3


class CustomCallSchedule(enum.IntEnum):
    """XLA CustomCallSchedule: a scheduling hint, no effect on values."""

    SCHEDULE_NONE = 0
    SCHEDULE_LATEST = 1
    SCHEDULE_EARLIEST = 2


class CustomCallApiVersion(enum.IntEnum):
    """XLA CustomCallApiVersion; the value is the custom_call's `api_version`."""

    API_VERSION_ORIGINAL = 1
    API_VERSION_STATUS_RETURNING = 2
    API_VERSION_STATUS_RETURNING_UNIFIED = 3
    API_VERSION_TYPED_FFI = 4
