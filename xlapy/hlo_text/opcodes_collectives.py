"""HLO opcode readers of the collectives: all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute, collective-broadcast, with every `replica_groups` form XLA prints.

Registered into `opcodes.READERS` when `opcodes` is imported.
"""

from __future__ import annotations

from typing import Any

from xlapy.hlo_text import attrs as A
from xlapy.hlo_text import groups as G
from xlapy.hlo_text.importer import InstrContext
from xlapy.hlo_text.opcodes import make, reads


# ---- collectives ---------------------------------------------------------------------------------
def _groups(c: InstrContext) -> tuple[tuple[int, ...], ...]:
    """Explicit `{{0,1},{2,3}}`, iota `[2,2]<=[4]`, or `mesh[...] {axes}` (see groups.py)."""
    a = c.attr("replica_groups")
    dev = c.attr("device_ids")
    if dev is not None and (a is None or not a.value.lstrip().startswith("mesh")):
        raise c.error("device_ids= goes with replica_groups=mesh[...]", dev.pos)
    if a is None or a.value in ("{}", "{{}}"):
        return ()

    def error(msg: str) -> Exception:
        return c.error(f"replica_groups: {msg}", a.pos)

    groups = G.parse_iota(a.value, error)
    if groups is None:
        groups = G.mesh_groups(a.value, None if dev is None else dev.value, error)
    if groups is None and not a.value.startswith("{"):
        raise error(f"expected {{{{ids}},...}}, [groups,size]<=[dims] or mesh[...], got "
                    f"'{a.value}'")
    return groups if groups is not None else A.read_int_lists(c.cur, a)


def _common(c: InstrContext) -> dict[str, Any]:
    return {"replica_groups": _groups(c), "channel_id": c.get("channel_id", A.read_int, 0)}


def _one_dim(c: InstrContext) -> int:
    dims = c.req("dimensions", A.read_ints)
    if len(dims) != 1:
        raise c.error(f"takes one dimension, got {list(dims)}")
    return dims[0]


@reads("all-reduce", "cross-replica-sum")
def _all_reduce(c: InstrContext) -> Any:
    return "all_reduce", c.operands, make(
        "all_reduce", use_global_device_ids=c.get("use_global_device_ids", A.read_bool, False),
        **_common(c)), [c.computation("to_apply")]


def _shards(c: InstrContext, dim: int) -> int:
    if not (c.operands and c.operands[0].shape.is_array and c.shape.is_array):
        return 1
    a, b = c.operands[0].shape.dimensions, c.shape.dimensions
    if not (0 <= dim < len(a) == len(b)) or min(a[dim], b[dim]) == 0:
        return 1
    return max(a[dim], b[dim]) // min(a[dim], b[dim])


@reads("all-gather")
def _all_gather(c: InstrContext) -> Any:
    d = _one_dim(c)
    return "all_gather", c.operands, make(
        "all_gather", all_gather_dim=d, shard_count=_shards(c, d),
        use_global_device_ids=c.get("use_global_device_ids", A.read_bool, False),
        **_common(c)), []


@reads("reduce-scatter")
def _reduce_scatter(c: InstrContext) -> Any:
    d = _one_dim(c)
    return "reduce_scatter", c.operands, make(
        "reduce_scatter", scatter_dimension=d, shard_count=_shards(c, d),
        use_global_device_ids=c.get("use_global_device_ids", A.read_bool, False),
        **_common(c)), [c.computation("to_apply")]


@reads("all-to-all")
def _all_to_all(c: InstrContext) -> Any:
    d = _one_dim(c)
    common = _common(c)
    count = len(common["replica_groups"][0]) if common["replica_groups"] else 1
    return "all_to_all", c.operands, make("all_to_all", split_dimension=d, concat_dimension=d,
                                          split_count=count, **common), []


@reads("collective-permute")
def _collective_permute(c: InstrContext) -> Any:
    pairs = c.req("source_target_pairs", A.read_int_lists)
    if any(len(p) != 2 for p in pairs):
        raise c.error("source_target_pairs are {source,target} pairs")
    return "collective_permute", c.operands, make(
        "collective_permute", source_target_pairs=pairs,
        channel_id=c.get("channel_id", A.read_int, 0)), []


@reads("collective-broadcast")
def _collective_broadcast(c: InstrContext) -> Any:
    return "collective_broadcast", c.operands, make("collective_broadcast", **_common(c)), []
