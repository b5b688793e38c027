"""`select` inside kernels, and a select by one scalar predicate of costly arrays as a branch.

Why: conditional_to_select.py turns a small `case` in a loop body into selects between its
branches' values, so the loop runs natively; the fused kernel then computed every branch
for every element. jax_probe's switch_in_loop (a fori_loop over lax.switch(i % 3, [u * 0.5,
u + 1, sin])) computed the sine of 256 floats in each of 1000 iterations: 0.33 ms, 1.07x
XLA's, where XLA branches. A select whose predicate is a scalar (HLO allows pred[] with
array operands) and one of whose arms is costly (a transcendental, or more than
BRANCH_OPS arithmetic ops) is emitted as a branch around the two arms: only the taken one
runs. The branch is on a value fixed for the whole kernel call, so the predictor takes it
for free. Each arm computes what the select's operand computed: the same bits.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import bf16_exact
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import has_lane
from xlapy.ir import Instruction

#: Arithmetic ops (in the kernel) of an arm from which a scalar-predicate select branches.
BRANCH_OPS = 8


def select(k: Any, instr: Instruction, idx: list[Any]) -> ir.Value:
    """select(pred, x, y) at `idx` for KernelEmitter `k`."""
    pred, x, y = instr.operands
    if pred.shape.rank == 0 and instr.shape.rank and not instr.shape.element_type.is_complex \
            and not (k._cheap(x, BRANCH_OPS) and k._cheap(y, BRANCH_OPS)):
        return _branch(k, k.gen(pred, []), x, y, idx)
    p, a, c = k._unify([k.gen(pred, idx if pred.shape.rank else []), k.gen(x, idx),
                        k.gen(y, idx)])
    return ew.select(k.b, p, a, c)


def _branch(k: Any, p: ir.Value, x: Instruction, y: Instruction, idx: list[Any]
            ) -> ir.Value:
    """x or y at idx, whichever scalar p picks, only that one computed."""
    b = k.b
    lanes = has_lane(idx)

    def arm(o: Instruction) -> tuple[ir.Value, ir.Block]:
        saved = dict(k.memo)  # (values made in one arm do not dominate the code after it)
        v = k.gen(o, idx)
        if lanes and not isinstance(v.type, ir.VectorType):
            v = k.splat(v)
        k.memo.clear()
        k.memo.update(saved)
        return v, b.block

    with b.if_else(p) as (then, otherwise):
        with then:
            tv, tb = arm(x)
        with otherwise:
            fv, fb = arm(y)
    out = b.phi(tv.type)
    out.add_incoming(tv, tb)
    out.add_incoming(fv, fb)
    if ew._isfloat(tv) and ew.is_flushed(tv) and ew.is_flushed(fv):
        ew.mark_flushed(out)
    if bf16_exact.is_bf16(tv) and bf16_exact.is_bf16(fv):
        bf16_exact.mark(out)
    return out


__all__ = ["BRANCH_OPS", "select"]
