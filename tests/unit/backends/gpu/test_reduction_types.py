"""Block reductions (warp shuffles + shared memory) and thread reductions over the reducer
ops and element types the kernels reduce, through ptxas for sm_80 and sm_90 in one batch (the
conformance corpus's arrays are too small to reach the block form)."""

from __future__ import annotations

import pytest

from xlapy.backends import get_backend
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.gpu import nvptx
from xlapy.backends.gpu.kernel_emit import Launch
from xlapy.stablehlo import parse_module
from xlapy.types import ElementType as ET

OPS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")
TYPES = (ET.PRED, ET.S8, ET.S16, ET.S32, ET.S64, ET.U8, ET.U32, ET.U64, ET.F16, ET.BF16,
         ET.F32, ET.F64)


def _cases() -> list[tuple[str, ET]]:
    """Every op on s32 and f32, every type with add and maximum (the shuffles move 32- or
    64-bit words: these cover every width and conversion); one kernel takes ~0.2 s."""
    cases = {(op, t) for op in OPS for t in (ET.S32, ET.F32)} | \
        {(op, t) for op in ("add", "maximum") for t in TYPES}
    return sorted((c for c in cases if ew.supports(*c)), key=lambda c: (c[0], c[1].shlo_name))


def _function(k: int, op: str, t: ET, dims: str, red: str, out: str) -> str:
    ty = t.shlo_name
    init = {"pred": "false"}.get(ty, "0" if "i" in ty and "bf" not in ty else "0.0")
    return f"""
func.func @f{k}(%x: tensor<{dims}x{ty}>) -> tensor<{out}{ty}> {{
  %z = stablehlo.constant dense<{init}> : tensor<{ty}>
  %r = stablehlo.reduce(%x init: %z) applies stablehlo.{op} across dimensions = [{red}]
    : (tensor<{dims}x{ty}>, tensor<{ty}>) -> tensor<{out}{ty}>
  return %r : tensor<{out}{ty}>
}}"""


def test_every_reducer_and_type_through_ptxas() -> None:
    cases = _cases()
    assert len(cases) > 25
    text = ""
    for k, (op, t) in enumerate(cases):
        text += _function(2 * k, op, t, "2x64", "1", "2x")  # rows: a block per row
        if op == "add":
            text += _function(2 * k + 1, op, t, "4x2", "0", "2x")  # columns: a thread each
    module = parse_module(text, "<reductions>")
    gpu = get_backend("gpu")
    irs, names, launches = [], [], []
    for name in module.meta["functions"]:  # type: ignore[union-attr]
        exe = gpu.compile_function(module, module.get(name), eager_ptx=False)
        assert not exe.host_ops(), (name, exe.explain())
        irs.append(exe.ir)
        names += exe.kernel_names()
        launches += [k.launch for k in exe.kernel_specs]
    assert launches.count(Launch.BLOCK) == len(cases)
    assert launches.count(Launch.ELEMENTS) == sum(op == "add" for op, _ in cases)
    ref = nvptx.link(irs, names, True)
    ptx = {arch: nvptx.emit_ptx(ref, arch) for arch in nvptx.ARCHS}
    assert ptx["sm_90"].count("shfl.sync.bfly.b32") >= 10 * len(cases)
    if nvptx.ptxas_path() is None:
        pytest.skip(f"ptxas not found (optional tool): {nvptx.MISSING}")
    for arch, p in ptx.items():
        nvptx.ptxas(p, arch)
