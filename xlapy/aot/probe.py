"""interpreter.probe in an object: the probed values become extra results.

The interpreter records every value a probe sees under its `probe_id`, in execution order
(check.expect_serialized_eq compares value `iter` of an id). An object cannot call back into
a harness, so each probe instruction j gets two results after the program's own:

    results[NUM_PROGRAM_RESULTS + 2 j]      [capacity, *shape] values: execution i writes
                                            row i while i < capacity (later ones are counted
                                            but not kept)
    results[NUM_PROGRAM_RESULTS + 2 j + 1]  s64: how many times the probe ran

`capacity` is a compile option (`probe_capacity`, default 1: the first value; a probe inside
a loop needs one row per iteration to keep them all). The run function zeroes the counts,
then every function of the program gets the probe results' pointer table as its fourth
argument (emit.py passes it down to called computations and loop bodies).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import I64, i64
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET
from xlapy.types import Shape

OPCODE = "interpreter.probe"


def index(prog: Any, instr: Instruction) -> int:
    """The probe's number j in the program (assigned in the order functions are emitted; a
    computation emitted twice keeps its probes' numbers)."""
    for j, p in enumerate(prog.probes):
        if p is instr:
            return j
    prog.probes.append(instr)
    return len(prog.probes) - 1


def emit_probe(em: Any, instr: Instruction, src: ir.Value, dst: ir.Value) -> None:
    """dst := src; record src as the probe's next value (see the module docstring)."""
    from xlapy.aot.emit import nbytes

    b = em.b
    n = nbytes(instr.shape)
    em._copy(dst, src, n)
    j = index(em.prog, instr)
    values = b.load(b.gep(em.probes, [i64(2 * j)]))
    count = b.bitcast(b.load(b.gep(em.probes, [i64(2 * j + 1)])), I64.as_pointer())
    c = b.load(count)
    with b.if_then(b.icmp_signed("<", c, i64(em.prog.probe_capacity))):
        em._copy(b.gep(values, [b.mul(c, i64(n))]), src, n)
    b.store(b.add(c, i64(1)), count)


def result_shapes(prog: Any) -> list[Shape]:
    """The extra results, in order: per probe its values and its count."""
    out = []
    for p in prog.probes:
        s = p.shape
        out += [Shape.array(s.element_type, (prog.probe_capacity, *s.dimensions)),
                Shape.array(ET.S64, ())]
    return out


def table(b: ir.IRBuilder, results: ir.Value, first: int, count: int) -> ir.Value:
    """The probe results' pointers (results + first), each count zeroed."""
    base = b.gep(results, [i64(first)])
    for j in range(count):
        cell = b.load(b.gep(base, [i64(2 * j + 1)]))
        b.store(i64(0), b.bitcast(cell, I64.as_pointer()))
    return base


def header_lines(up: str, prog: Any, first: int) -> list[str]:
    """Macros naming each probe's results: NAME_NUM_PROBES, NAME_PROBE_CAPACITY,
    NAME_PROBEj_ID (the probe_id string), NAME_PROBEj_VALUES / _COUNT (result indices)."""
    lines = ["/* probes: interpreter.probe values as extra results (xlapy/aot/probe.py) */",
             f"#define {up}_NUM_PROBES {len(prog.probes)}",
             f"#define {up}_PROBE_CAPACITY {prog.probe_capacity}"]
    for j, p in enumerate(prog.probes):
        pid = p.attrs.probe_id.replace("\\", "\\\\").replace('"', '\\"')
        lines += [f'#define {up}_PROBE{j}_ID "{pid}"',
                  f"#define {up}_PROBE{j}_VALUES {first + 2 * j}",
                  f"#define {up}_PROBE{j}_COUNT {first + 2 * j + 1}"]
    return lines


__all__ = ["OPCODE", "index", "emit_probe", "result_shapes", "table", "header_lines"]
