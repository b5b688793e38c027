"""The conformance corpus of test_interpret.py, run on the `cpu` backend.

Same chunks, same runner (RUN-line arguments and CHECK lines included) and same XFAIL table,
imported so both suites expect the same thing; only `run_chunk` runs with backend="cpu"
(kernels, library thunks, and interpreter kernels for the ops cpu does not compile, `check`
ops included). CPU_XFAIL lists chunks that fail on cpu only, each with its reason (strict).
"""

from __future__ import annotations

import functools

import pytest

from tests.conformance import test_interpret as conf
from tests.fallbacks import assert_no_unlisted_fallbacks
from xlapy.backends import get_backend
from xlapy.cli.main import entry_functions, parse_module, run_chunk, verify_module_lenient

#: chunk id -> why it fails on cpu but not on the interpreter.
CPU_XFAIL: dict[str, str] = {}


def test_cpu_xfail_table_names_real_chunks() -> None:
    ids = {cid for cid, _, _ in conf.CHUNKS}
    assert not sorted(set(CPU_XFAIL) - ids)
    assert not set(CPU_XFAIL) & set(conf.XFAIL)
    assert not set(CPU_XFAIL) & set(conf.FTZ_EXPECTED)


@pytest.mark.parametrize(("cid", "text", "offset"), conf.CHUNKS,
                         ids=[c[0] for c in conf.CHUNKS])
def test_chunk_cpu(cid: str, text: str, offset: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conf, "run_chunk", functools.partial(run_chunk, backend="cpu"))
    runner = getattr(conf, "run_with_run_line", None)
    name = cid.split(":")[0]
    text = conf.ftz_text(cid, text)
    result = runner(text, name, offset) if runner else conf.run_chunk(text, name, offset)
    reason = conf.XFAIL.get(cid) or CPU_XFAIL.get(cid)
    if reason is not None:
        assert not result.ok, f"{cid} passes on cpu now: remove it from the XFAIL tables"
        pytest.xfail(reason)
    assert result.ok, result.message


@pytest.mark.parametrize(("cid", "text", "offset"), conf.CHUNKS,
                         ids=[c[0] for c in conf.CHUNKS])
def test_chunk_cpu_runs_natively(cid: str, text: str, offset: int) -> None:
    """Every function of the chunk compiles with no interpreter fallback outside the
    listed ones (tests/fallbacks.py)."""
    module = parse_module(text, cid.split(":")[0], None, offset, None)
    verify_module_lenient(module)
    for name in entry_functions(module, None):
        exe = get_backend("cpu").compile_function(module, module.get(name))
        assert_no_unlisted_fallbacks(exe, f"{cid} @{name}")
