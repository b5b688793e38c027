"""Ops with several results (op_emit.TupleKernel: jnp.argmax's variadic reduce) as steps of
a native loop: on the Python path their results are fresh arrays per call, so a loop whose
body took an argmax (a decoding loop picking the next token) ran through Python. As a step,
the results get buffers of the loop's own, allocated once per prepared loop; the
get_tuple_elements that read them are bound to those buffers, and the op's function reads
`[table, result buffers...]` as on the Python path.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu.op_emit import TupleKernel
from xlapy.backends.cpu.thunks import ptr

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.ir import Instruction


def index(exe: CpuExecutable, name: str, how: str) -> int | None:
    """The kernel index of the TupleKernel the report line (name, how) names, or None."""
    parts = how.split()
    if len(parts) < 2 or not parts[-1].startswith("k") or not parts[-1][1:].isdigit():
        return None
    j = int(parts[-1][1:])
    specs = exe.kernel_specs
    if j >= len(specs) or not isinstance(specs[j], TupleKernel) or specs[j].root.name != name:
        return None
    return j


def reads_one(exe: CpuExecutable, gte: Instruction) -> bool:
    """Whether get_tuple_element `gte` reads a result of a TupleKernel of `exe`."""
    src = gte.operands[0]
    return any(isinstance(s, TupleKernel) and s.root is src for s in exe.kernel_specs)


def cells(exe: CpuExecutable, j: int, table: int, keep: list[Any]) -> int:
    """The `[table, result buffers...]` array of TupleKernel j over the table at `table`
    (its buffers kept in `keep`), the table's entries of the get_tuple_elements reading it
    pointed at the buffers."""
    spec = exe.kernel_specs[j]
    assert isinstance(spec, TupleKernel)
    outs = [np.empty(tuple(s.dimensions), s.dtype) for s in spec.shapes]
    keep.append(outs)
    for u in spec.root.users:
        s = exe.slot.get(id(u))
        if u.opcode == "get_tuple_element" and s is not None:
            ctypes.c_int64.from_address(table + 8 * s).value = ptr(outs[u.attrs.index])
    arr = (ctypes.c_int64 * (1 + len(outs)))(table, *[ptr(o) if o.size else 0 for o in outs])
    keep.append(arr)
    return ctypes.addressof(arr)


def readers_ok(exe: CpuExecutable, j: int) -> bool:
    """Whether every reader of TupleKernel j's results is a get_tuple_element with a slot."""
    root = exe.kernel_specs[j].root
    return all(u.opcode == "get_tuple_element" and id(u) in exe.slot for u in root.users)


__all__ = ["index", "reads_one", "cells", "readers_ok"]
