"""A convolution's element-wise consumer computed in the convolution's output registers.

JAX's layers are `max(conv(x, w) + bias, 0)`: the cpu fusion makes the add and max one
kernel reading the convolution's buffer, a second pass over 16 MB per layer of the CNN
benchmark (0.8 ms of ~6) and a 16 MB temporary. When that kernel (its root R) reads the
convolution only at its own index, and nothing else reads the convolution, the convolution
computes R instead: conv_kernel.py applies this module's expression to each register block
before its store, and R's buffer is the convolution's.

The expression may use: the convolution's value; scalar constants; buffers read per output
feature (a bias: every dimension but the output feature one broadcast) or at the output's
own index (a residual); element-wise ops of elementwise.py's table, compare, select, clamp,
broadcast_in_dim, reshapes that only add or drop size-1 dimensions. The ops are
elementwise.py's own emitters, on the same values, so the bits are the unfused kernel's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.kernels import is_scalar_constant
from xlapy.ir import Computation, Instruction
from xlapy.types import ElementType as ET

#: Op nodes one epilogue may hold (each is emitted once per register of a block).
MAX_OPS = 16


@dataclass
class Node:
    """One value of the expression: "conv", "const" (value), "leaf" (index into the
    epilogue's leaves) or "op" (instr, args)."""

    kind: str
    instr: Instruction | None = None
    args: list[Node] = field(default_factory=list)
    value: Any = None


@dataclass
class Epilogue:
    """The consumer kernel `root` of `conv` as an expression over its registers."""

    conv: Instruction
    root: Instruction
    expr: Node
    #: (buffer, "channel" | "same"): the buffers it reads, in the order of the pointers.
    leaves: list[tuple[Instruction, str]]

    def emit(self, b: ir.IRBuilder, val: ir.Value, feature: ir.Value, at: ir.Value,
             extra: ir.Value) -> ir.Value:
        """The root's vector for the convolution's vector `val` of the output features
        starting at `feature`, stored at element `at` of the output."""
        vt = val.type
        memo: dict[int, ir.Value] = {}

        def leaf(k: int) -> ir.Value:
            et = self.leaves[k][0].shape.element_type
            base = b.bitcast(b.load(b.gep(extra, [ir.Constant(ir.IntType(64), k)])),
                             ew.storage_type(et).as_pointer())
            off = feature if self.leaves[k][1] == "channel" else at
            ld = b.load(b.bitcast(b.gep(base, [off]), vt.as_pointer()))
            ld.align = 8 if et == ET.F64 else 4
            return ld

        def gen(n: Node) -> ir.Value:
            got = memo.get(id(n))
            if got is not None:
                return got
            if n.kind == "conv":
                v = val
            elif n.kind == "leaf":
                v = leaf(n.value)
            elif n.kind == "const":
                c = ew.constant(n.value, n.instr.shape.element_type)  # type: ignore[union-attr]
                v = ir.Constant(ir.VectorType(c.type, vt.count), [c] * vt.count)
            else:
                v = _op(b, n.instr, [gen(a) for a in n.args])  # type: ignore[arg-type]
            memo[id(n)] = v
            return v

        return gen(self.expr)

    def pointers(self, arrays: Sequence[np.ndarray], keep: list[Any]) -> int:
        """The address of the leaves' pointer table for one call (arrays in leaf order;
        what must stay alive meanwhile goes into `keep`)."""
        o = self.conv.shape.dimensions[self.conv.attrs.dimension_numbers.output_feature_dimension]
        ptrs = []
        for (_, kind), a in zip(self.leaves, arrays):
            a = np.asarray(a)
            if kind == "channel":
                a = np.ascontiguousarray(np.broadcast_to(a.reshape(-1), (o,)))
            else:
                a = np.ascontiguousarray(a)
            keep.append(a)
            ptrs.append(a.ctypes.data)
        table = np.array(ptrs or [0], np.int64)
        keep.append(table)
        return int(table.ctypes.data)


def _op(b: ir.IRBuilder, instr: Instruction, args: list[ir.Value]) -> ir.Value:
    op = instr.opcode
    et = instr.shape.element_type
    t = instr.operands[0].shape.element_type
    if op == "compare":
        return ew.compare(b, args[0], args[1], t, instr.attrs)
    if op == "select":
        return ew.select(b, *args)
    if op == "clamp":
        lo, x, hi = args
        return ew.emit(b, "minimum", [ew.emit(b, "maximum", [x, lo], et, et), hi], et, et)
    return ew.emit(b, op, args, t, et)


def _elementwise(instr: Instruction, t: ET) -> bool:
    """An op the epilogue computes on vectors of `t` (and pred)."""
    op = instr.opcode
    ok = {t, ET.PRED}
    if any(o.shape.element_type not in ok for o in instr.operands) or \
            instr.shape.element_type not in ok:
        return False
    if op in ("compare", "select", "clamp"):
        return True
    row = ew.TABLE.get(op)
    return row is not None and instr.operands[0].shape.element_type in row[0] \
        and instr.operands[0].shape.element_type == t and instr.shape.element_type == t


def match(conv: Instruction, root: Instruction, inside: set[int]) -> Epilogue | None:
    """The epilogue computing kernel `root` (whose fused members are `inside`) from the
    convolution's registers, or None when the kernel reads anything it cannot."""
    dims = tuple(conv.shape.dimensions)
    t = conv.shape.element_type
    if tuple(root.shape.dimensions) != dims or root.shape.element_type != t:
        return None
    fdim = conv.attrs.dimension_numbers.output_feature_dimension
    ident = tuple(range(len(dims)))
    leaves: list[tuple[Instruction, str]] = []
    leaf_at: dict[tuple[int, str], int] = {}
    memo: dict[tuple[int, tuple[int | None, ...]], Node] = {}
    ops = [0]

    def walk(i: Instruction, m: tuple[int | None, ...]) -> Node | None:
        key = (id(i), m)
        if key in memo:
            return memo[key]
        n = _walk(i, m)
        if n is not None:
            memo[key] = n
        return n

    def _walk(i: Instruction, m: tuple[int | None, ...]) -> Node | None:
        if i is conv:
            return Node("conv") if m == ident else None
        if not i.shape.is_array:
            return None
        if i.opcode == "constant" and is_scalar_constant(i):  # fused or a buffer
            return Node("const", i, value=np.asarray(i.attrs.literal.to_numpy()).reshape(())
                        .item())
        if i is not root and id(i) not in inside:  # a buffer
            if i.shape.element_type != t:
                return None
            if m == ident:
                kind = "same"
            elif all(d in (None, fdim) for d in m) and \
                    all(m[k] == fdim for k, n in enumerate(i.shape.dimensions) if n != 1):
                kind = "channel"
            else:
                return None
            k = leaf_at.setdefault((id(i), kind), len(leaves))
            if k == len(leaves):
                leaves.append((i, kind))
            return Node("leaf", i, value=k)
        op = i.opcode
        if op == "broadcast_in_dim":
            src = i.operands[0].shape.dimensions
            return walk(i.operands[0], tuple(m[d] if src[k] != 1 else None
                                             for k, d in enumerate(i.attrs.broadcast_dimensions)))
        if op == "reshape":
            src = i.operands[0].shape.dimensions
            big_out = [k for k, n in enumerate(i.shape.dimensions) if n != 1]
            big_src = [k for k, n in enumerate(src) if n != 1]
            if [i.shape.dimensions[k] for k in big_out] != [src[k] for k in big_src]:
                return None
            ms: list[int | None] = [None] * len(src)
            for a, c in zip(big_src, big_out):
                ms[a] = m[c]
            return walk(i.operands[0], tuple(ms))
        if op == "convert" and i.operands[0].shape.element_type == i.shape.element_type:
            return walk(i.operands[0], m)
        if not _elementwise(i, t):
            return None
        ops[0] += 1
        if ops[0] > MAX_OPS:
            return None
        args = []
        for o in i.operands:
            a = walk(o, m if o.shape.rank else ())
            if a is None:
                return None
            args.append(a)
        return Node("op", i, args)

    expr = walk(root, ident)
    if expr is None or not any(n.kind == "conv" for n in memo.values()):
        return None
    return Epilogue(conv, root, expr, leaves)


def plan(comp: Computation, roots: dict[int, set[int]], outputs: set[int],
         ok: Any) -> dict[int, Epilogue]:
    """id(convolution) -> its epilogue, for each convolution `ok(conv)` accepts whose
    readers all lie in one kernel: `roots` maps each kernel root's id to the ids of the
    values it computes inside. The buffers an epilogue reads must be computed before the
    convolution (the thunk runs at the convolution's place)."""
    pos = {id(i): k for k, i in enumerate(comp.instructions)}
    by_id = {id(i): i for i in comp.instructions}
    kernel_of: dict[int, list[int]] = {}
    for r, inside in roots.items():
        for m in inside | {r}:
            kernel_of.setdefault(m, []).append(r)
    out: dict[int, Epilogue] = {}
    for conv in comp.instructions:
        if conv.opcode != "convolution" or id(conv) in outputs or not conv.users or \
                not ok(conv):
            continue
        ks = {k for u in conv.users for k in kernel_of.get(id(u), [None])}  # type: ignore[list-item]
        if len(ks) != 1 or None in ks:
            continue
        r = next(iter(ks))
        if any(len(kernel_of.get(id(u), [])) != 1 for u in conv.users):
            continue  # a user recomputed in several kernels
        epi = match(conv, by_id[r], roots[r])
        if epi is None or any(pos[id(leaf)] > pos[id(conv)] and leaf.opcode != "constant"
                              for leaf, _ in epi.leaves):
            continue
        out[id(conv)] = epi
    return out


def for_plan(comp: Computation, fusion: Any, outputs: set[int]) -> dict[int, Epilogue]:
    """plan() over a CpuFusionPlan's kernels (those without inline row reductions), for the
    convolutions conv_general can give an epilogue."""
    from xlapy.backends.cpu.conv_general import epilogue_ok

    if not any(i.opcode == "convolution" for i in comp.instructions):
        return {}
    roots = {id(r): {id(m) for m in fusion.members(r)} for r in fusion.kernel_roots()
             if id(r) not in fusion.row_reduces}
    return plan(comp, roots, outputs, epilogue_ok)


__all__ = ["Epilogue", "Node", "match", "plan", "for_plan", "MAX_OPS"]
