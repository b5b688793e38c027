"""Control flow: while, case, if, call, map, optimization_barrier, composite.

Called computations are seen through `Region` (parameter shapes, result shape). A region
"returns several values" when its computation has `multi_result` (StableHLO regions with
`return %a, %b`); otherwise its single root value is its one result, even when that value is
a tuple (XLA's While/Conditional over a tuple-typed state). `region_results` encodes this.

Branch operands (docs/architecture.md, "Control flow"): StableHLO `case`/`if` branches take
no arguments; XLA's Conditional passes one operand to each branch. Both are one op: the
operands after the index/pred are either none (every branch takes no parameter) or exactly
one per branch (branch `i` takes operand `1 + i` as its single parameter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import OPS, VARIADIC, EvalContext, OpDef, Region, check, fail, register
from xlapy.ops.loop_guard import WhileGuard
from xlapy.types import ElementType, Shape, shapes_str


# ---- region helpers (also used by collectives) ------------------------------------------------
def region_results(region: Region) -> list[Shape]:
    """The region's results: the root tuple's elements for a multi-result region."""
    shape = region.result_shape
    if getattr(region, "multi_result", False):
        return list(shape.tuple_shapes)
    return [shape]


def results_shape(results: Sequence[Shape]) -> Shape:
    """Several results make a tuple shape; exactly one is returned bare (architecture.md)."""
    return results[0] if len(results) == 1 else Shape.tuple(list(results))


def called(ctx: EvalContext, index: int) -> Any:
    """The index-th called computation when the context exposes it (the interpreter does)."""
    instr = getattr(ctx, "instruction", None)
    return instr.called[index] if instr is not None else None


def call_results(ctx: EvalContext, index: int, args: Sequence[Any], n: int) -> list[Any]:
    """Run region `index` and return its `n` results as a list."""
    value = ctx.call(index, *args)
    comp = called(ctx, index)
    multi = bool(getattr(comp, "multi_result", False)) if comp is not None else n != 1
    if multi or n != 1:
        return list(value)
    return [value]


def call_region(ctx: EvalContext, index: int, args: Sequence[Any], result: Shape) -> Any:
    """Run region `index`; a multi-result region with one result gives that result bare."""
    value = ctx.call(index, *args)
    comp = called(ctx, index)
    if comp is not None and getattr(comp, "multi_result", False) and not result.is_tuple:
        return value[0]
    return value


def _types(shapes: Sequence[Shape]) -> str:
    return "(" + shapes_str(shapes) + ")"


def check_region_signature(region: Region, params: Sequence[Shape], label: str,
                           what: str) -> None:
    """`region` takes exactly `params` (StableHLO types compare without layout)."""
    got = list(region.parameter_shapes)
    if got != list(params):
        fail(label, f"{what} {region.name} takes {_types(got)}, expected {_types(params)}")


def _is_pred_scalar(s: Shape) -> bool:
    return s.is_array and s.rank == 0 and s.element_type is ElementType.PRED


# ---- while ------------------------------------------------------------------------------------
@register
class While(OpDef):
    """stablehlo.while: spec §while; XLA While(condition, body, init)."""

    name = "while"
    arity = VARIADIC
    num_regions = 2
    family = "control_flow"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        cond, body = regions
        ops = list(operands)
        check_region_signature(cond, ops, "while_c1", "cond")
        cond_results = region_results(cond)
        check(len(cond_results) == 1 and _is_pred_scalar(cond_results[0]), "while_c1",
              f"cond {cond.name} returns {_types(cond_results)}, expected pred[]")
        check_region_signature(body, ops, "while_c2", "body")
        body_results = region_results(body)
        check(body_results == ops, "while_c2",
              f"body {body.name} returns {_types(body_results)}, expected {_types(ops)}")
        return results_shape(ops)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        state = list(operands)
        n = len(state)
        # the iteration limit and the grid's poll (loop_guard.py)
        guard = WhileGuard(getattr(ctx, "instruction", None))
        while bool(np.asarray(call_results(ctx, 0, state, 1)[0])):
            guard.step()
            state = call_results(ctx, 1, state, n)
        return state[0] if n == 1 else tuple(state)


# ---- case / if --------------------------------------------------------------------------------
def _check_branches(branches: Sequence[Region], extra: Sequence[Shape], labels: Sequence[str]
                    ) -> Shape:
    """`labels`: (at least one branch, branch parameters, same outputs) constraint labels."""
    some, params, same = labels
    check(len(branches) >= 1, some, "needs at least one branch")
    check(not extra or len(extra) == len(branches), params,
          f"{len(extra)} branch operand(s) for {len(branches)} branch(es): pass none (branches "
          "take no parameters) or exactly one per branch")
    for i, br in enumerate(branches):
        expected = [extra[i]] if extra else []
        check_region_signature(br, expected, params, f"branch {i}")
    first = region_results(branches[0])
    for i, br in enumerate(branches[1:], 1):
        res = region_results(br)
        check(res == first, same,
              f"branch {i} ({br.name}) returns {_types(res)} but branch 0 returns "
              f"{_types(first)}")
    return results_shape(first)


def _run_branch(ctx: EvalContext, index: int, operands: Sequence[Any], result: Shape) -> Any:
    extra = operands[1:]
    return call_region(ctx, index, [extra[index]] if extra else [], result)


@register
class Case(OpDef):
    """stablehlo.case: spec §case; XLA Conditional(branch_index, branches, operands).

    An index outside [0, N) runs the last branch.
    """

    name = "case"
    hlo_name = "conditional"
    arity = VARIADIC
    num_regions = VARIADIC
    family = "control_flow"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 1, "case_c0", "needs an index operand")
        index = operands[0]
        check(index.is_array and index.rank == 0 and index.element_type is ElementType.S32,
              "case_c0", f"index must be s32[], got {index}")
        return _check_branches(regions, operands[1:], ("case_c1", "case_c2", "case_c3"))

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        n = ctx.num_regions
        i = int(operands[0])
        if not 0 <= i < n:
            i = n - 1
        return _run_branch(ctx, i, operands, result)


@register
class If(OpDef):
    """stablehlo.if: spec §if; XLA Conditional(pred, true_operand, true_comp, false_operand,
    false_comp) (regions: true branch, false branch)."""

    name = "if"
    arity = VARIADIC
    num_regions = 2
    family = "control_flow"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 1, "if_c0", "needs a pred operand")
        check(_is_pred_scalar(operands[0]), "if_c0", f"pred must be pred[], got {operands[0]}")
        return _check_branches(regions, operands[1:], ("if_c1", "if_c1", "if_c2"))

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        return _run_branch(ctx, 0 if bool(operands[0]) else 1, operands, result)


# ---- call -------------------------------------------------------------------------------------
@register
class Call(OpDef):
    """func.call / XLA Call (seed 000 §Call): runs `to_apply` on the operands."""

    name = "call"
    arity = VARIADIC
    num_regions = 1
    family = "control_flow"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        (comp,) = regions
        check_region_signature(comp, operands, "call_c1", "computation")
        res = region_results(comp)
        return results_shape(res)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        return call_region(ctx, 0, operands, result)


# ---- map --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MapAttrs:
    """`dimensions` must be [0, ..., R-1] (spec map C3)."""

    dimensions: tuple[int, ...]


@register
class Map(OpDef):
    """stablehlo.map: spec §map; XLA Map(operands, computation, dimensions)."""

    name = "map"
    arity = VARIADIC
    attrs = MapAttrs
    num_regions = 1
    family = "control_flow"

    def infer(self, operands: Sequence[Shape], attrs: MapAttrs,
              regions: Sequence[Region]) -> Shape:
        (comp,) = regions
        check(len(operands) >= 1, "map_c2", "needs at least one input")
        first = operands[0]
        for i, s in enumerate(operands):
            check(s.is_array, "map_c1", f"input {i} is {s}, not a tensor")
            check(s.dimensions == first.dimensions, "map_c1",
                  f"input {i} has dimensions {list(s.dimensions)}, input 0 has "
                  f"{list(first.dimensions)}")
        check(tuple(attrs.dimensions) == tuple(range(first.rank)), "map_c3",
              f"dimensions {list(attrs.dimensions)} must be {list(range(first.rank))}")
        params = [Shape.scalar(s.element_type) for s in operands]
        check_region_signature(comp, params, "map_c4", "computation")
        res = region_results(comp)
        check(len(res) == 1 and res[0].is_array and res[0].rank == 0, "map_c4",
              f"computation {comp.name} returns {_types(res)}, expected one scalar tensor")
        return Shape.array(res[0].element_type, first.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: MapAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        comp = called(ctx, 0)
        if comp is not None:
            vectorized = map_whole_arrays(comp, operands, result, ctx)
            if vectorized is not None:
                return vectorized
        out = np.empty(result.dimensions, result.dtype)
        for idx in np.ndindex(*result.dimensions):
            out[idx] = ctx.call(0, *(x[idx] for x in operands))
        return out


def map_whole_arrays(comp: Any, operands: Sequence[Any], result: Shape,
                      ctx: EvalContext) -> Any:
    """Evaluate an element-wise computation once on whole arrays, or None if it is not one.

    Element-wise ops are exact per element, so running them on the full arrays gives the same
    values as running the scalar computation at every index.
    """
    dims = result.dimensions
    env: dict[int, Any] = {}
    for instr in comp.instructions:
        shape = instr.shape
        if not (shape.is_array and shape.rank == 0):
            return None
        if instr.opcode == "parameter":
            env[id(instr)] = operands[instr.parameter_number]
        elif instr.opcode == "constant":
            value = instr.attrs.literal.to_value()
            env[id(instr)] = np.broadcast_to(value, dims).copy()
        else:
            op = OPS.get(instr.opcode)
            if op is None or op.family != "elementwise" or op.side_effecting or instr.called:
                return None
            args = [env[id(o)] for o in instr.operands]
            env[id(instr)] = op.evaluate(args, instr.attrs,
                                         Shape.array(shape.element_type, dims), ctx)
    return np.asarray(env[id(comp.root)], dtype=result.dtype).reshape(dims)


# ---- optimization_barrier -----------------------------------------------------------------------
@register
class OptimizationBarrier(OpDef):
    """stablehlo.optimization_barrier: spec §optimization_barrier; XLA OptimizationBarrier
    (HLO opt-barrier over one tuple). Identity."""

    name = "optimization_barrier"
    hlo_name = "opt-barrier"
    arity = VARIADIC
    family = "control_flow"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        for i, s in enumerate(operands):
            check(s.is_array or s.is_token or s.is_tuple, "optimization_barrier_c2",
                  f"operand {i} is {s}")
        return results_shape(operands)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        return operands[0] if len(operands) == 1 else tuple(operands)


# ---- composite --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompositeAttrs:
    """`composite_attributes` as sorted (name, value) pairs; `decomposition` names the callee."""

    name: str
    composite_attributes: tuple[tuple[str, Any], ...] = ()
    decomposition: str = ""
    version: int = 0


@register
class Composite(OpDef):
    """stablehlo.composite: spec §composite (newer StableHLO). Evaluates its decomposition."""

    name = "composite"
    arity = VARIADIC
    attrs = CompositeAttrs
    num_regions = 1
    family = "control_flow"

    def infer(self, operands: Sequence[Shape], attrs: CompositeAttrs,
              regions: Sequence[Region]) -> Shape:
        parts = attrs.name.split(".")
        check(len(parts) >= 2 and all(parts), "composite_c1",
              f"name '{attrs.name}' is not a namespaced op name (like 'my_ns.my_op')")
        keys = [k for k, _ in attrs.composite_attributes]
        check(len(set(keys)) == len(keys), "composite_c2",
              f"composite_attributes has duplicate names {keys}")
        check(attrs.version >= 0, "composite_c2", f"version {attrs.version} is negative")
        (comp,) = regions
        check_region_signature(comp, operands, "composite_c3", "decomposition")
        res = region_results(comp)
        return results_shape(res)

    def evaluate(self, operands: Sequence[Any], attrs: CompositeAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return call_region(ctx, 0, operands, result)
