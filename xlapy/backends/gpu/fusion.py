"""Which instructions the gpu backend computes in its kernels, and which values get a
buffer (each such value is the root of one kernel; the fusible producers behind it are
computed per element inside it, as on cpu).

Fusible: what the cpu kernels compute per index (kernels.fusible), except complex values
(their libm calls follow the x86-64 C ABI; not compiled for the GPU yet). Float math that
the cpu backend calls libm for (power, atan2, cbrt, remainder) is libdevice's here."""

from __future__ import annotations

from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu import kernels
from xlapy.backends.cpu.fusion_plan import depth_cuts, leaf_slots
from xlapy.ir import Instruction

#: The buffers (id -> slot) a kernel reads (as on cpu).
leaves = leaf_slots

#: Ops a kernel recomputes for each consumer rather than store (no arithmetic of their own).
CHEAP = frozenset({"constant", "broadcast_in_dim", "iota", "reshape", "transpose", "slice",
                   "reverse", "convert"})


def fusible(instr: Instruction) -> bool:
    if instr.opcode == "parameter" or ewc.involved(instr):
        return False
    return kernels.fusible(instr)


def materialized(order: list[Instruction], fus: set[int], outputs: set[int]) -> set[int]:
    """Fusible values that get a buffer: reduces (a kernel of their own), outputs, values a
    non-fusible op reads, array constants, values several consumers read (unless CHEAP),
    and cuts that bound a kernel's expression depth."""
    cuts = depth_cuts(order, fus)
    mat: set[int] = set()
    for instr in order:
        iid = id(instr)
        if iid not in fus:
            continue
        users = instr.users
        if (instr.opcode == "reduce" or iid in outputs or iid in cuts
                or any(id(u) not in fus for u in users)
                or (instr.opcode == "constant" and not kernels.is_scalar_constant(instr))
                or (len({id(u) for u in users}) > 1 and instr.opcode not in CHEAP)):
            mat.add(iid)
    return mat

