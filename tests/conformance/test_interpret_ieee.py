"""The conformance corpus in the `ieee` denormal mode (xlapy.denormal: the StableHLO spec's
IEEE-754 arithmetic, subnormals kept), on the interpreter and on the cpu backend.

Same chunks and runner as test_interpret.py, run inside `denormal.use("ieee")` (as `xlapy run
--denormal ieee` does). Its XFAIL entries that exist only because XLA CPU flushes subnormals
(ceil/floor of a subnormal input) pass here; the rest still apply, strictly.
"""

from __future__ import annotations

import functools

import pytest

from tests.conformance import test_interpret as conf
from xlapy import denormal
from xlapy.cli.main import run_chunk

#: test_interpret.XFAIL entries due to XLA CPU's flushing: the ieee mode passes them.
FLUSH_ONLY = frozenset(cid for cid in conf.XFAIL if cid.startswith(("ceil.mlir:", "floor.mlir:")))
IEEE_XFAIL = {cid: why for cid, why in conf.XFAIL.items() if cid not in FLUSH_ONLY}


def test_flush_only_entries_are_the_daz_ones() -> None:
    assert FLUSH_ONLY and all("DAZ" in conf.XFAIL[cid] for cid in FLUSH_ONLY)


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
