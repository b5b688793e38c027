"""Every kernel the gpu backend emits for the conformance corpus compiles to PTX for sm_80
and sm_90 and through `ptxas` for both, with no errors; no GPU needed.

The chunks are planned once per process (about 9 s), their kernel modules linked in batches
(one LLVM module, one PTX text and one ptxas call per batch and architecture: ptxas starts
in ~0.1 s but a module of 100 executables takes seconds). Ops that run on the host instead
must be listed in tests/gpu_host_ops.py with their reason. ptxas comes from PATH or the
nvidia-cuda-nvcc-cu12 wheel (the `test` and `gpu` extras); without either the ptxas half
skips saying so (PTX is still made and checked by LLVM)."""

from __future__ import annotations

import functools

import pytest

from tests.conformance import test_interpret as conf
from tests.gpu_host_ops import host_op_keys, reason
from xlapy.backends import get_backend
from xlapy.backends.gpu import nvptx
from xlapy.cli.main import entry_functions, parse_module, verify_module_lenient

#: Executables per linked module (one batch = one pytest case, so xdist spreads them).
BATCH = 60
BATCHES = 6


@functools.cache
def _planned() -> tuple[list[tuple[str, str, list[str]]], list[tuple[str, str, str]]]:
    """(chunk id, NVPTX IR, kernel names) per executable with kernels, and every host step
    (chunk id, instruction, opcode:type)."""
    gpu = get_backend("gpu")
    irs, host = [], []
    for cid, text, offset in conf.CHUNKS:
        module = parse_module(text, cid.split(":")[0], None, offset, None)
        verify_module_lenient(module)
        for name in entry_functions(module, None):
            top = gpu.compile_function(module, module.get(name), eager_ptx=False)
            host += [(cid, n, key) for n, key in host_op_keys(top)]
            irs += [(cid, e.ir, e.kernel_names()) for e in top.tree() if e.kernel_specs]
    return irs, host


def test_enough_batches() -> None:
    irs, _ = _planned()
    assert len(irs) > 250, "the conformance corpus gave fewer kernels than it should"
    assert len(irs) <= BATCH * BATCHES, "raise BATCHES: some executables are not compiled"


def test_host_steps_are_listed() -> None:
    _, host = _planned()
    bad = sorted({key for _, _, key in host if reason(key) is None})
    assert not bad, (f"{', '.join(bad)} run on the host in the gpu backend: compile them, or "
                     "list them in tests/gpu_host_ops.py with the reason")


@pytest.mark.parametrize("batch", range(BATCHES))
def test_kernels_compile_through_ptxas(batch: int) -> None:
    irs, _ = _planned()
    part = irs[batch * BATCH:(batch + 1) * BATCH]
    if not part:
        return
    ref = nvptx.link([t for _, t, _ in part], [n for _, _, ks in part for n in ks], True)
    ptx = {arch: nvptx.emit_ptx(ref, arch) for arch in nvptx.ARCHS}
    for arch, text in ptx.items():
        assert f".target {arch}" in text
        assert text.count(".entry ") == sum(len(ks) for _, _, ks in part)
    if nvptx.ptxas_path() is None:
        pytest.skip(f"ptxas not found (optional tool): {nvptx.MISSING}")
    for arch, text in ptx.items():
        nvptx.ptxas(text, arch)  # raises CompileError with ptxas's messages
