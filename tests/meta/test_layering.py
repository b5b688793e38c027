"""Each layer imports only the layers before it (docs/architecture.md)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "xlapy"

LAYERS = {
    "errors": 0, "phases": 0, "denormal": 1, "types": 1, "ops": 2, "ir": 3, "verify": 4,
    "builder": 5, "stablehlo": 5, "hlo_text": 5, "passes": 6, "interpreter": 7, "backends": 8,
    "runtime": 9, "aot": 9, "distributed": 10, "cli": 11,
}
# Top-level glue modules may import anything.
FREE = {"__init__", "__main__", "api"}


def _layer_of_module(name: str) -> int | None:
    parts = name.split(".")
    if parts[0] != "xlapy" or len(parts) < 2:
        return None
    return LAYERS.get(parts[1])


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _files() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.parent != PKG or p.stem not in FREE)


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_respect_layers(path: Path) -> None:
    rel = path.relative_to(PKG)
    own = LAYERS.get(rel.parts[0].removesuffix(".py"))
    assert own is not None, f"{rel}: package not in the layer table of docs/architecture.md"
    bad = []
    for line, name in _imports(path):
        layer = _layer_of_module(name)
        if layer is not None and layer > own:
            bad.append(f"line {line}: imports {name} (layer {layer} > {own})")
    assert not bad, f"{rel}: " + "; ".join(bad)
