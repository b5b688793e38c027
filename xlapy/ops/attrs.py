"""Attribute types shared by several op families (enums and small records of the spec)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ComparisonDirection(enum.Enum):
    """stablehlo.compare `comparison_direction`; XLA Eq/Ne/Ge/Gt/Le/Lt."""

    EQ = "EQ"
    NE = "NE"
    GE = "GE"
    GT = "GT"
    LE = "LE"
    LT = "LT"


class ComparisonType(enum.Enum):
    """stablehlo.compare `compare_type`; TOTALORDER orders -NaN < -Inf < ... < +Inf < NaN."""

    FLOAT = "FLOAT"
    TOTALORDER = "TOTALORDER"
    SIGNED = "SIGNED"
    UNSIGNED = "UNSIGNED"


class Precision(enum.Enum):
    """`precision_config` entries of dot_general and convolution."""

    DEFAULT = "DEFAULT"
    HIGH = "HIGH"
    HIGHEST = "HIGHEST"


class ChannelType(enum.Enum):
    """Channel kinds: device-to-device, device-to-host, host-to-device (send/recv)."""

    DEVICE_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    HOST_TO_DEVICE = 3


@dataclass(frozen=True)
class ChannelHandle:
    """`channel_handle` of send/recv and `channel_id` of collectives (0 = none)."""

    handle: int = 0
    type: ChannelType = ChannelType.DEVICE_TO_DEVICE
