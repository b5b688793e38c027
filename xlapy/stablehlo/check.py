"""The `check` and `interpreter` dialects of the StableHLO reference interpreter, as OpDefs.

`check.expect_*` compare a value with another value or a constant and raise `CheckFailure`
on a mismatch; `interpreter.probe` records a value (read back by `check.expect_serialized_eq`),
`interpreter.print` prints one, `interpreter.run_parallel` runs a program (one process for
now). They have no results: their shape is the empty tuple, and they are side-effecting.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.errors import CheckFailure, Unimplemented
from xlapy.ops.base import VARIADIC, EvalContext, OpDef, Region, add_op, check
from xlapy.types import Literal, Shape

NO_RESULT = Shape.tuple([])


@dataclass(frozen=True)
class ExpectConstAttrs:
    """`value`: the expected constant; `tolerance` for the almost_eq flavours."""

    value: Literal
    tolerance: float = 0.0001

    def __hash__(self) -> int:
        return hash((str(self.value.shape), self.value.to_numpy().tobytes(), self.tolerance))


@dataclass(frozen=True)
class ExpectAttrs:
    tolerance: float = 0.0001


@dataclass(frozen=True)
class ExpectCloseAttrs:
    max_ulp_difference: int = 0
    min_ulp_difference: int = 0


@dataclass(frozen=True)
class ProbeAttrs:
    probe_id: str
    iteration: int = 0


@dataclass(frozen=True)
class RunParallelAttrs:
    """`programs`: function names per process; regions are those functions, then the infeed."""

    programs: tuple[tuple[str, ...], ...]
    infeed: tuple[str, ...] = ()


def _show(x: np.ndarray) -> str:
    return np.array2string(np.asarray(x), threshold=64)


def _ordered(x: np.ndarray) -> np.ndarray:
    it = np.dtype(f"int{x.dtype.itemsize * 8}")
    i = x.view(it).astype(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(it).min) - i, i)


def equal(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Exact equality; NaN equals NaN (the reference interpreter compares elements so)."""
    if actual.dtype.kind in "biu":
        return bool(np.array_equal(actual, expected))
    a = actual.astype(np.complex128 if actual.dtype.kind == "c" else np.float64)
    return bool(np.array_equal(a, expected.astype(a.dtype), equal_nan=True))


def almost_equal(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> bool:
    if actual.dtype.kind in "biu":
        return bool(np.array_equal(actual, expected))
    kind = np.complex128 if actual.dtype.kind == "c" else np.float64
    a, b = actual.astype(kind), expected.astype(kind)
    parts = [(a.real, b.real), (a.imag, b.imag)] if kind is np.complex128 else [(a, b)]
    for x, y in parts:
        both_nan = np.isnan(x) & np.isnan(y)
        with np.errstate(all="ignore"):
            close = (x == y) | (np.abs(x - y) <= tolerance)
        if not np.all(both_nan | close):
            return False
    return True


class _Check(OpDef):
    family = "check"
    side_effecting = True

    def __init__(self, name: str, arity: int, attrs: type) -> None:
        self.name = name  # type: ignore[misc]
        self.arity = arity  # type: ignore[misc]
        self.attrs = attrs  # type: ignore[misc]

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        for s in operands:
            check(s.is_array, f"{self.name}_c1", f"operand {s} is not a tensor")
        if self.arity == 2:
            check(operands[0] == operands[1], f"{self.name}_c1",
                  "operands must have the same type")
        if isinstance(attrs, ExpectConstAttrs):
            check(attrs.value.shape == operands[0], f"{self.name}_c1",
                  f"the expected constant has type {attrs.value.shape.to_shlo()}, the operand "
                  f"{operands[0].to_shlo()}")
        return NO_RESULT

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        actual = operands[0]
        if self.name == "check.expect_serialized_eq":
            probes = ctx.runtime.hooks.get("probes", {}).get(attrs.probe_id)
            if not probes or attrs.iteration >= len(probes):
                raise CheckFailure(f"{self.name}: no probe '{attrs.probe_id}' "
                                   f"(iteration {attrs.iteration}) was recorded")
            expected = probes[attrs.iteration]
        elif isinstance(attrs, ExpectConstAttrs):
            expected = attrs.value.to_numpy()
        else:
            expected = operands[1]
        if self.name == "check.expect_close":
            ok, detail = _ulp_close(actual, expected, attrs)
        elif "almost" in self.name:
            ok, detail = almost_equal(actual, expected, attrs.tolerance), ""
        else:
            ok, detail = equal(actual, expected), ""
        if not ok:
            raise CheckFailure(f"{self.name} failed{detail}:\n  actual:   {_show(actual)}\n"
                               f"  expected: {_show(expected)}")
        return ()


def _ulp_close(actual: np.ndarray, expected: np.ndarray, attrs: ExpectCloseAttrs
               ) -> tuple[bool, str]:
    if actual.dtype.kind == "c":
        parts = [(actual.real, expected.real), (actual.imag, expected.imag)]
    else:
        parts = [(actual, expected)]
    worst = 0
    for x, y in parts:
        d = np.abs(_ordered(np.ascontiguousarray(x)) - _ordered(np.ascontiguousarray(y)))
        nan = np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64))
        d = np.where(nan, 0, d)
        worst = max(worst, int(d.max()) if d.size else 0)
    ok = attrs.min_ulp_difference <= worst <= attrs.max_ulp_difference
    return ok, f" (ulp difference {worst}, allowed [{attrs.min_ulp_difference}, " \
               f"{attrs.max_ulp_difference}])"


for _name, _arity, _attrs in [
    ("check.expect_eq", 2, ExpectAttrs),
    ("check.expect_eq_const", 1, ExpectConstAttrs),
    ("check.expect_almost_eq", 2, ExpectAttrs),
    ("check.expect_almost_eq_const", 1, ExpectConstAttrs),
    ("check.expect_close", 2, ExpectCloseAttrs),
    ("check.expect_serialized_eq", 1, ProbeAttrs),
]:
    add_op(_Check(_name, _arity, _attrs))


class Probe(OpDef):
    """interpreter.probe: records its operand under `probe_id` and returns it."""

    name = "interpreter.probe"
    arity = 1
    attrs = ProbeAttrs
    side_effecting = True
    family = "check"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        return operands[0]

    def evaluate(self, operands: Sequence[Any], attrs: ProbeAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        probes = ctx.runtime.hooks.setdefault("probes", {})
        probes.setdefault(attrs.probe_id, []).append(np.array(operands[0], copy=True))
        return operands[0]


class Print(OpDef):
    """interpreter.print: prints its operand (to the `print` hook, else stdout)."""

    name = "interpreter.print"
    arity = 1
    side_effecting = True
    family = "check"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        return NO_RESULT

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        from xlapy.stablehlo.values import format_value

        text = format_value(operands[0])
        hook = ctx.runtime.hooks.get("print")
        if hook is not None:
            hook(text)
        else:
            sys.stdout.write(text + "\n")
        return ()


class RunParallel(OpDef):
    """interpreter.run_parallel: runs `programs` on the process grid (`xlapy.distributed`).

    Regions: the program functions (row-major over the grid), then the infeed functions.
    """

    name = "interpreter.run_parallel"
    arity = VARIADIC
    attrs = RunParallelAttrs
    num_regions = VARIADIC
    side_effecting = True
    family = "check"

    def infer(self, operands: Sequence[Shape], attrs: RunParallelAttrs,
              regions: Sequence[Region]) -> Shape:
        n = sum(len(row) for row in attrs.programs)
        check(n >= 1, "run_parallel_c1", "needs at least one program")
        check(len(regions) == n + len(attrs.infeed), "run_parallel_c1",
              f"expects {n + len(attrs.infeed)} functions, got {len(regions)}")
        results: list[Shape] = []
        for region in regions[:n]:
            rs = region.result_shape
            results.extend(rs.tuple_shapes if getattr(region, "multi_result", False) else [rs])
        return results[0] if len(results) == 1 else Shape.tuple(results)

    def evaluate(self, operands: Sequence[Any], attrs: RunParallelAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        n = sum(len(row) for row in attrs.programs)
        feeds = [ctx.call(n + i) for i in range(len(attrs.infeed))]
        instr = getattr(ctx, "instruction", None)
        if n == 1 and (instr is None or ctx.process is not None):
            ctx.runtime.infeed.extend(feeds)
            return ctx.call(0, *operands)
        if instr is None:
            raise Unimplemented(f"interpreter.run_parallel: a grid of {n} processes needs "
                                "the interpreter's instruction context")
        # The process grid (xlapy.distributed): program i runs on process i, row-major.
        from xlapy.ops.collectives import new_process_grid

        programs = list(instr.called[:n])
        args, pos = [], 0
        for comp in programs:
            k = len(comp.parameters)
            args.append(list(operands[pos:pos + k]))
            pos += k
        grid = new_process_grid(len(attrs.programs), len(attrs.programs[0]))
        values = grid.run_programs(programs, args, runtime=ctx.runtime, infeed=feeds)
        out: list[Any] = []
        for comp, v in zip(programs, values):
            out.extend(v if getattr(comp, "multi_result", False) else [v])
        return out[0] if len(out) == 1 else tuple(out)


add_op(Probe())
add_op(Print())
add_op(RunParallel())
