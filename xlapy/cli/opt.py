"""`xlapy opt FILE`: run passes or a pipeline over a program and print the result.

    xlapy opt FILE --passes algsimp,dce [--print-after-all]
    xlapy opt FILE --pipeline cpu [--explain-fusion] [--memory-report] [--timing]

FILE is StableHLO text (.mlir), XLA's HLO text (`HloModule ...`), or `workload:NAME` for a
reference workload of benchmarks/workloads (run from the repository root). `--pipeline cpu` is
the pipeline the cpu backend's compile runs (backends/cpu/pipeline.py); its --explain-fusion
prints every fusion decision with its reason, then the kernels under "// cpu fusion", the
lines `xlapy compile FILE --explain` prints. `--pipeline xla-cpu` is XLA:CPU's pass order (the
generic passes).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from xlapy.errors import XlapyError
from xlapy.ir import Module


def load_module(spec: str, entry: str | None = None) -> Module:
    """`workload:NAME`, else a file of StableHLO text or of XLA's HLO text (`HloModule`)."""
    if spec.startswith("workload:"):
        return _workload(spec.split(":", 1)[1])
    from xlapy.hlo_text import is_hlo_text, parse_hlo_module
    from xlapy.stablehlo import parse_module, read_program

    text = read_program(spec)
    return parse_hlo_module(text, spec) if is_hlo_text(text) else parse_module(text, spec, entry)


def _workload(name: str) -> Module:
    """A reference workload of benchmarks/workloads, read from the repository in the current
    directory (an installed `xlapy` script's path does not hold it)."""
    import importlib
    import os
    import sys

    try:
        workloads = importlib.import_module("benchmarks.workloads")
    except ModuleNotFoundError:
        if not os.path.isfile(os.path.join("benchmarks", "workloads", "__init__.py")):
            raise XlapyError(f"workload:{name}: the reference workloads are the xlapy "
                             "repository's benchmarks/workloads: run from its root") from None
        sys.path.insert(0, os.getcwd())
        workloads = importlib.import_module("benchmarks.workloads")
    if name not in workloads.WORKLOADS:
        raise XlapyError(f"workload:{name}: no such workload (known: "
                         f"{', '.join(sorted(workloads.WORKLOADS))})")
    build, _ = workloads.WORKLOADS[name]
    return build().module


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("opt", help="run HLO passes or a pipeline and print the module")
    p.add_argument("file", metavar="FILE", help="StableHLO file or workload:NAME")
    p.add_argument("--passes", default="", help="comma-separated pass names")
    p.add_argument("--pipeline", default=None, help="a named pipeline (cpu)")
    p.add_argument("--print-after-all", action="store_true")
    p.add_argument("--explain-fusion", action="store_true", help="print fusion decisions")
    p.add_argument("--memory-report", action="store_true")
    p.add_argument("--timing", action="store_true", help="seconds per pass")
    p.add_argument("--no-verify", action="store_true")
    return p


def cmd_opt(args: argparse.Namespace, out: TextIO) -> int:
    from xlapy.cli.compile import FUSION_HEADER
    from xlapy.passes import Pipeline, make_pass, make_pipeline
    from xlapy.passes.buffer_assignment import assign_buffers

    try:
        # On a copy, as the cpu backend's compile does: cloning orders the computations
        # (post order), which decides the names the passes give new instructions.
        module = load_module(args.file).clone()
        printer = (lambda text: out.write(text + "\n")) if args.print_after_all else None
        if args.pipeline:
            pipe = make_pipeline(args.pipeline, verify=not args.no_verify,
                                 print_after_all=printer)
        else:
            names = [n for n in args.passes.split(",") if n]
            pipe = Pipeline("opt", [make_pass(n) for n in names], not args.no_verify, printer)
        before = assign_buffers(module.entry_computation()) if args.memory_report else None
        pipe.run(module)
    except (XlapyError, OSError, KeyError) as e:
        out.write(f"error: {e}\n")
        return 1
    out.write(module.to_text())
    if args.explain_fusion:
        out.write("\n// fusion decisions\n")
        for p in _all_passes(pipe):
            for d in getattr(p, "decisions", ()):
                out.write(f"{d}\n")
        for p in _all_passes(pipe):
            if hasattr(p, "describe"):  # the cpu fusion: its kernels, as `compile --explain`
                out.write(f"\n{FUSION_HEADER}\n" + "".join(f"{line}\n" for line in p.describe()))
    if args.memory_report:
        ba = module.meta.get("buffer_assignment") or assign_buffers(module.entry_computation())
        assert before is not None
        out.write(f"\n// before the passes: {before.unshared_bytes} B in one buffer per value, "
                  f"arena {before.arena_bytes} B\n")
        out.write(ba.report() + "\n")
    if args.timing:
        out.write("\n" + pipe.context.timing_report() + "\n")
    return 0


def _all_passes(p: Any) -> list[Any]:
    out = [p]
    for q in getattr(p, "passes", []):
        out.extend(_all_passes(q))
    return out
