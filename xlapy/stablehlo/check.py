"""The `check` and `interpreter` dialects of the StableHLO reference interpreter, as OpDefs.

The `check.expect_*` ops follow StableHLO's CheckOps.td / CheckOps.cpp (reconstructed: the
StableHLO sources were not at hand, so the `-0`/`+0` ulp rule below is xlapy's own choice,
stated here). Each compares `actual` (its first operand) with `expected` (the second
operand, the `value` constant or a probe), element by element; the first element that
breaks the rule raises `CheckFailure` naming its index, both values (with their bit
patterns) and, for `expect_close`, the ulp difference.
Complex elements are checked part by part (real, then imaginary).

* `expect_eq`, `expect_eq_const`: exact equality. Integers and booleans by value; floats
  bitwise (APFloat::bitwiseIsEqual in the reference: -0 != +0, a NaN equals only a NaN
  with the same bits).
* `expect_almost_eq`, `expect_almost_eq_const` (attribute `tolerance`, default 0.0001):
  integers and booleans exactly; for floats a NaN matches only a NaN, an infinity only the
  same infinity, finite values when |actual - expected| (rounded to the element type) is at
  most `tolerance` (rounded to the element type).
* `expect_close` (`max_ulp_difference` default 1, `min_ulp_difference` default 0): every
  element satisfies min <= ulp_difference(actual, expected) <= max. `ulp_difference` counts
  the representable values of the element type between the two, so adjacent floats are 1
  apart and -0 and +0 are the same point (0 apart, as IEEE equality and numpy's
  `nulp_diff` have it; +0 and the smallest negative subnormal are 1 apart). A pair with a
  non-finite value has difference 0 when both are NaN or the two are bitwise equal, and
  otherwise matches no bound. Integers: |actual - expected|.
* `expect_serialized_eq` (`probe_id`, `iteration`): the reference reads the tensor that
  `interpreter.probe` wrote to `probe_output_dir`; xlapy keeps probes in memory
  (`runtime.hooks["probes"]`) and compares the recorded value with the operand exactly, as
  `expect_eq` does.

The `stablehlo.custom_call @check.expect_*(...)` form (JAX-exported self-checking programs)
imports to the same ops, with the same defaults (`importer.op_custom_call`).
`interpreter.probe` records a value, `interpreter.print` prints one, `interpreter.run_parallel`
runs a program on a process grid. Check ops have no results (their shape is the empty
tuple) and are side-effecting. Not here: how a chunk's CHECK lines are compared (cli).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
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
    """CheckOps.td: DefaultValuedAttr max_ulp_difference = 1, min_ulp_difference = 0."""

    max_ulp_difference: int = 1
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


# ---- the element rules ----------------------------------------------------------------------
#: ulp difference of a pair that matches no bound (a non-finite value that differs).
UNBOUNDED = np.iinfo(np.uint64).max


def _parts(actual: np.ndarray, expected: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The arrays a rule applies to: the real and imaginary parts of complex values."""
    if actual.dtype.kind == "c":
        return [("real part of ", actual.real, expected.real),
                ("imaginary part of ", actual.imag, expected.imag)]
    return [("", actual, expected)]


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind not in "biu"


def _bits(x: np.ndarray) -> np.ndarray:
    """The bit pattern of each element, as uint64."""
    flat = np.ascontiguousarray(x).reshape(-1)  # a 0-d operand comes back 1-d
    bits = flat.view(np.dtype(f"uint{x.dtype.itemsize * 8}")).astype(np.uint64)
    return bits.reshape(np.shape(x))


def _ordinal(x: np.ndarray) -> np.ndarray:
    """Float bit patterns on a signed integer line: adjacent floats differ by 1, -0 == +0 == 0."""
    bits = _bits(x)
    nbits = int(ml_dtypes.finfo(x.dtype).bits)
    signed = bool(np.signbit(np.array(-1.0, np.float32).astype(x.dtype)))  # not f8E8M0FNU
    if not signed:
        return bits.astype(np.int64)
    sign = np.uint64(1 << (nbits - 1))
    magnitude = (bits & (sign - np.uint64(1))).astype(np.int64)
    return np.where((bits & sign) != 0, -magnitude, magnitude)


def _abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| of int64 arrays as uint64, without overflow (the result is below 2**64)."""
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    return np.where(a >= b, ua - ub, ub - ua)


def ulp_difference(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per element: representable values between the two (uint64), UNBOUNDED for a pair with
    a non-finite value unless both are NaN or they are bitwise equal. Real arrays only."""
    if not _is_float(actual):
        if actual.dtype.kind == "u":
            a, e = actual.astype(np.uint64), expected.astype(np.uint64)
            return np.where(a >= e, a - e, e - a)
        return _abs_diff(actual.astype(np.int64), expected.astype(np.int64))
    d = _abs_diff(_ordinal(actual), _ordinal(expected))
    nan_a, nan_e = np.isnan(actual), np.isnan(expected)
    special = nan_a | nan_e | np.isinf(actual) | np.isinf(expected)
    same = (nan_a & nan_e) | (_bits(actual) == _bits(expected))
    return np.where(special, np.where(same, np.uint64(0), np.uint64(UNBOUNDED)), d)


def exactly_equal(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per element: integers by value, floats bitwise (APFloat::bitwiseIsEqual)."""
    if not _is_float(actual):
        return np.asarray(actual == expected)
    return np.asarray(_bits(actual) == _bits(expected))


def almost_equal(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> np.ndarray:
    """Per element: NaN only with NaN, an infinity only with itself, finite values when
    |actual - expected| <= tolerance, both rounded to the element type."""
    if not _is_float(actual):
        return np.asarray(actual == expected)
    dtype = actual.dtype
    with np.errstate(all="ignore"):
        # The difference is exact in float64 for the narrow types (save extreme exponent
        # gaps), so rounding it once to the element type is the type's own subtraction.
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64)).astype(dtype)
        tol = np.asarray(tolerance, np.float64).astype(dtype)
        # Equal values match even where the type has no zero to hold their difference
        # (f8E8M0FNU).
        finite_ok = (actual == expected) | (diff <= tol)
    nan_a, nan_e = np.isnan(actual), np.isnan(expected)
    inf = np.isinf(actual) | np.isinf(expected)
    return np.where(nan_a | nan_e, nan_a & nan_e,
                    np.where(inf, _bits(actual) == _bits(expected), finite_ok))


def _show_element(x: np.ndarray, index: tuple[int, ...]) -> str:
    """The element and, for floats, its bit pattern (telling -0 from +0 and NaNs apart)."""
    v = x[index]
    if not _is_float(x):
        return str(v)
    text = str(v)
    if isinstance(v, np.floating):  # shortest round-trip digits of the element type
        magnitude = abs(float(v))
        big_or_tiny = math.isfinite(magnitude) and magnitude != 0 and not 1e-4 <= magnitude < 1e16
        fmt = np.format_float_scientific if big_or_tiny else np.format_float_positional
        text = fmt(v, unique=True, trim="0")
    return f"{text} (0x{int(_bits(np.asarray(v))):0{x.dtype.itemsize * 2}x})"


def _show(x: np.ndarray) -> str:
    return np.array2string(np.asarray(x), threshold=64)


def first_mismatch(name: str, actual: np.ndarray, expected: np.ndarray, attrs: Any) -> str | None:
    """None when every element satisfies `name`'s rule, else the message for the first that
    does not: its index, both values and (expect_close) the ulp difference."""
    for part, a, e in _parts(actual, expected):
        note = ""
        if name == "check.expect_close":
            lo, hi = attrs.min_ulp_difference, attrs.max_ulp_difference
            d = ulp_difference(a, e)
            ok = (d >= np.uint64(max(lo, 0))) & (d <= np.uint64(max(hi, 0))) & (d != UNBOUNDED)
            if hi < 0:
                ok[...] = False
        elif "almost" in name:
            ok = almost_equal(a, e, attrs.tolerance)
        else:
            ok = exactly_equal(a, e)
        bad = np.flatnonzero(~ok)
        if not bad.size:
            continue
        index = tuple(int(i) for i in np.unravel_index(int(bad[0]), a.shape))
        if name == "check.expect_close":
            du = int(d[index])
            shown = "unbounded (a non-finite value differs)" if du == UNBOUNDED else str(du)
            note = f", ulp difference {shown}, allowed [{lo}, {hi}]"
        elif "almost" in name and _is_float(a):
            note = f", tolerance {attrs.tolerance}"
        return (f"{name} failed: {bad.size} of {a.size} elements don't match; the first at "
                f"index {list(index)}: {part}actual {_show_element(a, index)} vs expected "
                f"{_show_element(e, index)}{note}\n"
                f"  actual:   {_show(actual)}\n  expected: {_show(expected)}")
    return None


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
        actual, expected = np.asarray(actual), np.asarray(expected)
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            raise CheckFailure(f"{self.name} failed: actual is {actual.dtype}{list(actual.shape)}"
                               f", expected {expected.dtype}{list(expected.shape)}")
        message = first_mismatch(self.name, actual, expected, attrs)
        if message is not None:
            raise CheckFailure(message)
        return ()


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
        values = grid.run_programs(programs, args, runtime=ctx.runtime, infeed=feeds,
                                   backend=getattr(ctx, "backend", "interpreter"))
        out: list[Any] = []
        for comp, v in zip(programs, values):
            out.extend(v if getattr(comp, "multi_result", False) else [v])
        return out[0] if len(out) == 1 else tuple(out)


add_op(Probe())
add_op(Print())
add_op(RunParallel())
