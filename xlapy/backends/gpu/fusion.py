"""Which instructions the gpu backend computes in its kernels, and which values get a
buffer (each such value is the root of one kernel; the fusible producers behind it are
computed per element inside it, as on cpu).

Fusible: what the cpu kernels compute per index (kernel_ops.fusible), except complex values
(their libm calls follow the x86-64 C ABI; not compiled for the GPU yet). Float math that
the cpu backend calls libm for (power, atan2, cbrt, remainder) is libdevice's here."""

from __future__ import annotations

from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu import kernel_ops
from xlapy.backends.cpu.fusion_plan import depth_cuts, leaf_slots
from xlapy.ir import Instruction

#: The buffers (id -> slot) a kernel reads (as on cpu).
leaves = leaf_slots

#: Ops a kernel recomputes for each consumer rather than store (no arithmetic of their own).
CHEAP = frozenset({"constant", "broadcast_in_dim", "iota", "reshape", "transpose", "slice",
                   "reverse", "convert"})
#: Ops at most in a value's fused expression for it to be recomputed by several kernels.
DUP_OPS = 16


def fusible(instr: Instruction) -> bool:
    if instr.opcode == "parameter" or ewc.involved(instr):
        return False
    return kernel_ops.fusible(instr)


def materialized(order: list[Instruction], fus: set[int], outputs: set[int]) -> set[int]:
    """Fusible values that get a buffer. Must: reduces (a kernel of their own), outputs,
    values a non-fusible op reads, array constants, depth cuts. Otherwise, consumers first,
    a value lands in the kernels of its users: in one kernel it fuses there (the GELU chain
    is one kernel); in several it is recomputed in each when CHEAP or when its fused
    expression costs at most DUP_OPS ops (recomputing beats a round trip through device
    memory), else it gets a buffer."""
    cuts = depth_cuts(order, fus)
    cost: dict[int, int] = {}
    for instr in order:
        if id(instr) in fus:
            own = 0 if instr.opcode in CHEAP else 1
            cost[id(instr)] = min(own + sum(cost.get(id(o), 0) for o in instr.operands), 1 << 20)
    mat: set[int] = set()
    lands: dict[int, frozenset[int]] = {}  # value -> the kernels (roots) that compute it
    for instr in reversed(order):
        iid = id(instr)
        if iid not in fus:
            continue
        users = instr.users
        must = (instr.opcode == "reduce" or iid in outputs or iid in cuts
                or any(id(u) not in fus for u in users)
                or (instr.opcode == "constant" and not kernel_ops.is_scalar_constant(instr)))
        ks = frozenset() if must else frozenset().union(*(lands[id(u)] for u in users))
        if must or (len(ks) > 1 and instr.opcode not in CHEAP and cost[iid] > DUP_OPS):
            mat.add(iid)
            ks = frozenset((iid,))
        lands[iid] = ks
    return mat

