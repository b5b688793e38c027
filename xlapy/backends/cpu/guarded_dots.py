"""Dots a select may drop, skipped in native loops when their side is not picked.

conditional_to_select turns a small lax.cond into both branches and a select; a branch's
dot then runs every iteration whether picked or not. jax.scipy.linalg.expm squares its
result in a scan of 16 steps, each `cond(i < n, x @ x, x)`: a 64 x 64 matrix with no
squaring due still paid 16 products (squaring loop 96 us, XLA's 10-20). A dot whose only
reader is such a select (a rank-0 predicate picking it or another value) runs, in a native
loop, as a guarded step: the driver reads the predicate's byte and calls the GEMM only when
the select picks it; the select reads the product's buffer (stale when skipped) only in
lanes it drops, so the results are the same bits. The predicate gets a buffer of its own
(fusion_plan's forced materializations), and such a dot joins no row-parallel region (its
rows would run with the select's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu.llvm_util import I8, I8P, I64, KERNEL_TYPE, i64
from xlapy.ir import Instruction
from xlapy.types import ElementType

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable

GUARD_NAME = "xlapy_guarded"


def guard(dot: Instruction) -> tuple[Instruction, bool] | None:
    """(predicate, the value it must hold for the dot's result to be read) when `dot`'s only
    reader is a select on a rank-0 predicate taking it on one side only."""
    if dot.opcode != "dot_general" or len(dot.users) != 1:
        return None
    sel = dot.users[0]
    if sel.opcode != "select" or sel.operands[0].shape.rank != 0 or \
            sel.operands[0].shape.element_type is not ElementType.PRED:
        return None
    on_true, on_false = sel.operands[1] is dot, sel.operands[2] is dot
    if on_true == on_false:
        return None
    return sel.operands[0], on_true


def forced(order: list[Instruction], fusible: set[int]) -> dict[int, str]:
    """The fusible predicates of guardable dots, to materialize (fusion_plan), with why."""
    out: dict[int, str] = {}
    for i in order:
        if (g := guard(i)) is not None and id(g[0]) in fusible:
            out[id(g[0])] = (f"the predicate of a select that may drop dot %{i.name}: "
                             "materialized, so a native loop skips the dot")
    return out


def wrap(exe: CpuExecutable, dot_slot: int, words: list[int], table: int,
         keep: list[Any]) -> list[int]:
    """The driver's words of a GEMM step (`words`: function, argument, outer) guarded by its
    select's predicate when that is in a buffer computed before the step; else `words`."""
    dot = next((i for i in exe.comp.instructions
                if i.opcode == "dot_general" and exe.slot.get(id(i)) == dot_slot), None)
    g = guard(dot) if dot is not None else None
    if g is None or id(g[0]) not in exe.slot or not _before(exe, g[0], dot):
        return words
    pred, expect = g
    w = np.array([table + 8 * exe.slot[id(pred)], int(expect), *words], np.int64)
    keep.append(w)
    from xlapy.backends.cpu.while_driver import driver

    return [driver()[0].address(GUARD_NAME), int(w.ctypes.data), 0]


def _before(exe: CpuExecutable, pred: Instruction, dot: Instruction) -> bool:
    """Whether `pred`'s value is in its buffer when the dot's step runs: a parameter's (or
    an element of one), or a thunk earlier in the report's order."""
    if pred.opcode == "parameter" or (pred.opcode == "get_tuple_element" and
                                      pred.operands[0].opcode == "parameter"):
        return True
    names = [name for name, _, _ in exe.report]
    return pred.name in names and dot.name in names and \
        names.index(pred.name) < names.index(dot.name)


def emit(mod: ir.Module) -> None:
    """Add `void xlapy_guarded(i64 *w, i64, i64)` to the driver's module: when the byte at
    *w[0] (a table cell's buffer) is nonzero exactly when w[1] is, w[2](w[3], 0, w[4])."""
    i64p = I64.as_pointer()
    fn = ir.Function(mod, KERNEL_TYPE, name=GUARD_NAME)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    w = b.bitcast(fn.args[0], i64p)

    def word(k: int) -> ir.Value:
        return b.load(b.gep(w, [i64(k)]))

    buf = b.load(b.inttoptr(word(0), I8P.as_pointer()))
    held = b.icmp_unsigned("!=", b.load(buf), ir.Constant(I8, 0))
    want = b.icmp_unsigned("!=", word(1), i64(0))
    with b.if_then(b.icmp_unsigned("==", held, want)):
        step = b.inttoptr(word(2), KERNEL_TYPE.as_pointer())
        b.call(step, [b.inttoptr(word(3), I8P.as_pointer()), i64(0), word(4)])
    b.ret_void()


__all__ = ["GUARD_NAME", "emit", "forced", "guard", "wrap"]
