"""A stable debug printer in HLO-text style; attributes print generically from their dataclass."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from xlapy.ir.computation import Computation
from xlapy.ir.instruction import Instruction


def format_attr_value(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "{" + ",".join(format_attr_value(v) for v in value) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ", ".join(f"{f.name}={format_attr_value(getattr(value, f.name))}"
                          for f in dataclasses.fields(value))
        return "{" + inner + "}"
    if isinstance(value, np.ndarray):
        from xlapy.types.literal import format_array

        return format_array(value)
    if isinstance(value, Computation):
        return f"%{value.name}"
    return str(value)


def format_attrs(attrs: Any) -> list[str]:
    if not dataclasses.is_dataclass(attrs) or isinstance(attrs, type):
        return []
    out = []
    for f in dataclasses.fields(attrs):
        value = getattr(attrs, f.name)
        if f.name == "literal" and hasattr(value, "shape"):
            continue
        out.append(f"{f.name}={format_attr_value(value)}")
    return out


def print_instruction(instr: Instruction, root: bool = False) -> str:
    args = ", ".join(f"%{o.name}" for o in instr.operands)
    if instr.opcode == "parameter":
        args = str(instr.parameter_number)
    elif instr.opcode == "constant":
        from xlapy.types.literal import format_array

        lit = instr.attrs.literal
        args = format_array(lit.to_numpy()) if lit.shape.is_array else str(lit)
    extras = [] if instr.opcode in ("parameter", "constant") else format_attrs(instr.attrs)
    for i, c in enumerate(instr.called):
        extras.append(f"to_apply=%{c.name}" if len(instr.called) == 1
                      else f"called_{i}=%{c.name}")
    tail = (", " + ", ".join(extras)) if extras else ""
    prefix = "ROOT " if root else ""
    return f"{prefix}%{instr.name} = {instr.shape} {instr.opcode}({args}){tail}"


def print_computation(comp: Computation, entry: bool = False) -> str:
    head = ("ENTRY " if entry else "") + f"%{comp.name} {{"
    body = [f"  {print_instruction(i, i is comp.root)}" for i in comp.post_order()]
    return "\n".join([head, *body, "}"])


def print_module(module: Any) -> str:
    lines = [f"HloModule {module.name}"]
    if module.num_replicas != 1 or module.num_partitions != 1:
        lines[0] += f", replica_count={module.num_replicas}, num_partitions={module.num_partitions}"
    for c in module.post_order():
        lines.append("")
        lines.append(print_computation(c, entry=c is module.entry))
    return "\n".join(lines) + "\n"
