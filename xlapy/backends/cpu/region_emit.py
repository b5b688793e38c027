"""Regions of scalar element-wise ops (reducers, comparators, update computations) emitted
inline as LLVM IR, so the native reduce_window, select_and_scatter, scatter and variadic
reduce loops call them per element instead of running the interpreter.

A region qualifies when every instruction is a parameter, a scalar constant, a tuple, or an
element-wise op / compare / select / clamp / convert / same-width bitcast_convert /
reduce_precision that elementwise.py (elementwise_bits.py) emits for its types: the same
per-op IR (flushing, bf16/f16 rounding after every op) as the kernels, hence the
interpreter's semantics. Anything else (nested calls, non-scalar values, types
outside the table) is reported unsupported and the op keeps its interpreter fallback.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_bits as eb
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.backends.cpu.llvm_util import broadcast
from xlapy.ir import Computation, Instruction
from xlapy.types import ElementType as ET

_STRUCTURAL = frozenset({"parameter", "constant", "tuple"})


def _scalar(instr: Instruction) -> bool:
    sh = instr.shape
    return bool(sh.is_array and sh.rank == 0 and sh.element_type in ew.SUPPORTED)


def _supported(instr: Instruction) -> bool:
    op = instr.opcode
    if instr.called:
        return False
    if op == "tuple":
        return all(_scalar(o) for o in instr.operands)
    if not _scalar(instr) or not all(_scalar(o) for o in instr.operands):
        return False
    if op in ("parameter", "constant", "compare", "select", "clamp"):
        return True
    if op == "convert":
        return ewconv.convert_supported(instr.operands[0].shape.element_type,
                                    instr.shape.element_type)
    if op in eb.OPS:  # XLA's comparators bitcast floats to integers (a total order)
        return eb.fusible(instr) and (op != "bitcast_convert" or instr.shape.element_type.bits
                                      == instr.operands[0].shape.element_type.bits)
    return bool(instr.operands) and ew.supports(op, instr.operands[0].shape.element_type)


def supported(comp: Computation) -> bool:
    """Whether `emit` can compile this region."""
    return comp.root is not None and all(_supported(i) for i in comp.instructions)


def results(comp: Computation) -> list[Instruction]:
    """The region's result values (the root, or the elements of a root tuple)."""
    root = comp.root
    assert root is not None
    return list(root.operands) if root.opcode == "tuple" else [root]


def emit(b: ir.IRBuilder, comp: Computation, args: Sequence[ir.Value], width: int = 0
         ) -> list[ir.Value]:
    """The region's results (compute-type values) for parameter values `args` (compute
    types, in parameter order; vectors of `width` lanes where it is not 0: each lane the
    scalar region's ops). `supported(comp)` must hold."""
    env: dict[int, ir.Value] = {}
    for p, v in zip(comp.parameters, args):
        env[id(p)] = v
    for instr in comp.instructions:
        if instr.opcode in ("parameter", "tuple"):
            continue
        v = _one(b, instr, [env[id(o)] for o in instr.operands])
        env[id(instr)] = broadcast(b, v, width) if width else v
    return [env[id(r)] for r in results(comp)]


def _one(b: ir.IRBuilder, instr: Instruction, xs: list[ir.Value]) -> ir.Value:
    op = instr.opcode
    et = instr.shape.element_type
    if op == "constant":
        return ew.constant(np.asarray(instr.attrs.literal.to_numpy()).reshape(()).item(), et)
    t = instr.operands[0].shape.element_type
    if op == "compare":
        return ew.compare(b, xs[0], xs[1], t, instr.attrs)
    if op == "select":
        return ew.select(b, xs[0], xs[1], xs[2])
    if op == "clamp":
        mx = ew.emit(b, "maximum", [xs[1], xs[0]], et, et)
        return ew.emit(b, "minimum", [mx, xs[2]], et, et)
    if op == "convert":
        return ewconv.convert(b, xs[0], t, et)
    if op in eb.OPS:
        return eb.emit(b, instr, [], lambda _operand, _idx: xs[0])
    return ew.emit(b, op, xs, t, et)


def binary_kind(comp: Computation) -> str | None:
    """The opcode of a region `f(a, b) = a op b` (either operand order), else None."""
    root = comp.root
    params = comp.parameters
    if root is None or len(params) != 2 or len(comp.instructions) != 3 or \
            len(root.operands) != 2:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    return root.opcode


def types_ok(*types: ET) -> bool:
    return all(t in ew.SUPPORTED for t in types)


__all__ = ["supported", "emit", "results", "binary_kind", "types_ok"]
