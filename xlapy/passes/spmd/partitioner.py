"""The SPMD partitioner: a global program with shardings -> the one program every partition
runs on its shards (local shapes), with the collectives the shardings need (GSPMD's
SpmdPartitioner).

Each op is built in the sharding propagation prefers where the op supports it:
element-wise ops, broadcast, transpose and reshape keep their operands' tiles; dot_general
and convolution tile batch / free (output-feature) dimensions and, when the contracting
dimension is tiled, sum partial products with an all_reduce; reductions over tiled
dimensions reduce locally, then all_reduce with their reducer; slice, pad, concatenate and
reverse keep the tiles of dimensions they leave whole. Every other op runs on whole operands
(they are all-gathered first) and is listed in `replicated` (the cost report and
`explain_spmd` show it). Manual regions (shard_map, `sdy.manual_computation`) are kept as
written between SPMDFullToShardShape and SPMDShardToFullShape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from xlapy.errors import Unimplemented
from xlapy.ir import Computation, Instruction, Module
from xlapy.ir.sharding import MANUAL, AnySharding, Sharding
from xlapy.passes.fusion_decision import is_elementwise
from xlapy.passes.spmd.propagation import (
    Propagation,
    conv_halos,
    gather_maps,
    marker,
    merge,
    operand_to_output,
    reshape_map,
    whole_dims,
)
from xlapy.passes.spmd.reshard import Ctx, local_dims, local_shape, subgroups
from xlapy.types import ElementType

REPLICATED = Sharding.replicated()
_REDUCERS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")


class Partitioner:
    def __init__(self, module: Module, comp: Computation, num_partitions: int,
                 num_replicas: int = 1, result: Sequence[AnySharding | None] = (),
                 params: Sequence[AnySharding] | None = None, parent: Ctx | None = None,
                 strict: bool = False) -> None:
        """`params`: the parameters' shardings (a loop body's), else from the program;
        `parent`: the enclosing program's context (shared channel ids and counts);
        `strict`: an op that would run on whole operands is an Unimplemented error."""
        self.src = comp
        self.out = Computation(comp.name + ("_spmd" if parent else ""))
        self.ctx = Ctx(module, self.out, num_partitions, num_replicas, parent, strict)
        seeds = {id(p): s for p, s in zip(comp.parameters, params)} if params else {}
        self.prop = Propagation(comp, self.ctx.devices, result, seeds)
        self.result = list(result)
        self.val: dict[int, tuple[Instruction, AnySharding]] = {}
        self._cache: dict[tuple[int, Any], Instruction] = {}
        self.param_shardings: list[AnySharding] = []
        self.result_shardings: list[AnySharding] = []

    # ---- driver --------------------------------------------------------------------------------
    def run(self) -> Computation:
        e = self.ctx.e
        for p in self.src.parameters:
            s = self.prop.get(p) or REPLICATED
            self.param_shardings.append(s)
            self.val[id(p)] = (e.param(local_shape(p.shape, s), p.name), s)
        for i in self.src.post_order():
            if i.opcode != "parameter":
                self.val[id(i)] = self.lower(i)
        root = self.src.root
        assert root is not None
        local, actual = self.val[id(root)]
        if self.src.multi_result:
            parts = []
            for k, o in enumerate(root.operands):
                want = self.result[k] if k < len(self.result) and self.result[k] else None
                x, s = self.val[id(o)]
                if want is not None:
                    x, s = self.want(o, want), want
                parts.append(x)
                self.result_shardings.append(s)
            self.out.root = e.op("tuple", *parts)
            self.out.multi_result = True
        else:
            want = self.result[0] if self.result and self.result[0] else None
            if want is not None:
                local, actual = self.want(root, want), want
            self.out.root = local
            self.result_shardings.append(actual)
        return self.out

    def want(self, o: Instruction, tgt: AnySharding) -> Instruction:
        """Operand `o` as its piece under `tgt` (collectives once per operand and target)."""
        x, cur = self.val[id(o)]
        key = (id(o), tgt)
        if key not in self._cache:
            self._cache[key] = self.ctx.reshard(x, cur, tgt, o.shape)
        return self._cache[key]

    def _shardings(self, i: Instruction) -> list[AnySharding]:
        return [self.val[id(o)][1] for o in i.operands]

    def target(self, i: Instruction) -> Sharding:
        s = self.prop.get(i)
        return s if isinstance(s, Sharding) else REPLICATED

    def emit(self, i: Instruction, operands: list[Instruction], attrs: Any = None
             ) -> Instruction:
        from xlapy.ir import make_instruction

        return self.out.add(make_instruction(i.opcode, operands, i.attrs if attrs is None
                                             else attrs, i.called, i.name))

    # ---- ops -----------------------------------------------------------------------------------
    def lower(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        m = marker(i)
        if m:
            return self.lower_marker(i, m)
        if any(isinstance(self.val[id(o)][1], Sharding) and self.val[id(o)][1].kind == MANUAL
               for o in i.operands):
            return self.emit(i, [self.val[id(o)][0] for o in i.operands]), Sharding.manual()
        if i.opcode in ("constant", "iota") or (not i.operands and i.opcode != "partition_id"
                                                 and not i.called):
            return self.emit(i, []), REPLICATED
        if is_elementwise(i) and all(o.shape.is_array for o in i.operands):
            s = self.target(i)
            ops = [self.want(o, s if o.shape.dimensions == i.shape.dimensions else REPLICATED)
                   for o in i.operands]
            return self.emit(i, ops), s
        handler = getattr(self, "op_" + i.opcode, None)
        if handler is not None:
            out = handler(i)
            if out is not None:
                return out
        return self.replicate(i)

    def replicate(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        """The op on whole operands (all-gathered); its result replicated."""
        tiled = [o for o in i.operands if _is_tiled(self.val[id(o)][1])]
        if tiled or (self.target(i).is_tiled and i.shape.is_array):
            self.ctx.whole(i, "", self._shardings(i))
        ops = [self.want(o, _replicated_like(o.shape)) for o in i.operands]
        return self.emit(i, ops), _replicated_like(i.shape)

    def lower_marker(self, i: Instruction, m: str) -> tuple[Instruction, AnySharding]:
        s = i.meta.get("sharding") or REPLICATED
        o = i.operands[0]
        x, cur = self.val[id(o)]
        if m == "Sharding":
            if isinstance(s, Sharding) and s.kind == MANUAL:
                return x, s
            return self.want(o, s), s
        if m == "SPMDFullToShardShape":
            assert isinstance(cur, Sharding)
            if any(g % t for g, t in zip(o.shape.dimensions, cur.num_tiles(o.shape.rank))):
                raise Unimplemented(f"SPMDFullToShardShape of {o.shape} sharded {cur}: "
                                    "uneven shards entering a manual region")
            if local_dims(o.shape.dimensions, cur) != i.shape.dimensions:
                raise Unimplemented(f"SPMDFullToShardShape %{i.name}: {o.shape} sharded {cur} "
                                    f"gives local {local_dims(o.shape.dimensions, cur)}, the "
                                    f"region takes {i.shape}")
            return x, Sharding.manual()
        assert isinstance(s, Sharding)
        if local_dims(i.shape.dimensions, s) != o.shape.dimensions:
            raise Unimplemented(f"SPMDShardToFullShape %{i.name}: local {o.shape} is not a "
                                f"{s} shard of {i.shape}")
        return x, s

    def op_get_tuple_element(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        x, s = self.val[id(i.operands[0])]
        part = s[i.attrs.index] if isinstance(s, tuple) else s
        return self.emit(i, [x]), part

    def op_tuple(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        return (self.emit(i, [self.val[id(o)][0] for o in i.operands]),
                tuple(self.val[id(o)][1] for o in i.operands))

    def op_broadcast_in_dim(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        s, d = self.target(i), self.ctx.devices
        src, dst = i.operands[0].shape.dimensions, i.shape.dimensions
        bd = i.attrs.broadcast_dimensions
        inv = {bd[k]: k for k in range(len(src)) if src[k] == dst[bd[k]]}
        x = self.want(i.operands[0], s.place_dims(inv, len(src), d))
        local = local_dims(dst, s)
        return self.emit(i, [x], replace(i.attrs, shape=local)), s

    def op_transpose(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        s, d = self.target(i), self.ctx.devices
        perm = i.attrs.permutation
        x = self.want(i.operands[0], s.place_dims({k: p for k, p in enumerate(perm)},
                                                  len(perm), d))
        return self.emit(i, [x]), s

    def op_reshape(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        s, d = self.target(i), self.ctx.devices
        src, dst = i.operands[0].shape.dimensions, i.shape.dimensions
        fwd = reshape_map(dst, src, s)  # out dim -> operand dim
        s = s.place_dims({k: k for k in fwd}, len(dst), d)
        x = self.want(i.operands[0], s.place_dims(fwd, len(src), d))
        return self.emit(i, [x], replace(i.attrs, shape=local_dims(dst, s))), s

    def op_convert(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        s = self.target(i)
        return self.emit(i, [self.want(i.operands[0], s)]), s

    def _contract(self, i: Instruction, out: Sharding, lhs_map: dict[int, int],
                  rhs_map: dict[int, int], lc: list[int], rc: list[int],
                  halos: Sequence[tuple[int, int, int, int]] = ()
                  ) -> tuple[Instruction, AnySharding]:
        """A dot / convolution: the iteration space is the output dims then the contracted
        ones; tiles of the contracted dims (taken from an operand) become partial sums
        (all_reduce, or reduce_scatter where the result is wanted tiled over the same
        group). `halos`: spatial dims of a convolution whose tiles get their neighbours'
        edges (collective_permute) instead of being gathered."""
        d = self.ctx.devices
        rank = i.shape.rank
        lhs, rhs = i.operands
        n = rank + len(lc)
        it = out.place_dims({k: k for k in range(rank)}, n, d)
        extras = []
        for side, dims in ((self.val[id(lhs)][1], lc), (self.val[id(rhs)][1], rc)):
            if _is_tiled(side) and any(side.tiles[x] > 1 for x in dims):
                extras.append(side.place_dims({x: rank + k for k, x in enumerate(dims)}, n, d))
        for extra in extras:
            merged = merge(it, extra, n, d)
            if merged is not None:
                it = merged
                break
        else:
            if len(extras) == 2 and extras[0].same_as(extras[1], n, d):
                # both operands tile the contraction alike but not as the result wants:
                # contract where they are, then reduce_scatter / reshard the result
                it = extras[0]
        lm = {v: k for k, v in lhs_map.items()} | {rank + k: x for k, x in enumerate(lc)}
        rm = {v: k for k, v in rhs_map.items()} | {rank + k: x for k, x in enumerate(rc)}
        ls = it.place_dims(lm, lhs.shape.rank, d)
        rs = it.place_dims(rm, rhs.shape.rank, d)
        x, y = self.want(lhs, ls), self.want(rhs, rs)
        e = self.ctx.e
        tiled_c = [rank + k for k in range(len(lc)) if it.num_tiles(rank + len(lc))[rank + k] > 1]
        if tiled_c:
            zero_l = e.const(0, lhs.shape.element_type)
            zero_r = e.const(0, rhs.shape.element_type)
            x = self.ctx.mask_padding(x, ls, lc, lhs.shape.dimensions, zero_l)
            y = self.ctx.mask_padding(y, rs, rc, rhs.shape.dimensions, zero_r)
        attrs = i.attrs
        if halos:
            pad = list(attrs.padding)
            dn = attrs.dimension_numbers
            for di, _, lo, hi in halos:
                if ls.num_tiles(lhs.shape.rank)[di] > 1:
                    x = self.ctx.halo_exchange(x, ls, di, lo, hi)
                    pad[dn.input_spatial_dimensions.index(di)] = (0, 0)
            attrs = replace(attrs, padding=tuple(pad))
        et = i.shape.element_type
        wide = bool(tiled_c) and et in (ElementType.BF16, ElementType.F16)
        if wide:  # partial sums in f32, rounded once at the end as the unsharded op does
            attrs = replace(attrs, result_element_type=ElementType.F32)
        res = self.emit(i, [x, y], attrs)
        final = it.keep_dims(list(range(rank)), rank + len(lc), d)
        if tiled_c:
            body = self.ctx.reducer("add", res.shape.element_type)
            groups = subgroups(it, tiled_c, d)
            scattered = self._scatter_target(i, it, final, tiled_c, groups)
            if scattered is not None:
                dim, want = scattered
                res = self.ctx.reduce_scatter(res, dim, groups, body)
                return (e.op("convert", res, new_element_type=et) if wide else res), want
            res = self.ctx.all_reduce(res, groups, body)
            if wide:
                res = e.op("convert", res, new_element_type=et)
        return res, final

    def _scatter_target(self, i: Instruction, it: Sharding, final: Sharding,
                        tiled_c: list[int], groups: Sequence[Sequence[int]]
                        ) -> tuple[int, Sharding] | None:
        """The output dim to reduce_scatter over when the propagated sharding tiles it over
        exactly the partial-sum groups (in group order), evenly."""
        want = self.target(i)
        rank, d = i.shape.rank, self.ctx.devices
        if not want.is_tiled or len(tiled_c) != 1:
            return None
        t = len(groups[0])
        cw, cf = want.coords(d), final.coords(d) if final.is_tiled else {x: () for x in d}
        for e in range(rank):
            if want.tiles[e] != t or final.num_tiles(rank)[e] != 1 or \
                    i.shape.dimensions[e] % t:
                continue
            rest = [k for k in range(rank) if k != e]
            if any(want.tiles[k] != final.num_tiles(rank)[k] for k in rest):
                continue
            ok = all(cw[g[j]][e] == j for g in groups for j in range(t)) and all(
                final.num_tiles(rank)[k] == 1 or cw[x][k] == cf[x][k] for x in d for k in rest)
            if ok:
                return e, want
        return None

    def op_dot_general(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        from xlapy.passes.spmd.propagation import dot_dims

        _, _, lc, rc, _, _ = dot_dims(i)
        lhs_map, rhs_map = operand_to_output(i)
        return self._contract(i, self.target(i), lhs_map, rhs_map, lc, rc)

    def op_convolution(self, i: Instruction) -> tuple[Instruction, AnySharding] | None:
        a = i.attrs
        if a.feature_group_count != 1 or a.batch_group_count != 1:
            return None
        dn = a.dimension_numbers
        lhs_s = self.val[id(i.operands[0])][1]
        lhs_map, rhs_map = operand_to_output(i, lhs_s)
        out = self.target(i).place_dims({k: k for k in lhs_map.values()} |
                                        {k: k for k in rhs_map.values()},
                                        i.shape.rank, self.ctx.devices)
        return self._contract(i, out, lhs_map, rhs_map, [dn.input_feature_dimension],
                              [dn.kernel_input_feature_dimension], conv_halos(i, lhs_s))

    def op_reduce(self, i: Instruction) -> tuple[Instruction, AnySharding] | None:
        if len(i.operands) != 2:
            return self._reduce_whole_dims(i)
        x_in, init = i.operands
        x, s = self.val[id(x_in)]
        if not _is_tiled(s):
            return None
        dims = list(i.attrs.dimensions)
        rank = x_in.shape.rank
        d = self.ctx.devices
        keep = [k for k in range(rank) if k not in dims]
        tiled = [k for k in dims if s.tiles[k] > 1]
        body = i.called[0]
        root = body.root
        simple = (root is not None and root.opcode in _REDUCERS and
                  {o.opcode for o in root.operands} == {"parameter"} and
                  len(body.instructions) == 3)
        if tiled and not simple:
            return self._reduce_whole_dims(i)
        init_l = self.want(init, REPLICATED)
        x = self.ctx.mask_padding(x, s, tiled, x_in.shape.dimensions, init_l)
        res = self.emit(i, [x, init_l])
        if tiled:
            res = self.ctx.all_reduce(res, subgroups(s, tiled, d), body)
        return res, s.keep_dims(keep, rank, d)

    def _reduce_whole_dims(self, i: Instruction) -> tuple[Instruction, AnySharding] | None:
        """A reduction (variadic, or with a reducer all_reduce cannot apply) over tiled
        dims in two steps, as XLA: each partition reduces its tile, the partial results are
        all-gathered along a new last dim and reduced again with the same reducer."""
        n = len(i.operands) // 2
        x0, s = self.val[id(i.operands[0])]
        if not _is_tiled(s):
            return None
        dims = list(i.attrs.dimensions)
        src = i.operands[0].shape.dimensions
        rank, d, e = len(src), self.ctx.devices, self.ctx.e
        keep = [k for k in range(rank) if k not in dims]
        tiled = [k for k in dims if s.tiles[k] > 1]
        inits = [self.want(o, REPLICATED) for o in i.operands[n:]]
        ins = [self.ctx.mask_padding(self.want(o, s), s, tiled, src, init)
               for o, init in zip(i.operands[:n], inits)]
        local = self.emit(i, ins + inits)
        out_s = s.keep_dims(keep, rank, d)
        if not tiled:
            return local, (out_s if n == 1 else (out_s,) * n)
        parts = [local] if n == 1 else [e.op("get_tuple_element", local, index=j)
                                        for j in range(n)]
        groups = subgroups(s, tiled, d)
        gathered = []
        for p in parts:
            col = e.op("reshape", p, shape=p.shape.dimensions + (1,))
            gathered.append(self.ctx.all_gather(col, p.shape.rank, groups))
        from xlapy.ir import make_instruction

        last = (len(keep),)
        res = self.out.add(make_instruction("reduce", gathered + inits,
                                            replace(i.attrs, dimensions=last), i.called,
                                            i.name))
        return res, (out_s if n == 1 else (out_s,) * n)

    def _passthrough(self, i: Instruction, whole: set[int]) -> tuple[Instruction, AnySharding]:
        """Ops that map dim k of each operand to dim k of the result: tiles kept on dims not
        in `whole` (scalar operands replicated)."""
        s = self.target(i)
        if isinstance(s, tuple) or i.shape.is_tuple:
            s = self.val[id(i.operands[0])][1]
            s = s if isinstance(s, Sharding) else REPLICATED
        rank = i.operands[0].shape.rank
        d = self.ctx.devices
        s = s.place_dims({k: k for k in range(rank) if k not in whole}, rank, d)
        if any(_is_tiled(self.val[id(o)][1]) and o.shape.rank == rank and
               any(self.val[id(o)][1].tiles[k] > 1 for k in whole) for o in i.operands):
            self.ctx.whole(i, f"whole along dims {sorted(whole)}", self._shardings(i))
        ops = [self.want(o, s if o.shape.rank == rank else REPLICATED) for o in i.operands]
        out = self.emit(i, ops, self._local_attrs(i, s))
        return out, (tuple(s for _ in i.shape.tuple_shapes) if i.shape.is_tuple else s)

    def _local_attrs(self, i: Instruction, s: Sharding) -> Any:
        a = i.attrs
        if i.opcode == "slice":
            ld = local_dims(i.shape.dimensions, s)
            lim = tuple(ld[k] if s.num_tiles(i.shape.rank)[k] > 1 else a.limit_indices[k]
                        for k in range(i.shape.rank))
            return replace(a, limit_indices=lim)
        return a

    def op_while(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        """The loop keeps its state in the init value's sharding: body and condition are
        partitioned with that parameter sharding, the body's result resharded to it."""
        xs = [self.val[id(o)][0] for o in i.operands]
        ss = [self.val[id(o)][1] for o in i.operands]
        cond, body = i.called
        parts = []
        for comp, result in ((cond, [REPLICATED]), (body, ss)):
            sub = Partitioner(self.ctx.module, comp, self.ctx.P, self.ctx.R, result, ss,
                              self.ctx)
            parts.append(sub.run())
            self.ctx.module.add_computation(parts[-1])
        from xlapy.ir import make_instruction

        out = self.out.add(make_instruction("while", xs, i.attrs, parts, i.name))
        return out, (tuple(ss) if i.shape.is_tuple else ss[0])

    def op_dynamic_slice(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        src = i.operands[0].shape.dimensions
        whole = {k for k in range(len(src)) if i.attrs.slice_sizes[k] != src[k]}
        s = self.target(i)
        s = s.place_dims({k: k for k in range(len(src)) if k not in whole}, len(src),
                         self.ctx.devices)
        ops = [self.want(i.operands[0], s)] + [self.want(o, REPLICATED) for o in i.operands[1:]]
        sizes = tuple(local_dims(src, s)[k] if k not in whole else i.attrs.slice_sizes[k]
                      for k in range(len(src)))
        return self.emit(i, ops, replace(i.attrs, slice_sizes=sizes)), s

    def op_dynamic_update_slice(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        src, upd = i.operands[0].shape.dimensions, i.operands[1].shape.dimensions
        s = self.target(i)
        s = s.place_dims({k: k for k in range(len(src)) if upd[k] == src[k]}, len(src),
                         self.ctx.devices)
        ops = [self.want(i.operands[0], s), self.want(i.operands[1], s)]
        ops += [self.want(o, REPLICATED) for o in i.operands[2:]]
        return self.emit(i, ops), s

    def op_gather(self, i: Instruction) -> tuple[Instruction, AnySharding] | None:
        """Tiles of the indices' batch dims and of whole, unindexed operand slice dims carry
        to the result; a gather indexing a tiled dim gathers the operand first."""
        maps = gather_maps(i)
        if maps is None:
            return None
        op_map, idx_map = maps
        d, rank = self.ctx.devices, i.shape.rank
        out = self.target(i).place_dims({o: o for o in [*op_map.values(), *idx_map.values()]},
                                        rank, d)
        operand, indices = i.operands
        ws = out.place_dims({o: k for k, o in op_map.items()}, operand.shape.rank, d)
        wi = out.place_dims({o: k for k, o in idx_map.items()}, indices.shape.rank, d)
        src = operand.shape.dimensions
        cur = self.val[id(operand)][1]
        indexed = [k for k in range(len(src)) if k not in op_map and _is_tiled(cur)
                   and cur.tiles[k] > 1]
        if indexed:
            masked = self._gather_tiled_index(i, out, ws, wi, indexed)
            if masked is not None:
                return masked, out
            self.ctx.whole(i, "indexed dims whole", self._shardings(i))
        local = local_dims(src, ws)
        sizes = tuple(local[k] if k in op_map else i.attrs.slice_sizes[k]
                      for k in range(len(src)))
        x = self.emit(i, [self.want(operand, ws), self.want(indices, wi)],
                      replace(i.attrs, slice_sizes=sizes))
        return x, out

    def _gather_tiled_index(self, i: Instruction, out: Sharding, ws: Sharding, wi: Sharding,
                            indexed: list[int]) -> Instruction | None:
        """A gather of single indices into one tiled dim `k` (an embedding table sharded on
        its vocabulary): each partition gathers from its tile with shifted indices, zeroes
        the rows another tile holds, and an all_reduce sums (as XLA)."""
        dn, operand, indices = i.attrs.dimension_numbers, i.operands[0], i.operands[1]
        src, d = operand.shape.dimensions, self.ctx.devices
        k = indexed[0]
        cur = self.val[id(operand)][1]
        if len(indexed) != 1 or tuple(dn.start_index_map) != (k,) or \
                k not in dn.collapsed_slice_dims or not isinstance(cur, Sharding):
            return None
        n_op = len(src)
        ws = merge(ws, cur.place_dims({k: k}, n_op, d), n_op, d)
        if ws is None:
            return None
        e, et = self.ctx.e, indices.shape.element_type
        x, idx = self.want(operand, ws), self.want(indices, wi)
        local = local_dims(src, ws)[k]
        off = e.op("convert", self.ctx.offsets(ws, src)[k], new_element_type=et)
        shape = idx.shape
        clamped = e.op("clamp", e.const(0, et), idx, e.const(src[k] - 1, et))
        shifted = e.op("subtract", clamped, e.bcast(off, shape.dimensions, ()))
        lo = e.cmp(shifted, e.bcast(e.const(0, et), shape.dimensions, ()), "GE")
        hi = e.cmp(shifted, e.bcast(e.const(local, et), shape.dimensions, ()), "LT")
        ok = e.op("and", lo, hi)
        res = self.emit(i, [x, shifted], replace(i.attrs, slice_sizes=tuple(
            local_dims(src, ws)[j] if j in gather_maps(i)[0] else i.attrs.slice_sizes[j]
            for j in range(n_op))))
        batch_out = [o for o in range(i.shape.rank) if o not in dn.offset_dims]
        if dn.index_vector_dim < shape.rank:
            ok = e.op("reshape", ok, shape=tuple(x for j, x in enumerate(shape.dimensions)
                                                 if j != dn.index_vector_dim))
        keep = e.bcast(ok, res.shape.dimensions, tuple(batch_out))
        zero = e.bcast(e.const(0, res.shape.element_type), res.shape.dimensions, ())
        res = e.op("select", keep, res, zero)
        body = self.ctx.reducer("add", res.shape.element_type)
        return self.ctx.all_reduce(res, subgroups(ws, [k], d), body)

    def op_slice(self, i: Instruction) -> tuple[Instruction, AnySharding]:
        return self._passthrough(i, whole_dims(i))

    op_pad = op_concatenate = op_reverse = op_sort = op_reduce_window = op_slice


def _is_tiled(s: AnySharding) -> bool:
    return isinstance(s, Sharding) and s.is_tiled


def _replicated_like(shape: Any) -> AnySharding:
    if shape.is_tuple:
        return tuple(_replicated_like(s) for s in shape.tuple_shapes)
    return REPLICATED


__all__ = ["Partitioner"]
