"""Kernels that only move elements (slice, reshape, transpose of one buffer) read by a dot as
strided views instead: BLAS takes a leading dimension and a transpose flag, so a head of a
transformer's fused q/k/v projection ([T, 3D] sliced, split into heads, heads moved first)
needs no copy.

`view_of` says whether a kernel's value is such a view and with which element offset and
strides into its one leaf buffer: the ops are replayed on a NumPy array of the leaf's shape
and strides over a one-byte buffer (no element is ever read), reshapes with copy=False (a
reshape that would need a copy refuses).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from xlapy.ir import Instruction

#: The ops a view kernel may consist of.
VIEW_OPS = frozenset({"slice", "reshape", "transpose"})


@dataclass(frozen=True)
class View:
    """A value as a strided view of slot `leaf`: element (i0, i1, ...) at element offset
    `offset + sum(ik * strides[k])` of the leaf."""

    leaf: int
    offset: int
    strides: tuple[int, ...]


def reshaped(a: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """`a` reshaped without a copy (a copy would read the fake buffer): ValueError or
    AttributeError when that needs one. NumPy < 2.1 has no copy=False: the shape is set
    on a view, which never copies."""
    try:
        return a.reshape(dims, copy=False)
    except TypeError:
        v = a.view()
        v.shape = dims
        return v


def view_of(root: Instruction, fusible: AbstractSet[int], mat: AbstractSet[int],
            slot: Mapping[int, int]) -> View | None:
    """The View a kernel rooted at `root` computes, or None: root and every fused value
    behind it a slice, reshape or transpose with one operand, down to one buffer."""
    ops: list[Instruction] = []
    i = root
    while True:
        if i.opcode not in VIEW_OPS or len(i.operands) != 1 or not i.shape.is_array:
            return None
        ops.append(i)
        o = i.operands[0]
        if id(o) in fusible and id(o) not in mat:
            i = o
            continue
        if id(o) not in slot or not o.shape.is_array:
            return None
        leaf = o
        break
    dims = tuple(leaf.shape.dimensions)
    if 0 in dims or any(0 in tuple(x.shape.dimensions) for x in ops):
        return None
    strides = [1] * len(dims)
    for d in range(len(dims) - 2, -1, -1):
        strides[d] = strides[d + 1] * dims[d + 1]
    fake = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=dims,
                                           strides=tuple(strides))
    base = fake.__array_interface__["data"][0]
    try:
        for op in reversed(ops):
            a = op.attrs
            if op.opcode == "slice":
                fake = fake[tuple(slice(s, e, k) for s, e, k in
                                  zip(a.start_indices, a.limit_indices, a.strides))]
            elif op.opcode == "transpose":
                fake = fake.transpose(tuple(a.permutation))
            else:
                fake = reshaped(fake, tuple(op.shape.dimensions))
    except (ValueError, AttributeError):  # a reshape that is no view
        return None
    if tuple(fake.shape) != tuple(root.shape.dimensions):
        return None
    return View(slot[id(leaf)], fake.__array_interface__["data"][0] - base,
                tuple(int(s) for s in fake.strides))


__all__ = ["View", "view_of", "reshaped", "VIEW_OPS"]
