"""Ahead-of-time compilation: a program as one relocatable object file and a C header.

    obj = xlapy.aot.compile(program, name="mlp", target="x86-64-v3")
    obj.write("out/")          # out/mlp.o, out/mlp.h

The object defines `int NAME_run(const void *const *args, void *const *results,
void *scratch)` and `NAME_run_threaded(..., int num_threads)` (threads.py) and no other
global symbol (only weak compiler-rt builtins: link.py); it
holds every kernel, product (ragged ones too), convolution, FFT, triangular solve, sort and
control-flow loop of the program and its constants, and needs only libc / libm (listed in
the header; nothing at all with `freestanding=True`: freestanding.py). No Python, no
xlapy runtime; interpreter.probe values are extra results (probe.py). How: the cpu
backend plans the program as for the JIT (one thread), and emit.py
turns the plan into C-callable functions over a scratch arena; link.py links the kernels in
and emits the object. An op with no in-object implementation (collectives, infeed / outfeed,
custom calls with no in-object routine, an interpreter fallback of the cpu backend) raises
`Unimplemented` naming it. `xlapy aot` is the command-line door
(docs/aot.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llvmlite import ir

from xlapy.aot import freestanding as freestanding_mod
from xlapy.aot import probe, threads
from xlapy.aot.emit import ALIGN, Program, array_leaves, emit_entry
from xlapy.aot.errors import Unimplemented
from xlapy.aot.header import header
from xlapy.aot.link import link_object, linked_text
from xlapy.backends.cpu import objfile, rtlib, target
from xlapy.backends.cpu.llvm_util import I8P, I32, module_text
from xlapy.errors import XlapyError
from xlapy.ir import Computation, Module
from xlapy.types import Shape

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RUN_TYPE = ir.FunctionType(I32, [I8P.as_pointer(), I8P.as_pointer(), I8P])
RUN_THREADED_TYPE = ir.FunctionType(I32, [I8P.as_pointer(), I8P.as_pointer(), I8P, I32])


@dataclass
class AotObject:
    """A compiled program: the object file's bytes, its header's text, and what the header
    says (argument and result shapes, scratch bytes, libc / libm symbols needed)."""

    name: str
    target: str
    object: bytes
    header: str
    args: list[Shape]
    results: list[Shape]
    scratch_bytes: int
    undefined: list[str]
    #: probe_id of each interpreter.probe, in result order (probe.py): probe j's values
    #: and count are results[len(results) - 2 * len(probes) + 2 j] and the one after.
    probes: list[str] = field(default_factory=list)

    def write(self, directory: str | Path) -> tuple[Path, Path]:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        o, h = d / f"{self.name}.o", d / f"{self.name}.h"
        o.write_bytes(self.object)
        h.write_text(self.header)
        return o, h


def load(program: Any, entry: str | None = None) -> Module:
    """A Module from StableHLO / HLO text, a path to a .mlir / .hlo file, or a Module."""
    from xlapy.hlo_text import is_hlo_text, parse_hlo_module
    from xlapy.stablehlo import parse_module, read_program

    if isinstance(program, Module):
        return program
    if isinstance(program, Path) or (isinstance(program, str) and "\n" not in program
                                     and Path(program).is_file()):
        text, where = read_program(program), str(program)
    elif isinstance(program, str):
        text, where = program, "<string>"
    else:
        raise XlapyError(f"xlapy aot: cannot compile a {type(program).__name__}")
    return parse_hlo_module(text, where) if is_hlo_text(text) else \
        parse_module(text, where, entry)


def compile(program: Any, name: str, target_name: str | None = None,  # noqa: A001
            entry: str | None = None, function: Computation | None = None,
            target: str | None = None, probe_capacity: int = 1,
            freestanding: bool = False) -> AotObject:
    """Compile `program` (see `load`) into an object defining `{name}_run` for a cpu target
    (target.py's names; default: the host). `function`: compile this computation of an
    already verified module as it is (no backend pipeline; the conformance chunks' way).
    `probe_capacity`: values kept per interpreter.probe (probe.py). `freestanding`: an
    object with no undefined symbol (no libc / libm / pthreads: freestanding.py); a program
    needing a libm function is refused with `Unimplemented` naming it."""
    from xlapy.backends import get_backend
    from xlapy.backends.cpu import target as targets

    if not _NAME.match(name):
        raise XlapyError(f"xlapy aot: the name {name!r} is not a C identifier")
    if probe_capacity < 0:
        raise XlapyError(f"xlapy aot: probe_capacity {probe_capacity} is negative")
    t = targets.resolve(target or target_name)
    module = load(program, entry)
    options = {"target": t, "num_threads": 1, "nested": True, "routines": False}
    with targets.use(t):
        if function is not None:
            exe = get_backend("cpu").compile_function(module, function, options)
        else:
            if module.entry is None:
                raise XlapyError(f"module {module.name} has no entry function "
                                 "(name one with entry=)")
            exe = get_backend("cpu").compile(module, options)
        return _build(exe, name, t, module.name, probe_capacity, freestanding)


def _build(exe: Any, name: str, t: targets_t, source: str, capacity: int = 1,
           freestanding: bool = False) -> AotObject:
    comp = exe.comp
    args = [s for p in comp.parameters for s in _leaves_checked(p.shape, "argument")]
    results = _leaves_checked(comp.root.shape, "result") if comp.root is not None else []
    mod = ir.Module(name=f"xlapy_aot_{name}")
    mod.triple = t.triple
    prog = Program(name, mod, probe_capacity=capacity, freestanding=freestanding)
    fn, scratch = emit_entry(prog, exe)
    first = len(results)
    results = results + probe.result_shapes(prog)
    entries = []
    for suffix, ty in (("run", RUN_TYPE), ("run_threaded", RUN_THREADED_TYPE)):
        run = ir.Function(mod, ty, name=f"{name}_{suffix}")
        b = ir.IRBuilder(run.append_basic_block("entry"))
        n = run.args[3] if len(run.args) > 3 else ir.Constant(I32, 1)
        b.call(fn, [*run.args[:3], probe.table(b, run.args[1], first, len(prog.probes)), n])
        b.ret(ir.Constant(I32, 0))
        entries.append(run.name)
    driver = module_text(mod)
    obj = link_object(driver, prog.texts, set(entries), t, freestanding)
    undefined = sorted(objfile.undefined(obj))
    if freestanding and undefined:
        raise freestanding_mod.refuse(undefined, [linked_text(driver, prog.texts, t)],
                                      prog.kernel_ops)
    missing = set(undefined) - set(rtlib.LIBC) - set(rtlib.LIBM) - set(threads.PTHREAD)
    if missing:
        raise XlapyError(f"xlapy aot: the object needs {', '.join(sorted(missing))}, which "
                         "is neither libc, libm nor pthreads")
    text = header(name, args, results, scratch, ALIGN, undefined, str(t), source,
                  probe.header_lines(name.upper(), prog, first) if prog.probes else [],
                  freestanding)
    return AotObject(name, str(t), obj, text, args, results, scratch, undefined,
                     [p.attrs.probe_id for p in prog.probes])


targets_t = target.CpuTarget


def _leaves_checked(shape: Shape, what: str) -> list[Shape]:
    out = array_leaves(shape)
    if shape.is_token or (shape.is_tuple and len(out) != _count(shape)):
        raise Unimplemented("token", f"a token {what} of the entry computation")
    return out


def _count(shape: Shape) -> int:
    return sum(_count(s) for s in shape.tuple_shapes) if shape.is_tuple else 1


__all__ = ["AotObject", "Unimplemented", "compile", "load"]
