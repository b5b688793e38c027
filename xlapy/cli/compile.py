"""`xlapy compile FILE --explain`: compile a program with a backend and say how each op runs.

    xlapy compile FILE [--backend cpu] [--explain] [--entry NAME]

FILE is StableHLO text (.mlir), XLA's HLO text (`HloModule ...`, e.g. what
`jax.jit(f).lower(...).compile().as_text()` prints) or `workload:NAME` (a reference
workload, run from the repository root). With --explain, the cpu backend prints one line
per instruction (kernel, library call, control flow, interpreter fallback), the kernels
built, the ops that fall back to interpreter kernels, and what each fused kernel computes
(the same "// cpu fusion" lines as `xlapy opt FILE --pipeline cpu --explain-fusion`) and
where the compile's time went, phase by phase (xlapy.phases: parse, import, passes, emit,
LLVM optimize and codegen, ...); the command also prints the compile time.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from xlapy.errors import XlapyError
from xlapy.phases import recording

#: The header of the fused-kernel lines `compile --explain` and `opt --explain-fusion` print.
FUSION_HEADER = "// cpu fusion"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("compile", help="compile a program; --explain says how each op runs")
    p.add_argument("file", metavar="FILE", help="StableHLO or HLO text file, or workload:NAME")
    p.add_argument("--backend", default="cpu", help="backend name (default cpu)")
    p.add_argument("--entry", default=None, help="function to compile (default: main)")
    p.add_argument("--explain", action="store_true",
                   help="list kernels, library calls and interpreter fallbacks")
    add_target_argument(p)
    return p


def add_target_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=None,
                   help="cpu target: host (default: $XLAPY_CPU_TARGET, else host), x86-64-v2, "
                        "x86-64-v3, x86-64-v4, sapphirerapids, znver5, aarch64-linux-gnu, ... "
                        "(code for a machine other than this one is compiled, not run)")


def cmd_compile(args: argparse.Namespace, out: TextIO) -> int:
    from xlapy.backends import get_backend
    from xlapy.cli.opt import load_module

    try:
        with recording() as phases:
            module = load_module(args.file, args.entry)
            if module.entry is None:
                raise XlapyError(f"{args.file}: no entry function (name one with --entry)")
            t0 = time.perf_counter()
            exe = get_backend(args.backend).compile(module, None)
            dt = time.perf_counter() - t0
    except (XlapyError, OSError, KeyError) as e:
        out.write(f"error: {e}\n")
        return 1
    where = f" for {exe.target}" if hasattr(exe, "target") else ""
    out.write(f"compiled {module.entry.name} with {args.backend}{where} in {dt * 1e3:.1f} ms\n")
    if args.explain:
        explain = getattr(exe, "explain", None)
        if explain is None:
            out.write(f"backend {args.backend} has nothing to explain (no compiled kernels)\n")
            return 0
        out.write(explain() + "\n")
        kernels = getattr(exe, "kernels", lambda: [])()
        out.write(f"-- {len(kernels)} kernel(s) built"
                  + (": " + ", ".join(f"{k} (root %{r})" for k, r in kernels) if kernels
                     else "") + "\n")
        out.write(f"-- {phases.table()}\n")  # before the fusion lines, which end the output
        fusions = getattr(exe, "fusions", None)
        if fusions is not None:
            out.write(FUSION_HEADER + "\n" + "".join(f"{line}\n" for line in fusions()))
    return 0


__all__ = ["add_parser", "cmd_compile"]
