"""`xlapy run FILE...`: parse StableHLO files, run their entry function, evaluate `check` ops.

One PASS/FAIL line per chunk when a run has several (files or `// -----` chunks), then
`N passed, M failed`; exit status 0 exactly when nothing failed. Parse and verification
errors print `file:line:col: message`, the source line and a caret.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from xlapy import denormal
from xlapy.backends import default_backend
from xlapy.errors import XlapyError
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ir import Module
from xlapy.stablehlo import has_dynamic_entry, parse_module, read_program, split_chunks
from xlapy.stablehlo.values import format_value
from xlapy.types import Shape, from_shlo_name
from xlapy.verify import verify_module


@dataclass
class ChunkResult:
    name: str
    ok: bool
    message: str = ""
    outputs: list[Any] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)


def entry_functions(module: Module, entry: str | None) -> list[str]:
    """What to run: the entry (main / the only function), else every argument-less public
    function nobody calls (the reference interpreter's test files hold several)."""
    if module.entry is not None:
        return [module.entry.name]
    called = {c.name for comp in module.computations for c in comp.called_computations()}
    vis = module.meta.get("visibility", {})
    names = [n for n in module.meta.get("functions", [])  # type: ignore[union-attr]
             if n not in called and vis.get(n, "public") == "public"]  # type: ignore[union-attr]
    return [n for n in names if not module.get(n).parameters]


def run_module(module: Module, args: Sequence[Any] = (), entry: str | None = None,
               printed: list[str] | None = None, backend: str = "interpreter") -> list[Any]:
    """Verify `module` and run its entry function(s) on `backend`; returns their values."""
    verify_module_lenient(module)
    outs = []
    for name in entry_functions(module, entry):
        runtime = RuntimeState()
        if printed is not None:
            runtime.hooks["print"] = printed.append
        comp = module.get(name)
        fargs = list(args) if comp is module.entry else []
        if comp is module.entry and module.num_replicas * module.num_partitions > 1:
            from xlapy.distributed.cli_support import run_on_grid

            outs.extend(run_on_grid(module, comp, fargs, runtime, backend))  # one per process
            continue
        if backend == "interpreter":
            outs.append(Interpreter(runtime).run(comp, fargs))
        else:
            from xlapy.backends import get_backend

            exe = get_backend(backend).compile_function(module, comp)
            outs.append(exe.run_computation(fargs, runtime))
    return outs


def verify_module_lenient(module: Module) -> None:
    """verify_module needs an entry; a module of independent test functions has none."""
    if module.entry is None and module.computations:
        module.entry = module.computations[-1]
        try:
            verify_module(module)
        finally:
            module.entry = None
    elif module.computations:
        verify_module(module)


def run_chunk(text: str, filename: str, line_offset: int = 0, entry: str | None = None,
              inputs: Sequence[Any] = (), backend: str = "interpreter") -> ChunkResult:
    name = f"{filename}:{line_offset + 1}"
    printed: list[str] = []
    try:
        shapes = None
        if inputs and has_dynamic_entry(text, entry):  # `?` arguments: the inputs' shapes
            shapes = [Shape.array(_etype(np.asarray(a)), np.shape(a)) for a in inputs]
        module = parse_module(text, filename, entry, line_offset, shapes)
        outs = run_module(module, inputs, entry, printed, backend)
    except XlapyError as e:
        return ChunkResult(name, False, f"{type(e).__name__}: {e}", printed=printed)
    except RecursionError:
        return ChunkResult(name, False, "RecursionError: nesting too deep", printed=printed)
    return ChunkResult(name, True, "", outs, printed)


def _etype(a: np.ndarray) -> Any:
    from xlapy.types import ElementType

    for t in ElementType:
        if t.is_array and t.dtype == a.dtype:
            return t
    raise XlapyError(f"no element type for numpy dtype {a.dtype}")


# ---- inputs ---------------------------------------------------------------------------------
_INLINE = re.compile(r"^((?:\d+x)*)([a-z][a-z0-9]*)=(.*)$", re.S)


def parse_input(spec: str) -> list[Any]:
    """`x.npy`, `x.npz` (arrays in name order) or iree-style `2x2xf32=[1 2][3 4]` / `f32=5`."""
    if spec.endswith(".npy"):
        return [np.load(spec)]
    if spec.endswith(".npz"):
        with np.load(spec) as data:
            return [data[k] for k in data.files]
    m = _INLINE.match(spec.strip())
    if m is None:
        raise XlapyError(f"bad --input '{spec}': expected FILE.npy, FILE.npz or "
                         "DIMSxTYPE=VALUES like 2x2xf32=[1 2][3 4]")
    dims = [int(d) for d in m.group(1).split("x")[:-1]]
    et = from_shlo_name(m.group(2))
    values = re.findall(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)|true|false",
                        m.group(3))
    n = int(np.prod(dims)) if dims else 1
    if len(values) == 1 and n != 1:
        values = values * n
    if len(values) != n:
        raise XlapyError(f"bad --input '{spec}': {len(values)} value(s) for shape {dims}")
    if et.is_pred:
        arr = np.array([v in ("true", "1") for v in values])
    else:
        arr = np.array([float(v) if et.is_float or et.is_complex else int(v) for v in values])
    return [arr.astype(et.dtype).reshape(dims)]


_ARGS_USAGE = "--args=[dense<1> : tensor<2xi32>, ...]"


def parse_args_attr(text: str) -> list[Any]:
    """stablehlo-translate's `--args`: an array attribute of `dense<...> : type` values."""
    from xlapy.stablehlo.dense import dense_to_array
    from xlapy.stablehlo.nodes import DenseAttr
    from xlapy.stablehlo.parser import Parser

    p = Parser(text, "--args")
    if not p.at("["):
        raise XlapyError(f"expected array attribute string for args, i.e. {_ARGS_USAGE}")
    value = p.parse_attr()
    if p.peek().kind != "eof":
        raise XlapyError(f"unexpected '{p.peek().text}' after the --args array")
    out = []
    for item in value:
        if not isinstance(item, DenseAttr) or not isinstance(item.type, Shape):
            raise XlapyError("expected dense elements attribute for args elements, i.e. "
                             f"{_ARGS_USAGE}")
        out.append(dense_to_array(item.body, item.type))
    return out


# ---- the command ------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    inputs: list[Any] = []
    try:
        for spec in args.input or []:
            inputs.extend(parse_input(spec))
        if args.args:
            inputs.extend(parse_args_attr(args.args))
    except (XlapyError, OSError, ValueError) as e:
        out.write(f"error: {e}\n")
        return 2
    results: list[ChunkResult] = []
    for path in args.files:
        try:
            text = read_program(path)
        except XlapyError as e:
            results.append(ChunkResult(path, False, str(e)))
            continue
        chunks = split_chunks(text)
        for c in chunks:
            if not c.text.strip() or _only_comments(c.text):
                continue
            results.append(run_chunk(c.text, path, c.line_offset, args.entry, inputs,
                                     args.backend or default_backend()))
    many = len(results) != 1
    for r in results:
        for line in r.printed:
            out.write(line + "\n")
        if many:
            out.write(f"{'PASS' if r.ok else 'FAIL'} {r.name}\n")
            if not r.ok:
                out.write(_indent(r.message) + "\n")
        elif r.ok:
            for value in r.outputs:
                if isinstance(value, tuple) and value == ():
                    continue
                out.write(format_value(value) + "\n")
        else:
            out.write(r.message + "\n")
    failed = sum(not r.ok for r in results)
    if many:
        out.write(f"{len(results) - failed} passed, {failed} failed\n")
    return 0 if failed == 0 else 1


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("//") for line in text.splitlines())


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xlapy", description="XLA in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run StableHLO files (check ops are evaluated)")
    run.add_argument("files", nargs="+", metavar="FILE")
    run.add_argument("--entry", default=None, help="function to run (default: main)")
    run.add_argument("--input", action="append", metavar="VALUE",
                     help="an argument: FILE.npy, FILE.npz or 2x2xf32=[1 2][3 4]")
    run.add_argument("--args", default=None, metavar="ARRAY",
                     help="arguments as stablehlo-translate takes them: "
                          "'[dense<1> : tensor<2xi32>, ...]'")
    run.add_argument("--split-input-file", action="store_true",
                     help="split files at '// -----' (always done)")
    run.add_argument("--distributed", choices=("threads", "mpi"), default="threads",
                     help="process grids run in threads (default) or, under mpiexec, one "
                          "MPI rank per process (docs/distributed.md)")
    run.add_argument("--backend", default=None,
                     help="cpu or interpreter (default: $XLAPY_BACKEND, else cpu)")
    run.add_argument("--denormal", choices=denormal.MODES, default=denormal.FTZ,
                     help="ftz: flush f32/f64 denormals as XLA CPU (default); ieee: keep "
                          "them, as the StableHLO spec (xlapy.denormal)")
    from xlapy.cli.compile import add_target_argument

    add_target_argument(run)
    from xlapy.cli.opt import add_parser as add_opt_parser

    add_opt_parser(sub)
    from xlapy.cli.graph import add_parser as add_graph_parser

    add_graph_parser(sub)
    from xlapy.cli.compile import add_parser as add_compile_parser

    add_compile_parser(sub)
    from xlapy.cli.aot import add_parser as add_aot_parser

    add_aot_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    with denormal.use(getattr(args, "denormal", denormal.FTZ)):
        return _main(args, out or sys.stdout)


def _main(args: argparse.Namespace, stream: TextIO) -> int:
    if getattr(args, "target", None):
        from xlapy.backends.cpu import target

        try:
            chosen = target.resolve(args.target)
        except XlapyError as e:
            stream.write(f"error: {e}\n")
            return 2
        with target.use(chosen):
            return _dispatch(args, stream)
    return _dispatch(args, stream)


def _dispatch(args: argparse.Namespace, stream: TextIO) -> int:
    if args.command == "run" and args.distributed == "mpi":
        from xlapy.distributed.cli_support import cmd_run_mpi

        return cmd_run_mpi(args, stream, cmd_run)
    if args.command == "run":
        return cmd_run(args, stream)
    if args.command == "graph":
        from xlapy.cli.graph import cmd_graph

        return cmd_graph(args, stream)
    if args.command == "opt":
        from xlapy.cli.opt import cmd_opt

        return cmd_opt(args, stream)
    if args.command == "compile":
        from xlapy.cli.compile import cmd_compile

        return cmd_compile(args, stream)
    if args.command == "aot":
        from xlapy.cli.aot import cmd_aot

        return cmd_aot(args, stream)
    return 2


if __name__ == "__main__":
    sys.exit(main())
