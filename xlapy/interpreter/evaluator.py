"""The reference interpreter: walks a computation and calls each op's `evaluate` via `OPS`.

Values are numpy arrays (exact element dtype and shape), tuples of values, or TOKEN_VALUE.
Each op's result is checked against its inferred shape, so a wrong evaluate fails loudly here
instead of corrupting later ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlapy.errors import InterpreterError, XlapyError
from xlapy.ir import Computation, Instruction, Module
from xlapy.ir.location import locate_error
from xlapy.ops.base import OPS
from xlapy.types import Shape
from xlapy.types.literal import TOKEN_VALUE, Token


@dataclass
class RuntimeState:
    """Per-execution state shared by every frame: rng, custom calls, feeds, host hooks."""

    rng_seed: int = 0
    rng_counter: int = 0
    custom_calls: dict[str, Callable[..., Any]] = field(default_factory=dict)
    infeed: list[Any] = field(default_factory=list)
    outfeed: list[Any] = field(default_factory=list)
    #: Named host hooks (check-dialect results, probes, prints) used by front doors.
    hooks: dict[str, Any] = field(default_factory=dict)
    #: Host channels by channel id: values send(is_host_transfer) wrote, values recv reads.
    host_sends: dict[int, list[Any]] = field(default_factory=dict)
    host_recvs: dict[int, list[Any]] = field(default_factory=dict)
    #: set_dimension_size results: id(value) -> (weakref to it, {dimension: dynamic size}).
    dynamic_sizes: dict[int, Any] = field(default_factory=dict)


class _Context:
    """The EvalContext an op sees: its instruction's called computations, process, runtime."""

    __slots__ = ("_interp", "_instr")

    def __init__(self, interp: Interpreter, instr: Instruction) -> None:
        self._interp = interp
        self._instr = instr

    def call(self, index: int, *args: Any) -> Any:
        return self._interp.run(self._instr.called[index], list(args))

    @property
    def num_regions(self) -> int:
        return len(self._instr.called)

    @property
    def process(self) -> Any:
        return self._interp.process

    @property
    def runtime(self) -> RuntimeState:
        return self._interp.runtime

    @property
    def instruction(self) -> Instruction:
        return self._instr


class Interpreter:
    """Evaluates computations of one module for one process of the grid."""

    def __init__(self, runtime: RuntimeState | None = None, process: Any = None) -> None:
        self.runtime = runtime or RuntimeState()
        self.process = process

    def run_module(self, module: Module, args: Sequence[Any]) -> Any:
        return self.run(module.entry_computation(), list(args))

    def run(self, comp: Computation, args: Sequence[Any]) -> Any:
        if len(args) != len(comp.parameters):
            raise InterpreterError(
                f"computation {comp.name} takes {len(comp.parameters)} argument(s), "
                f"got {len(args)}"
            )
        env: dict[int, Any] = {}
        for param, value in zip(comp.parameters, args):
            env[id(param)] = check_value(value, param.shape, f"argument {param.parameter_number}"
                                         f" of {comp.name}")
        order = comp.instructions
        last_use = _last_uses(order, comp.root)
        for pos, instr in enumerate(order):
            if instr.opcode == "parameter":
                continue
            op = OPS.get(instr.opcode)
            if op is None:
                raise InterpreterError(f"unknown op '{instr.opcode}' in %{instr.name}")
            operands = [env[id(o)] for o in instr.operands]
            try:
                value = op.evaluate(operands, instr.attrs, instr.shape, _Context(self, instr))
            except XlapyError as e:
                raise locate_error(e, instr) from e.__cause__
            except Exception as e:  # a numpy failure inside evaluate: name the instruction
                raise locate_error(InterpreterError(
                    f"{instr.opcode} (%{instr.name}: {instr.shape}) failed: "
                    f"{type(e).__name__}: {e}"
                ), instr) from e
            env[id(instr)] = check_value(value, instr.shape, f"{instr.opcode} %{instr.name}",
                                         internal=True)
            for dead in last_use.get(pos, ()):
                env.pop(dead, None)
        if comp.root is None:
            raise InterpreterError(f"computation {comp.name} has no root")
        return env[id(comp.root)]


def _last_uses(order: list[Instruction], root: Instruction | None) -> dict[int, list[int]]:
    """Position -> ids of values whose last use is there (so big temporaries are freed)."""
    last: dict[int, int] = {}
    for pos, instr in enumerate(order):
        for o in instr.operands:
            last[id(o)] = pos
    if root is not None:
        last[id(root)] = len(order)
    out: dict[int, list[int]] = {}
    for vid, pos in last.items():
        out.setdefault(pos, []).append(vid)
    return out


def check_value(value: Any, shape: Shape, what: str, internal: bool = False) -> Any:
    """Normalize a value to `shape` (0-d scalars to arrays) or fail naming `what`."""
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise _bad(what, f"expected a tuple {shape}, got {_describe(value)}", internal)
        return tuple(check_value(v, s, f"{what}[{i}]", internal)
                     for i, (v, s) in enumerate(zip(value, shape.tuple_shapes)))
    if shape.is_token:
        if not isinstance(value, Token):
            raise _bad(what, f"expected a token, got {_describe(value)}", internal)
        return TOKEN_VALUE
    if isinstance(value, np.ma.MaskedArray) and not internal:
        if np.ma.getmask(value) is not np.ma.nomask and np.ma.getmask(value).any():
            raise _bad(what, "a masked array with masked elements has no value for them "
                       f"(expected {shape})", internal)
        value = np.ma.getdata(value)
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype != shape.dtype:
        if internal or not np.can_cast(arr.dtype, shape.dtype, "same_kind"):
            raise _bad(what, f"expected {shape}, got {_describe(value)}", internal)
        arr = _convert(arr, shape, what)
    if arr.shape != shape.dimensions:
        raise _bad(what, f"expected {shape}, got {_describe(value)}", internal)
    return arr


def _convert(arr: np.ndarray, shape: Shape, what: str) -> np.ndarray:
    """`arr` as the parameter's dtype when no value changes: integers (into integers or
    floats) must convert exactly; floats into a narrower float are rounded to its
    precision (like a literal) but must not overflow to infinity."""
    dst = np.dtype(shape.dtype)
    if np.can_cast(arr.dtype, dst, "safe"):
        return arr.astype(dst)
    out = None
    if arr.dtype.kind in "iu" and dst.kind in "iu":
        # (the range, not a round trip: numpy's default int64 into an s32 parameter of 4M
        # elements cost ~22 ms a call by astype, astype back and two compares)
        info = np.iinfo(dst)
        fits = not arr.size or (int(arr.min()) >= info.min and int(arr.max()) <= info.max)
    else:
        with np.errstate(all="ignore"):
            out = arr.astype(dst)
        fits = np.array_equal(out.astype(np.float64), arr) if arr.dtype.kind in "iu" else \
            bool(np.all(np.isfinite(out) | ~np.isfinite(arr)))
    if not fits:
        raise InterpreterError(f"{what}: {_describe(arr)} has values that do not fit "
                               f"{shape} (pass an array of {shape.dtype} to convert them "
                               "yourself)")
    return arr.astype(dst) if out is None else out
    if arr.dtype.kind in "biu":
        back = out.astype(arr.dtype) if out.dtype.kind in "biu" else out.astype(np.float64)
        fits = np.array_equal(back, arr) and (out.dtype.kind not in "iu" or
                                               np.array_equal(np.sign(out), np.sign(arr)))
    else:
        fits = bool(np.all(np.isfinite(out) | ~np.isfinite(arr)))
    if not fits:
        raise InterpreterError(f"{what}: {_describe(arr)} has values that do not fit "
                               f"{shape} (pass an array of {shape.dtype} to convert them "
                               "yourself)")
    return out


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return type(value).__name__


def _bad(what: str, message: str, internal: bool) -> XlapyError:
    if internal:
        return InterpreterError(f"internal error: {what} produced a wrong value: {message}")
    return InterpreterError(f"{what}: {message}")
