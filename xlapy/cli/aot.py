"""`xlapy aot FILE --name NAME -o DIR [--target T]`: a program as DIR/NAME.o + DIR/NAME.h.

FILE is StableHLO text (.mlir) or XLA HLO text (.hlo). The object defines `NAME_run` only
and needs nothing but libc / libm (xlapy/aot/__init__.py; nothing at all with
--freestanding); the header documents the call.
An op with no in-object implementation is an error naming the op (exit status 1).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from xlapy.errors import XlapyError


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("aot", help="compile a program ahead of time: NAME.o + NAME.h for C")
    p.add_argument("file", metavar="FILE", help="StableHLO (.mlir) or HLO text (.hlo) file")
    p.add_argument("--name", required=True, help="C identifier: the object defines NAME_run")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="directory for NAME.o and NAME.h")
    p.add_argument("--entry", default=None, help="function to compile (default: main)")
    p.add_argument("--target", default=None,
                   help="host (default), x86-64-v2, x86-64-v3, x86-64-v4, aarch64-linux-gnu, "
                        "... (backends/cpu/target.py)")
    p.add_argument("--probe-capacity", type=int, default=1, metavar="N",
                   help="values kept per interpreter.probe (extra results; default 1)")
    p.add_argument("--freestanding", action="store_true",
                   help="an object with no undefined symbol (no libc / libm / pthreads); "
                        "a program needing a libm function is refused")
    return p


def cmd_aot(args: argparse.Namespace, out: TextIO) -> int:
    from xlapy.aot import compile as aot_compile

    try:
        obj = aot_compile(args.file, name=args.name, target=args.target, entry=args.entry,
                          probe_capacity=args.probe_capacity,
                          freestanding=args.freestanding)
        o, h = obj.write(args.output)
    except (XlapyError, OSError) as e:
        out.write(f"error: {e}\n")
        return 1
    needs = "nothing (freestanding)" if args.freestanding else \
        f"{', '.join(obj.undefined) or 'nothing'} from libc/libm"
    out.write(f"wrote {o} ({len(obj.object)} bytes, {obj.target}) and {h}; "
              f"{len(obj.args)} argument(s), {len(obj.results)} result(s), "
              f"{obj.scratch_bytes} bytes of scratch; needs {needs}\n")
    return 0


__all__ = ["add_parser", "cmd_aot"]
