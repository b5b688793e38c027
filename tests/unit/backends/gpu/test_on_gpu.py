"""The GPU-only checks of issue 19, for a machine with an NVIDIA GPU, its driver, cuBLAS
(`xlapy[gpu]`) and jax: the conformance corpus and the JAX program suite on the `gpu`
backend, compared as on cpu (same runners, same XFAIL tables plus GPU_XFAIL). Where no GPU
is present the whole module is one skip that says why (the no-GPU checks are
test_gpu_backend.py, test_ptx_conformance.py and test_emulated_runs.py); the benchmark
against XLA:GPU is benchmarks/gpu_run.py."""

from __future__ import annotations

import functools

import pytest

from xlapy.backends.gpu import driver

HAS_GPU, WHY = driver.available()
if not HAS_GPU:
    pytest.skip(f"GPU-only checks (issue 19): {WHY}", allow_module_level=True)

from tests.conformance import test_interpret as conf  # noqa: E402
from tests.differential.jax_programs.runner import check_program  # noqa: E402
from tests.differential.jax_programs.test_jax_programs import PROGRAMS, XFAIL  # noqa: E402
from xlapy.cli.main import run_chunk  # noqa: E402

#: chunk id or JAX program id -> why it fails on gpu only. None: on 2026-11-28 an NVIDIA H200
#: (driver 580, CUDA 13.0 ptxas/libdevice/cuBLAS, jax 0.11.2, Python 3.12) passed all 522
#: chunks and all 559 programs (JAX_PLATFORMS=cpu, so JAX's expected values are its cpu ones).
GPU_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize(("cid", "text", "offset"), conf.CHUNKS,
                         ids=[c[0] for c in conf.CHUNKS])
def test_chunk_gpu(cid: str, text: str, offset: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conf, "run_chunk", functools.partial(run_chunk, backend="gpu"))
    name = cid.split(":")[0]
    result = conf.run_with_run_line(conf.ftz_text(cid, text), name, offset)
    reason = conf.XFAIL.get(cid) or GPU_XFAIL.get(cid)
    if reason is not None:
        assert not result.ok, f"{cid} passes on gpu now: remove it from the XFAIL tables"
        pytest.xfail(reason)
    assert result.ok, result.message


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_matches_jax_on_gpu(program: object) -> None:
    reason = XFAIL.get(program.id) or GPU_XFAIL.get(program.id)  # type: ignore[attr-defined]
    if reason is not None:
        pytest.xfail(reason)
    check_program(program, "gpu")  # type: ignore[arg-type]
