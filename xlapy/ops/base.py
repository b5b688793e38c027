"""The op-definition contract: `OpDef`, the registry, constraint checks.

Every op is one registered `OpDef` (or a row of a table that makes one) holding its signature,
typed attributes, shape inference and reference `evaluate`. Nothing here knows about the IR;
regions are seen through the small `Region` protocol and evaluation context through
`EvalContext`, so this layer stays below `ir/` and `interpreter/`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn, Protocol

from xlapy.errors import ShapeInferenceError, XlapyError
from xlapy.types import Shape, shapes_str

VARIADIC = -1


class Region(Protocol):
    """What shape inference sees of a called computation (reducer, comparator, body...)."""

    name: str

    @property
    def parameter_shapes(self) -> list[Shape]: ...

    @property
    def result_shape(self) -> Shape: ...


class EvalContext(Protocol):
    """What `evaluate` may use besides its operands.

    `call(i, *args)` runs the instruction's i-th called computation and returns its value (a
    tuple for a multi-result region). `process` is the process-grid handle (collectives,
    channels, feeds); `runtime` holds rng state, custom-call targets and host hooks.
    """

    def call(self, index: int, *args: Any) -> Any: ...

    @property
    def num_regions(self) -> int: ...

    @property
    def process(self) -> Any: ...

    @property
    def runtime(self) -> Any: ...

    @property
    def instruction(self) -> Any:
        """The instruction being evaluated, so an op may inspect its called computations (e.g.
        to recognise a reducer that is a plain `add` and take a vectorized path)."""
        ...


@dataclass(frozen=True)
class NoAttrs:
    """Attributes of an op that has none."""


NO_ATTRS = NoAttrs()


def check(condition: object, label: str, message: str) -> None:
    """Raise `ShapeInferenceError(label, message)` unless `condition` holds.

    Labels are the spec's constraint ids (`concatenate_c4`); `infer_shape` appends every
    operand shape to the message, so `message` need only say what is wrong.
    """
    if not condition:
        raise ShapeInferenceError(label, message)


def fail(label: str, message: str) -> NoReturn:
    """Raise `ShapeInferenceError(label, message)`: `if not ok: fail(...)` is `check` for the
    hot rules (element-wise, broadcast, reduce), whose f-string messages `check` would format
    on every call, failing or not (a third of the import's shape inference)."""
    raise ShapeInferenceError(label, message)


class OpDef:
    """One op: its StableHLO name, operands, attributes, shape rule and reference semantics.

    Subclasses set the class variables and override `infer` and `evaluate`. `infer` receives
    operand shapes, the attrs dataclass and the called computations; it returns the result
    shape (a tuple shape for an op with several results) or raises through `check`.
    `evaluate` receives operand values (numpy arrays of exactly the operand's dtype and shape,
    tuples for tuple values, `TOKEN_VALUE` for tokens) and returns the result value likewise.
    """

    name: ClassVar[str]
    #: Number of operands, or VARIADIC.
    arity: ClassVar[int] = VARIADIC
    #: The frozen dataclass type of the attributes.
    attrs: ClassVar[type] = NoAttrs
    #: Number of called computations (regions), or VARIADIC (case branches).
    num_regions: ClassVar[int] = 0
    #: Ops with effects beyond their result (feeds, channels, rng state, custom calls).
    side_effecting: ClassVar[bool] = False
    #: Family module name, for the coverage table.
    family: ClassVar[str] = ""
    #: The HLO-text opcode when it differs from `name` (`broadcast` for broadcast_in_dim).
    hlo_name: ClassVar[str | None] = None

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        raise XlapyError(f"{self.name}: shape inference is not defined")

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        from xlapy.errors import Unimplemented

        raise Unimplemented(f"{self.name}: the interpreter does not evaluate this op yet")

    # Introspection used by the coverage table.
    @classmethod
    def has_infer(cls) -> bool:
        return cls.infer is not OpDef.infer

    @classmethod
    def has_evaluate(cls) -> bool:
        return cls.evaluate is not OpDef.evaluate

    def __repr__(self) -> str:
        return f"<OpDef {self.name}>"


#: Every op by its StableHLO name.
OPS: dict[str, OpDef] = {}
#: HLO-text opcodes and other spellings that name an op in OPS.
HLO_NAMES: dict[str, str] = {}


def register(cls: type[OpDef]) -> type[OpDef]:
    """Class decorator: instantiate and enter the op in `OPS`."""
    add_op(cls())
    return cls


def add_op(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise XlapyError(f"op '{op.name}' is defined twice")
    OPS[op.name] = op
    HLO_NAMES[op.hlo_name or op.name] = op.name
    return op


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        from xlapy.errors import Unimplemented

        raise Unimplemented(f"unknown op '{name}'") from None


def infer_shape(name: str, operands: Sequence[Shape], attrs: Any = NO_ATTRS,
                regions: Sequence[Region] = ()) -> Shape:
    """Run op `name`'s shape inference with arity checks; errors list every operand shape."""
    op = get_op(name)
    try:
        if op.arity != VARIADIC and len(operands) != op.arity:
            fail(f"{name}_arity", f"expects {op.arity} operand(s), got {len(operands)}")
        if op.num_regions != VARIADIC and len(regions) != op.num_regions:
            fail(f"{name}_regions",
                 f"expects {op.num_regions} called computation(s), got {len(regions)}")
        if not isinstance(attrs, op.attrs):
            raise ShapeInferenceError(
                f"{name}_attrs",
                f"expects attributes {op.attrs.__name__}, got {type(attrs).__name__}",
            )
        return op.infer(operands, attrs, regions)
    except ShapeInferenceError as e:
        msg = str(e)
        if "; got " not in msg:
            raise ShapeInferenceError(e.label, msg[len(e.label) + 2:]
                                      + f"; got {shapes_str(operands) or 'no operands'}") from None
        raise


#: Type alias for region evaluators handed to `evaluate` helpers.
RegionFn = Callable[..., Any]
