"""What the SPMD partitioner emits between ops: shard offsets from `partition_id`, the
collectives that move a value from one sharding to another (all_gather, all_to_all,
dynamic_slice of a replicated value), partial-sum all_reduces and padding masks.

Shards of a dimension of size `n` split `t` ways hold `ceil(n / t)` elements each; the last
ones are padded (the padding holds unspecified values; an op that reads across it, such as a
reduction or a contraction over that dimension, masks it first: `mask_padding`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import ceil
from typing import Any

import numpy as np

from xlapy.errors import Unimplemented
from xlapy.ir import Computation, Instruction, Module
from xlapy.ir.sharding import MANUAL, MAXIMAL, AnySharding, Sharding
from xlapy.passes.hlo_builder import Emitter
from xlapy.types import ElementType, Shape


def local_dims(gdims: Sequence[int], s: Sharding) -> tuple[int, ...]:
    tiles = s.num_tiles(len(gdims))
    return tuple(ceil(g / t) for g, t in zip(gdims, tiles))


def local_shape(shape: Shape, s: AnySharding) -> Shape:
    if shape.is_tuple:
        parts = s if isinstance(s, tuple) else (s,) * len(shape.tuple_shapes)
        return Shape.tuple([local_shape(x, p) for x, p in zip(shape.tuple_shapes, parts)])
    assert isinstance(s, Sharding)
    if s.kind == MANUAL:
        return shape
    return shape.with_dimensions(local_dims(shape.dimensions, s))


def subgroups(s: Sharding, dims: Sequence[int], devices: Sequence[int]
              ) -> tuple[tuple[int, ...], ...]:
    """Groups of devices that differ only in their tiles along `dims`, one device per tile,
    ordered by tile (replicas of a tile go to different groups)."""
    coords = s.coords(devices)
    by_key: dict[tuple[int, ...], dict[tuple[int, ...], list[int]]] = {}
    for d in devices:
        c = coords[d]
        key = tuple(x for i, x in enumerate(c) if i not in dims)
        along = tuple(c[i] for i in dims) if c else ()
        by_key.setdefault(key, {}).setdefault(along, []).append(d)
    out = []
    for key in sorted(by_key):
        tiles = by_key[key]
        reps = min(len(v) for v in tiles.values())
        for j in range(reps):
            out.append(tuple(tiles[t][j] for t in sorted(tiles)))
    return tuple(out)


class Ctx:
    """The per-partition program being built and what it needs once (partition id, offset
    tables, reducers); counts the collectives it inserts."""

    def __init__(self, module: Module, comp: Computation, num_partitions: int,
                 num_replicas: int = 1, parent: Ctx | None = None, strict: bool = False
                 ) -> None:
        self.module = module
        self.comp = comp
        self.e = Emitter(comp)
        self.P, self.R = num_partitions, num_replicas
        self.devices = list(range(num_partitions))
        self._pid: Instruction | None = None
        self._offsets: dict[Any, list[Instruction]] = {}
        #: shared with the enclosing program's context (loop bodies are partitioned apart)
        self._channels = parent._channels if parent else itertools.count(1)
        self._reducers: dict[Any, Computation] = parent._reducers if parent else {}
        self.collectives: list[tuple[str, Shape, int]] = parent.collectives if parent else []
        self.replicated: list[str] = parent.replicated if parent else []
        self.strict = parent.strict if parent else strict

    def whole(self, i: Instruction, why: str, shardings: Sequence[AnySharding]) -> None:
        """Record that `i` runs on whole (gathered) operands; under `strict` that is an
        error naming the op and its operands' shardings."""
        what = f"{i.opcode} %{i.name}" + (f" ({why})" if why else "")
        if self.strict:
            from xlapy.ir.sharding import to_text

            raise Unimplemented(f"SPMD partitioning of {what} with operands sharded "
                                f"{', '.join(map(to_text, shardings))}: it would run on whole "
                                "operands (strict partitioning)")
        self.replicated.append(what)

    # ---- ids and offsets ----------------------------------------------------------------------
    def pid(self) -> Instruction:
        if self._pid is None:
            p = self.e.op("partition_id", name="partition_id")
            self._pid = self.e.op("convert", p, name="pid", new_element_type=ElementType.S32)
        return self._pid

    def offsets(self, s: Sharding, gdims: Sequence[int]) -> list[Instruction]:
        """Per dimension, this partition's first global index under `s` (s32 scalars)."""
        key = (s, tuple(gdims))
        if key not in self._offsets:
            rank = len(gdims)
            table = np.zeros((self.P, max(rank, 1)), np.int32)
            ld = local_dims(gdims, s)
            for d, c in s.coords(self.devices).items():
                for i, x in enumerate(c):
                    table[d, i] = x * ld[i]
            e = self.e
            t = e.const(table, ElementType.S32)
            zero = e.const(0, ElementType.S32)
            row = e.op("dynamic_slice", t, self.pid(), zero, slice_sizes=(1, table.shape[1]))
            out = []
            for i in range(rank):
                one = e.op("slice", row, start_indices=(0, i), limit_indices=(1, i + 1),
                           strides=(1, 1))
                out.append(e.op("reshape", one, shape=()))
            self._offsets[key] = out
        return self._offsets[key]

    def reducer(self, opcode: str, et: ElementType) -> Computation:
        key = (opcode, et)
        if key not in self._reducers:
            sub = Emitter(Computation(f"spmd_{opcode}_{et.hlo_name}"))
            a, b = sub.param(Shape.scalar(et)), sub.param(Shape.scalar(et))
            sub.comp.root = sub.op(opcode, a, b)
            self.module.add_computation(sub.comp)
            self._reducers[key] = sub.comp
        return self._reducers[key]

    # ---- collectives -------------------------------------------------------------------------
    def _groups(self, groups: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
        """Partition groups as global device ids of every replica."""
        return tuple(tuple(r * self.P + d for d in g) for r in range(self.R) for g in groups)

    def all_gather(self, x: Instruction, dim: int, groups: Sequence[Sequence[int]]
                   ) -> Instruction:
        out = self.e.op("all_gather", x, all_gather_dim=dim, replica_groups=self._groups(groups),
                        channel_id=next(self._channels), use_global_device_ids=True)
        self.collectives.append(("all_gather", out.shape, len(groups[0])))
        return out

    def all_reduce(self, x: Instruction, groups: Sequence[Sequence[int]], body: Computation
                   ) -> Instruction:
        out = self.e.op("all_reduce", x, called=[body], replica_groups=self._groups(groups),
                        channel_id=next(self._channels), use_global_device_ids=True)
        self.collectives.append(("all_reduce", out.shape, len(groups[0])))
        return out

    def all_to_all(self, x: Instruction, split: int, concat: int,
                   groups: Sequence[Sequence[int]]) -> Instruction:
        out = self.e.op("all_to_all", x, split_dimension=split, concat_dimension=concat,
                        split_count=len(groups[0]), replica_groups=self._groups(groups),
                        channel_id=next(self._channels))
        self.collectives.append(("all_to_all", out.shape, len(groups[0])))
        return out

    def reduce_scatter(self, x: Instruction, dim: int, groups: Sequence[Sequence[int]],
                       body: Computation) -> Instruction:
        out = self.e.op("reduce_scatter", x, called=[body], scatter_dimension=dim,
                        replica_groups=self._groups(groups), channel_id=next(self._channels),
                        use_global_device_ids=True)
        self.collectives.append(("reduce_scatter", out.shape, len(groups[0])))
        return out

    def collective_permute(self, x: Instruction, pairs: Sequence[tuple[int, int]]
                           ) -> Instruction:
        """Partition `a`'s `x` to partition `b` for each pair; a partition nobody sends to
        gets zeros."""
        out = self.e.op("collective_permute", x, source_target_pairs=tuple(pairs),
                        channel_id=next(self._channels))
        self.collectives.append(("collective_permute", out.shape, 2))
        return out

    def halo_exchange(self, x: Instruction, s: Sharding, d: int, lo: int, hi: int
                      ) -> Instruction:
        """`x` (a tile along `d`) with `lo` elements of its left neighbour's tile before it
        and `hi` of its right neighbour's after it (zeros at the ends: a convolution's zero
        padding)."""
        groups = subgroups(s, [d], self.devices)
        dims = x.shape.dimensions
        n = dims[d]
        parts = []

        def edge(a: int, b: int) -> Instruction:
            start = tuple(a if k == d else 0 for k in range(len(dims)))
            limit = tuple(b if k == d else dims[k] for k in range(len(dims)))
            return self.e.op("slice", x, start_indices=start, limit_indices=limit,
                             strides=(1,) * len(dims))

        if lo:
            right_to = [(g[k], g[k + 1]) for g in groups for k in range(len(g) - 1)]
            parts.append(self.collective_permute(edge(n - lo, n), right_to))
        parts.append(x)
        if hi:
            left_to = [(g[k + 1], g[k]) for g in groups for k in range(len(g) - 1)]
            parts.append(self.collective_permute(edge(0, hi), left_to))
        return self.e.op("concatenate", *parts, dimension=d) if len(parts) > 1 else x

    # ---- resharding ----------------------------------------------------------------------------
    def reshard(self, x: Instruction, cur: AnySharding, tgt: AnySharding, gshape: Shape
                ) -> Instruction:
        """`x` (this partition's piece of a value of global shape `gshape` sharded `cur`) as
        its piece under `tgt`."""
        if gshape.is_tuple:
            n = len(gshape.tuple_shapes)
            cs = cur if isinstance(cur, tuple) else (cur,) * n
            ts = tgt if isinstance(tgt, tuple) else (tgt,) * n
            if all(c == t for c, t in zip(cs, ts)):
                return x
            parts = [self.reshard(self.e.op("get_tuple_element", x, index=i), c, t, g)
                     for i, (c, t, g) in enumerate(zip(cs, ts, gshape.tuple_shapes))]
            return self.e.op("tuple", *parts)
        assert isinstance(cur, Sharding) and isinstance(tgt, Sharding)
        cur, tgt = _plain(cur), _plain(tgt)
        gdims = gshape.dimensions
        rank = len(gdims)
        if cur.kind == MANUAL or tgt.kind == MANUAL:
            if cur.kind == tgt.kind:
                return x
            raise Unimplemented(f"resharding a value between {cur} and {tgt} (a manual value "
                                "leaves its region only through SPMDShardToFullShape)")
        if cur.same_as(tgt, rank, self.devices):
            return x
        for d in range(rank):
            if cur.num_tiles(rank)[d] > 1 and not _same_dim(cur, tgt, d, self.devices):
                swapped = self._try_all_to_all(x, cur, tgt, d, gdims)
                if swapped is not None:
                    x, cur = swapped
                    continue
                x, cur = self.gather_dim(x, cur, d, gdims)
        need = [d for d in range(rank)
                if tgt.num_tiles(rank)[d] > 1 and cur.num_tiles(rank)[d] == 1]
        if need:
            x = self.slice_dims(x, tgt, need, gdims)
        return x

    def gather_dim(self, x: Instruction, cur: Sharding, d: int, gdims: Sequence[int]
                   ) -> tuple[Instruction, Sharding]:
        x = self.all_gather(x, d, subgroups(cur, [d], self.devices))
        if x.shape.dimensions[d] != gdims[d]:
            x = self.slice_to(x, d, gdims[d])
        tiles = list(cur.tiles)
        tiles[d] = 1
        coords = {dev: tuple(0 if i == d else c for i, c in enumerate(xy))
                  for dev, xy in cur.coords(self.devices).items()}
        return x, Sharding.from_coords(tiles, coords)

    def _try_all_to_all(self, x: Instruction, cur: Sharding, tgt: Sharding, a: int,
                        gdims: Sequence[int]) -> tuple[Instruction, Sharding] | None:
        """Dim `a` tiled in `cur` moves to a dim `b` tiled the same way in `tgt`: one
        all_to_all (even shards only)."""
        rank = len(gdims)
        t = cur.tiles[a]
        cc, tc = cur.coords(self.devices), tgt.coords(self.devices)
        for b in range(rank):
            if b == a or cur.num_tiles(rank)[b] != 1 or tgt.num_tiles(rank)[b] != t:
                continue
            if gdims[a] % t or gdims[b] % t:
                continue
            if any(tc[dev][b] != cc[dev][a] for dev in self.devices):
                continue
            x = self.all_to_all(x, b, a, subgroups(cur, [a], self.devices))
            tiles = list(cur.tiles)
            tiles[a], tiles[b] = 1, t
            coords = {}
            for dev, xy in cc.items():
                c = list(xy)
                c[a], c[b] = 0, xy[a]
                coords[dev] = tuple(c)
            return x, Sharding.from_coords(tiles, coords)
        return None

    def slice_to(self, x: Instruction, d: int, n: int) -> Instruction:
        dims = x.shape.dimensions
        limit = tuple(n if i == d else s for i, s in enumerate(dims))
        return self.e.op("slice", x, start_indices=(0,) * len(dims), limit_indices=limit,
                         strides=(1,) * len(dims))

    def slice_dims(self, x: Instruction, tgt: Sharding, dims: Sequence[int],
                   gdims: Sequence[int]) -> Instruction:
        """Cut this partition's tile along `dims` (where `x` is whole) out of `x`."""
        ld = local_dims(gdims, tgt)
        cur = x.shape.dimensions
        high = [0] * len(cur)
        for d in dims:
            high[d] = ld[d] * tgt.tiles[d] - cur[d]
        if any(high):
            zero = self.e.const(0, x.shape.element_type)
            x = self.e.op("pad", x, zero, edge_padding_low=(0,) * len(cur),
                          edge_padding_high=tuple(high), interior_padding=(0,) * len(cur))
        offs = self.offsets(tgt, gdims)
        zero_i = self.e.const(0, ElementType.S32)
        starts = [offs[d] if d in dims else zero_i for d in range(len(cur))]
        sizes = tuple(ld[d] if d in dims else cur[d] for d in range(len(cur)))
        return self.e.op("dynamic_slice", x, *starts, slice_sizes=sizes)

    def mask_padding(self, x: Instruction, s: Sharding, dims: Sequence[int],
                     gdims: Sequence[int], fill: Instruction) -> Instruction:
        """`x` with the padding of its uneven shards along `dims` set to `fill` (a scalar)."""
        uneven = [d for d in dims if s.num_tiles(len(gdims))[d] > 1 and
                  gdims[d] % s.tiles[d]]
        if not uneven:
            return x
        e = self.e
        shape = x.shape
        offs = self.offsets(s, gdims)
        keep = None
        for d in uneven:
            idx = e.op("iota", shape=shape.with_element_type(ElementType.S32), iota_dimension=d)
            start = e.bcast(offs[d], shape.dimensions, ())
            limit = e.bcast(e.const(gdims[d], ElementType.S32), shape.dimensions, ())
            ok = e.cmp(e.add(idx, start), limit, "LT")
            keep = ok if keep is None else e.op("and", keep, ok)
        filled = e.bcast(fill, shape.dimensions, ())
        return e.op("select", keep, x, filled)


def _plain(s: Sharding) -> Sharding:
    """Maximal shardings (one device computes) are treated as replicated: every partition
    computes the value (the result is the same)."""
    return Sharding.replicated() if s.kind == MAXIMAL else s


def _same_dim(a: Sharding, b: Sharding, d: int, devices: Sequence[int]) -> bool:
    if b.kind != a.kind or not b.is_tiled or b.tiles[d] != a.tiles[d]:
        return False
    ca, cb = a.coords(devices), b.coords(devices)
    return all(ca[x][d] == cb[x][d] for x in devices)


__all__ = ["Ctx", "local_dims", "local_shape", "subgroups"]
