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

Past that kernel (or the bare convolution): a reduce_window pooling read by nothing else,
windows equal to strides, is folded as rows are stored (PoolPlan, conv_kernel.Pool), then
its own element-wise consumer (an average's 0.25); and a convolution whose value (through
its kernel) only the next convolution reads is computed inside that one (Chain,
conv_chain.py). The CNN benchmark's whole program is then one loop nest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.kernel_ops import is_scalar_constant
from xlapy.backends.cpu.llvm_util import splat
from xlapy.ir import Computation, Instruction
from xlapy.types import ElementType as ET

#: Op nodes one epilogue may hold (each is emitted once per register of a block).
MAX_OPS = 16
#: A value of the expression as Expr.walk's caller writes it.
V = TypeVar("V")


@dataclass
class Node:
    """One value of the expression: "conv", "const" (value), "leaf" (index into the
    epilogue's leaves) or "op" (instr, args)."""

    kind: str
    instr: Instruction | None = None
    args: list[Node] = field(default_factory=list)
    value: Any = None


@dataclass
class Expr:
    """The element-wise kernel `root` as an expression over the registers of `source`
    (the convolution, or the pooling of it)."""

    source: Instruction
    root: Instruction
    expr: Node
    #: (buffer, "channel" | "same"): the buffers it reads.
    leaves: list[tuple[Instruction, str]]
    #: Its first leaf's index in the call's pointer table.
    first: int = 0
    #: (id(function), table index) -> (function, its pointer loaded in the entry block).
    _loaded: dict[tuple[int, int], tuple[ir.Function, ir.Value]] = field(
        default_factory=dict, compare=False, repr=False)

    def emit(self, b: ir.IRBuilder, val: ir.Value, feature: ir.Value, at: ir.Value,
             extra: ir.Value) -> ir.Value:
        """The root's vector for the source's vector `val` of the output features
        starting at `feature`, stored at element `at` of the source's shape."""
        vt = val.type

        def leaf(k: int) -> ir.Value:
            et = self.leaves[k][0].shape.element_type
            base = b.bitcast(self._pointer(b, extra, self.first + k),
                             ew.storage_type(et).as_pointer())
            off = feature if self.leaves[k][1] == "channel" else at
            ld = b.load(b.bitcast(b.gep(base, [off]), vt.as_pointer()))
            ld.align = 8 if et == ET.F64 else 4
            return ld

        def const(n: Node) -> ir.Value:
            c = ew.constant(n.value, n.instr.shape.element_type)  # type: ignore[union-attr]
            return splat(ir.VectorType(c.type, vt.count), c)  # `splat (...)`: short text

        return self.walk(val, leaf, const,
                         lambda n, args: _op(b, n.instr, args))  # type: ignore[arg-type]

    def walk(self, val: V, leaf: Callable[[int], V], const: Callable[[Node], V],
             op: Callable[[Node, list[V]], V]) -> V:
        """The expression's value, each node's computed once: `val` for the source, leaf(k)
        for leaf k, const(node), op(node, its operands' values) (Expr.emit on llvmlite,
        conv_finish_text.py as IR text)."""
        memo: dict[int, V] = {}

        def gen(n: Node) -> V:
            got = memo.get(id(n))
            if got is not None:
                return got
            if n.kind == "conv":
                v = val
            elif n.kind == "leaf":
                v = leaf(n.value)
            elif n.kind == "const":
                v = const(n)
            else:
                v = op(n, [gen(a) for a in n.args])
            memo[id(n)] = v
            return v

        return gen(self.expr)

    def _pointer(self, b: ir.IRBuilder, extra: ir.Value, k: int) -> ir.Value:
        """extra[k], loaded once per function in its entry block when `extra` is the
        function's argument (else here): a load per stored vector made the code longer
        to compile, and stores to the output may alias the table, so LLVM kept it."""
        index = ir.Constant(ir.IntType(64), k)
        fn = b.function
        if not isinstance(extra, ir.Argument) or b.block is fn.entry_basic_block:
            return b.load(b.gep(extra, [index]))
        got = self._loaded.get((id(fn), k))
        if got is None or got[0] is not fn:
            with b.goto_block(fn.entry_basic_block):
                got = self._loaded[(id(fn), k)] = (fn, b.load(b.gep(extra, [index])))
        return got[1]


@dataclass
class PoolPlan:
    """reduce_window `rw` of the (epilogue's) result: windows [1, kh, kw, 1], strides equal
    to them, no padding or dilation, a scalar constant init, a reducer that is one
    element-wise op; `post` its own element-wise consumer kernel (an average's scale)."""

    rw: Instruction
    kh: int
    kw: int
    init: Any
    op: str
    post: Expr | None = None

    def spec(self) -> Any:
        from xlapy.backends.cpu.conv_kernel import Pool

        et = self.rw.shape.element_type
        dims = self.rw.shape.dimensions

        def init(vt: ir.Type) -> ir.Value:
            c = ew.constant(self.init, et)
            return splat(vt, c)

        def fold(b: ir.IRBuilder, acc: ir.Value, v: ir.Value) -> ir.Value:
            return ew.emit(b, self.op, [acc, v], et, et)

        return Pool(self.kh, self.kw, dims[1], dims[2], init, fold,
                    self.post.emit if self.post is not None else None, (self.op, self.init, et))


@dataclass
class Chain:
    """A convolution (and its element-wise kernel) read only by the next convolution:
    computed row by row into that one's ring (conv_chain.py), never stored whole."""

    conv: Instruction
    expr: Expr | None


@dataclass
class Epilogue:
    """What a convolution computes past its sums: an element-wise kernel (`expr`), then a
    pooling (`pool`, itself maybe followed by an element-wise kernel); `chain`: the
    convolution whose value (through its kernel) is this one's operand, computed inside."""

    conv: Instruction
    expr: Expr | None
    pool: PoolPlan | None = None
    chain: Chain | None = None

    @property
    def parts(self) -> list[Instruction]:
        """The instructions it computes besides its convolution, in order (the last is its
        value)."""
        out: list[Instruction] = []
        if self.chain is not None:
            out.append(self.chain.conv)
            if self.chain.expr is not None:
                out.append(self.chain.expr.root)
        if self.expr is not None:
            out.append(self.expr.root)
        if self.pool is not None:
            out.append(self.pool.rw)
            if self.pool.post is not None:
                out.append(self.pool.post.root)
        return out

    @property
    def root(self) -> Instruction:
        return self.parts[-1] if self.expr is not None or self.pool is not None else self.conv

    def inputs(self) -> tuple[Instruction, Instruction, list[Instruction]]:
        """(operand, weights, extra buffers) of its run: the convolution's operands and the
        leaves; chained, the first convolution's operand, this one's weights, then the
        first's weights and leaves before this one's."""
        own = [leaf for leaf, _ in self.leaves]
        if self.chain is None:
            return self.conv.operands[0], self.conv.operands[1], own
        c1 = self.chain.conv
        first = [leaf for leaf, _ in self.chain.expr.leaves] if self.chain.expr else []
        return c1.operands[0], self.conv.operands[1], [c1.operands[1], *first, *own]

    @property
    def leaves(self) -> list[tuple[Instruction, str]]:
        """Every buffer it reads, in the order of the pointer table."""
        out = list(self.expr.leaves) if self.expr is not None else []
        if self.pool is not None and self.pool.post is not None:
            out += self.pool.post.leaves
        return out

    @property
    def emit(self) -> Any:
        return self.expr.emit if self.expr is not None else None

    def pointers(self, arrays: Sequence[np.ndarray], keep: list[Any]) -> int:
        """The address of the leaves' pointer table for one call (arrays in leaf order;
        what must stay alive meanwhile goes into `keep`)."""
        return table(self.conv, self.leaves, arrays, keep)


def table(conv: Instruction, leaves: list[tuple[Instruction, str]],
          arrays: Sequence[np.ndarray], keep: list[Any], more: Sequence[int] = ()) -> int:
    """The address of a pointer table: the leaves' arrays (per-feature ones as [O] arrays of
    `conv`'s output features), then `more` addresses; what must stay alive goes into keep."""
    o = conv.shape.dimensions[conv.attrs.dimension_numbers.output_feature_dimension]
    ptrs = []
    for (_, kind), a in zip(leaves, arrays):
        a = np.asarray(a)
        if kind == "channel":
            a = np.ascontiguousarray(np.broadcast_to(a.reshape(-1), (o,)))
        else:
            a = np.ascontiguousarray(a)
        keep.append(a)
        ptrs.append(a.ctypes.data)
    tab = np.array([*ptrs, *more] or [0], np.int64)
    keep.append(tab)
    return int(tab.ctypes.data)


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


def match(conv: Instruction, root: Instruction, inside: set[int], fdim: int) -> Expr | None:
    """The expression computing kernel `root` (whose fused members are `inside`) from the
    registers of `conv` (its output features along `fdim`), or None when the kernel reads
    anything it cannot."""
    dims = tuple(conv.shape.dimensions)
    t = conv.shape.element_type
    if tuple(root.shape.dimensions) != dims or root.shape.element_type != t:
        return None
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
    return Expr(conv, root, expr, leaves)


def plan(comp: Computation, roots: dict[int, set[int]], outputs: set[int],
         ok: Any, chains: Any = None) -> dict[int, Epilogue]:
    """id(convolution) -> its epilogue, for each convolution `ok(conv)` accepts: its
    readers all lie in one kernel (`roots` maps each kernel root's id to the ids of the
    values it computes inside) that match() takes, and/or its (that kernel's) value is read
    by one reduce_window pooling_of() takes, itself maybe read by one kernel alone. The
    buffers an epilogue reads must be computed before the convolution (the thunk runs at
    the convolution's place)."""
    pos = {id(i): k for k, i in enumerate(comp.instructions)}
    by_id = {id(i): i for i in comp.instructions}
    kernel_of: dict[int, list[int]] = {}
    for r, inside in roots.items():
        for m in inside | {r}:
            kernel_of.setdefault(m, []).append(r)

    def consumer(v: Instruction, fdim: int) -> Expr | None:
        """The kernel reading `v`, as an expression of v, when it alone reads v."""
        if id(v) in outputs or not v.users:
            return None
        ks = {k for u in v.users for k in kernel_of.get(id(u), [None])}  # type: ignore[list-item]
        if len(ks) != 1 or None in ks or \
                any(len(kernel_of.get(id(u), [])) != 1 for u in v.users):
            return None  # read outside kernels, by several, or recomputed in several
        r = next(iter(ks))
        return match(v, by_id[r], roots[r], fdim)

    out: dict[int, Epilogue] = {}
    for conv in comp.instructions:
        if conv.opcode != "convolution" or not ok(conv):
            continue
        fdim = conv.attrs.dimension_numbers.output_feature_dimension
        expr = consumer(conv, fdim)
        value = expr.root if expr is not None else conv
        pool = pooling_of(value, outputs) if conv.shape.rank == 4 and fdim == 3 else None
        if pool is not None:
            pool.post = consumer(pool.rw, 3)
        epi = Epilogue(conv, expr, pool)
        if expr is None and pool is None:
            continue
        if any(pos[id(leaf)] > pos[id(conv)] and leaf.opcode != "constant"
               for leaf, _ in epi.leaves):
            continue
        if epi.expr is not None and epi.pool is not None and epi.pool.post is not None:
            epi.pool.post.first = len(epi.expr.leaves)
        out[id(conv)] = epi
    if chains is not None:
        _chain(comp, out, outputs, ok, chains)
    return out


def _chain(comp: Computation, out: dict[int, Epilogue], outputs: set[int], ok: Any,
           chains: Any) -> None:
    """Chain each convolution whose operand is the value of an earlier one (alone, or
    through that one's element-wise epilogue) read by it alone, when `chains(first,
    second)` accepts the pair: the second's epilogue takes the first (see Chain)."""
    for conv in comp.instructions:
        if conv.opcode != "convolution" or not ok(conv):
            continue
        src = conv.operands[0]
        first = None
        for e1 in list(out.values()):
            if e1.expr is not None and e1.pool is None and e1.chain is None and \
                    e1.expr.root is src:
                first = (e1.conv, e1.expr)
        if first is None and src.opcode == "convolution" and id(src) not in out:
            first = (src, None)
        if first is None or id(src) in outputs or len(src.users) != 1 or \
                not ok(first[0]) or not chains(first[0], conv):
            continue
        if first[1] is None and (id(first[0]) in outputs or len(first[0].users) != 1):
            continue
        mine = out.get(id(conv)) or Epilogue(conv, None)
        if mine.chain is not None:
            continue
        out.pop(id(first[0]), None)
        mine.chain = Chain(*first)
        out[id(conv)] = mine


def _scalar(i: Instruction) -> Any:
    """The value of a scalar constant behind broadcasts and reshapes, else None."""
    while i.opcode in ("broadcast_in_dim", "reshape") and i.shape.num_elements == 1:
        i = i.operands[0]
    if i.opcode == "constant" and is_scalar_constant(i):
        return np.asarray(i.attrs.literal.to_numpy()).reshape(()).item()
    return None


def pooling_of(v: Instruction, outputs: set[int]) -> PoolPlan | None:
    """The reduce_window that alone reads `v` ([B, H, W, F]), when the kernel can fold it
    as rows are stored (see PoolPlan)."""
    if id(v) in outputs or len(v.users) != 1:
        return None
    rw = v.users[0]
    if rw.opcode != "reduce_window" or len(rw.operands) != 2 or rw.operands[0] is not v \
            or rw.shape.element_type != v.shape.element_type:
        return None
    a = rw.attrs
    win = tuple(a.window_dimensions)
    if len(win) != 4 or win[0] != 1 or win[3] != 1 or \
            tuple(a.window_strides or (1,) * 4) != win or \
            any(d != 1 for d in (*(a.base_dilations or ()), *(a.window_dilations or ()))) or \
            any(tuple(p) != (0, 0) for p in (a.padding or ())):
        return None
    init = _scalar(rw.operands[1])
    comp = rw.called[0]
    r = comp.root
    params = comp.parameters
    if init is None or r is None or len(params) != 2 or r.opcode not in ("add", "maximum",
                                                                          "minimum", "multiply") \
            or list(r.operands) != list(params) or \
            r.shape.element_type != v.shape.element_type:
        return None
    return PoolPlan(rw, win[1], win[2], init, r.opcode)


def for_plan(comp: Computation, fusion: Any, outputs: set[int]) -> dict[int, Epilogue]:
    """plan() over a CpuFusionPlan's kernels (those without inline row reductions), for the
    convolutions conv_general can give an epilogue."""
    from xlapy.backends.cpu.conv_general import epilogue_ok

    if not any(i.opcode == "convolution" for i in comp.instructions):
        return {}
    roots = {id(r): {id(m) for m in fusion.members(r)} for r in fusion.kernel_roots()
             if id(r) not in fusion.row_reduces}
    from xlapy.backends.cpu.conv_chain import chainable

    return plan(comp, roots, outputs, epilogue_ok, chainable)


__all__ = ["Chain", "Epilogue", "Expr", "PoolPlan", "table", "Node", "match", "plan", "for_plan",
           "pooling_of", "MAX_OPS"]
