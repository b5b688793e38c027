"""An element-wise kernel whose last dimension is shorter than a vector, emitted over one
flat dimension instead (KernelEmitter's `flat`).

Why: a kernel's vector lanes run along its last dimension, and one of fewer elements than a
vector holds ([N, 3] coordinates, NHWC images' 3 channels) ran every element in scalar
code: jnp.clip(x * 255, 0, 255).astype(uint8) of an 8 x 224 x 224 x 3 image took 0.70 ms
against XLA's 0.16. When every value of the kernel is element-wise over the root's own
index (its leaves read there, or scalars and broadcasts of scalars), the element at flat
position i depends on the operands' elements at i alone: the same expression is emitted as
a copy over [prod(dims)], its leaves read as flat buffers (row-major, as they are). A
[c] leaf broadcast along the last dimension (per-channel values) is read at i mod c
(periodic_emit.py). The same ops on the same elements: the same bits.

Also `peel_reshape`: a reshape root is walked in its operand's dims (the same row-major
elements, the output buffer viewed in that shape).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.periodic_emit import PERIODIC, ROWWISE
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Instruction
from xlapy.ir.computation import make_instruction
from xlapy.ops.shape import BroadcastInDimAttrs, ReshapeAttrs, SliceAttrs
from xlapy.passes.fusion_decision import SAME_INDEX as _SAME_INDEX
from xlapy.passes.fusion_decision import is_elementwise
from xlapy.types import Shape

#: The longest rows a reduce root walks as a fold (`fold_root`): short_reduce.SHORT.
FOLD_ROOT = 8


class _NotFlat(Exception):
    pass


def flatten(root: Instruction, leaves: dict[int, int], rows: object, force: bool = False
            ) -> tuple[Instruction, dict[int, int]] | None:
    """(a flat copy of the kernel of `root`, its leaves: the originals' and the copies'
    flat stand-ins, id -> slot) when its last dimension is shorter than a vector (or
    `force`: any) and every value is element-wise at its index; else None."""
    sh = root.shape
    if rows or not sh.is_array or sh.rank < 2 or id(root) in leaves:
        return None
    dims = tuple(sh.dimensions)
    w = vector_width()
    n = math.prod(dims)
    if w < 2 or (dims[-1] >= w and not force) or n < w:
        return None
    flat_leaves = dict(leaves)
    made: dict[int, Instruction] = {}

    def vector(leaf: Instruction) -> Instruction:
        """A leaf's flat stand-in ([1, c] is read as [c])."""
        s = leaf.shape
        if s.rank == 1:
            return leaf
        out = Instruction("parameter", [], Shape.array(s.element_type, (s.num_elements,)),
                          name=leaf.name)
        flat_leaves[id(out)] = leaves[id(leaf)]
        return out

    def copy(i: Instruction) -> Instruction:
        got = made.get(id(i))
        if got is not None:
            return got
        s = i.shape
        if not s.is_array or s.element_type.is_complex:
            raise _NotFlat
        if s.rank == 0:  # a scalar: computed as it is (its own leaves stay in the map)
            return i
        if tuple(s.dimensions) != dims:
            raise _NotFlat
        one = Shape.array(s.element_type, (n,))
        if id(i) in leaves:
            out = Instruction("parameter", [], one, name=i.name)
            flat_leaves[id(out)] = leaves[id(i)]
        elif i.opcode == "broadcast_in_dim" and i.operands[0].shape.rank == 0:
            out = Instruction(i.opcode, [i.operands[0]], one, i.attrs, name=i.name)
        elif i.opcode == "broadcast_in_dim" and \
                (leaf := _channels(i.operands[0], dims[-1], leaves)) is not None and \
                tuple(i.attrs.broadcast_dimensions)[-1] == len(dims) - 1:
            out = Instruction(PERIODIC, [vector(leaf)], one, name=i.name)  # leaf[i mod c]
        elif i.opcode == "broadcast_in_dim" and \
                (leaf := _rows(i, dims, leaves)) is not None:  # leaf[i // c]
            out = Instruction(ROWWISE, [vector(leaf)], one, name=i.name)
        elif is_elementwise(i) or i.opcode in _SAME_INDEX:
            out = Instruction(i.opcode, [copy(o) for o in i.operands], one, i.attrs,
                              i.called, i.name)
        else:
            raise _NotFlat
        made[id(i)] = out
        return out

    try:
        return copy(root), flat_leaves
    except _NotFlat:
        return None


def _channels(x: Instruction, c: int, leaves: dict[int, int]) -> Instruction | None:
    """The leaf holding x's values in order when x is [1, ..., 1, c] made of it by
    broadcasts and reshapes of such (a per-channel mean or std), else None."""
    s = x.shape
    if not s.is_array or s.num_elements != c or s.element_type.is_complex or \
            (s.rank and s.dimensions[-1] != c):
        return None
    if id(x) in leaves:
        return x
    if x.opcode in ("broadcast_in_dim", "reshape") and x.operands[0].shape.num_elements == c:
        return _channels(x.operands[0], c, leaves)
    return None


def _rows(x: Instruction, dims: tuple[int, ...], leaves: dict[int, int]
          ) -> Instruction | None:
    """The leaf holding broadcast x's values row by row when x repeats one value across
    each row of its last dimension (jnp's v[:, None] over [n, c]; broadcasts and reshapes of
    a leaf of n elements, in order), else None."""
    o = x.operands[0]
    n = math.prod(dims[:-1])
    bd = [d for d, k in zip(x.attrs.broadcast_dimensions, o.shape.dimensions) if k != 1]
    if o.shape.num_elements != n or len(dims) - 1 in bd or bd != sorted(bd) or \
            o.shape.element_type.is_complex or n < 2:
        return None
    while id(o) not in leaves:
        if o.opcode not in ("broadcast_in_dim", "reshape") or \
                o.operands[0].shape.num_elements != n or (
                    o.opcode == "broadcast_in_dim" and
                    list(o.attrs.broadcast_dimensions) != sorted(o.attrs.broadcast_dimensions)):
            return None
        o = o.operands[0]
    return o


def peel_reshape(root: Instruction, leaves: dict[int, int], rows: Sequence[Instruction],
                 extra: Sequence[Any]) -> Instruction:
    """The instruction whose loop nest computes `root`: a reshape root's operand, whose
    row-major elements are the output's (the output buffer viewed in its shape), where
    walking the reshape's dims would divide each index into the operand's (its last
    dimension differs) - a ViT patch embedding's reshape(transpose(reshape(x))) ran 6.1 ms
    (XLA 3.1) - and the operand's outer loop (after its leading dimensions of one element,
    jnp.tile's broadcast [1, R, k, C]: `_unit_head`) still splits over threads."""
    while root.opcode == "reshape" and not rows and not extra and id(root) not in leaves:
        x = root.operands[0]
        out, src = root.shape.dimensions, x.shape.dimensions
        body = _body(src)
        if id(x) in leaves or not out or not body or out[-1] == src[-1] or \
                body[0] < min(out[0], 8):
            break
        root = x
    if rows or extra or id(root) in leaves:
        return root
    return _unit_tail(_unit_head(fold_root(root)))


def _body(dims: Sequence[int]) -> tuple[int, ...]:
    """dims after their leading ones."""
    k = 0
    while k < len(dims) and dims[k] == 1:
        k += 1
    return tuple(dims[k:])


def _unit_head(root: Instruction) -> Instruction:
    """A root whose first dimensions are one element each walked as a reshape without them
    (the same row-major elements; each index the root's with zeros in front): its outer
    loop, the one threads split, was one iteration (jnp.tile(x, (1, 3)) of f32[2048, 341],
    a broadcast [1, 2048, 3, 341] written as [2048, 1023]: its index divided per element,
    3.7x XLA's time)."""
    sh = root.shape
    body = _body(sh.dimensions)
    if root.opcode == "reduce" or not sh.is_array or len(body) == sh.rank or not body:
        return root
    return _walked_as(root, body)


def _walked_as(root: Instruction, dims: tuple[int, ...]) -> Instruction:
    """root's loop nest walked over `dims` (its elements in row-major order)."""
    return Instruction("reshape", [root], Shape.array(root.shape.element_type, dims),
                       ReshapeAttrs(dims), name=root.name)


def fold_root(root: Instruction) -> Instruction:
    """A reduce root over a short last dimension (2 to FOLD_ROOT elements) into at least a
    vector of outputs, walked as the fold short_reduce writes (init op x[..., 0] op x[...,
    1] ..., the interpreter's order): its lanes run along the outputs, each column one
    shuffle of a tile (column_lanes.py). Its own kernel's reduce folded a row at a time (a
    max over rows of 8, a result broadcast back too: 0.19 -> 0.09 ms); over 10 columns the
    fold ran 0.21 -> 0.17 ms but compiled 2.7x slower (16 -> 39-44 ms), so not past 8."""
    if root.opcode != "reduce" or len(root.operands) != 2 or reducer_op(root) is None:
        return root
    x, init = root.operands
    dims, r = tuple(x.shape.dimensions), x.shape.rank
    if r < 2 or tuple(root.attrs.dimensions) != (r - 1,) or x.shape.element_type.is_complex \
            or not 2 <= dims[-1] <= FOLD_ROOT or root.shape.num_elements < vector_width():
        return root
    out = dims[:-1]
    acc = make_instruction("broadcast_in_dim", [init], BroadcastInDimAttrs(out, ()))
    for c in range(dims[-1]):
        col = make_instruction("slice", [x], SliceAttrs((0,) * (r - 1) + (c,), out + (c + 1,),
                                                        (1,) * r))
        acc = make_instruction(reducer_op(root), [acc, make_instruction(
            "reshape", [col], ReshapeAttrs(out))])
    return acc


def _unit_tail(root: Instruction) -> Instruction:
    """A root whose last dimensions are one element each ([R, 1]: jnp's keepdims, an RMS
    norm's rsqrt(mean(x * x, -1, keepdims=True) + eps)) walked as a reshape without them
    (the same row-major elements): lanes along a dimension of one element were one at a
    time, and a column read of short rows (column_lanes.py) needs them along the rows."""
    sh = root.shape
    if not (is_elementwise(root) or root.opcode in _SAME_INDEX) or sh.rank < 2 or \
            sh.dimensions[-1] != 1:
        return root
    body = _body(sh.dimensions[::-1])[::-1]  # (without the trailing ones)
    return _walked_as(root, body) if body else root


__all__ = ["flatten", "peel_reshape"]
