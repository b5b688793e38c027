"""The gpu executable: a step sequence over slots (device buffers), planned once.

Steps, in program order:

* kernel: a materialized fusible value with its fused producers (fusion.py), emitted as
  NVPTX IR (kernel_emit.py); all kernels of the computation form one module, compiled to
  PTX per architecture (nvptx.py; `ptx(arch)`);
* library cublas: dot_general GEMMs (cublas.py);
* aliasing: tuple, get_tuple_element, optimization_barrier, after_all (no device work);
* host: every other op (control flow, sort, scatter, ...) runs its interpreter kernel on
  the host, operands copied out and the result copied back ("host fallback", listed by
  `explain()` and `host_ops()`: each is a missing GPU feature).

Running needs a GPU (driver.py; runtime.py executes the steps); without one, `run` raises
Unimplemented saying so, while planning and PTX work anywhere.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import target as cpu_target
from xlapy.backends.cpu.llvm_util import module_text
from xlapy.backends.gpu import cublas, fusion, nvptx
from xlapy.backends.gpu.kernel_emit import GpuKernel, GpuKernelEmitter
from xlapy.interpreter import RuntimeState
from xlapy.ir import Computation, Instruction, Module

ALIASING = frozenset({"tuple", "get_tuple_element", "optimization_barrier", "after_all"})
#: Ops whose computations run as nested gpu executables, the host driving them (reading
#: a loop's predicate or a branch index back from the device; state stays there).
CONTROL_FLOW = frozenset({"while", "case", "if", "call"})
#: The cpu target whose emitters the kernels reuse: no AVX-512 (x86 intrinsics), F16C
#: (half conversions as fpext/fptrunc, not runtime calls).
EMIT_TARGET = "x86-64-v3"
_SERIAL = itertools.count()


@dataclass
class Step:
    """One step: `kind` is kernel, cublas, alias or host; `instr` its instruction."""

    kind: str
    instr: Instruction
    out: int
    ins: list[int]
    kernel: GpuKernel | None = None
    gemm: cublas.Gemm | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class GpuExecutable:
    """A computation planned for the GPU; `run(args)` returns interpreter values."""

    backend_name = "gpu"

    def __init__(self, comp: Computation, module: Module | None = None,
                 options: dict[str, Any] | None = None, eager_ptx: bool = True) -> None:
        eager_ptx = eager_ptx and not (options or {}).get("nested")  # the caller's runner
        self.comp = comp
        self.module = module
        self.options = dict(options or {})
        self.denormal = denormal.from_options(self.options)
        self.report: list[tuple[str, str, str]] = []
        self.subexecs: list[tuple[str, Any]] = []
        self.slot: dict[int, int] = {}
        self.shapes: list[Any] = []
        self.static: dict[int, np.ndarray] = {}
        self.steps: list[Step] = []
        self.kernel_specs: list[GpuKernel] = []
        self.prefix = re.sub(r"\W", "_", f"x{next(_SERIAL)}_{comp.name}")
        with cpu_target.use(EMIT_TARGET), denormal.use(self.denormal):
            self.ir = self._plan()
        self._ptx: dict[str, str] = {}
        self._runtime: Any = None
        if eager_ptx and self.kernel_specs:
            self.ptx()

    # ---- planning ----
    def _new_slot(self, instr: Instruction) -> int:
        s = len(self.shapes)
        self.slot[id(instr)] = s
        self.shapes.append(instr.shape)
        return s

    def _outputs(self) -> set[int]:
        out: set[int] = set()

        def walk(i: Instruction) -> None:
            if i.opcode == "tuple":
                for o in i.operands:
                    walk(o)
            else:
                out.add(id(i))

        if self.comp.root is not None:
            walk(self.comp.root)
        return out

    def _plan(self) -> str:
        order = self.comp.instructions
        fus = {id(i) for i in order if fusion.fusible(i)}
        mat = fusion.materialized(order, fus, self._outputs())
        mod = ir.Module(name=self.prefix)
        mod.triple = nvptx.TRIPLE
        mod.data_layout = nvptx.data_layout()
        for instr in order:
            iid = id(instr)
            if instr.opcode == "parameter":
                self._new_slot(instr)
                continue
            if iid in fus and iid not in mat:
                continue  # computed inside its consumers' kernels
            ins = [self.slot[id(o)] for o in instr.operands if id(o) in self.slot]
            if instr.opcode == "constant":
                s = self._new_slot(instr)
                self.static[s] = np.array(instr.attrs.literal.to_numpy(), order="C")
                self.report.append((instr.name, "constant", "buffer"))
                continue
            s = self._new_slot(instr)
            if iid in fus:
                name = f"{self.prefix}_k{len(self.kernel_specs)}"
                k = GpuKernelEmitter(mod, name, instr,
                                     fusion.leaves(instr, fus, mat, self.slot), s).build()
                self.kernel_specs.append(k)
                self.steps.append(Step("kernel", instr, s, k.inputs, kernel=k))
                self.report.append((instr.name, instr.opcode, f"kernel {name} ({k.launch.value})"))
                continue
            if instr.opcode in CONTROL_FLOW:
                opts = {**self.options, "nested": True}
                subs = [GpuExecutable(c, self.module, opts) for c in instr.called]
                self.subexecs.extend((instr.name, sub) for sub in subs)
                self.steps.append(Step("control", instr, s, ins, extra={"subs": subs}))
                self.report.append((instr.name, instr.opcode,
                                    "control flow (gpu sub-executables)"))
                continue
            gemm = cublas.plan(instr)
            if gemm is not None:
                self.steps.append(Step("cublas", instr, s, ins, gemm=gemm))
                self.report.append((instr.name, instr.opcode, "library cublas"))
                continue
            kind = "alias" if instr.opcode in ALIASING else "host"
            self.steps.append(Step(kind, instr, s, ins))
            self.report.append((instr.name, instr.opcode,
                                "aliasing" if kind == "alias" else "host fallback"))
        if not self.kernel_specs:
            return ""
        return module_text(mod) + nvptx.ftz_flag(denormal.flushing())

    # ---- code ----
    def kernel_names(self) -> list[str]:
        return [k.name for k in self.kernel_specs]

    def kernels(self) -> list[tuple[str, str]]:
        """(kernel name, root instruction) of every kernel, nested too (as on cpu)."""
        return [(k.name, k.root.name) for k in self.kernel_specs] + [
            k for _, sub in self.subexecs for k in sub.kernels()]

    def tree(self) -> list[GpuExecutable]:
        """This executable and those its control flow runs, depth first."""
        return [self] + [e for _, sub in self.subexecs for e in sub.tree()]

    def ptx(self, arch: str = nvptx.DEFAULT_ARCH) -> str:
        """The PTX of every kernel, for `arch` (compiled once per architecture)."""
        if arch not in self._ptx:
            if not self.kernel_specs:
                self._ptx[arch] = ""
            else:
                ref = nvptx.link([self.ir], self.kernel_names(), denormal.flushing())
                self._ptx[arch] = nvptx.emit_ptx(ref, arch)
        return self._ptx[arch]

    # ---- introspection ----
    def explain(self) -> str:
        """One line per instruction: how it runs on the GPU; then the called computations."""
        lines = [f"computation {self.comp.name}:"] + [
            f"  {name:24s} {op:24s} {how}" for name, op, how in self.report]
        for owner, sub in self.subexecs:
            lines += [f"-- called by %{owner}", sub.explain()]
        return "\n".join(lines)

    def host_ops(self) -> list[tuple[str, str]]:
        """(instruction, opcode) of every op that runs on the host, nested too."""
        return [(n, op) for n, op, how in self.report if how == "host fallback"] + [
            h for _, sub in self.subexecs for h in sub.host_ops()]

    fallbacks = host_ops

    # ---- running ----
    def run_computation(self, args: Sequence[Any], runtime: RuntimeState | None = None,
                        process: Any = None) -> Any:
        from xlapy.backends.gpu.runtime import Runner

        if self._runtime is None:
            self._runtime = Runner(self)
        return self._runtime.run(args, runtime, process)

    def run(self, args: Sequence[Any], runtime: RuntimeState | None = None,
            process: Any = None) -> Any:
        return self.run_computation(args, runtime, process)

    @staticmethod
    def fetch(value: Any) -> Any:
        """A value run_on_device returned, copied to the host (interpreter values)."""
        from xlapy.backends.gpu.runtime import to_host

        return to_host(value)

    def run_on_device(self, args: Sequence[Any], runtime: RuntimeState | None = None) -> Any:
        """Run on device buffers (runtime.DeviceArray, or host values copied in); the
        results stay on the device (DeviceArrays, tuples of them) until `.to_host()`."""
        from xlapy.backends.gpu.runtime import Runner

        if self._runtime is None:
            self._runtime = Runner(self)
        return self._runtime.run_device(args, runtime)
