"""`xlapy.compile` of a sharded module (`mhlo.num_partitions = N` with GSPMD or Shardy
shardings): the program is partitioned once (passes/spmd) and every call splits the global
arguments into shards, runs the per-partition program on an N-way process grid (threads,
cpu backend by default) and puts the global results back together."""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil
from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.ir import Module
from xlapy.ir.sharding import MANUAL, AnySharding, Sharding
from xlapy.passes.spmd import SpmdModule, partition_module
from xlapy.types import Shape


def shard_of(a: np.ndarray, s: AnySharding, device: int) -> np.ndarray:
    """Device `device`'s piece of the global array `a` (uneven last shards zero-padded)."""
    if not isinstance(s, Sharding) or not s.is_tiled:
        return a
    coords = s.coords([device])[device]
    idx, pad = [], []
    for g, t, c in zip(a.shape, s.tiles, coords):
        n = ceil(g / t)
        lo, hi = min(c * n, g), min((c + 1) * n, g)
        idx.append(slice(lo, hi))
        pad.append((0, n - (hi - lo)))
    piece = a[tuple(idx)]
    return np.pad(piece, pad) if any(p for _, p in pad) else np.ascontiguousarray(piece)


def assemble(pieces: Sequence[np.ndarray], s: AnySharding, shape: Shape) -> np.ndarray:
    """The global array from every partition's piece (the first holder of each tile)."""
    if not isinstance(s, Sharding) or not s.is_tiled:
        return np.asarray(pieces[0])
    if s.kind == MANUAL:
        raise XlapyError("a manual value cannot leave the program")
    out = np.empty(shape.dimensions, dtype=np.asarray(pieces[0]).dtype)
    seen = set()
    for dev, coords in s.coords(range(len(pieces))).items():
        if coords in seen:
            continue
        seen.add(coords)
        idx, local = [], []
        for g, t, c in zip(shape.dimensions, s.tiles, coords):
            n = ceil(g / t)
            lo, hi = min(c * n, g), min((c + 1) * n, g)
            idx.append(slice(lo, hi))
            local.append(slice(0, hi - lo))
        out[tuple(idx)] = np.asarray(pieces[dev])[tuple(local)]
    return out


class ShardedProgram:
    """`prog(*global_arrays)` -> global results; `prog.run_shards(per_partition_args)` ->
    each partition's results; `num_partitions`, `partition_text(i)`, `cost_report()`."""

    def __init__(self, module: Module, backend: str = "cpu",
                 options: dict[str, Any] | None = None) -> None:
        """`options`: {"spmd_strict": True} makes an op that would run on whole operands an
        error instead of an entry of `spmd.replicated`."""
        self.global_module = module
        self.options = {k: v for k, v in (options or {}).items() if k != "spmd_strict"}
        self.spmd: SpmdModule = partition_module(module, bool((options or {}).get(
            "spmd_strict")))
        self.module = self.spmd.module
        self.backend = backend if backend in ("cpu", "interpreter") else "cpu"
        self.num_partitions = int(self.module.num_partitions or 1)
        self.num_replicas = int(self.module.num_replicas or 1)
        self._exe: Any = None

    def partition_text(self, i: int = 0) -> str:
        """Partition `i`'s program: the per-partition module with partition_id = i."""
        from xlapy.ir import Instruction
        from xlapy.ops.core import ConstantAttrs
        from xlapy.stablehlo import print_module
        from xlapy.types import Literal

        if not 0 <= i < self.num_partitions:
            raise XlapyError(f"partition {i} of {self.num_partitions}")
        m = self.module.clone()
        for c in m.computations:
            for instr in list(c.instructions):
                if instr.opcode == "partition_id":
                    lit = Literal(instr.shape, np.asarray(i, np.uint32))
                    const = Instruction("constant", [], instr.shape, ConstantAttrs(lit), (),
                                        f"partition_{i}")
                    c.instructions.insert(c.instructions.index(instr), const)
                    const.parent = c
                    instr.replace_all_uses_with(const)
        return print_module(m)

    def as_text(self, generic: bool = False) -> str:
        from xlapy.stablehlo import print_module

        return print_module(self.module, generic=generic)

    def shard_args(self, args: Sequence[Any]) -> list[list[np.ndarray]]:
        """One argument list per process (replica-major) from global arrays."""
        sp = self.spmd
        if len(args) != len(sp.global_params):
            raise XlapyError(f"the program takes {len(sp.global_params)} argument(s), got "
                             f"{len(args)}")
        arrays = [np.asarray(a, dtype=s.element_type.dtype) for a, s in
                  zip(args, sp.global_params)]
        for a, s in zip(arrays, sp.global_params):
            if tuple(a.shape) != tuple(s.dimensions):
                raise XlapyError(f"argument of shape {list(a.shape)}; the program takes {s}")
        per = [[shard_of(a, s, p) for a, s in zip(arrays, sp.param_shardings)]
               for p in range(self.num_partitions)]
        return per * self.num_replicas

    def executable(self) -> Any:
        """The cpu backend's executable of the per-partition program (compiled once)."""
        if self._exe is None:
            from xlapy.backends import get_backend

            self._exe = get_backend("cpu").compile(self.module, self.options)
        return self._exe

    def fallbacks(self) -> list[tuple[str, str]]:
        return list(self.executable().fallbacks()) if self.backend == "cpu" else []

    def run_shards(self, per_process: Sequence[Sequence[Any]]) -> list[Any]:
        """Each process's results from its argument list (replica-major), on the threaded
        grid, or on the MPI ranks after `xlapy.distributed.mpi.use_mpi()`."""
        from xlapy.distributed import ProcessGrid
        from xlapy.ops.collectives import new_process_grid

        grid = new_process_grid(self.num_replicas, self.num_partitions)
        comp = self.module.entry_computation()
        if not isinstance(grid, ProcessGrid) or self.backend != "cpu":
            n = self.num_replicas * self.num_partitions
            return grid.run_programs([comp] * n, per_process, backend=self.backend)
        exe = self.executable()
        index = {pid: k for k, pid in enumerate(grid.pids)}

        def job(pid: Any) -> Any:
            return lambda proc: exe.run_computation(list(per_process[index[pid]]),
                                                    grid.runtime_for(pid), proc)

        out = grid.run({pid: job(pid) for pid in grid.pids})
        return [out[pid] for pid in grid.pids]

    def __call__(self, *args: Any) -> Any:
        outs = self.run_shards(self.shard_args(args))
        sp = self.spmd
        n = len(sp.global_results)
        per = [list(o) if n > 1 or isinstance(o, tuple) else [o] for o in outs]
        results = [assemble([p[k] for p in per[:self.num_partitions]], s, shape)
                   for k, (s, shape) in enumerate(zip(sp.result_shardings, sp.global_results))]
        return tuple(results) if n > 1 else results[0]

    def memory(self) -> dict[str, int]:
        """Bytes one partition's program holds on the cpu backend (arguments, constants,
        the arena of temporaries, results)."""
        exe = self.executable()
        return executable_memory(exe, exe.comp)

    def collective_bytes(self) -> list[tuple[str, str, int]]:
        """Every collective of the per-partition program (inserted by the partitioner or
        written in a manual region): (op, result shape, bytes each partition receives; a
        ring all_reduce counts both passes)."""
        out = []
        for comp in self.module.computations:
            for i in comp.instructions:
                if i.opcode in _MOVED:
                    groups = getattr(i.attrs, "replica_groups", ()) or ()
                    n = len(groups[0]) if groups else self.num_partitions
                    size = _nbytes(i.shape)
                    out.append((i.opcode, str(i.shape), int(_MOVED[i.opcode](size, n))))
        return out

    def cost_report(self) -> str:
        """Per-partition memory, bytes moved per collective, ops run on whole operands."""
        lines = [f"{self.num_partitions} partitions x {self.num_replicas} replicas"]
        if self.backend == "cpu":
            mem = self.memory()
            lines.append("  per-partition memory: " + ", ".join(f"{k} {v}" for k, v in
                                                            mem.items()))
        moved = self.collective_bytes()
        for op, shape, b in moved:
            lines.append(f"  {op} {shape}: {b} bytes in per partition")
        lines.append(f"  collective bytes per partition: {sum(b for _, _, b in moved)}")
        for r in self.spmd.replicated:
            lines.append(f"  runs on whole operands: {r}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ShardedProgram {self.module.name}: {self.num_partitions} partitions>"


#: bytes a partition receives, from the result size and the group size
_MOVED = {"all_gather": lambda b, n: b * (n - 1) / n,
          "all_reduce": lambda b, n: 2 * b * (n - 1) / n,
          "reduce_scatter": lambda b, n: b * (n - 1),
          "all_to_all": lambda b, n: b * (n - 1) / n,
          "collective_permute": lambda b, n: b,
          "collective_broadcast": lambda b, n: b}


def _nbytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_nbytes(s) for s in shape.tuple_shapes)
    return shape.num_elements * ((shape.element_type.bits + 7) // 8)


def executable_memory(exe: Any, comp: Any) -> dict[str, int]:
    """A CpuExecutable's memory: arguments, constants, arena (temporaries packed by live
    range), results; and their total."""
    nbytes = _nbytes
    out = {"arguments": sum(nbytes(p.shape) for p in comp.parameters),
           "constants": sum(nbytes(i.shape) for i in comp.instructions
                            if i.opcode == "constant"),
           "arena": int(exe._arena_plan[1]),
           "results": nbytes(comp.root.shape)}
    out["total"] = sum(out.values())
    return out


__all__ = ["ShardedProgram", "assemble", "executable_memory", "shard_of"]
