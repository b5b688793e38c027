"""The process grid runs each participant's program on the cpu backend (issue 13): every
collective case of cases.py matches the interpreter's grid bit for bit, collectives are grid
thunks of the compiled program, and faults still end in errors naming the process."""

from __future__ import annotations

import numpy as np
import pytest

from tests.distributed.cases import cases
from tests.distributed.test_faults import (
    all_reduce_prog,
    entries,
    identity_prog,
    recv_prog,
    send_prog,
)
from xlapy.backends.cpu.executable import CpuExecutable
from xlapy.distributed.grid import ProcessGrid, ProcessGridError, _entry
from xlapy.errors import XlapyError


@pytest.mark.parametrize("grid", [(2, 1), (1, 2), (2, 2), (4, 1)])
def test_cases_match_the_interpreter_grid(grid: tuple[int, int]) -> None:
    nr, np_ = grid
    for name, (comp, args) in cases(nr, np_).items():
        want = ProcessGrid(nr, np_).run_computation(comp, args)
        got = ProcessGrid(nr, np_).run_computation(comp, args, backend="cpu")
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w, err_msg=f"{nr}x{np_} {name}")


def test_collectives_are_grid_thunks_not_fallbacks() -> None:
    comp = _entry(all_reduce_prog())
    exe = CpuExecutable(comp)
    assert not exe.fallbacks()
    assert "all_reduce" in exe.explain() and "grid thunk" in exe.explain()


def test_channels_and_faults_on_cpu() -> None:
    grid = ProcessGrid(1, 2, timeout=2)
    out = grid.run_programs(entries(send_prog(9), recv_prog(9)),
                            [[np.arange(4, dtype=np.float32)], [np.ones(4, np.float32)]],
                            backend="cpu")
    np.testing.assert_array_equal(out[1], np.arange(4) ** 2 + 1)
    grid = ProcessGrid(2, 1, timeout=2)
    ones = [[np.ones(4, np.float32)] for _ in range(2)]
    with pytest.raises(ProcessGridError) as err:
        grid.run_programs(entries(all_reduce_prog(), identity_prog()), ones, backend="cpu")
    assert "all_reduce" in str(err.value) and "(1, 0)" in str(err.value)
    bad = [[np.ones(4, np.float32)], [np.ones(5, np.float32)]]
    with pytest.raises(ProcessGridError, match="argument 0"):
        grid.run_programs(entries(*[all_reduce_prog()] * 2), bad, backend="cpu")


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(XlapyError, match="interpreter or cpu, not 'gpu'"):
        ProcessGrid(2, 1).run_programs(entries(*[identity_prog()] * 2),
                                       [[np.ones(4, np.float32)]] * 2, backend="gpu")
