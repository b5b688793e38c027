"""Small pure conditionals as selects: `case`/`if` whose branches are a few element-wise and
shape ops (and small dots) become every branch inlined plus a select of the taken one's
results.

A `lax.cond` inside a `lax.fori_loop` kept the loop off the native driver (a `case` is a
call into sub-executables, so the body ran through Python): 1000 iterations of a cond
between two 256-element updates took 38 ms, XLA 0.06 ms (606x). As selects, the body is
kernels only and the loop runs natively. The results are bit for bit the taken branch's
(each branch's ops unchanged; select only picks), and the other branches' values are
computed and dropped: only branches of the ops in `_PURE` and dot_general (no calls, no side
effects, no traps: integer division by zero has a defined result), of at most MAX_ELEMENTS
elements and MAX_DOT_FLOPS dot flops computed in all are converted, so the waste stays
below the dispatch it saves. A `case` index outside [0, N) selects the last branch, as the
op runs it.
"""

from __future__ import annotations

import math

from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.fusion_decision import SHAPE_OPS, is_elementwise
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.inliner import inline_body
from xlapy.passes.pass_base import ComputationPass

#: Elements computed by all the branches together at most (each op's result counted, but
#: for the ops that compute nothing in a fused kernel: FREE).
MAX_ELEMENTS = 1 << 18
#: Ops a fused kernel reads through (a parameter, a broadcast scalar) rather than computes:
#: a lax.switch of u * 0.5, u + 1 and tanh(u) on 65536 floats counted its 3 parameters, 2
#: broadcast constants and tuple results too (~9 x 65536) and stayed a call per branch in
#: its fori_loop, 50 iterations 2.4 ms against XLA's 1.0 (its 3 ops: 3 x 65536).
FREE = frozenset({"parameter", "constant", "get_tuple_element", "tuple", "broadcast_in_dim",
                  "reshape", "bitcast_convert"})
#: Dot flops of all the branches together at most: a few microseconds, less than one call
#: into a branch's sub-executable, and a loop around them then runs natively (the squaring
#: loop of jax.scipy.linalg.expm: a cond between x @ x and x; 6 x 6: 750 -> 198 us).
MAX_DOT_FLOPS = 1 << 19
#: Dot flops of a loop body's branches that are a branch's result and nothing else's,
#: at most: the cpu backend's native loops run such a dot only when its select picks it
#: (guarded_dots.py), so they cost what the case costs (expm of 128 x 128: a 4 MFLOP
#: squaring stayed a case, the loop's chain copying its state: 631 -> 457 us, XLA 431).
MAX_GUARDED_FLOPS = 1 << 25
#: Ops a converted branch may hold besides element-wise ones (SHAPE_OPS: the fusible ones).
_PURE = SHAPE_OPS | {"parameter", "constant", "get_tuple_element", "tuple", "convert",
                     "compare", "select", "clamp", "bitcast_convert", "dynamic_update_slice"}


def _dot_flops(i: Instruction) -> int:
    """2 x result elements x contracted elements of a dot_general."""
    lhs = i.operands[0].shape.dimensions
    k = math.prod(lhs[d] for d in i.attrs.lhs_contracting_dimensions)
    return 2 * i.shape.num_elements * k


def _cheap(instr: Instruction, in_loop: bool) -> bool:
    """Whether every branch is pure and small and every result an array (`in_loop`: a
    while loop's body or condition, where a dot that is only a branch's result counts
    against MAX_GUARDED_FLOPS instead)."""
    shapes = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    if not instr.called or not all(s.is_array for s in shapes):
        return False
    total = flops = guarded = 0
    for br in instr.called:
        for i in br.instructions:
            if i.opcode == "dot_general" and i.shape.is_array:
                if in_loop and _result_only(i, br):
                    guarded += _dot_flops(i)
                else:
                    flops += _dot_flops(i)
            elif i.called or not (i.opcode in _PURE or is_elementwise(i)):
                return False
            if i.shape.is_array and i.opcode not in FREE:
                total += i.shape.num_elements
    return total <= MAX_ELEMENTS and flops <= MAX_DOT_FLOPS and guarded <= MAX_GUARDED_FLOPS


def _result_only(dot: Instruction, br: Computation) -> bool:
    """Whether `dot` is branch `br`'s result (or one element of its result tuple) and read
    by nothing else: as a select's operand it may be skipped (guarded_dots.py)."""
    root = br.root
    return dot is root or (root.opcode == "tuple" and dot.users == [root] and
                           sum(o is dot for o in root.operands) == 1)


def _results(e: Emitter, root: Instruction, n: int, tupled: bool) -> list[Instruction]:
    if not tupled:
        return [root]
    if root.opcode == "tuple":
        return list(root.operands)
    return [e.get_tuple_element(root, index=j) for j in range(n)]


def as_select(comp: Computation, instr: Instruction) -> Instruction:
    """The value of conditional `instr` (in `comp`) as its branches inlined and selected."""
    e = Emitter(comp)
    extra = list(instr.operands[1:])
    tupled = instr.shape.is_tuple
    n = len(instr.shape.tuple_shapes) if tupled else 1
    outs = [_results(e, inline_body(comp, br, [extra[k]] if extra else []), n, tupled)
            for k, br in enumerate(instr.called)]
    sel = instr.operands[0]
    if instr.opcode == "if":  # pred: branch 0 when true
        picked = [e.select(sel, t, f) for t, f in zip(outs[0], outs[1])]
    else:
        picked = outs[-1]
        for k in range(len(outs) - 2, -1, -1):
            p = e.cmp(sel, e.const(k, sel.shape.element_type), "EQ")
            picked = [e.select(p, t, f) for t, f in zip(outs[k], picked)]
    return e.tuple(*picked) if tupled else picked[0]


class ConditionalToSelect(ComputationPass):
    """Rewrites the small pure conditionals of each computation (module docstring)."""

    name = "conditional-to-select"
    #: The ids of the module's while conditions and bodies (set by `run`).
    _loops: frozenset[int] = frozenset()

    def run(self, module: Module) -> bool:
        self._loops = frozenset(id(c) for comp in module.computations
                                for i in comp.instructions if i.opcode == "while"
                                for c in i.called)
        return super().run(module)

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        in_loop = id(comp) in self._loops
        for instr in list(comp.instructions):
            if instr.opcode not in ("case", "if") or not _cheap(instr, in_loop):
                continue
            instr.replace_all_uses_with(as_select(comp, instr))  # (the root too)
            if not instr.users:
                comp.remove(instr)
            changed = True
        return changed


__all__ = ["ConditionalToSelect", "as_select", "MAX_ELEMENTS", "MAX_GUARDED_FLOPS"]
