"""A kernel function's text, as llvmlite prints it, in about half the time (issue 14: cold
compile time).

llvmlite prints an instruction through its generic machinery (a `descr` into a buffer,
`str.format` with type objects, metadata joined, then the whole stripped): ~7 us an
instruction, the 2 ms "ir text" phase of a softmax's 290-line kernel. `function_text`
writes the instruction kinds the kernels emit with one f-string each, character for
character what llvmlite writes (test_ir_print.py compares the two on every kernel of the
reference programs), and hands any other instruction, or one with attributes this does
not spell out, to llvmlite.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir
from llvmlite.ir import instructions as ins


def function_text(fn: ir.Function) -> str:
    """`str(fn)`: the prototype, then each block's label and instructions."""
    buf: list[str] = []
    fn.descr_prototype(buf)
    if fn.blocks:
        buf.append("{\n")
        for blk in fn.blocks:
            buf.append(f"{blk._format_name()}:\n")
            buf += [f"  {instruction_text(i)}\n" for i in blk.instructions]
        buf.append("}\n")
    return "".join(buf)


def instruction_text(i: ir.Instruction) -> str:
    """`str(i)`: `%name = ` unless void, then its description, trailing space stripped."""
    write = _WRITERS.get(type(i))
    if write is None:
        return str(i)
    body = write(i)
    if body is None:
        return str(i)
    if isinstance(i.type, ir.VoidType):
        return body.rstrip()
    return f"{i.get_reference()} = {body}".rstrip()


def _md(i: ir.Instruction) -> str:
    return i._stringify_metadata(leading_comma=True) if i.metadata else ""


def _typed(v: ir.Value) -> str:
    return f"{v.type} {v.get_reference()}"


def _generic(i: ir.Instruction) -> str:
    op = " ".join([i.opname, *i.flags]) if i.flags else i.opname
    refs = ", ".join([o.get_reference() for o in i.operands])
    return f"{op} {i.type} {refs}{_md(i)}\n"


def _cast(i: ins.CastInstr) -> str:
    o = i.operands[0]
    return f"{i.opname} {o.type} {o.get_reference()} to {i.type} {_md(i)}\n"


def _load(i: ins.LoadInstr) -> str:
    (p,) = i.operands
    align = f", align {i.align}" if i.align is not None else ""
    return f"load {i.type}, {p.type} {p.get_reference()}{align}{_md(i)}\n"


def _store(i: ins.StoreInstr) -> str:
    v, p = i.operands
    align = f", align {i.align}" if i.align is not None else ""
    return f"store {v.type} {v.get_reference()}, {p.type} {p.get_reference()}{align}{_md(i)}\n"


def _gep(i: ins.GEPInstr) -> str:
    op = "getelementptr inbounds" if i.inbounds else "getelementptr"
    idx = ", ".join([_typed(x) for x in i.indices])
    p = i.pointer
    return f"{op} {i.source_etype}, {p.type} {p.get_reference()}, {idx} {_md(i)}\n"


def _compare(i: ins.CompareInstr) -> str:
    flags = "".join(" " + f for f in i.flags)
    a, b = i.operands
    return f"{i.opname}{flags} {i.op} {a.type} {a.get_reference()}, {b.get_reference()} " \
           f"{_md(i)}\n"


def _select(i: ins.SelectInstr) -> str:
    c, a, b = i.operands
    return f"select {' '.join(i.flags)} {_typed(c)}, {_typed(a)}, {_typed(b)} {_md(i)}\n"


def _call(i: ins.CallInstr) -> str | None:
    fnty = i.callee.function_type
    if fnty.var_arg or i.arg_attributes or i.attributes or i.fastmath or i.cconv or i.tail:
        return None
    args = ", ".join([_typed(a) for a in i.args])
    return f"{i.opname} {fnty.return_type} {i.callee.get_reference()}({args}){_md(i)}\n"


def _phi(i: ins.PhiInstr) -> str:
    incs = ", ".join([f"[{v.get_reference()}, {b.get_reference()}]" for v, b in i.incomings])
    return f"phi {' '.join(i.flags)} {i.type} {incs} {_md(i)}\n"


def _branch(i: ins.Terminator) -> str:
    return f"{i.opname} {', '.join([_typed(o) for o in i.operands])}{_md(i)}"


def _ret(i: ins.Ret) -> str:
    v = i.return_value
    if v is None:
        return f"{i.opname}{_md(i)}\n"
    return f"{i.opname} {v.type} {v.get_reference()}{_md(i)}\n"


def _element(i: ir.Instruction) -> str:
    return f"{i.opname} {', '.join([_typed(o) for o in i.operands])}\n"


def _shuffle(i: ins.ShuffleVector) -> str:
    return f"shufflevector {', '.join([_typed(o) for o in i.operands])} {_md(i)}\n"


def _alloca(i: ins.AllocaInstr) -> str:
    out = f"{i.opname} {i.allocated_type}"
    if i.operands:
        out += f", {_typed(i.operands[0])}"
    if i.align is not None:
        out += f", align {i.align}"
    return out + _md(i)


#: Writers by exact class (a subclass may print differently: llvmlite prints it).
_WRITERS: dict[type, Callable[..., str | None]] = {
    ins.Instruction: _generic,
    ins.CastInstr: _cast,
    ins.LoadInstr: _load,
    ins.StoreInstr: _store,
    ins.GEPInstr: _gep,
    ins.ICMPInstr: _compare,
    ins.FCMPInstr: _compare,
    ins.SelectInstr: _select,
    ins.CallInstr: _call,
    ins.PhiInstr: _phi,
    ins.Branch: _branch,
    ins.ConditionalBranch: _branch,
    ins.Ret: _ret,
    ins.ExtractElement: _element,
    ins.InsertElement: _element,
    ins.ShuffleVector: _shuffle,
    ins.AllocaInstr: _alloca,
}

__all__ = ["function_text", "instruction_text"]
