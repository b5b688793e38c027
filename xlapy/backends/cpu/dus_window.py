"""A native while loop's dynamic_update_slice of its own state, written in place: only the
update's window, not the whole state element.

`lax.scan` stacks its per-step outputs with `dynamic_update_slice(ys, y, i, 0)`, ys a state
element of the loop. As a kernel (index_emit.py) that op writes a fresh copy of all of ys
with the window changed, so every step cost a pass over ys and a scan of n steps O(n^2):
200 x 128 f32 steps 2.7 us each (XLA: 85 ns), 2000 steps 40 us each (XLA 87 ns). XLA
updates such a buffer in place; so does the native loop (native_loop.py) here, for a body
result k that is `dynamic_update_slice(state k, update, starts...)` when

* state k's only reader in the body is that op, as its operand (each get_tuple_element of
  element k, or the parameter), so nothing reads the old value (the update cannot);
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
run) keeps the op's whole-array kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu import cache, kernels
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import row_strides
from xlapy.backends.cpu.llvm_util import Engine, i64, module_text, new_module

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.ir import Computation, Instruction


class WindowEmitter(kernels.KernelEmitter):
    """The kernel of `root` (a dynamic_update_slice) that writes only the update's window
    into `out_slot`, a buffer already holding the operand's value: loops over the update's
    dimensions, the first over [begin, end); scalar code (LLVM's vectorizer)."""

    def __init__(self, mod: Any, name: str, root: Instruction, leaves: dict[int, int],
                 out_slot: int) -> None:
        super().__init__(mod, name, root, leaves, out_slot)
        self.width = 0
        self.segmented = False

    def _elementwise(self, begin: Any, end: Any) -> tuple[int, bool]:
        root = self.root
        operand, update, *starts = root.operands
        dims, udims = operand.shape.dimensions, update.shape.dimensions
        et = root.shape.element_type
        out = self.ptr(self.out_slot, et)
        b = self.b
        at = [self._start(s, n - u) for s, n, u in zip(starts, dims, udims)]
        strides = row_strides(dims)

        def body(idx: list[Any]) -> None:
            self.memo.clear()
            v = ew.to_storage(b, self.gen(update, idx), et)
            terms = [(b.add(s, i, flags=["nsw"]), st) for s, i, st in zip(at, idx, strides)]
            b.store(v, b.gep(out, [self.offset_sum(terms, i64(0))], inbounds=True))

        self._nest(udims, begin, end, body)
        return udims[0], True

    def build(self) -> kernels.Kernel:
        spec = super().build()
        spec.cost = int(np.prod(self.root.operands[1].shape.dimensions)) * max(self.ops, 1)
        return spec


@dataclass
class Windows:
    """A loop body's in-place updates: body kernel index -> (window kernel, its address),
    the state elements they write, and the engine holding their code."""

    kernels: dict[int, tuple[kernels.Kernel, int]]
    elements: frozenset[int]
    engine: Engine


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
    return op in state and d.operands.count(op) == 1 and \
        all(u is d for s in state for u in s.users)


def state_instrs(params: list[Instruction], k: int, tupled: bool) -> list[Instruction]:
    """The instructions of a cond/body that are state element k (its get_tuple_elements,
    or its parameter); none when the state tuple itself is read other than by those."""
    if not tupled:
        return [params[k]] if k < len(params) else []
    if any(u.opcode != "get_tuple_element" for u in params[0].users):
        return []
    return [u for u in params[0].users if u.attrs.index == k]


def plan(body: CpuExecutable, results: list[Instruction]) -> Windows | None:
    """The window kernels of body results that qualify (module docstring), compiled; None
    when none does."""
    if not body.runnable or not results:
        return None
    in_regions = {m.slot for r in body.regions for m in r.members}
    by_output = {spec.output: j for j, spec in enumerate(body.kernel_specs)}
    picked: list[tuple[int, int, Instruction, int]] = []  # (element, kernel, op, state slot)
    for k, d in enumerate(results):
        if not candidate(d, body.comp):
            continue
        s = body.slot.get(id(d))
        j = by_output.get(s) if s is not None else None
        if j is None or s in in_regions or body.kernel_specs[j].root is not d or \
                id(d) in body.row_reduces:
            continue
        if any(n == 0 for n in d.operands[1].shape.dimensions):
            continue
        picked.append((k, j, d, body.slot[id(d.operands[0])]))
    if not picked:
        return None
    mod = new_module(f"xlapy_{body.comp.name}_windows")
    specs = []
    for _, j, d, out in picked:
        leaves = body._leaves(d, body.fusion.fusible)
        leaves.pop(id(d.operands[0]), None)  # the window never reads the old value
        specs.append(WindowEmitter(mod, f"w{j}", d, leaves, out).build())
    eng = cache.engine(module_text(mod), "", exports=[s.name for s in specs])
    return Windows({j: (spec, eng.address(spec.name)) for (_, j, _, _), spec
                    in zip(picked, specs)}, frozenset(k for k, _, _, _ in picked), eng)


__all__ = ["WindowEmitter", "Windows", "plan"]
