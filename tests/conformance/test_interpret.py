"""Every chunk of every file in ../shared/conformance/stablehlo-interpret/ through `xlapy run`.

One pytest id per `// -----` chunk (`file:line`). Chunks that fail for a known reason are in
XFAIL with the reason; nothing is skipped silently. The files are read in place.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xlapy.cli.main import _only_comments, run_chunk
from xlapy.stablehlo import split_chunks

ROOT = Path(__file__).parents[3] / "shared" / "conformance" / "stablehlo-interpret"

#: chunk id -> why it fails today.
XFAIL: dict[str, str] = {
    "all_gather.mlir:50": "cross replica+partition all_gather needs the process grid",
    "all_reduce.mlir:80": "replica_groups padded with -1 need the process grid semantics",
    "api_input_arguments.mlir:1":
        "needs the RUN lines --args inputs (a stablehlo-translate option, no check op)",
    "bitcast_convert.mlir:1": "bitcast_convert between i1 and wider ints not supported by the op",
    "bitcast_convert.mlir:34":
        "stablehlo.bitcast_convert: bitcast_convert_c1: pred has no bit width to bitcast; got "
        "f64[]",
    "bitcast_convert.mlir:58":
        "stablehlo.bitcast_convert: bitcast_convert_c2: cannot bitcast between complex types of"
        " different widths (c128 ",
    "cbrt.mlir:10": "cbrt of complex not supported by the op",
    "ceil.mlir:1": "ceil of subnormal inputs gives 0 instead of 1 (elementwise op evaluate)",
    "ceil.mlir:19": "ceil of subnormal inputs gives 0 instead of 1 (elementwise op evaluate)",
    "ceil.mlir:28": "ceil of subnormal inputs gives 0 instead of 1 (elementwise op evaluate)",
    "collective_broadcast.mlir:225": "variadic collective_broadcast not supported by the op",
    "collective_broadcast.mlir:254": "variadic collective_broadcast not supported by the op",
    "collective_reduce.mlir:1": "unknown op collective_reduce (op not implemented yet)",
    "constant.mlir:105": "f6 element types (f6E2M3FN/f6E3M2FN) are not xlapy element types",
    "constant.mlir:113": "f6 element types (f6E2M3FN/f6E3M2FN) are not xlapy element types",
    "convert.mlir:181": "convert to i1 gives a wrong value (elementwise convert evaluate)",
    "floor.mlir:1":
        "floor of negative subnormal inputs gives -0 instead of -1 (elementwise op evaluate)",
    "floor.mlir:19":
        "floor of negative subnormal inputs gives -0 instead of -1 (elementwise op evaluate)",
    "floor.mlir:28":
        "floor of negative subnormal inputs gives -0 instead of -1 (elementwise op evaluate)",
    "printing.mlir:81": "f6 element types (f6E2M3FN/f6E3M2FN) are not xlapy element types",
    "reduce_precision.mlir:10":
        "reduce_precision with 0 mantissa bits: NaN stays NaN, expected Inf (op evaluate)",
}


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
    stale = sorted(set(XFAIL) - ids)
    assert not stale, f"XFAIL names chunks that do not exist: {stale}"


@pytest.mark.parametrize(("cid", "text", "offset"), CHUNKS, ids=[c[0] for c in CHUNKS])
def test_chunk(cid: str, text: str, offset: int) -> None:
    result = run_chunk(text, cid.split(":")[0], offset)
    if cid in XFAIL:
        # Strict: a listed chunk that passes must leave the table (no silent passes).
        assert not result.ok, f"{cid} passes now: remove it from XFAIL"
        pytest.xfail(XFAIL[cid])
    assert result.ok, result.message
