"""A native while loop's dynamic_update_slice of its own state, written in place: only the
update's window, not the whole state element.

`lax.scan` stacks its per-step outputs with `dynamic_update_slice(ys, y, i, 0)`, ys a state
element of the loop. As a kernel (index_emit.py) that op writes a fresh copy of all of ys
with the window changed, so every step cost a pass over ys and a scan of n steps O(n^2):
200 x 128 f32 steps 2.7 us each (XLA: 85 ns), 2000 steps 40 us each (XLA 87 ns). XLA
updates such a buffer in place; so does the native loop (native_loop.py) here, for a body
result k that is `dynamic_update_slice(state k, update, starts...)` when

* state k's readers in the body are that op, as its operand (each get_tuple_element of
  element k, or the parameter), and what computes its update and starts (`reading`), so
  nothing reads the old value after the window is written. A window whose update reads the
  state (`c.at[(i + 1) % n].set(f(c[i]))`, a ring buffer, a time-stepping loop) computes
  the whole update into a stack buffer first (at most BUFFER_BYTES), then writes it, on one
  thread: each step had copied all of c, a 2000 x 256 f32 loop 52 ms (XLA 0.76). Not when
  it reads the state only where it writes (`pointwise`: a scatter's old values);
* the op is the root of a kernel of its own and only the body's root tuple reads it. Such an
  op is no member of a row-parallel region (`candidate`, asked when the body plans them):
  the LSTM's gradient saves 12 residuals a step, which formed one region, so every step
  copied all 12 stacked buffers (50 steps: 2.7 ms, XLA's whole gradient 1.5).

The loop's state buffers are its own copies (native_loop._run copies the initial state; an
element written so is never bound in place), so writing into them is safe. The window kernel
(`WindowEmitter`, a KernelEmitter over the update's index space) computes the update exactly
as the op's kernel would (the same fused producers, the same leaves) and stores each element
at its clamped start plus its index, into the state buffer itself; the element is then
passed through (no copy or swap). The Python path of the same body (a loop the driver cannot
run) keeps the op's whole-array kernel. The window kernels are emitted into the body's own
kernel module as it compiles (`early`), under its options (a loop body's floating-point
environment test, fp_env.ENV_SET), so a tiny body's kernel sequence (kernel_sequence.py)
calls them inline: a scan stacking 16-float steps had run five calls a step, 35 -> 17 ns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import kernels
from xlapy.backends.cpu.lanes import row_strides, vector_width
from xlapy.backends.cpu.llvm_util import i64
from xlapy.backends.cpu.loop_metadata import no_vectorize
from xlapy.passes.fusion_decision import is_elementwise

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.ir import Computation, Instruction


#: The largest update a window that reads its own state buffers on the stack.
BUFFER_BYTES = 64 << 10


class WindowEmitter(kernels.KernelEmitter):
    """The kernel of `root` (a dynamic_update_slice) that writes only the update's window
    into `out_slot`, a buffer already holding the operand's value: loops over the update's
    dimensions, the first over [begin, end); scalar code (LLVM's vectorizer)."""

    def __init__(self, mod: Any, name: str, root: Instruction, leaves: dict[int, int],
                 out_slot: int, buffered: bool = False) -> None:
        super().__init__(mod, name, root, leaves, out_slot)
        self.width = 0
        self.segmented = False
        #: The update reads the state: all of it is computed before any element is written.
        self.buffered = buffered

    def _elementwise(self, begin: Any, end: Any) -> tuple[int, bool]:
        root = self.root
        operand, update, *starts = root.operands
        dims, udims = operand.shape.dimensions, update.shape.dimensions
        et = root.shape.element_type
        out = self.ptr(self.out_slot, et)
        b = self.b
        at = [self._start(s, n - u) for s, n, u in zip(starts, dims, udims)]
        strides = row_strides(dims)

        def window(idx: list[Any]) -> ir.Value:
            terms = [(b.add(s, i, flags=["nsw"]), st) for s, i, st in zip(at, idx, strides)]
            return b.gep(out, [self.offset_sum(terms, i64(0))], inbounds=True)

        def body(idx: list[Any]) -> None:
            self.memo.clear()
            b.store(ew.to_storage(b, self.gen(update, idx), et), window(idx))

        if not self.buffered:
            self._nest(udims, begin, end, body)
            return udims[0], True
        ustrides = row_strides(udims)
        with b.goto_entry_block():
            buf = b.alloca(ew.storage_type(et), i64(int(np.prod(udims))), name="update")

        def held(idx: list[Any]) -> ir.Value:
            return b.gep(buf, [self.offset_sum(list(zip(idx, ustrides)), i64(0))],
                         inbounds=True)

        def compute(idx: list[Any]) -> None:
            self.memo.clear()
            b.store(ew.to_storage(b, self.gen(update, idx), et), held(idx))

        self._nest(udims, i64(0), i64(udims[0]), compute)
        self._nest(udims, i64(0), i64(udims[0]), lambda idx: b.store(b.load(held(idx)),
                                                                      window(idx)))
        return 1, False  # (one call, one thread: a share's writes would race another's reads)

    def build(self) -> kernels.Kernel:
        spec = super().build()
        udims = self.root.operands[1].shape.dimensions
        if len(udims) > 1 and np.prod(udims[:-1]) > 1 and udims[-1] < vector_width():
            # rows of a few elements (a column: kv-cache `k.at[:, i].set(..)`): LLVM's
            # vectors across rows were gathers and scatters (Zen 4: 137 -> 98 ns a step
            # of a 64-row column without them)
            no_vectorize(self.fn)
        spec.cost = int(np.prod(udims)) * max(self.ops, 1)
        return spec


@dataclass
class Windows:
    """A loop body's in-place updates: body kernel index -> its window kernel (whose
    address is the body's `window_addrs`), and the state elements they write."""

    kernels: dict[int, kernels.Kernel]
    elements: frozenset[int]


def candidate(d: Instruction, comp: Computation) -> bool:
    """Whether `d`, in a loop body `comp`, has the shape of a window (`plan`'s test without
    the kernel plan): a dynamic_update_slice of state element k that is the body's result k
    (the root, or the root tuple's element k, read by nothing else), its operand read by
    nothing but `d`."""
    root, params = comp.root, comp.parameters
    if d.opcode != "dynamic_update_slice" or d.shape.rank == 0 or root is None:
        return False
    if root is d:
        k = 0
    elif root.opcode == "tuple" and root.operands.count(d) == 1 and \
            all(u is root for u in d.users):
        k = root.operands.index(d)
    else:
        return False
    op = d.operands[0]
    state = state_instrs(params, k, len(params) == 1 and params[0].shape.is_tuple)
    return op in state and d.operands.count(op) == 1 and reading(d, state) is not None


def reading(d: Instruction, state: list[Instruction]) -> bool | None:
    """Whether dynamic_update_slice `d`'s update or starts read the state element `state`
    (its instructions; `d`'s operand among them), or None when anything else may read it
    after the window is written: every other reader of the state, and everything computed
    from it, must feed `d`'s update or starts and nothing else (a reader fused into another
    kernel too, or an alias of the buffer passed on, would see the new value)."""
    feeding: set[int] = set()
    stack = list(d.operands[1:])
    while stack:
        i = stack.pop()
        if id(i) not in feeding:
            feeding.add(id(i))
            stack.extend(i.operands)
    reads = False
    for s in state:
        for u in s.users:
            if u is d and s is d.operands[0] and d.operands.count(s) == 1:
                continue
            if u is not d and not _only_into(u, d, feeding):
                return None
            reads = True
    return reads


def pointwise(d: Instruction, state: list[Instruction]) -> bool:
    """Whether `d`'s update reads the state only where it writes: every reader of the state
    besides `d` is a dynamic_slice of `d`'s operand at `d`'s own starts (the same
    instructions, clamped alike) and of the update's size, followed only by elementwise ops
    of that shape up to the update (scatter_window's `select(in_bounds, f(old, u), old)`),
    and the starts read no state. Element e of the update then reads the old value at e
    alone, so the window is written as it is computed, no stack buffer between (kv-cache
    `k.at[:, i].set(v[:, i] * 2)`, 64 strided elements a step: 188 -> 137 ns a step)."""
    operand, update, *starts = d.operands
    size = update.shape.dimensions
    ids = {id(s) for s in state}
    stack, seen = list(starts), set()
    while stack:  # the starts' inputs: none of them the state
        i = stack.pop()
        if id(i) in ids:
            return False
        if id(i) not in seen:
            seen.add(id(i))
            stack.extend(i.operands)
    for s in state:
        for u in s.users:
            if u is d:
                continue
            if u.opcode != "dynamic_slice" or u.operands[0] is not operand or \
                    list(u.operands[1:]) != starts or u.shape.dimensions != size:
                return False
            todo = [u]
            while todo:
                i = todo.pop()
                for x in i.users:
                    if x is d:
                        if i is not update:
                            return False
                    elif not (is_elementwise(x) and x.shape.dimensions == size):
                        return False
                    else:
                        todo.append(x)
    return True


def _only_into(u: Instruction, d: Instruction, feeding: set[int]) -> bool:
    """Whether `u` and everything computed from it feed `d`'s update or starts alone."""
    seen: set[int] = set()
    stack = [u]
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if id(i) not in feeding:
            return False
        stack.extend(x for x in i.users if x is not d)
    return True


def state_instrs(params: list[Instruction], k: int, tupled: bool) -> list[Instruction]:
    """The instructions of a cond/body that are state element k (its get_tuple_elements,
    or its parameter); none when the state tuple itself is read other than by those."""
    if not tupled:
        return [params[k]] if k < len(params) else []
    if any(u.opcode != "get_tuple_element" for u in params[0].users):
        return []
    return [u for u in params[0].users if u.attrs.index == k]


def state_index(instr: Instruction, params: list[Instruction], tupled: bool) -> int | None:
    """The state element `instr` is (a parameter, or the state tuple's element), or None."""
    if tupled:
        return instr.attrs.index if (instr.opcode == "get_tuple_element"
                                     and instr.operands[0] is params[0]) else None
    return next((j for j, q in enumerate(params) if instr is q), None)


def moves(comp: Computation) -> bool:
    """Whether a loop body `comp` has a result that is another state element as it was (a
    rotation: native_loop's moves, whose bookkeeping assumes no window wrote a state)."""
    root, params = comp.root, comp.parameters
    if root is None:
        return False
    results = list(root.operands) if root.opcode == "tuple" else [root]
    tupled = len(params) == 1 and params[0].shape.is_tuple
    return any((j := state_index(o, params, tupled)) is not None and j != k
               for k, o in enumerate(results))


def early(body: CpuExecutable, specs: list[kernels.Kernel], mod: Any) -> dict[int, kernels.Kernel]:
    """The window kernels of a loop body's results that qualify (module docstring), emitted
    into the body's own kernel module before it compiles (its kernel sequence calls them,
    kernel_sequence.py): the index of each whole-array kernel -> its window kernel. None
    where the body moves a state element (`moves`)."""
    comp = body.comp
    root = comp.root
    if not body.options.loop_part or root is None or moves(comp):
        return {}
    results = list(root.operands) if root.opcode == "tuple" else [root]
    in_regions = {m.slot for r in body.regions for m in r.members}
    by_output = {spec.output: j for j, spec in enumerate(specs)}
    out: dict[int, kernels.Kernel] = {}
    for d in results:
        if not candidate(d, comp):
            continue
        s = body.slot.get(id(d))
        j = by_output.get(s) if s is not None else None
        if j is None or s in in_regions or specs[j].root is not d or \
                id(d) in body.row_reduces or any(n == 0 for n in d.operands[1].shape.dimensions):
            continue
        leaves = body._leaves(d, body.fusion.fusible)
        state = state_instrs(comp.parameters, results.index(d), len(
            comp.parameters) == 1 and comp.parameters[0].shape.is_tuple)
        reads = reading(d, state)
        buffered = bool(reads) and not pointwise(d, state)
        if buffered and d.operands[1].shape.num_elements * d.shape.dtype.itemsize > \
                BUFFER_BYTES:
            continue
        if not reads:
            leaves.pop(id(d.operands[0]), None)  # the window never reads the old value
        out[j] = WindowEmitter(mod, f"w{j}", d, leaves, body.slot[id(d.operands[0])],
                               buffered=buffered).build()
    return out


def plan(body: CpuExecutable, results: list[Instruction]) -> Windows | None:
    """The body's window kernels (`early`, compiled with its kernels) as the native loop
    takes them: the kernels by the index of the one each replaces, the state elements they
    write; None when the body has none."""
    if not body.runnable or not body.windows:
        return None
    written = {id(body.kernel_specs[j].root) for j in body.windows}
    return Windows(dict(body.windows),
                   frozenset(k for k, d in enumerate(results) if id(d) in written))


__all__ = ["WindowEmitter", "Windows", "candidate", "early", "moves", "plan", "pointwise",
           "reading", "state_index"]
