"""The verifier skips shape inference for an instruction whose shape inference made from the
opcode, attrs and operand shapes it still holds (Instruction.inferred), and runs it again as
soon as any of them was replaced."""

from __future__ import annotations

from typing import Any

import pytest

import xlapy
from xlapy.errors import VerificationError
from xlapy.ir import Module
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.types import ElementType, Shape
from xlapy.verify import verifier, verify_module

TEXT = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.add %x, %y : tensor<4xf32>
  %1 = stablehlo.multiply %0, %x : tensor<4xf32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}"""


def _module() -> Module:
    return xlapy.compile(TEXT).module


def _count_inference(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = verifier.infer_shape

    def counted(name: str, *args: Any) -> Shape:
        calls.append(name)
        return real(name, *args)

    monkeypatch.setattr(verifier, "infer_shape", counted)
    return calls


def _by_opcode(m: Module, opcode: str) -> Any:
    return next(i for i in m.entry.instructions if i.opcode == opcode)


def test_imported_and_cloned_modules_are_not_inferred_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    m = _module()
    assert all(i.shape_is_inferred() for i in m.entry.instructions if i.opcode != "parameter")
    calls = _count_inference(monkeypatch)
    verify_module(m)
    verify_module(m.clone())
    assert calls == ["parameter", "parameter"] * 2  # parameters are made without inference


def test_a_replaced_shape_is_inferred_and_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    m = _module()
    mul = _by_opcode(m, "multiply")
    mul.shape = Shape.array(ElementType.F32, [5])
    assert not mul.shape_is_inferred()
    with pytest.raises(VerificationError, match="has shape f32\\[5\\] but its operands give"):
        verify_module(m)


def test_a_replaced_operand_is_inferred_and_caught() -> None:
    m = _module()
    add, bcast = _by_opcode(m, "add"), _by_opcode(m, "broadcast_in_dim")
    mul = _by_opcode(m, "multiply")
    assert mul.shape_is_inferred()
    mul.replace_operand(1, bcast)  # f32[2,4] where f32[4] was
    assert not mul.shape_is_inferred()
    m.entry.instructions.remove(bcast)
    m.entry.instructions.insert(m.entry.instructions.index(add), bcast)
    with pytest.raises(VerificationError):
        verify_module(m)


def test_replaced_attrs_or_opcode_are_inferred_again(monkeypatch: pytest.MonkeyPatch) -> None:
    m = _module()
    bcast = _by_opcode(m, "broadcast_in_dim")
    bcast.attrs = BroadcastInDimAttrs(shape=(4, 2), broadcast_dimensions=(0,))
    with pytest.raises(VerificationError, match="has shape f32\\[2,4\\]"):
        verify_module(m)
    m = _module()
    mul = _by_opcode(m, "multiply")
    mul.opcode = "subtract"  # same shape: verified again, and fine
    calls = _count_inference(monkeypatch)
    verify_module(m)
    assert "subtract" in calls


def test_an_operand_with_an_equal_shape_object_is_not_enough() -> None:
    """Identity, not equality: an equal but new Shape object means inference runs (it
    would agree; what matters is that nothing is skipped on a guess)."""
    m = _module()
    add = _by_opcode(m, "add")
    x = m.entry.parameters[0]
    x.shape = Shape.array(ElementType.F32, [4])
    assert not add.shape_is_inferred()
    verify_module(m)
