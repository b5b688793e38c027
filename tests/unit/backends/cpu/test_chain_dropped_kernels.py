"""Kernels whose thunk a batch chain drops (the bf16 -> f32 converts it widens block by
block, chain_widen.py) are not compiled: x86-64-v3's attention_bf16 compiled three such
converts for nothing. The kernels that run are compiled as before, with the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.backends.cpu.test_batch_chain import _text
from tests.unit.backends.cpu.test_chain_widen import DIRECT, OPTIONS, _args, _run
from xlapy.backends.cpu import chain_widen


@pytest.mark.parametrize("options", OPTIONS, ids=["v3", "ieee"])
@pytest.mark.parametrize("threads", [1, 2])
def test_dropped_converts_are_not_compiled(options: dict[str, object], threads: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    t, s, d = 64, 64, 16
    text = _text(DIRECT, t=t, s=s, d=d, f="bf16")
    args = _args(t, s, d)
    got, exe = _run(text, args, options, threads)
    chain = exe.chains[0]  # type: ignore[attr-defined]
    dropped = {x for x, _ in chain.views}
    assert len(chain.widen) == 3 and {w.slot for w in chain.widen} <= dropped
    specs = exe.kernel_specs  # type: ignore[attr-defined]
    addrs = dict(zip((k.output for k in specs), exe.kernel_addrs))  # type: ignore[attr-defined]
    assert all(addrs[x] == 0 for x in dropped)
    assert all(a != 0 for x, a in addrs.items() if x not in dropped)  # the softmax kernel
    exported = {n for e in exe.engines for n in e._exports}  # type: ignore[attr-defined]
    assert exported == {k.name for k in specs if k.output not in dropped}
    # the chain without widening runs (and compiles) the converts: the same bits
    monkeypatch.setattr(chain_widen, "find", lambda *a, **k: [])
    want, ref = _run(text, args, options, threads)
    assert all(a != 0 for a in ref.kernel_addrs)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
