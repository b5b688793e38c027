"""Sharding propagation: a sharding for every value of the (call-inlined) entry, from the
ones written on arguments, results, `Sharding` custom calls and ops (GSPMD's / Shardy's
seeds), forward through element-wise ops, broadcast, transpose, reshape (factor mapping),
dot_general and convolution (dimension mapping), reductions and tuples, then backward from
element-wise users to operands that had none. What propagation decides is the preference
the partitioner builds each op for; a value with none is replicated.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xlapy.ir import Computation, Instruction
from xlapy.ir.sharding import MANUAL, AnySharding, Sharding
from xlapy.passes.fusion_decision import is_elementwise

MARKERS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")
#: ops whose result dim k is operand dim k except on `whole_dims`
PASSTHROUGH = ("slice", "pad", "concatenate", "reverse", "sort", "reduce_window")


def marker(instr: Instruction) -> str:
    if instr.opcode == "custom_call" and instr.attrs.call_target_name in MARKERS:
        return str(instr.attrs.call_target_name)
    return ""


def tiles_of(s: AnySharding | None) -> int:
    return prod(s.tiles) if isinstance(s, Sharding) and s.is_tiled else 1


def reshape_groups(a: Sequence[int], b: Sequence[int]
                   ) -> list[tuple[list[int], list[int]]]:
    """Dims of two shapes with equal element counts grouped so each group's products match
    (size-1 dims join a neighbouring group)."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(a) or j < len(b):
        ga, gb = [], []
        pa = pb = 1
        while True:
            if pa <= pb and i < len(a):
                pa *= a[i]
                ga.append(i)
                i += 1
            elif j < len(b):
                pb *= b[j]
                gb.append(j)
                j += 1
            else:
                break
            if pa == pb and (i == len(a) or a[i] != 1) and (j == len(b) or b[j] != 1):
                break
        groups.append((ga, gb))
    return groups


def reshape_map(src: Sequence[int], dst: Sequence[int], s: Sharding) -> dict[int, int]:
    """src dim -> dst dim that can carry `s`'s tiling through a reshape: the major non-1
    dim of each group, when the tile count divides the major dims on both sides."""
    out: dict[int, int] = {}
    tiles = s.num_tiles(len(src))
    for ga, gb in reshape_groups(src, dst):
        ga = [d for d in ga if src[d] != 1]
        gb = [d for d in gb if dst[d] != 1]
        if not ga or not gb:
            continue
        a0, b0 = ga[0], gb[0]
        t = tiles[a0]
        if any(tiles[d] > 1 for d in ga[1:]):
            continue
        if t > 1 and src[a0] % t == 0 and dst[b0] % t == 0:
            out[a0] = b0
    return out


def dot_dims(instr: Instruction) -> tuple[list[int], list[int], list[int], list[int],
                                          list[int], list[int]]:
    """(lhs batch, rhs batch, lhs contracting, rhs contracting, lhs free, rhs free)."""
    a = instr.attrs
    lb, rb = list(a.lhs_batching_dimensions), list(a.rhs_batching_dimensions)
    lc, rc = list(a.lhs_contracting_dimensions), list(a.rhs_contracting_dimensions)
    lr, rr = instr.operands[0].shape.rank, instr.operands[1].shape.rank
    lf = [d for d in range(lr) if d not in lb and d not in lc]
    rf = [d for d in range(rr) if d not in rb and d not in rc]
    return lb, rb, lc, rc, lf, rf


class Propagation:
    def __init__(self, comp: Computation, devices: Sequence[int],
                 result: Sequence[AnySharding | None] = (),
                 seeds: dict[int, AnySharding] | None = None) -> None:
        self.devices = list(devices)
        self.sh: dict[int, AnySharding] = dict(seeds or {})
        order = comp.post_order()
        for i in order:
            s = i.meta.get("sharding")
            if s is not None:
                self.sh[id(i)] = s
        for _ in range(2):
            for i in order:
                if i.opcode != "parameter" and i.meta.get("sharding") is None:
                    s = self.forward(i)
                    if s is not None and tiles_of(s) >= tiles_of(self.sh.get(id(i))):
                        self.sh[id(i)] = s
            for i in reversed(order):
                self.backward(i)
        root = comp.root
        if root is not None and result and id(root) not in self.sh:
            self.sh[id(root)] = result[0] if len(result) == 1 else tuple(result)

    def get(self, i: Instruction) -> AnySharding | None:
        return self.sh.get(id(i))

    def forward(self, i: Instruction) -> AnySharding | None:
        ops = [self.get(o) for o in i.operands]
        if any(isinstance(s, Sharding) and s.kind == MANUAL for s in ops):
            return Sharding.manual()
        rank = i.shape.rank if i.shape.is_array else 0
        d = self.devices
        if is_elementwise(i):
            best = None
            for o, s in zip(i.operands, ops):
                if o.shape.dimensions == i.shape.dimensions and tiles_of(s) > tiles_of(best):
                    best = s
            return best
        s0 = ops[0] if ops else None
        if i.opcode in ("dot_general", "convolution", "gather"):
            return self._contracting(i, ops)
        if not isinstance(s0, Sharding) or not s0.is_tiled:
            if i.opcode == "tuple":
                return tuple(s if s is not None else Sharding.replicated() for s in ops)
            if i.opcode == "get_tuple_element" and isinstance(s0, tuple):
                return s0[i.attrs.index]
            return None
        src = i.operands[0].shape.dimensions
        if i.opcode == "broadcast_in_dim":
            bd = i.attrs.broadcast_dimensions
            return s0.place_dims({k: bd[k] for k in range(len(src))
                                  if src[k] == i.shape.dimensions[bd[k]]}, rank, d)
        if i.opcode == "transpose":
            return s0.place_dims({p: k for k, p in enumerate(i.attrs.permutation)}, rank, d)
        if i.opcode == "reshape":
            return s0.place_dims(reshape_map(src, i.shape.dimensions, s0), rank, d)
        if i.opcode == "reduce" and i.shape.is_array:
            keep = [k for k in range(len(src)) if k not in i.attrs.dimensions]
            return s0.keep_dims(keep, len(src), d)
        if i.opcode in ("dynamic_slice", "dynamic_update_slice"):
            full = (i.attrs.slice_sizes if i.opcode == "dynamic_slice"
                    else i.operands[1].shape.dimensions)
            return s0.place_dims({k: k for k in range(rank) if full[k] == src[k]}, rank, d)
        if i.opcode in PASSTHROUGH:
            whole = whole_dims(i)
            r = i.operands[0].shape.rank
            kept = s0.place_dims({k: k for k in range(r) if k not in whole}, r, d)
            return kept if i.shape.is_array else tuple(kept for _ in i.shape.tuple_shapes)
        return None

    def _contracting(self, i: Instruction, ops: list[AnySharding | None]
                     ) -> AnySharding | None:
        """Output tiles from the lhs's batch / free dims and the rhs's free dims (a
        gather's: its operand's whole slice dims and its indices' batch dims)."""
        rank, d = i.shape.rank, self.devices
        cands = []
        maps = gather_maps(i) if i.opcode == "gather" else operand_to_output(i, ops[0])
        for s, m in zip(ops, maps or ()):
            if isinstance(s, Sharding) and s.is_tiled:
                cands.append(s.place_dims(m, rank, d))
        if not cands:
            return None
        if len(cands) == 2:
            merged = merge(cands[0], cands[1], rank, d)
            if merged is not None:
                return merged
        return max(cands, key=tiles_of)

    def backward(self, i: Instruction) -> None:
        s = self.get(i)
        if not isinstance(s, Sharding) or not s.is_tiled or not is_elementwise(i):
            return
        for o in i.operands:
            if (self.get(o) is None and o.shape.dimensions == i.shape.dimensions
                    and o.opcode in ("broadcast_in_dim", "constant", "iota", "convert")
                    or (self.get(o) is None and is_elementwise(o)
                        and o.shape.dimensions == i.shape.dimensions)):
                self.sh[id(o)] = s


def operand_to_output(i: Instruction, lhs: AnySharding | None = None
                      ) -> tuple[dict[int, int], dict[int, int]]:
    """A dot's / convolution's operand dims that are output dims (lhs map, rhs map); a
    convolution's spatial dims too where `lhs` tiles them and halos can make them whole."""
    if i.opcode == "convolution":
        dn = i.attrs.dimension_numbers
        spatial = {di: do for di, do, _, _ in conv_halos(i, lhs)}
        return ({dn.input_batch_dimension: dn.output_batch_dimension} | spatial,
                {dn.kernel_output_feature_dimension: dn.output_feature_dimension})
    lb, rb, _, _, lf, rf = dot_dims(i)
    nb, nl = len(lb), len(lf)
    return ({x: k for k, x in enumerate(lb)} | {x: nb + k for k, x in enumerate(lf)},
            {x: k for k, x in enumerate(rb)} | {x: nb + nl + k for k, x in enumerate(rf)})


def conv_halos(i: Instruction, lhs: AnySharding | None) -> list[tuple[int, int, int, int]]:
    """(input dim, output dim, low halo, high halo) for each spatial dim `lhs` tiles that a
    halo exchange serves: stride 1, no dilation, the output as long as the input, even tiles
    at least as long as the halos."""
    if not isinstance(lhs, Sharding) or not lhs.is_tiled:
        return []
    a, dn = i.attrs, i.attrs.dimension_numbers
    out = []
    for k, (di, ki, do) in enumerate(zip(dn.input_spatial_dimensions,
                                         dn.kernel_spatial_dimensions,
                                         dn.output_spatial_dimensions)):
        t = lhs.tiles[di]
        n = i.operands[0].shape.dimensions[di]
        w = i.operands[1].shape.dimensions[ki]
        lo, hi = a.padding[k] if a.padding else (0, 0)
        plain = all(not x or x[k] == 1 for x in (a.window_strides, a.lhs_dilation,
                                                 a.rhs_dilation)) and \
            not (a.window_reversal and a.window_reversal[k])
        if t > 1 and plain and n % t == 0 and i.shape.dimensions[do] == n and \
                lo + hi == w - 1 and 0 <= lo <= n // t and 0 <= hi <= n // t:
            out.append((di, do, lo, hi))
    return out


def gather_maps(i: Instruction) -> tuple[dict[int, int], dict[int, int]] | None:
    """A gather's operand dims that are result dims (whole, unindexed slices) and its
    indices' batch dims that are result dims; None for batching gathers."""
    dn, sizes = i.attrs.dimension_numbers, i.attrs.slice_sizes
    if dn.operand_batching_dims:
        return None
    src = i.operands[0].shape.dimensions
    kept = [k for k in range(len(src)) if k not in dn.collapsed_slice_dims]
    op_map = {k: o for k, o in zip(kept, dn.offset_dims)
              if sizes[k] == src[k] and k not in dn.start_index_map}
    batch_out = [o for o in range(i.shape.rank) if o not in dn.offset_dims]
    idx_dims = [k for k in range(i.operands[1].shape.rank) if k != dn.index_vector_dim]
    return op_map, dict(zip(idx_dims, batch_out))


def whole_dims(i: Instruction) -> set[int]:
    """Dims that slice / pad / concatenate / reverse / sort / reduce_window change (the
    others map 1:1)."""
    a = i.attrs
    if i.opcode == "slice":
        src = i.operands[0].shape.dimensions
        return {k for k in range(len(src)) if (a.start_indices[k], a.limit_indices[k],
                                               a.strides[k]) != (0, src[k], 1)}
    if i.opcode == "pad":
        return {k for k in range(i.shape.rank) if (a.edge_padding_low[k], a.edge_padding_high[k],
                                                   a.interior_padding[k]) != (0, 0, 0)}
    if i.opcode == "concatenate":
        return {a.dimension}
    if i.opcode == "sort":
        return {a.dimension % i.operands[0].shape.rank}
    if i.opcode == "reduce_window":
        n = len(a.window_dimensions)
        ones, no_pad = (1,) * n, ((0, 0),) * n
        return {k for k in range(n) if a.window_dimensions[k] != 1 or
                (a.window_strides or ones)[k] != 1 or (a.padding or no_pad)[k] != (0, 0) or
                (a.base_dilations or ones)[k] != 1 or (a.window_dilations or ones)[k] != 1}
    return set(a.dimensions)


def merge(a: Sharding, b: Sharding, rank: int, devices: Sequence[int]) -> Sharding | None:
    """One sharding tiled where `a` or `b` is (they must agree where both are), if the
    combination is a tiling."""
    if not a.is_tiled:
        return b
    if not b.is_tiled:
        return a
    ta, tb = a.tiles, b.tiles
    ca, cb = a.coords(devices), b.coords(devices)
    tiles = []
    for k in range(rank):
        if ta[k] > 1 and tb[k] > 1 and ta[k] != tb[k]:
            return None
        tiles.append(max(ta[k], tb[k]))
    coords = {}
    for dev in devices:
        c = []
        for k in range(rank):
            if ta[k] > 1 and tb[k] > 1 and ca[dev][k] != cb[dev][k]:
                return None
            c.append(ca[dev][k] if ta[k] > 1 else cb[dev][k])
        coords[dev] = tuple(c)
    try:
        return Sharding.from_coords(tiles, coords)
    except ValueError:
        return None


__all__ = ["MARKERS", "PASSTHROUGH", "Propagation", "conv_halos", "dot_dims", "gather_maps",
           "marker", "merge", "operand_to_output", "reshape_map", "whole_dims"]
