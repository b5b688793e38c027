"""LoopScatterWindows: a while body's scatter of one window into its own state, as a
dynamic_update_slice of that window.

`c.at[i].set(v)` and `c.at[i].add(v)` with a traced `i` lower to a scatter of a single
update window (one index vector). In a loop body whose state element c it updates, the cpu
backend wrote it as a kernel copying all of c with the window changed, every step: a
fori_loop over 2000 rows of 256 f32 setting row i from row i - 1 ran 95 ms (XLA, which
updates in place, 1.1). As a dynamic_update_slice of c it is a window kernel writing only
the window into the loop's own buffer (backends/cpu/dus_window.py). The rewrite keeps the
scatter's semantics exactly:

    old = dynamic_slice(c, starts, window)          starts: the index's components, else 0
    new = f(old, reshape(update))                   the scatter's combiner, elementwise
    dynamic_update_slice(c, select(in_bounds, new, old), starts)

where `in_bounds` says the whole window lies inside c (a scatter skips a window that does
not; dynamic_update_slice clamps, and then writes back the values it read: no change). Only
a scatter whose combiner is its update (set) or one elementwise op of the old value and the
update (`COMBINERS`, operands in that order) is rewritten, and only in a loop body whose
state element (a parameter or its get_tuple_element) is the scatter's operand.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass

#: Combiners f(old, update) rewritten elementwise: one op of the region's two parameters.
COMBINERS = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})


def _combiner(region: Computation) -> str | None:
    """"set" when the scatter's region returns its update, the op of `COMBINERS` it applies
    to (old, update) in that order, else None."""
    params, root = region.parameters, region.root
    if len(params) != 2 or root is None:
        return None
    if root is params[1]:
        return "set"
    if root.opcode in COMBINERS and list(root.operands) == list(params):
        return root.opcode
    return None


def _state(body: Computation) -> set[int]:
    """The ids of a loop body's state values: its parameters and their tuple elements."""
    out = {id(p) for p in body.parameters}
    for p in body.parameters:
        out.update(id(u) for u in p.users if u.opcode == "get_tuple_element")
    return out


def _one_window(s: Instruction) -> bool:
    """A single-result scatter of one index vector, no batching dimensions."""
    if len(s.operands) != 3 or not s.shape.is_array or len(s.called) != 1:
        return False
    dn = s.attrs.scatter_dimension_numbers
    idx = s.operands[1].shape
    vector = idx.dimensions[dn.index_vector_dim] if dn.index_vector_dim < idx.rank else 1
    return not dn.input_batching_dims and not dn.scatter_indices_batching_dims and \
        idx.num_elements == vector == len(dn.scatter_dims_to_operand_dims) and \
        idx.element_type.is_integer


def rewrite(s: Instruction, e: Emitter, how: str) -> Instruction:
    """The dynamic_update_slice form of one-window scatter `s` (module docstring)."""
    operand, indices, update = s.operands
    dn = s.attrs.scatter_dimension_numbers
    dims = operand.shape.dimensions
    rest = [d for d in range(len(dims)) if d not in dn.inserted_window_dims]
    window = [1] * len(dims)
    for d, w in zip(rest, dn.update_window_dims):
        window[d] = update.shape.dimensions[w]
    it = indices.shape.element_type
    flat = e.reshape(indices, shape=(len(dn.scatter_dims_to_operand_dims),))
    zero = e.const(0, it)
    starts = [zero] * len(dims)
    inside = None
    for c, d in enumerate(dn.scatter_dims_to_operand_dims):
        v = e.reshape(e.slice(flat, start_indices=(c,), limit_indices=(c + 1,), strides=(1,)),
                      shape=())
        starts[d] = v
        ok = e.cmp(v, e.const(dims[d] - window[d], it), "LE")
        if it.is_signed:
            ok = e.op("and", ok, e.cmp(v, zero, "GE"))
        inside = ok if inside is None else e.op("and", inside, ok)
    old = e.op("dynamic_slice", operand, *starts, slice_sizes=tuple(window))
    upd = e.reshape(update, shape=tuple(window))
    new = upd if how == "set" else e.op(how, old, upd)
    if inside is not None:  # (no index component: the window is always inside)
        pick = e.op("broadcast_in_dim", inside, shape=tuple(window), broadcast_dimensions=())
        new = e.op("select", pick, new, old)
    return e.op("dynamic_update_slice", operand, new, *starts)


class LoopScatterWindows(ComputationPass):
    """Rewrites each while body's one-window scatters of its own state (module docstring)."""

    name = "loop-scatter-windows"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for w in comp.instructions:
            if w.opcode != "while":
                continue
            body = w.called[1]
            state = _state(body)
            e = Emitter(body)
            for s in list(body.instructions):
                how = _combiner(s.called[0]) if s.opcode == "scatter" and s.called else None
                if how is None or id(s.operands[0]) not in state or not _one_window(s) or \
                        0 in s.operands[2].shape.dimensions:
                    continue
                s.replace_all_uses_with(rewrite(s, e, how))
                body.remove(s)
                changed = True
        return changed


__all__ = ["COMBINERS", "LoopScatterWindows", "rewrite"]
