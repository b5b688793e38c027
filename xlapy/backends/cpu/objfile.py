"""What an ELF object file defines and needs: its symbol table, read with the struct module
(llvmlite's ObjectFileRef lists sections, not symbols). The libcall test checks that every
undefined symbol of every kernel object is one the runtime library provides."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from xlapy.errors import XlapyError

_SHT_SYMTAB = 2
_STB_LOCAL = 0


@dataclass(frozen=True)
class Symbol:
    name: str
    defined: bool
    binding: int  # 0 local, 1 global, 2 weak
    size: int = 0  # bytes (a function's code)


def symbols(obj: bytes) -> list[Symbol]:
    """The named symbols of a little-endian ELF64 relocatable object (x86-64, aarch64)."""
    if obj[:4] != b"\x7fELF":
        raise XlapyError("not an ELF object file")
    if obj[4] != 2 or obj[5] != 1:
        raise XlapyError("only little-endian ELF64 objects are read")
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize)
                for k in range(shnum)]
    out: list[Symbol] = []
    for sh in sections:
        if sh[1] != _SHT_SYMTAB:
            continue
        offset, size, link, entsize = sh[4], sh[5], sh[6], sh[9]
        strtab = sections[link]
        str_off = strtab[4]
        for k in range(1, size // entsize):  # entry 0 is the null symbol
            st_name, st_info, _, st_shndx, _, st_size = struct.unpack_from(
                "<IBBHQQ", obj, offset + k * entsize)
            if not st_name:
                continue
            end = obj.index(b"\0", str_off + st_name)
            name = obj[str_off + st_name:end].decode()
            out.append(Symbol(name, st_shndx != 0, st_info >> 4, st_size))
    return out


#: ELF e_machine values of the architectures xlapy emits.
MACHINES = {62: "x86_64", 183: "aarch64"}


def machine(obj: bytes) -> str:
    """The object's architecture (x86_64, aarch64) from its ELF header."""
    em, = struct.unpack_from("<H", obj, 0x12)
    return MACHINES.get(em, f"e_machine {em}")


def undefined(obj: bytes) -> set[str]:
    """Names the object needs from elsewhere (its undefined non-local symbols)."""
    return {s.name for s in symbols(obj) if not s.defined and s.binding != _STB_LOCAL}


__all__ = ["Symbol", "machine", "symbols", "undefined"]
