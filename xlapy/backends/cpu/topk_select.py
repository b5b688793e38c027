"""A stable sort of (x, iota) read only through its first k positions becomes chlo.top_k
again, so the cpu backend neither builds the iota nor keeps full-size sort results.

The chlo lowering (passes/chlo_lowering.py) writes `lax.top_k` as a sort of x with an s32
iota along the last dimension, sliced to k: the cpu backend then wrote the 16 MB iota of a
4096x1024 top_k every call (a temporary as big as the input, its peak memory 16.5 MB against
XLA's 0.5) and recycled two full-size results of which k columns were read. chlo.top_k on
the cpu backend is topk_emit's selection of x alone (the index of an element is its column):
its peak is the two [.., k] results. The rewrite matches exactly what chlo.top_k means - a
stable sort, descending (GT) or ascending (LT) on operand 0 in total order for floats (or
its integer order), the second operand an s32 iota along the sorted last dimension, both
results sliced from 0 to the same k with unit strides - and only when topk_emit selects it.
"""

from __future__ import annotations

from xlapy.backends.cpu import topk_emit
from xlapy.ir import Computation, Instruction
from xlapy.ir.computation import make_instruction
from xlapy.ops.attrs import ComparisonType
from xlapy.ops.core import GetTupleElementAttrs
from xlapy.passes.pass_base import ComputationPass
from xlapy.types import ElementType as ET


def _order(sort: Instruction) -> bool | None:
    """largest (True: descending) when the comparator is chlo.top_k's order on operand 0,
    else None."""
    from xlapy.ops.reduction_sort import simple_order

    order = simple_order(sort.called[0])
    if order is None:
        return None
    descending, ctype = order
    et = sort.operands[0].shape.element_type
    if et.is_float:
        return descending if ctype is ComparisonType.TOTALORDER else None
    want = ComparisonType.SIGNED if et.is_signed else ComparisonType.UNSIGNED
    if et is ET.PRED or ctype not in (None, want):
        return None
    return descending


def match(sort: Instruction) -> tuple[Instruction, int, bool, list[Instruction]] | None:
    """(x, k, largest, [values slice, indices slice]) of a top-k written as a sort."""
    if sort.opcode != "sort" or len(sort.operands) != 2 or not sort.attrs.is_stable:
        return None
    x, idx = sort.operands
    rank = x.shape.rank
    if rank == 0 or sort.attrs.dimension % rank != rank - 1:
        return None
    if idx.opcode != "iota" or idx.shape.element_type is not ET.S32 or \
            idx.attrs.iota_dimension != rank - 1:
        return None
    largest = _order(sort)
    if largest is None or not sort.shape.is_tuple or len(sort.users) != 2:
        return None
    gtes = sorted(sort.users, key=lambda u: getattr(u.attrs, "index", -1))
    if [g.opcode for g in gtes] != ["get_tuple_element"] * 2 or \
            [g.attrs.index for g in gtes] != [0, 1]:
        return None
    slices = []
    for g in gtes:
        if len(g.users) != 1 or g.users[0].opcode != "slice" or g is g.parent.root:
            return None
        slices.append(g.users[0])
    dims = tuple(x.shape.dimensions)
    k = slices[0].attrs.limit_indices[-1]
    for s in slices:
        a = s.attrs
        if any(a.start_indices) or any(st != 1 for st in a.strides) or \
                tuple(a.limit_indices) != dims[:-1] + (k,):
            return None
    if not topk_emit.selects(x, k):
        return None
    return x, k, largest, slices


class SelectTopK(ComputationPass):
    """sort(x, iota) sliced to k => chlo.top_k(x) (module docstring)."""

    name = "select-top-k"

    def run_on_computation(self, comp: Computation) -> bool:
        from xlapy.stablehlo.chlo_ops import TopKAttrs

        changed = False
        for sort in [i for i in comp.instructions if i.opcode == "sort"]:
            m = match(sort)
            if m is None:
                continue
            x, k, largest, slices = m
            top = comp.add(make_instruction("chlo.top_k", [x], TopKAttrs(k, largest),
                                            name=f"{sort.name}.top_k"))
            top.meta.update(sort.meta)
            for n, s in enumerate(slices):
                g = comp.add(make_instruction("get_tuple_element", [top],
                                              GetTupleElementAttrs(n),
                                              name=f"{s.name}.top_k"))
                g.meta.update(s.meta)
                s.replace_all_uses_with(g)
            gtes = [s.operands[0] for s in slices]
            iota = sort.operands[1]
            for dead in [*slices, *gtes, sort]:
                comp.remove(dead)
            if not iota.users and iota is not comp.root:
                comp.remove(iota)
            changed = True
        return changed


__all__ = ["SelectTopK", "match"]
