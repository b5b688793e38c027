"""Module size limits from the style guide: <= 600 lines soft, <= 1000 hard; tests <= 1500."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXEMPT = "xlapy: size-exempt"


def _lines(path: Path) -> int:
    return sum(1 for _ in path.open(encoding="utf-8"))


def _modules(top: str) -> list[Path]:
    return sorted((ROOT / top).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("xlapy"), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_at_most_600_lines(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if EXEMPT in text:
        return
    n = _lines(path)
    assert n <= 600, f"{path.relative_to(ROOT)} has {n} lines; split it by sub-family"


@pytest.mark.parametrize("path", _modules("tests"), ids=lambda p: str(p.relative_to(ROOT)))
def test_test_file_is_at_most_1500_lines(path: Path) -> None:
    assert _lines(path) <= 1500
