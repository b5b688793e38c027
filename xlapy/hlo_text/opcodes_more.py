"""More HLO opcode readers: `topk` and the `TopK` custom call, `send`/`recv` pairs.

Registered into `opcodes.READERS` when `opcodes` is imported.
"""

from __future__ import annotations

from typing import Any

from xlapy.hlo_text import attrs as A
from xlapy.hlo_text.importer import InstrContext
from xlapy.hlo_text.opcodes import make, reads
from xlapy.ops.base import OPS
from xlapy.types import Shape


# ---- topk ----------------------------------------------------------------------------------------
@reads("topk")
def _topk(c: InstrContext) -> Any:
    """XLA's TopK: the k largest (or smallest) along the last dimension, sorted, with s32
    indices; ties by lower index (chlo.top_k)."""
    _ensure_chlo()
    return "chlo.top_k", c.operands, make("chlo.top_k", k=c.req("k", A.read_int),
                                          largest=c.get("largest", A.read_bool, True)), []


def _ensure_chlo() -> None:
    if "chlo.top_k" not in OPS:
        import xlapy.stablehlo.chlo_ops  # noqa: F401  (registers chlo.top_k)


def custom_top_k(c: InstrContext, called: list[Any]) -> Any:
    """custom_call_target="TopK" (what XLA compiles top_k to): a stable sort of (x, iota)
    along the last dimension by the called comparator, then the first k of each."""
    c.arity(1)
    (x,) = c.operands
    out = c.shape
    if len(called) != 1 or not x.shape.is_array or x.shape.rank < 1 or not out.is_tuple \
            or len(out.tuple_shapes) != 2 or not out.tuple_shapes[0].is_array:
        raise c.error("TopK takes one array operand and a comparator, and gives a "
                      "(values, indices) tuple")
    d = x.shape.rank - 1
    k = out.tuple_shapes[0].dimensions[-1] if out.tuple_shapes[0].rank else 0
    idx_t = out.tuple_shapes[1].element_type
    iota = c.add("iota", [], make("iota", shape=Shape.array(idx_t, x.shape.dimensions),
                                  iota_dimension=d))
    srt = c.add("sort", [x, iota], make("sort", dimension=d, is_stable=True), called)
    parts = []
    for n in range(2):
        e = c.add("get_tuple_element", [srt], make("get_tuple_element", index=n))
        lim = tuple(e.shape.dimensions[:-1]) + (k,)
        parts.append(c.add("slice", [e], make("slice", start_indices=(0,) * e.shape.rank,
                                              limit_indices=lim, strides=(1,) * e.shape.rank)))
    return c.finish(c.add("tuple", parts))
