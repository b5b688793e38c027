"""Library thunks that also compute their consumers (the planning methods of
`CpuExecutable` for them): a convolution writing its epilogue's root (conv_epilogue.py) and
a column-split GEMM finishing its consumer kernel chunk by chunk (dot_epilogue.py). Both
write the root's value into the library op's slot, so they share one planner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xlapy.backends.cpu import conv_epilogue, dot_epilogue, library, recycle
from xlapy.ir import Instruction


class FusedRoots:
    """Mixed into CpuExecutable: adds a thunk and fills its plan's tables."""

    slot: dict[int, int]
    shapes: dict[int, Any]
    outputs: Any
    thunks: list[Callable[..., None]]
    report: list[tuple[str, str, str]]
    num_threads: int
    _extra_ins: dict[int, list[int]]
    _native: set[int]
    _keep: dict[int, Any]
    _dot_epilogues_compiled: Any

    _set: Callable[..., None]
    _threads: Callable[[int], int]
    _pool: Callable[[], Any]

    def _plan_conv_epilogue(self, instr: Instruction, epi: conv_epilogue.Epilogue, s: int,
                            ins: list[int], temps: list[int]) -> None:
        """The convolution writes its epilogue root's value into slot s (the root's too)."""
        from xlapy.backends.cpu.conv_general import general_plan

        x_in, w_in, leaves = epi.inputs()
        self._plan_fused_root(
            instr, epi.root, epi.parts, general_plan(instr, self.num_threads, epi), s,
            [self.slot[id(x_in)], self.slot[id(w_in)], *(self.slot[id(leaf)] for leaf in leaves)],
            temps, "library conv-direct (", "convolution")

    def _plan_dot_epilogue(self, instr: Instruction, epi: dot_epilogue.DotEpilogue, s: int,
                           ins: list[int], temps: list[int]) -> None:
        """The GEMM writes its consumer kernel's root into slot s (the root's too), each
        column chunk finished by the thread that computed it (dot_epilogue.py)."""
        assert self._dot_epilogues_compiled is not None
        run = dot_epilogue.runner(epi, self._dot_epilogues_compiled,
                                  self._threads(library.dot_cost(instr)), self._pool)
        self._plan_fused_root(instr, epi.root, epi.parts, run, s,
                              [*ins, *dot_epilogue.leaf_slots(epi, self.slot)], temps,
                              "library blas (column chunks, ", "dot")

    def _plan_fused_root(self, instr: Instruction, root: Instruction, parts: list[Instruction],
                         run: Callable[..., None], s: int, ins: list[int], temps: list[int],
                         how: str, kind: str) -> None:
        """`run(*ins values, out)` writes `root`'s value (a pooling's result is smaller than
        the convolution's) into slot s, a temporary or a recycled output."""
        self.slot[id(root)] = s
        self.shapes[s] = root.shape
        self._extra_ins[s] = list(ins)
        temp = id(root) not in self.outputs
        if temp:
            temps.append(s)
        shape, dtype = tuple(root.shape.dimensions), root.shape.dtype

        def run_fused(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
            out = v[s] if temp else recycle.output(self._keep, s, shape, dtype)
            run(*(v[k] for k in ins[:2]), out, *(v[k] for k in ins[2:]))
            if not temp:
                self._set(t, v, s, out)

        self.thunks.append(run_fused)
        self._native.add(s)
        self.report.append((instr.name, instr.opcode, f"{how}epilogue %{root.name})"))
        self.report += [(r.name, r.opcode, f"{kind} %{instr.name}'s epilogue") for r in parts]


__all__ = ["FusedRoots"]
