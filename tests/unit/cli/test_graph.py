"""`xlapy graph`: DOT text with fusions as clusters; svg/html with and without graphviz."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from benchmarks.workloads import WORKLOADS
from xlapy.cli.graph import module_to_dot, write_graph
from xlapy.cli.main import main
from xlapy.errors import XlapyError
from xlapy.passes import cpu_pipeline


def _fused_softmax() -> object:
    build, kw = WORKLOADS["softmax"]
    m = build(**kw).module
    cpu_pipeline(verify=True).run(m)
    return m


def test_dot_has_one_cluster_per_fusion_and_balanced_braces() -> None:
    m = _fused_softmax()
    text = module_to_dot(m)
    fusions = [i for i in m.entry.instructions if i.opcode == "fusion"]
    assert fusions
    assert len(re.findall(r"subgraph cluster_n\d+ \{", text)) == len(fusions)
    assert "cluster_entry" in text and text.count("{") == text.count("}")
    for f in fusions:
        assert f"{f.name} (" in text  # the cluster label
        for i in f.called[0].instructions:
            assert f'"{i.name}\\n{i.opcode}' in text


def test_unfused_module_has_no_fusion_clusters() -> None:
    build, kw = WORKLOADS["softmax"]
    text = module_to_dot(build(**kw).module)
    assert "fusion" not in text and "cluster_entry" in text


def test_write_dot_svg_html_without_graphviz(tmp_path: Path) -> None:
    m = _fused_softmax()
    note = write_graph(m, tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    note = write_graph(m, tmp_path / "g.svg", svg=lambda _: None)
    assert "not installed" in note and (tmp_path / "g.svg.dot").exists()
    assert not (tmp_path / "g.svg").exists()
    write_graph(m, tmp_path / "g.html", svg=lambda _: None)
    page = (tmp_path / "g.html").read_text()
    assert "<pre>digraph" in page and "-&gt;" in page


def test_write_svg_and_html_with_a_renderer(tmp_path: Path) -> None:
    m = _fused_softmax()
    fake = "<svg xmlns='http://www.w3.org/2000/svg'></svg>"
    write_graph(m, tmp_path / "g.svg", svg=lambda _: fake)
    assert (tmp_path / "g.svg").read_text() == fake
    write_graph(m, tmp_path / "g.html", svg=lambda _: fake)
    assert fake in (tmp_path / "g.html").read_text()
    with pytest.raises(XlapyError, match="unknown output type"):
        write_graph(m, tmp_path / "g.png")


def test_cli_graph_command(tmp_path: Path) -> None:
    out = io.StringIO()
    target = tmp_path / "loop.dot"
    assert main(["graph", "workload:fori_loop", "-o", str(target)], out) == 0
    text = target.read_text()
    assert "while" in text and "style=dashed" in text  # the loop body is its own cluster
    out = io.StringIO()
    assert main(["graph", "workload:softmax", "-o", str(tmp_path / "s.dot"),
                 "--no-passes"], out) == 0
    assert "fusion" not in (tmp_path / "s.dot").read_text()
    out = io.StringIO()
    assert main(["graph", "workload:nope", "-o", str(tmp_path / "x.dot")], out) == 1
    assert out.getvalue().startswith("error:")
