"""What the AMX tile kernels (gemm_amx.py: int8, gemm_bf16.py: bf16) share: Linux's
permission for the tile data state, asked once per process, and the tile configuration."""

from __future__ import annotations

import ctypes
import functools

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import I8

_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18
_SYS_ARCH_PRCTL = 158


@functools.cache
def tile_permission() -> bool:
    """Ask Linux once per process for the AMX tile data state; False if refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):  # pragma: no cover - no libc syscall
        return False


def tile_config(mod: ir.Module, name: str) -> ir.GlobalVariable:
    """The module's 64-byte tile configuration `name`: palette 1, tiles 0-7 all 16 rows x 64
    bytes."""
    old = mod.globals.get(name)
    if old is not None:
        return old
    cfg = bytearray(64)
    cfg[0] = 1
    for t in range(8):
        cfg[16 + 2 * t] = 64  # colsb (u16, little-endian)
        cfg[48 + t] = 16  # rows
    ty = ir.ArrayType(I8, 64)
    g = ir.GlobalVariable(mod, ty, name=name)
    g.initializer = ir.Constant(ty, bytearray(cfg))
    g.global_constant = True
    g.linkage = "private"
    g.align = 64
    return g
