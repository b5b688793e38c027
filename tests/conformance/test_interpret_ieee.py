"""The conformance corpus in the `ieee` denormal mode (xlapy.denormal: the StableHLO spec's
IEEE-754 arithmetic, subnormals kept), on the interpreter and on the cpu backend.

Same chunks and runner as test_interpret.py, run inside `denormal.use("ieee")` (as `xlapy run
--denormal ieee` does), each chunk as the file writes it: the chunks whose expected values the
ftz mode replaces with XLA CPU's (test_interpret.FTZ_EXPECTED: ceil/floor of a subnormal input)
are checked here against the spec's.
"""

from __future__ import annotations

import functools

import pytest

from tests.conformance import test_interpret as conf
from xlapy import denormal
from xlapy.cli.main import run_chunk

#: Chunks that fail in the ieee mode, with the reason (strict). test_interpret's FTZ_EXPECTED
#: entries are checked here as the files write them.
IEEE_XFAIL: dict[str, str] = {**conf.XFAIL}


def test_ftz_entries_are_the_daz_ones() -> None:
    assert conf.FTZ_EXPECTED and all("DAZ" in why for *_, why in conf.FTZ_EXPECTED.values())


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize(("cid", "text", "offset"), conf.CHUNKS,
                         ids=[c[0] for c in conf.CHUNKS])
def test_chunk_ieee(cid: str, text: str, offset: int, backend: str,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conf, "run_chunk", functools.partial(run_chunk, backend=backend))
    with denormal.use(denormal.IEEE):
        result = conf.run_with_run_line(text, cid.split(":")[0], offset)
    if cid in IEEE_XFAIL:
        assert not result.ok, f"{cid} passes in the ieee mode now: remove it from XFAIL"
        pytest.xfail(IEEE_XFAIL[cid])
    assert result.ok, result.message
