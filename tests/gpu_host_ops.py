"""Ops the gpu backend does not compile yet: they run on the host (interpreter kernels,
operands copied out and results copied back), each listed with its reason. An op not
listed here that runs on the host fails the test that planned it (tests/unit/backends/gpu/
test_ptx_conformance.py): no silent gaps. Every entry is a missing feature."""

from __future__ import annotations

from typing import Any

from tests.fallbacks import ALLOWED as CPU_ALLOWED

_COMPLEX = ("complex element types: the cpu emitters call libm's C99 complex functions by "
            "the x86-64 ABI; no GPU form yet")
_LIBRARY = "no GPU library (cuFFT/cuSOLVER) or kernel yet"
_KERNEL = "no GPU kernel yet (the cpu backend emits its own loop nests, not ported)"
#: opcode (or opcode:type) -> why it runs on the host in the gpu backend.
HOST_OPS: dict[str, str] = {
    "fft": _LIBRARY,
    "triangular_solve": _LIBRARY,
    "cholesky": _LIBRARY,
    "custom_call": _LIBRARY,
    **{op: _KERNEL for op in ("sort", "scatter", "select_and_scatter", "reduce_window",
                              "convolution", "chlo.ragged_dot")},
    "reduce": "reduces with several operands or a reducer that is not one binary op "
              "(the cpu backend's region emitters are not ported)",
    "dot_general": "integer, mixed-type or several-contracting-dimension dots (cuBLAS "
                   "handles f32/f64 GEMMs: backends/gpu/cublas.py)",
    "interpreter.run_parallel": "the interpreter's process grid (no multi-GPU runtime)",
}


def host_op_keys(exe: Any) -> list[tuple[str, str]]:
    """(instruction, opcode:type) of every host step of a gpu executable."""
    out = []
    for e in exe.tree():
        out += _keys(e)
    return out


def _keys(exe: Any) -> list[tuple[str, str]]:
    by_name = {i.name: i for i in exe.comp.instructions}
    out = []
    for name, op, how in exe.report:
        if how != "host fallback":
            continue
        instr = by_name[name]
        shapes = [o.shape for o in instr.operands] + [instr.shape]
        arrays = [s.element_type.shlo_name for s in shapes if s.is_array]
        t = next((a for a in arrays if "complex" in a), arrays[0] if arrays else "-")
        out.append((name, f"{op}:{t}"))
    return out


def reason(key: str) -> str | None:
    """Why `opcode:type` runs on the host (None: it is not listed)."""
    op, _, t = key.partition(":")
    if "complex" in t:
        return _COMPLEX
    return HOST_OPS.get(key) or HOST_OPS.get(op) or CPU_ALLOWED.get(key) or CPU_ALLOWED.get(op)
