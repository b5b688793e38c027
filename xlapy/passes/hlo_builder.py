"""A terse way to write HLO graphs in passes (expanders) and tests: `g.add(x, y)`.

`Emitter(comp)` appends instructions to an existing computation (shapes from inference);
`HloBuilder` starts a fresh module. Any registered op is a method; keyword arguments become
its attrs dataclass (`g.transpose(x, permutation=(1, 0))`), `called=[...]` its regions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction, Module, make_instruction
from xlapy.ops.attrs import ComparisonDirection
from xlapy.ops.base import NO_ATTRS, OPS
from xlapy.ops.core import ConstantAttrs, ParameterAttrs
from xlapy.passes.fusion_decision import is_elementwise
from xlapy.types import ElementType, Literal, Shape, from_hlo_name

_SHAPE = re.compile(r"^\s*([a-z0-9]+)\[([0-9,\s]*)\]\s*$")


def parse_shape(text: str | Shape) -> Shape:
    """`f32[4,8]` -> Shape; a Shape passes through."""
    if isinstance(text, Shape):
        return text
    m = _SHAPE.match(text)
    if m is None:
        raise XlapyError(f"bad shape '{text}': expected like f32[4,8]")
    dims = [int(d) for d in m.group(2).split(",") if d.strip()]
    return Shape.array(from_hlo_name(m.group(1)), dims)


class Emitter:
    """Appends instructions to `comp`; every OPS name is a method. `module`: comp's module
    where the caller knows it (a rewrite that needs a new reducer adds it there)."""

    def __init__(self, comp: Computation, module: Module | None = None) -> None:
        self.comp = comp
        self.module = module

    def op(self, opcode: str, *operands: Instruction, called: Sequence[Computation] = (),
           name: str = "", **attrs: Any) -> Instruction:
        spec = OPS[opcode]
        a = spec.attrs(**attrs) if attrs or spec.attrs is not type(NO_ATTRS) else NO_ATTRS
        return self.comp.add(make_instruction(opcode, list(operands), a, called,
                                              name or opcode))

    def __getattr__(self, opcode: str) -> Callable[..., Instruction]:
        if opcode not in OPS:
            raise AttributeError(opcode)
        return lambda *operands, **kw: self.op(opcode, *operands, **kw)

    def param(self, shape: str | Shape, name: str = "") -> Instruction:
        s = parse_shape(shape)
        n = len(self.comp.parameters)
        return self.comp.add(Instruction("parameter", [], s, ParameterAttrs(n, s), (),
                                         name or f"p{n}"))

    def const(self, value: Any, et: ElementType | str = ElementType.F32,
              dims: Sequence[int] | None = None) -> Instruction:
        """A constant: a scalar/array `value` of type `et`, splatted to `dims` when given."""
        t = et if isinstance(et, ElementType) else from_hlo_name(et)
        arr = np.asarray(value, dtype=t.dtype)
        if dims is not None:
            arr = np.broadcast_to(arr, tuple(dims)).copy()
        return self.comp.add(make_instruction("constant", [],
                                              ConstantAttrs(Literal.from_numpy(arr)),
                                              name="constant"))

    def splat(self, value: Any, like: Instruction | Shape | str) -> Instruction:
        """A scalar constant broadcast to `like`'s shape (how XLA spells a splat)."""
        shape = like.shape if isinstance(like, Instruction) else parse_shape(like)
        c = self.const(value, shape.element_type)
        if shape.rank == 0:
            return c
        return self.op("broadcast_in_dim", c, shape=shape.dimensions, broadcast_dimensions=())

    def bcast(self, x: Instruction, dims: Sequence[int], keep: Sequence[int]) -> Instruction:
        return self.op("broadcast_in_dim", x, shape=tuple(dims), broadcast_dimensions=tuple(keep))

    def regroup(self, x: Instruction, dims: Sequence[int]) -> Instruction:
        """x's elements (row-major) in shape `dims`: a reshape of the first operand of x's
        chain of reshapes, or that operand when already so shaped. Passes regrouping rows
        in turn (narrow_columns, column_sums) chained three: each a division of the
        kernel's index in the next shape (a column sum of f32[1M, 4]: 3.3 ms, XLA 2.8)."""
        return self._regrouped(x, tuple(dims), {}, [REGROUP_OPS])

    def _regrouped(self, x: Instruction, dims: tuple[int, ...], memo: dict[int, Instruction],
                   budget: list[int]) -> Instruction:
        """regroup's value: an element-wise chain only its consumer uses is computed from
        regrouped leaves (a splat broadcast anew, others reshaped), not reshaped after: a
        kernel reading a computed value through a reshape divides its index per element
        (jnp.max(jnp.abs(x)) of f32[1024, 256] in rows of 4096: 74 us, of x: 18)."""
        x = reshape_source(x)
        if tuple(x.shape.dimensions) == dims:
            return x
        if id(x) in memo:
            return memo[id(x)]
        if x.opcode == "broadcast_in_dim" and x.operands[0].shape.rank == 0:
            out = self.bcast(x.operands[0], dims, ())
        elif x.opcode == "slice" and prefix_slice(x) and budget[0] > 0 and \
                _elementwise(x.operands[0]) and sum(
                    u.opcode != "slice" for u in {id(u): u for u in x.operands[0].users}
                    .values()) <= 1:
            # the first rows of an element-wise value only its consumer and slices of it
            # read: its operands' first rows (a buffer's a kernel reads as the buffer; its
            # index divided through the slice's shape, jnp.sum(x * x, 0) of f32[300007, 3]
            # ran 3.6x the time of [300000, 3])
            y = x.operands[0]
            budget[0] -= 1
            ops = [o if o.shape.rank == 0 else self._head(o, x) for o in y.operands]
            out = self._regrouped(self.comp.add(make_instruction(y.opcode, ops, y.attrs, (),
                                                                 y.name)), dims, memo, budget)
        elif _elementwise(x) and len({id(u) for u in x.users}) <= 1 and budget[0] > 0:
            budget[0] -= 1
            ops = [o if o.shape.rank == 0 else self._regrouped(o, dims, memo, budget)
                   for o in x.operands]
            out = self.comp.add(make_instruction(x.opcode, ops, x.attrs, (), x.name))
        else:
            out = self.op("reshape", x, shape=dims)
        memo[id(x)] = out
        return out

    def _head(self, o: Instruction, like: Instruction) -> Instruction:
        """o (shaped as `like`'s operand) sliced as `like` (a splat broadcast anew)."""
        if o.opcode == "broadcast_in_dim" and o.operands[0].shape.rank == 0:
            return self.bcast(o.operands[0], like.shape.dimensions, ())
        a = like.attrs
        return self.op("slice", o, start_indices=a.start_indices,
                       limit_indices=a.limit_indices, strides=a.strides)

    def cmp(self, x: Instruction, y: Instruction, direction: str) -> Instruction:
        return self.op("compare", x, y, comparison_direction=ComparisonDirection[direction])

    def reduce(self, x: Instruction, init: Instruction, dims: Sequence[int],
               body: Computation) -> Instruction:
        return self.op("reduce", x, init, called=[body], dimensions=tuple(dims))


#: Most element-wise ops regroup pushes a reshape through (its leaves reshaped instead).
REGROUP_OPS = 32


def _elementwise(x: Instruction) -> bool:
    """x is an element-wise op of one index space (not a bitcast_convert that splits
    elements) that calls nothing."""
    return is_elementwise(x) and not x.called and all(
        o.shape.rank == 0 or o.shape.dimensions == x.shape.dimensions for o in x.operands)


def reshape_source(x: Instruction) -> Instruction:
    """The first value of x's chain of reshapes (x if it is no reshape): the same elements
    in row-major order."""
    while x.opcode == "reshape":
        x = x.operands[0]
    return x


def prefix_slice(x: Instruction) -> bool:
    """x is a slice of its operand's first elements in row-major order (from index 0, unit
    strides, cutting one dimension with only ones before it): the same buffer, shorter."""
    if x.opcode != "slice":
        return False
    a = x.attrs
    src = x.operands[0].shape.dimensions
    out = x.shape.dimensions
    if any(a.start_indices) or any(s != 1 for s in a.strides):
        return False
    cut = next((d for d, (n, m) in enumerate(zip(out, src)) if n != m), len(out))
    return all(n == 1 for n in out[:cut]) and tuple(out[cut + 1:]) == tuple(src[cut + 1:])


def scalar_reducer(module: Module, opcode: str, et: ElementType, name: str) -> Computation:
    """The module's computation `name`, `(a, b) -> opcode(a, b)` on `et` scalars, added on
    first use (the reducer a pass's new reduces call)."""
    for comp in module.computations:
        if comp.name == name:
            return comp
    sub = Emitter(Computation(name))
    p, q = sub.param(Shape.scalar(et)), sub.param(Shape.scalar(et))
    sub.comp.root = sub.op(opcode, p, q)
    return module.add_computation(sub.comp)


class HloBuilder(Emitter):
    """A fresh module whose entry this emitter fills; `build(root)` finishes it."""

    def __init__(self, name: str = "main") -> None:
        super().__init__(Computation(name))
        self.module = Module(name)
        self.subs: list[Computation] = []

    def scalar_fn(self, opcode: str, et: ElementType | str = ElementType.F32,
                  name: str = "") -> Computation:
        """A two-parameter reducer `(a, b) -> opcode(a, b)` (added to the module)."""
        t = et if isinstance(et, ElementType) else from_hlo_name(et)
        sub = Emitter(Computation(name or f"{opcode}_{t.hlo_name}"))
        a = sub.param(Shape.scalar(t))
        b = sub.param(Shape.scalar(t))
        sub.comp.root = sub.op(opcode, a, b)
        self.subs.append(sub.comp)
        return sub.comp

    def sub(self, name: str, shapes: Sequence[str | Shape],
            fn: Callable[..., Instruction]) -> Computation:
        """A called computation with parameters `shapes` and root `fn(emitter, *params)`."""
        e = Emitter(Computation(name))
        params = [e.param(s) for s in shapes]
        e.comp.root = fn(e, *params)
        self.subs.append(e.comp)
        return e.comp

    def build(self, root: Instruction) -> Module:
        self.comp.root = root
        for s in self.subs:
            self.module.add_computation(s)
        self.module.add_computation(self.comp, entry=True)
        return self.module
