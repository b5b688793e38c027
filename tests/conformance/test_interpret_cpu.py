"""The conformance corpus of test_interpret.py, run on the `cpu` backend.

Same chunks, same XFAIL table (imported, so both suites expect the same thing), plus CPU_XFAIL
for chunks that fail on cpu only (each with its reason; strict like the interpreter's). Every
entry function is compiled by the cpu backend (kernels, library thunks, and interpreter
kernels for the ops it does not compile, `check` ops included) and run there.
"""

from __future__ import annotations

import pytest

from tests.conformance.test_interpret import CHUNKS, XFAIL
from xlapy.backends.cpu.executable import CpuExecutable
from xlapy.cli.main import ChunkResult, entry_functions, verify_module_lenient
from xlapy.errors import XlapyError
from xlapy.interpreter import RuntimeState
from xlapy.stablehlo import parse_module

#: chunk id -> why it fails on cpu but not on the interpreter.
CPU_XFAIL: dict[str, str] = {}


def run_chunk_cpu(text: str, filename: str, line_offset: int = 0) -> ChunkResult:
    name = f"{filename}:{line_offset + 1}"
    printed: list[str] = []
    try:
        module = parse_module(text, filename, None, line_offset)
        verify_module_lenient(module)
        for fname in entry_functions(module, None):
            runtime = RuntimeState()
            runtime.hooks["print"] = printed.append
            CpuExecutable(module.get(fname), module).run_computation([], runtime)
    except XlapyError as e:
        return ChunkResult(name, False, f"{type(e).__name__}: {e}", printed=printed)
    except RecursionError:
        return ChunkResult(name, False, "RecursionError: nesting too deep", printed=printed)
    return ChunkResult(name, True, "", [], printed)


def test_cpu_xfail_table_names_real_chunks() -> None:
    ids = {cid for cid, _, _ in CHUNKS}
    assert not sorted(set(CPU_XFAIL) - ids)
    assert not set(CPU_XFAIL) & set(XFAIL)


@pytest.mark.parametrize(("cid", "text", "offset"), CHUNKS, ids=[c[0] for c in CHUNKS])
def test_chunk_cpu(cid: str, text: str, offset: int) -> None:
    result = run_chunk_cpu(text, cid.split(":")[0], offset)
    reason = XFAIL.get(cid) or CPU_XFAIL.get(cid)
    if reason is not None:
        assert not result.ok, f"{cid} passes on cpu now: remove it from the XFAIL tables"
        pytest.xfail(reason)
    assert result.ok, result.message
