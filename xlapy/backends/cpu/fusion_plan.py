"""The cpu fusion: which fusible values get a buffer (kernel roots), which row reductions a
kernel computes inline, how deep a kernel's expression may grow - decided once, with a reason
per decision, by the cpu-fusion pass (pipeline.py) into a `CpuFusionPlan` that the executable
builds its kernels from; and how many elements a kernel walks (its threading cost)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import numpy as np

from xlapy.backends.cpu import guarded_dots, kernel_ops, kernels
from xlapy.backends.cpu.fold_paths import (
    column_step,
    disjoint_slices,
    expands,
    forget_columns,
    stack_root,
)
from xlapy.backends.cpu.fusion_spread import (
    COSTLY,
    COSTLY_ELEMENTS,
    SPREAD_ELEMENTS,
    reduced_elsewhere,
    spread,
)
from xlapy.backends.cpu.index_emit import INDEX_OPS
from xlapy.backends.cpu.lanes import shared_dims
from xlapy.backends.cpu.reduce_region_emit import computed_iota
from xlapy.backends.cpu.scatter_emit import splat_reader
from xlapy.backends.cpu.transpose_lib import read_by_rows
from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction
from xlapy.passes.fusion_decision import EXPENSIVE, FusionDecision
from xlapy.passes.fusion_decision import SAME_INDEX as _SAME_INDEX

#: The longest chain of element-wise ops one kernel computes: the emitters walk a kernel's
#: expression recursively, and a chain of thousands (the interpreter runs 20,000) would
#: exceed Python's recursion limit; a value this deep into a chain gets a buffer instead.
MAX_FUSED_DEPTH = 100
#: Most (value, index) pairs one kernel generates. A value read through index-changing ops
#: (slice, pad, concatenate, transpose, ...) is generated once per distinct path of them: the
#: slices and interleaving pads of lax.associative_scan double those per level, and a
#: 256 x 4096 scan's kernel grew until the compile ran out of memory. Past this the value
#: generated in the most places gets a buffer (plan_fusion re-plans).
MAX_GENERATED = 512


def depth_cuts(order: list[Instruction], fusible: set[int],
               limit: int = MAX_FUSED_DEPTH) -> set[int]:
    """Fusible values to materialize so that no kernel's expression is deeper than `limit`
    (depth counted through fusible operands, restarting after each cut)."""
    depth: dict[int, int] = {}
    cuts: set[int] = set()
    for instr in order:
        if id(instr) not in fusible:
            continue
        d = 1 + max((depth.get(id(o), 0) for o in instr.operands), default=0)
        if d >= limit:
            cuts.add(id(instr))
            d = 0
        depth[id(instr)] = d
    return cuts


def _generated(root: Instruction, fusible: AbstractSet[int], mat: AbstractSet[int]
               ) -> tuple[dict[int, int], bool]:
    """(the number of index paths each value of `root`'s kernel is generated at, whether the
    kernel generates more than MAX_GENERATED (value, path) pairs: the count stops there). A
    path is the chain of index-changing ops between root and value; element-wise ops pass
    theirs on (the generators share a value read twice at one index)."""
    seen: set[tuple[int, tuple[int, ...]]] = set()
    per: dict[int, int] = {}
    cols: set[int] = set()
    stack: list[tuple[Instruction, tuple[int, ...]]] = [(root, ())]
    while stack:
        i, path = stack.pop()
        key = (id(i), path)
        if key in seen:
            continue
        seen.add(key)
        per[id(i)] = per.get(id(i), 0) + 1
        if len(seen) > MAX_GENERATED:
            return per, True
        same = i.opcode in _SAME_INDEX or (
            i.opcode not in CHEAP and i.opcode not in INDEX_OPS and i.opcode != "reduce")
        inner = path if same else (*path, id(i))
        inner = forget_columns(i, inner, cols)
        stack.extend((o, inner) for o in i.operands
                     if id(o) in fusible and id(o) not in mat and o.opcode != "constant")
    return per, False


def _oversized(order: list[Instruction], fusible: AbstractSet[int], mat: AbstractSet[int]
               ) -> Instruction | None:
    """In a kernel generating more than MAX_GENERATED (value, index) pairs, the value
    nearest its root (latest in program order) that it generates at several paths: with
    a buffer, everything below it is generated once. None when no kernel is that big."""
    pos = {id(i): k for k, i in enumerate(order)}
    for r in order:
        if id(r) not in mat or id(r) not in fusible:
            continue
        per, over = _generated(r, fusible, mat)
        if over:
            many = [k for k, n in per.items() if n > 1 and k != id(r)]
            if many:
                return order[max(pos[k] for k in many)]
    return None


def unread(user: Instruction, value: Instruction) -> bool:
    """Whether native op `user` computes operand `value` itself, reading no buffer of it: a
    scatter's splat (its scalar) or argmax's iota along the reduced dimension."""
    return splat_reader(user, value) or computed_iota(user, value)


def leaf_slots(root: Instruction, fusible: AbstractSet[int], materialized: AbstractSet[int],
               slot: dict[int, int]) -> dict[int, int]:
    """The buffers (id -> slot) the kernel of `root` reads: the values behind it that are
    not computed inside it (shared with the gpu backend)."""
    leaves: dict[int, int] = {}
    stack = list(root.operands)
    seen: set[int] = set()
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if id(i) in fusible and id(i) not in materialized:
            stack.extend(i.operands)
        else:
            leaves[id(i)] = slot[id(i)]
    return leaves


def kernel_elements(k: kernels.Kernel) -> int:
    """Elements a kernel walks (a reduce's input, else its result)."""
    sh = k.root.operands[0].shape if k.root.opcode == "reduce" else k.root.shape
    return int(np.prod(sh.dimensions)) if sh.is_array else 1


def row_walk(root: Instruction, fusible: set[int], mat: set[int], inline: set[int],
             reads: dict[int, set[tuple[str, ...]]] | None = None
             ) -> tuple[list[Instruction], set[int]]:
    """The row reductions kernel `root` computes inline, and those reached with an index
    other than the root's leading ones (they must be materialized). Indices are symbols:
    "r" the root's dimension 0, "r<d>" its dimension d, "0" index 0 (of an extent-1
    dimension), "c" a reduction's own column loop, "?" anything else. A reduction with a
    result of rank k must be reached at the root's first k indices.
    `reads` collects, per leaf buffer, the symbolic indices it is read at."""
    found: dict[int, Instruction] = {}
    bad: set[int] = set()
    seen: set[tuple[int, tuple[str, ...]]] = set()

    def walk(i: Instruction, idx: tuple[str, ...]) -> None:
        key = (id(i), idx)
        if key in seen:
            return
        seen.add(key)
        if i is not root and (id(i) not in fusible or id(i) in mat):
            if reads is not None:  # a leaf buffer
                reads.setdefault(id(i), set()).add(idx)
            return
        if id(i) in inline:
            row = row_symbols(i.shape.dimensions)
            if idx != row:
                bad.add(id(i))
                return
            found[id(i)] = i
            walk(i.operands[0], row + ("c",))
            walk(i.operands[1], ())
            return
        op = i.opcode
        if op == "broadcast_in_dim":
            src = i.operands[0].shape.dimensions
            walk(i.operands[0], tuple(idx[d] if src[k] != 1 else "0" for k, d in
                                      enumerate(i.attrs.broadcast_dimensions)))
            return
        if op == "reshape":
            walk(i.operands[0], _reshape_symbols(idx, i.shape.dimensions,
                                                 i.operands[0].shape.dimensions))
            return
        if op == "slice" and idx and i.attrs.start_indices[0] == 0 and \
                i.attrs.strides[0] == 1:  # rows kept (an LSTM's gates: columns of x W)
            o = i.operands[0]
            walk(o, (idx[0],) + ("?",) * (o.shape.rank - 1))
            return
        if op == "reduce" or op in ("transpose", "slice", "reverse") \
                or op in INDEX_OPS or op == "dynamic_iota":  # (operands read elsewhere)
            for o in i.operands:
                walk(o, ("?",) * o.shape.rank)
            return
        for o in i.operands:
            walk(o, idx if o.shape.rank else ())

    rank = root.shape.rank if root.shape.is_array else 0
    start = row_symbols(root.shape.dimensions) if rank and root.opcode != "reduce" else \
        ("?",) * rank
    walk(root, start)
    return list(found.values()), bad


def _reshape_symbols(idx: tuple[str, ...], out: Sequence[int], src: Sequence[int]
                     ) -> tuple[str, ...]:
    """A reshape's operand indices as lane_split's `_reshape_index` makes them: the leading
    and trailing dimensions both shapes share pass through, the middle ones are computed
    ("?") but for extent-1 ones (index 0): [B, H, L] -> [B, H, L, 1] keeps the row."""
    lead, trail = shared_dims(out, src)
    mid = tuple("0" if n == 1 else "?" for n in src[lead:len(src) - trail])
    return idx[:lead] + mid + idx[len(idx) - trail:]


def row_symbols(dims: Sequence[int]) -> tuple[str, ...]:
    """The symbols of the root's leading indices over `dims` (see row_walk)."""
    return tuple("0" if n == 1 else "r" if d == 0 else f"r{d}" for d, n in enumerate(dims))


#: Ops free to recompute in every kernel that needs them (no arithmetic).
CHEAP = frozenset({"constant", "broadcast_in_dim", "iota", "reshape", "transpose", "slice",
                   "reverse", "convert"})
#: A value several kernels need is recomputed in each when its fused chain has at most
#: DUP_OPS ops and at most DUP_KERNELS kernels need it; else it gets a buffer.
DUP_OPS = 8
DUP_KERNELS = 3
#: Integer bit-mixing ops (hashes, counter-based random bits): recomputed in up to
#: INT_DUP_KERNELS kernels while their fused chain has at most INT_DUP_OPS distinct ops. A
#: buffer costs a write and reads (~0.4 cycles an element each) where an op costs 1/16:
#: jax.random's threefry rounds (x0 += x1; x1 = rotl(x1) ^ x0, both words results) had
#: made six loop kernels and four buffers per iteration, dropout 1.7x XLA's time.
INT_MIX = frozenset({"add", "subtract", "multiply", "xor", "or", "and", "not", "negate",
                     "shift_left", "shift_right_logical", "shift_right_arithmetic", "compare",
                     "select", "maximum", "minimum", "abs", "popcnt", "count_leading_zeros"})
INT_DUP_OPS = 64
INT_DUP_KERNELS = 4
#: Ops through which a kernel reads its operand at another index than its own (a value read
#: through two of them is generated twice per element of the kernel). Broadcasts are left to
#: the emitter's hoisting and `fusion_spread.spread`; a reduce computed inline keeps its row
#: (softmax's exp(x - max), read by the sum and by the divide, is one row buffer).
REINDEX = INDEX_OPS | {"slice", "reverse", "transpose", "reshape"}
#: Index paths kept per value (two tell it is generated more than once).
MAX_PATHS = 4


@dataclass(frozen=True)
class FusionLimits:
    """The cost thresholds of the cpu fusion (CpuOptions carries them)."""

    dup_ops: int = DUP_OPS
    dup_kernels: int = DUP_KERNELS
    max_depth: int = MAX_FUSED_DEPTH


@dataclass
class CpuFusionPlan:
    """The fusion of one computation, made by the cpu fusion pass and consumed as is by the
    executable: the fusible values (a kernel can compute them per output index), those that
    get a buffer (each the root of one kernel, or an array constant), the row reductions each
    kernel computes inline, and every decision with its reason. `order` pins the instructions
    it was made for: a computation changed since is a loud error, never a silent re-plan."""

    comp: Computation
    order: tuple[int, ...]
    fusible: frozenset[int]
    materialized: frozenset[int]
    row_reduces: dict[int, list[Instruction]]
    decisions: list[FusionDecision] = field(default_factory=list)

    def check(self, comp: Computation) -> None:
        if comp is not self.comp or tuple(map(id, comp.instructions)) != self.order:
            raise XlapyError(f"the cpu fusion plan of {comp.name} is stale: the computation "
                             "changed after the cpu-fusion pass")

    def kernel_roots(self) -> list[Instruction]:
        """The instructions a fused kernel computes into a buffer, in program order."""
        return [i for i in self.comp.instructions if id(i) in self.fusible
                and id(i) in self.materialized and i.opcode != "constant"]

    def members(self, root: Instruction) -> list[Instruction]:
        """The values kernel `root` computes inside (not in buffers), in program order."""
        inside: set[int] = set()
        stack = list(root.operands)
        while stack:
            i = stack.pop()
            if id(i) in inside or id(i) not in self.fusible or id(i) in self.materialized:
                continue
            inside.add(id(i))
            stack.extend(i.operands)
        return [i for i in self.comp.instructions if id(i) in inside]

    def describe(self) -> list[str]:
        """One line per kernel: its root and what it fuses (`xlapy opt --explain-fusion` and
        `xlapy compile --explain` both print these lines)."""
        roots = self.kernel_roots()
        kernels = [(r, self.members(r)) for r in roots]
        uses: dict[int, int] = {}
        for _, ms in kernels:
            for m in ms:
                uses[id(m)] = uses.get(id(m), 0) + 1
        rows = {id(r) for rs in self.row_reduces.values() for r in rs}
        lines = [f"computation {self.comp.name}: {len(roots)} fused kernel(s)"]
        for root, ms in kernels:
            names = [f"%{m.name}" + (" (row)" if id(m) in rows else "")
                     + (" (dup)" if uses[id(m)] > 1 else "") for m in ms]
            lines.append(f"  kernel %{root.name} ({root.opcode}): "
                         + (", ".join(names) if names else "nothing fused"))
        return lines


def routine_operands(order: list[Instruction], fusible: set[int], outputs: set[int]
                     ) -> dict[int, str]:
    """The operands to materialize, with the reason, of transposes transpose_lib's routine
    runs once they read a buffer: a kernel's root (an output, or read by no fusible op),
    over an expression with arithmetic in it (not a broadcast or a reshape: those cost
    nothing read at the transposed index)."""
    from xlapy.backends.cpu.transpose_lib import routine_shape

    out: dict[int, str] = {}
    for i in order:
        if i.opcode != "transpose" or id(i) not in fusible:
            continue
        op = i.operands[0]
        if id(op) in fusible and op.opcode not in CHEAP and routine_shape(i) and (
                id(i) in outputs or not any(id(u) in fusible for u in i.users)):
            out[id(op)] = (f"computed in its own order for transpose %{i.name}, which "
                           "the transpose routine then runs: materialized")
    return out


def plan_fusion(comp: Computation, limits: FusionLimits = FusionLimits(),
                routines: bool = True) -> CpuFusionPlan:
    """The cpu fusion of `comp` (see CpuFusionPlan). A row reduction (reduce of [..., C] over
    its last dimension with a simple reducer) whose users all land in one kernel is computed
    inside that kernel, per row (value of its leading indices), before the inner loops
    (softmax and layernorm become one pass per row, the row still in cache; [B, H, L, L]
    attention scores too) - when every path from the kernel root reaches it with the root's
    leading indices (broadcasts along them, element-wise ops); otherwise it is materialized
    and planning is redone. `routines`: transposes may run transpose_lib's routine
    (routine_operands)."""
    order = comp.instructions
    fusible = {id(i) for i in order if i.opcode != "parameter" and kernel_ops.fusible(i)}
    outputs = {id(i) for i in root_values(comp)}
    forced: dict[int, str] = routine_operands(order, fusible, outputs) if routines else {}
    forced.update(guarded_dots.forced(order, fusible))
    pos = {id(i): k for k, i in enumerate(order)}
    while True:
        chooser = _Chooser(order, fusible, outputs, forced, limits)
        mat, inline = chooser.choose()
        rows: dict[int, list[Instruction]] = {}
        bad: set[int] = set()
        for instr in order:
            if id(instr) in mat and id(instr) in fusible and inline:
                found, b = row_walk(instr, fusible, mat, inline)
                # One row depth per kernel (its outer loop runs over that many dimensions).
                found.sort(key=lambda i: pos[id(i)])
                b |= {id(r) for r in found if r.shape.rank != found[0].shape.rank}
                found = [r for r in found if id(r) not in b]
                bad |= b
                if found:
                    rows[id(instr)] = sorted(found, key=lambda i: pos[id(i)])
        big = _oversized(order, fusible, mat) if not bad else None
        if big is not None:
            forced[id(big)] = (f"generated at too many indices of one kernel (over "
                               f"{MAX_GENERATED} values): materialized")
            continue
        if not bad:
            return CpuFusionPlan(comp, tuple(map(id, order)), frozenset(fusible),
                                 frozenset(mat), rows, chooser.decisions)
        forced.update((b, "a row reduction its kernel reads at an index other than the "
                       "kernel's row: materialized") for b in bad)


def root_values(comp: Computation) -> list[Instruction]:
    """The instructions whose values leave the computation (through tuples)."""
    out: list[Instruction] = []

    def walk(i: Instruction) -> None:
        if i.opcode == "tuple":
            for o in i.operands:
                walk(o)
        else:
            out.append(i)

    if comp.root is not None:
        walk(comp.root)
    return out


class _Chooser:
    """Which fusible values get a buffer (each is the root of one kernel), and why.

    Must: reduces, outputs, values a non-fusible op reads, array constants. Otherwise,
    walking consumers first: a value whose users all land in one kernel fuses there; a value
    needed by several kernels is recomputed in each when its fused producer chain is short
    (dup_ops, e.g. exp(x - max) in softmax feeds both the sum and the divide, saving a write
    and a read of the whole array), else materialized."""

    def __init__(self, order: list[Instruction], fusible: set[int], outputs: set[int],
                 forced: dict[int, str], limits: FusionLimits) -> None:
        self.order, self.fusible, self.outputs = order, fusible, outputs
        self.forced, self.limits = forced, limits
        self.decisions: list[FusionDecision] = []
        self.by_id = {id(i): i for i in order}

    def _say(self, p: Instruction, consumer: Instruction, fused: bool, reason: str,
             duplicated: bool = False) -> None:
        self.decisions.append(FusionDecision(p.name, consumer.name, fused, reason, duplicated))

    def _must_buffer(self, instr: Instruction, cuts: set[int]) -> str | None:
        iid = id(instr)
        if iid in self.forced:
            return self.forced[iid]
        if instr.opcode == "reduce":
            return "a reduce roots its own kernel"
        if iid in self.outputs:
            return "a result of the computation"
        if iid in cuts:
            return f"the kernel's expression would be deeper than {self.limits.max_depth} ops"
        outside = [u for u in instr.users if id(u) not in self.fusible
                   and not unread(u, instr)]
        if outside:
            return f"read by {outside[0].opcode} %{outside[0].name}, which no kernel computes"
        if instr.opcode == "constant" and not kernel_ops.is_scalar_constant(instr):
            return "an array constant is a buffer"
        if instr.opcode == "transpose" and (why := read_by_rows(instr)) is not None:
            return why
        if instr.opcode == "constant" and any(
                u.opcode == "broadcast_in_dim" and any(splat_reader(r, u) for r in u.users)
                for u in instr.users):
            return "the scalar a native scatter fills its result with"
        return None

    def choose(self) -> tuple[set[int], set[int]]:
        order, fusible, lim = self.order, self.fusible, self.limits
        cost: dict[int, int] = {}
        heavy: set[int] = set()  # over an EXPENSIVE op, fusible all the way
        for instr in order:
            if id(instr) in fusible and instr.opcode != "reduce":
                own = 0 if instr.opcode in CHEAP else 1
                if (instr.opcode in COSTLY and instr.shape.element_type.is_float
                        and instr.shape.num_elements >= COSTLY_ELEMENTS):
                    own = lim.dup_ops + 1
                # (a broadcast out of a smaller value is charged nothing of it: the value
                # decides for itself, a buffer of its own size rather than the broadcast's)
                srcs = [] if expands(instr) else instr.operands
                cost[id(instr)] = min(own + sum(cost.get(id(o), 0) for o in srcs), 1 << 20)
                ops = [o for o in instr.operands if id(o) in fusible]
                if instr.opcode in EXPENSIVE or any(id(o) in heavy for o in ops):
                    heavy.add(id(instr))
        mixing = integer_mixing(order, fusible)
        mat: set[int] = set()
        inline, cuts = set[int](), depth_cuts(order, fusible, lim.max_depth)
        kernel_of: dict[int, frozenset[int]] = {}
        #: The index paths (REINDEX ops from the root) at which a value's one kernel reads it.
        paths: dict[int, frozenset[tuple[int, ...]]] = {}
        for instr in reversed(order):
            iid = id(instr)
            if iid not in fusible:
                continue
            users = instr.users
            if (instr.opcode == "reduce" and iid not in self.forced and iid not in self.outputs
                    and kernel_ops.row_reduce(instr) and users
                    and all(id(u) in fusible for u in users)):
                ks = frozenset().union(*(kernel_of[id(u)] for u in users))
                if len(ks) == 1:
                    kernel_of[iid] = ks
                    inline.add(iid)
                    self._say(instr, self.by_id[next(iter(ks))], True,
                              "a row reduction computed inside the kernel, per row")
                    continue
            why = self._must_buffer(instr, cuts)
            if why is None and iid in heavy and instr.opcode not in CHEAP:
                why = spread(instr)
            if why is not None:
                mat.add(iid)
                kernel_of[iid] = frozenset((iid,))
                self._say(instr, instr, False, why)
                continue
            # (a native scatter filling its result with this splat reads its scalar)
            ks = frozenset().union(*(kernel_of[id(u)] for u in users
                                     if not unread(u, instr)))
            c = cost.get(iid, 0)
            if instr.opcode in EXPENSIVE and (
                    why := reduced_elsewhere(instr, [self.by_id[k] for k in ks])) is not None:
                mat.add(iid)
                kernel_of[iid] = frozenset((iid,))
                self._say(instr, instr, False, why)
                continue
            if len(ks) == 1:
                paths[iid] = self._paths(instr, next(iter(ks)), paths)
                if (len(paths[iid]) > 1 and c > lim.dup_ops and instr.opcode not in CHEAP
                        and instr.shape.num_elements >= SPREAD_ELEMENTS):
                    self._say(instr, instr, False,
                              f"read at {len(paths[iid])}+ index paths of one kernel with a "
                              f"chain of {c} ops (at most {lim.dup_ops} recompute): a buffer")
                    mat.add(iid)
                    kernel_of[iid] = frozenset((iid,))
                    paths[iid] = frozenset({()})
                    continue
            if len(ks) <= 1 or instr.opcode in CHEAP or (
                    c <= lim.dup_ops and len(ks) <= lim.dup_kernels) or (
                    iid in mixing and len(ks) <= INT_DUP_KERNELS):
                kernel_of[iid] = ks
                for k in sorted(ks, key=lambda k: self.by_id[k].name):
                    self._say(instr, self.by_id[k], True, self._fuse_reason(instr, len(ks), c),
                              len(ks) > 1)
            else:
                mat.add(iid)
                kernel_of[iid] = frozenset((iid,))
                self._say(instr, instr, False,
                          f"needed by {len(ks)} kernels (at most {lim.dup_kernels} recompute "
                          f"a value) with a chain of {c} ops (at most {lim.dup_ops}): a buffer")
        return mat, inline

    def _paths(self, instr: Instruction, root: int,
               paths: dict[int, frozenset[tuple[int, ...]]]) -> frozenset[tuple[int, ...]]:
        """The index paths at which kernel `root` reads `instr` (its users' paths, each
        through a REINDEX user extended by it), at most MAX_PATHS of them."""
        out: set[tuple[int, ...]] = set()
        stack = stack_root(self.by_id[root])
        for u in instr.users:
            if unread(u, instr):
                continue
            base = frozenset({()}) if id(u) == root else paths.get(id(u), frozenset({()}))
            step = (id(u),) if u.opcode in REINDEX and not (stack and column_step(u)) else ()
            out.update(p + step for p in base)
            if len(out) >= MAX_PATHS:
                break
        if len(out) > 1 and disjoint_slices(instr, [paths.get(id(u)) for u in instr.users]):
            return frozenset({os.path.commonprefix(sorted(out))})  # (generated once)
        return frozenset(sorted(out)[:MAX_PATHS])

    def _fuse_reason(self, instr: Instruction, kernels_: int, cost: int) -> str:
        if kernels_ <= 1:
            return f"all {len(instr.users)} user(s) are in this kernel"
        if instr.opcode in CHEAP:
            return f"cheap {instr.opcode}, recomputed in each of {kernels_} kernels"
        return f"a chain of {cost} op(s), recomputed in each of {kernels_} kernels"


def integer_mixing(order: Sequence[Instruction], fusible: set[int]) -> set[int]:
    """The fusible integer values computed by INT_MIX ops (and free ones) alone, with at most
    INT_DUP_OPS distinct ops in their fused chain (a DAG: a shared value counts once)."""
    ops: dict[int, frozenset[int] | None] = {}
    for instr in order:
        iid = id(instr)
        if iid not in fusible or instr.opcode == "reduce":
            continue
        ets = [v.shape.element_type for v in (instr, *instr.operands[:1])
               if v.shape.is_array]
        whole = bool(ets) and all(t.is_integer or t.is_pred for t in ets)
        free = instr.opcode in CHEAP and instr.opcode != "convert"
        if not free and (instr.opcode not in INT_MIX | {"convert"} or not whole):
            ops[iid] = None
            continue
        subs = [ops.get(id(o), frozenset()) for o in instr.operands if id(o) in fusible]
        acc = frozenset(() if free else (iid,)).union(*(s for s in subs if s is not None))
        ops[iid] = None if None in subs or len(acc) > INT_DUP_OPS else acc
    return {i for i, v in ops.items() if v is not None and v}
