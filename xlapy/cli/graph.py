"""`xlapy graph FILE -o out.svg|.dot|.html`: the HLO graph, fusions drawn as clusters.

    xlapy graph FILE -o out.svg [--pipeline cpu | --passes a,b | --no-passes]

FILE is StableHLO text or `workload:NAME` (as for `xlapy opt`). By default the cpu pipeline
runs first, so the picture shows what the backend will run: every fusion is a cluster holding
its fused instructions; other called computations (loop bodies, reducers) are dashed
clusters. `.dot` writes DOT text; `.svg` runs graphviz `dot` when it is installed and writes
the DOT text next to it (`out.svg.dot`) otherwise; `.html` embeds the SVG, or the DOT text
when graphviz is missing.
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
from pathlib import Path
from typing import Any, TextIO

from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction, Module

_FILL = {"fusion": "#fde2c8", "parameter": "#e0ecff", "constant": "#eeeeee",
         "dot_general": "#f8d0d0", "convolution": "#f8d0d0", "while": "#e6d9f5",
         "reduce": "#d6f0d6", "copy": "#fff3b0"}


def _q(text: str) -> str:
    """A DOT string; `\\n` in labels stays DOT's line break."""
    return '"' + text.replace('"', '\\"') + '"'


class _Dot:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ids: dict[int, str] = {}
        self.drawn: set[int] = set()

    def node_id(self, i: Instruction) -> str:
        return self.ids.setdefault(id(i), f"n{len(self.ids)}")

    def nodes(self, comp: Computation, indent: str) -> None:
        for i in comp.post_order():
            if i.opcode == "fusion":
                self.fusion(i, indent)
                continue
            label = f"{i.name}\\n{i.opcode}\\n{i.shape}"
            style = ",penwidth=2" if i is comp.root else ""
            fill = _FILL.get(i.opcode, "white")
            self.lines.append(f"{indent}{self.node_id(i)} [label={_q(label)},"
                              f"fillcolor={_q(fill)}{style}];")
            for o in i.operands:
                self.lines.append(f"{indent}{self.src(o)} -> {self.node_id(i)};")

    def src(self, o: Instruction) -> str:
        """The node an edge from `o` leaves: a fusion's fused root."""
        if o.opcode == "fusion" and o.called and o.called[0].root is not None:
            return self.src(o.called[0].root)
        return self.node_id(o)

    def fusion(self, f: Instruction, indent: str) -> None:
        (comp,) = f.called
        kind = getattr(getattr(f.attrs, "kind", None), "value", "")
        self.lines.append(f"{indent}subgraph cluster_{self.node_id(f)} {{")
        self.lines.append(f"{indent}  label={_q(f'{f.name} ({kind} fusion)')}; style=filled; "
                          f"fillcolor={_q(_FILL['fusion'])};")
        self.nodes(comp, indent + "  ")
        self.lines.append(f"{indent}}}")
        for p, o in zip(comp.parameters, f.operands):
            self.lines.append(f"{indent}{self.src(o)} -> {self.node_id(p)} [style=dashed];")

    def computation(self, comp: Computation, entry: bool) -> None:
        if id(comp) in self.drawn:
            return
        self.drawn.add(id(comp))
        if entry:
            self.lines.append(f"  subgraph cluster_entry {{ label={_q('ENTRY ' + comp.name)};")
        else:
            self.lines.append(f"  subgraph cluster_c{len(self.drawn)} {{ "
                              f"label={_q(comp.name)}; style=dashed;")
        self.nodes(comp, "    ")
        self.lines.append("  }")


def module_to_dot(module: Module) -> str:
    """DOT text for the module: the entry, and every other non-fused computation, each a
    cluster; fusions nested clusters with their fused instructions."""
    d = _Dot()
    d.lines += [f"digraph {_q(module.name)} {{", "  rankdir=TB;",
                '  node [shape=box, style="rounded,filled", fontname="monospace", '
                'fontsize=10];']
    fused = {id(c) for comp in module.computations for i in comp.instructions
             if i.opcode == "fusion" for c in i.called}
    if module.entry is not None:
        d.computation(module.entry, True)
    for comp in module.computations:
        if comp is not module.entry and id(comp) not in fused:
            d.computation(comp, False)
    d.lines.append("}")
    return "\n".join(d.lines) + "\n"


def render_svg(dot_text: str) -> str | None:
    """SVG from graphviz `dot`, or None when graphviz is not installed (or fails)."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True, text=True,
                           timeout=120, check=True)
    except (subprocess.SubprocessError, OSError):
        return None
    return r.stdout


def write_graph(module: Module, out: Path, svg: Any = render_svg) -> str:
    """Write `out` by its suffix; returns a one-line note of what was written."""
    text = module_to_dot(module)
    suffix = out.suffix.lower()
    if suffix == ".dot":
        out.write_text(text)
        return f"wrote DOT text to {out}"
    picture = svg(text)
    if suffix == ".svg":
        if picture is None:
            alt = out.with_name(out.name + ".dot")
            alt.write_text(text)
            return f"graphviz 'dot' is not installed: wrote DOT text to {alt}"
        out.write_text(picture)
        return f"wrote SVG to {out}"
    if suffix in (".html", ".htm"):
        body = picture if picture is not None else \
            f"<p>graphviz is not installed; DOT text:</p>\n<pre>{html.escape(text)}</pre>"
        out.write_text(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
                       f"{html.escape(module.name)}</title></head><body>\n{body}\n"
                       "</body></html>\n")
        return f"wrote HTML ({'SVG' if picture is not None else 'DOT text'}) to {out}"
    raise XlapyError(f"unknown output type '{out.suffix}': use .svg, .dot or .html")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("graph", help="draw the HLO graph (fusions as clusters)")
    p.add_argument("file", metavar="FILE", help="StableHLO file or workload:NAME")
    p.add_argument("-o", "--output", required=True, help="out.svg, out.dot or out.html")
    p.add_argument("--pipeline", default="cpu", help="pipeline to run first (default cpu)")
    p.add_argument("--passes", default=None, help="comma-separated passes instead")
    p.add_argument("--no-passes", action="store_true", help="draw the module as parsed")
    return p


def cmd_graph(args: argparse.Namespace, out: TextIO) -> int:
    from xlapy.cli.opt import load_module
    from xlapy.passes import Pipeline, make_pass, make_pipeline

    try:
        module = load_module(args.file)
        if args.passes is not None:
            names = [n for n in args.passes.split(",") if n]
            Pipeline("graph", [make_pass(n) for n in names], verify=True).run(module)
        elif not args.no_passes:
            make_pipeline(args.pipeline, verify=True).run(module)
        note = write_graph(module, Path(args.output))
    except (XlapyError, OSError, KeyError) as e:
        out.write(f"error: {e}\n")
        return 1
    out.write(note + "\n")
    return 0
