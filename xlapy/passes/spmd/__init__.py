"""SPMD partitioning (issue 17): a global program whose arguments, results and values carry
shardings (GSPMD attributes or Shardy, xlapy/ir/sharding.py) becomes the one program each
partition runs on its shards; `xlapy opt --pipeline spmd` prints it.

`partition_module` inlines calls (shard_map bodies, jax's nested functions), propagates
shardings (propagation.py), partitions (partitioner.py, collectives from reshard.py) and
returns the per-partition module with the shardings of its arguments and results (how a
caller splits global arrays and puts results back together) and what it inserted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xlapy.errors import Unimplemented
from xlapy.ir import Module
from xlapy.ir.sharding import AnySharding
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.inliner import CallInliner
from xlapy.passes.pass_base import Pass
from xlapy.passes.spmd.partitioner import Partitioner
from xlapy.passes.spmd.propagation import marker
from xlapy.passes.tuple_simplifier import TupleSimplifier
from xlapy.types import Shape


def has_shardings(module: Module) -> bool:
    """Does the module need partitioning: shardings over several partitions, or GSPMD
    marker custom calls (which only the partitioner removes)?"""
    insts = [i for c in module.computations for i in c.instructions]
    if any(marker(i) for i in insts):
        return True
    if int(module.num_partitions or 1) < 2:
        return False
    return bool(module.meta.get("arg_shardings") or module.meta.get("result_shardings")
                or any("sharding" in i.meta for i in insts))


@dataclass
class SpmdModule:
    """The per-partition module and how its arguments / results are sharded."""

    module: Module
    global_params: list[Shape]
    global_results: list[Shape]
    param_shardings: list[AnySharding]
    result_shardings: list[AnySharding]
    collectives: list[tuple[str, Shape, int]] = field(default_factory=list)
    replicated: list[str] = field(default_factory=list)


def partition_module(module: Module, strict: bool = False) -> SpmdModule:
    """`strict`: an op the partitioner would run on whole (gathered) operands is an error
    (Unimplemented naming it and its operands' shardings) instead of listed."""
    m = module.clone()
    n_parts, n_reps = int(m.num_partitions or 1), int(m.num_replicas or 1)
    CallInliner().run(m)
    TupleSimplifier().run(m)
    DeadCodeElimination().run(m)
    entry = m.entry_computation()
    for c in m.computations:
        if c is not entry and any(marker(i) for i in c.instructions):
            raise Unimplemented(f"sharding custom calls inside {c.name} (a region of a loop "
                                "or conditional) are not supported")
    result = m.meta.get("result_shardings", {}).get(entry.name, [])
    part = Partitioner(m, entry, n_parts, n_reps, result, strict=strict)
    new = part.run()
    out = Module(m.name)
    out.num_partitions, out.num_replicas = n_parts, n_reps
    out.meta = dict(m.meta)
    for c in m.computations:
        if c is not entry:
            out.add_computation(c)
    out.add_computation(new, entry=True)
    out.remove_unreachable()
    DeadCodeElimination().run(out)
    root = entry.root
    results = ([o.shape for o in root.operands] if entry.multi_result and root is not None
               else [root.shape] if root is not None else [])
    return SpmdModule(out, [p.shape for p in entry.parameters], results,
                      part.param_shardings, part.result_shardings, part.ctx.collectives,
                      part.ctx.replicated)


class SpmdPartitioner(Pass):
    """The pass form (`xlapy opt --pipeline spmd`): the module becomes its per-partition
    program."""

    name = "spmd-partitioner"

    def run(self, module: Module) -> bool:
        if not has_shardings(module):
            return False
        res = partition_module(module).module
        module.computations = res.computations
        module.entry = res.entry
        return True


__all__ = ["SpmdModule", "SpmdPartitioner", "has_shardings", "partition_module"]
