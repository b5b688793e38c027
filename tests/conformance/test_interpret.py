"""Every chunk of every file in ../shared/conformance/stablehlo-interpret/ through `xlapy run`.

One pytest id per `// -----` chunk (`file:line`). Chunks that fail for a known reason are in
XFAIL with the reason; nothing is skipped silently. The files are read in place.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xlapy.cli.main import ChunkResult, _only_comments, parse_args_attr, run_chunk
from xlapy.stablehlo import split_chunks
from xlapy.stablehlo.values import format_value

ROOT = Path(__file__).parents[3] / "shared" / "conformance" / "stablehlo-interpret"

#: chunk id -> why it fails today (strict: a listed chunk that passes fails the test).
XFAIL: dict[str, str] = {}

_CEIL = ("0.000000e+00, 1.000000e+00, 3.000000e+00", "0.000000e+00, 0.000000e+00, 3.000000e+00")
_FLOOR = ("-3.000000e+00, -1.000000e+00, -0.000000e+00",
          "-3.000000e+00, -0.000000e+00, -0.000000e+00")
_DAZ = ("XLA CPU flushes the subnormal input (DAZ): jax.jit(jnp.{op})({sign}1e-40) is {zero}, "
        "the spec's (ieee) answer is {spec}")

#: chunk id -> (fragment of the spec's expected value, XLA CPU's instead, why). In the ftz
#: mode (the default: XLA CPU's arithmetic) these chunks are checked against XLA CPU's result,
#: which tests/differential/test_conformance_ftz_vs_xla.py checks against XLA itself; in the
#: ieee mode (test_interpret_ieee.py) they are checked as written.
FTZ_EXPECTED: dict[str, tuple[str, str, str]] = {
    **{f"ceil.mlir:{line}": (*_CEIL, _DAZ.format(op="ceil", sign="", zero="0", spec="1"))
       for line in (1, 19, 28)},
    **{f"floor.mlir:{line}": (*_FLOOR, _DAZ.format(op="floor", sign="-", zero="-0",
                                                   spec="-1"))
       for line in (1, 19, 28)},
}


def ftz_text(cid: str, text: str) -> str:
    """The chunk as the ftz mode checks it: FTZ_EXPECTED's expected values substituted."""
    if cid not in FTZ_EXPECTED:
        return text
    spec, xla, _ = FTZ_EXPECTED[cid]
    assert text.count(spec) == 1, f"{cid}: FTZ_EXPECTED's fragment is not in the chunk once"
    return text.replace(spec, xla)


def _chunks() -> list[tuple[str, str, int]]:
    out = []
    for path in sorted(ROOT.rglob("*.mlir")):
        rel = path.relative_to(ROOT).as_posix()
        for c in split_chunks(path.read_text()):
            if _only_comments(c.text):
                continue
            out.append((f"{rel}:{c.line_offset + 1}", c.text, c.line_offset))
    return out


CHUNKS = _chunks() if ROOT.is_dir() else []


def test_conformance_files_found() -> None:
    assert ROOT.is_dir(), f"conformance files not found at {ROOT}"
    assert len(CHUNKS) > 400


def test_xfail_table_names_real_chunks() -> None:
    ids = {cid for cid, _, _ in CHUNKS}
    stale = sorted((set(XFAIL) | set(FTZ_EXPECTED)) - ids)
    assert not stale, f"XFAIL / FTZ_EXPECTED name chunks that do not exist: {stale}"


@pytest.mark.parametrize("cid", sorted(FTZ_EXPECTED))
def test_ftz_expected_is_needed(cid: str) -> None:
    """Each FTZ_EXPECTED entry changes the outcome: the chunk as written fails in the ftz mode
    (else the entry is stale) and passes with XLA's expected values."""
    text, offset = next((t, o) for c, t, o in CHUNKS if c == cid)
    assert not run_with_run_line(text, cid.split(":")[0], offset).ok
    assert run_with_run_line(ftz_text(cid, text), cid.split(":")[0], offset).ok


_RUN_ARGS = re.compile(r'^// RUN: stablehlo-translate .*--interpret --args="([^"]*)"', re.M)
_CHECK = re.compile(r"^// CHECK(?:-NEXT)?:\s?(.*)$", re.M)


def run_with_run_line(text: str, name: str, offset: int) -> ChunkResult:
    """Chunks whose RUN line passes `--args` run with those arguments, and their printed
    results must equal the CHECK lines (what `xlapy run --args=...` prints)."""
    m = _RUN_ARGS.search(text)
    if m is None:
        return run_chunk(text, name, offset)
    result = run_chunk(text, name, offset, inputs=parse_args_attr(m.group(1)))
    if not result.ok:
        return result
    printed = "\n".join(format_value(v) for v in result.outputs).splitlines()
    expected = _CHECK.findall(text)
    if [line.strip() for line in printed] != [line.strip() for line in expected]:
        return ChunkResult(result.name, False, f"printed {printed}, CHECK lines say {expected}")
    return result


@pytest.mark.parametrize(("cid", "text", "offset"), CHUNKS, ids=[c[0] for c in CHUNKS])
def test_chunk(cid: str, text: str, offset: int) -> None:
    result = run_with_run_line(ftz_text(cid, text), cid.split(":")[0], offset)
    if cid in XFAIL:
        # Strict: a listed chunk that passes must leave the table (no silent passes).
        assert not result.ok, f"{cid} passes now: remove it from XFAIL"
        pytest.xfail(XFAIL[cid])
    assert result.ok, result.message
