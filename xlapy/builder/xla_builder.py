"""XlaBuilder, XlaOp and XlaComputation: the seeds' ComputationBuilder in xla_client style.

Every op goes through `XlaBuilder.add_op`, which runs shape inference. Errors are deferred to
`build()` (the first one, naming the op) unless `set_die_immediately_on_error(True)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.errors import BuilderError, XlapyError
from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.base import NO_ATTRS, infer_shape
from xlapy.ops.core import ConstantAttrs, GetTupleElementAttrs, ParameterAttrs
from xlapy.types import ElementType, Literal, Shape, from_dtype


@dataclass(frozen=True)
class ProgramShape:
    parameters: tuple[Shape, ...]
    result: Shape
    parameter_names: tuple[str, ...] = ()

    def parameter_shapes(self) -> tuple[Shape, ...]:
        return self.parameters

    def result_shape(self) -> Shape:
        return self.result

    def __str__(self) -> str:
        params = ", ".join(f"{n}: {s}" for n, s in zip(self.parameter_names, self.parameters))
        return f"({params}) -> {self.result}"


@dataclass(frozen=True)
class OpMetadata:
    """xla_client's OpMetadata: where an op came from (printed as HLO `metadata={...}`)."""

    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0

    def hlo_text(self) -> str:
        parts = [f'{k}="{v}"' for k, v in (("op_type", self.op_type), ("op_name", self.op_name),
                                          ("source_file", self.source_file)) if v]
        if self.source_line:
            parts.append(f"source_line={int(self.source_line)}")
        return "{" + " ".join(parts) + "}"


class XlaComputation:
    """A built computation: a module whose entry is the builder's computation."""

    def __init__(self, module: Module) -> None:
        self.module = module

    @property
    def name(self) -> str:
        return self.module.entry_computation().name

    def program_shape(self) -> ProgramShape:
        entry = self.module.entry_computation()
        return ProgramShape(tuple(entry.parameter_shapes), entry.result_shape,
                            tuple(p.name for p in entry.parameters))

    def as_hlo_text(self) -> str:
        """XLA's HloModule text, which `xlapy.hlo_text.parse_hlo_module` reads back."""
        from xlapy.hlo_text import print_hlo_module

        return print_hlo_module(self.module)

    def as_stablehlo_text(self, generic: bool = False) -> str:
        from xlapy.stablehlo import print_module  # type: ignore[attr-defined]

        return print_module(self.module, generic=generic)

    def __repr__(self) -> str:
        return f"<XlaComputation {self.name}: {self.program_shape()}>"


class XlaOp:
    """A handle to a value under construction; `instr` is None once an earlier op failed."""

    __slots__ = ("builder", "instr")

    def __init__(self, builder: XlaBuilder, instr: Instruction | None) -> None:
        self.builder = builder
        self.instr = instr

    @property
    def ok(self) -> bool:
        return self.instr is not None

    def shape(self) -> Shape:
        return self.builder.get_shape(self)

    def __repr__(self) -> str:
        return f"XlaOp({self.instr!r})"


class XlaBuilder:
    """Builds one computation. Sub-computations (reducers, bodies) use builders of their own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._comp = Computation(name)
        #: id(computation) -> (the computation, kept alive so its id stays its own; its copy)
        self._embedded: dict[int, tuple[XlaComputation, Computation]] = {}
        self._module_comps: list[Computation] = []
        self._first_error: str | None = None
        self._die_immediately = False
        self._built = False
        #: HLO attributes every new op gets (set_op_metadata / set_sharding), no effect on values
        self._op_attrs: dict[str, str] = {}
        #: setup_alias: (output shape index, parameter number, parameter shape index)
        self._aliases: list[tuple[tuple[int, ...], int, tuple[int, ...]]] = []

    # ---- configuration and errors ----------------------------------------------------------
    def set_die_immediately_on_error(self, enabled: bool) -> None:
        self._die_immediately = enabled

    @property
    def first_error(self) -> str | None:
        return self._first_error

    def report_error(self, op_name: str, message: str) -> XlaOp:
        """Record an error from op `op_name` (raise now in die-immediately mode)."""
        text = f"{op_name}: {message}"
        if self._die_immediately:
            raise BuilderError(text)
        if self._first_error is None:
            self._first_error = text
        return XlaOp(self, None)

    # ---- adding ops -------------------------------------------------------------------------
    def add_op(self, opcode: str, operands: Sequence[XlaOp], attrs: Any = NO_ATTRS,
               computations: Sequence[XlaComputation] = (), api_name: str = "",
               name: str = "") -> XlaOp:
        """Append op `opcode` after shape inference; `api_name` is the builder spelling."""
        label = api_name or opcode
        for op in operands:
            if not isinstance(op, XlaOp):
                return self.report_error(label, f"operand {op!r} is not an XlaOp")
            if op.builder is not self:
                return self.report_error(
                    label, f"operand built by builder '{op.builder.name}' used in '{self.name}'"
                )
        if any(op.instr is None for op in operands):
            return XlaOp(self, None)  # an earlier error; it is the one reported
        try:
            called = [self._embed(c) for c in computations]
            instrs = [op.instr for op in operands]
            shape = infer_shape(opcode, [i.shape for i in instrs], attrs,  # type: ignore[union-attr]
                                called)
        except XlapyError as e:
            return self.report_error(label, str(e))
        meta = {"hlo_attrs": dict(self._op_attrs)} if self._op_attrs else None
        instr = Instruction(opcode, instrs, shape, attrs, called, name,  # type: ignore[arg-type]
                            meta)
        return XlaOp(self, self._comp.add(instr))

    def _embed(self, comp: XlaComputation) -> Computation:
        if not isinstance(comp, XlaComputation):
            raise BuilderError(f"expected an XlaComputation, got {type(comp).__name__}")
        # Keyed by identity, holding `comp` itself: a computation built for one call and
        # dropped would otherwise free its id for the next one, which would then get the
        # first one's body (two reducers built by one helper: max became add on Python 3.13).
        key = id(comp)
        if key not in self._embedded:
            cloned = comp.module.clone()
            for c in cloned.post_order():
                self._module_comps.append(c)
            self._embedded[key] = (comp, cloned.entry_computation())
        return self._embedded[key][1]

    def parameter(self, number: int, shape: Shape, name: str = "",
                  api_name: str = "Parameter") -> XlaOp:
        if not isinstance(shape, Shape):
            return self.report_error(api_name, f"shape must be a Shape, got {shape!r}")
        for p in self._comp.parameters:
            if p.parameter_number == number:
                return self.report_error(api_name, f"parameter {number} already declared")
        return self.add_op("parameter", [], ParameterAttrs(int(number), shape),
                           api_name=api_name, name=name or f"p{number}")

    def constant(self, literal: Literal, api_name: str = "ConstantLiteral") -> XlaOp:
        return self.add_op("constant", [], ConstantAttrs(literal), api_name=api_name,
                           name="constant")

    def get_shape(self, op: XlaOp) -> Shape:
        if op.instr is None:
            raise BuilderError(f"no shape: {self._first_error}")
        return op.instr.shape

    def get_program_shape(self, root: XlaOp | None = None) -> ProgramShape:
        """Parameter shapes and the shape of `root` (default: the last op added)."""
        params = sorted(self._comp.parameters, key=lambda p: p.parameter_number)
        if root is not None:
            result = self.get_shape(root)
        else:
            result = self._comp.instructions[-1].shape if self._comp.instructions \
                else Shape.tuple([])
        return ProgramShape(tuple(p.shape for p in params), result,
                            tuple(p.name for p in params))

    def is_constant(self, op: XlaOp) -> bool:
        """Whether `op`'s value is known before running: it depends on no parameter, no
        random number and no side effect (infeed, recv, custom calls, ...), here or in a
        computation it calls."""
        from xlapy.ops.base import get_op

        if op.builder is not self or op.instr is None:
            raise BuilderError(f"is_constant: the op does not belong to builder '{self.name}'"
                               f" or failed: {self._first_error}")
        seen: set[int] = set()
        stack = [op.instr]
        while stack:
            i = stack.pop()
            if id(i) in seen:
                continue
            seen.add(id(i))
            if i.opcode in ("parameter", "rng", "rng_bit_generator") or getattr(
                    get_op(i.opcode), "side_effecting", False):
                return False
            stack.extend(i.operands)
            for c in i.called:
                stack.extend(x for x in c.instructions if x.opcode != "parameter")
        return True

    # ---- op metadata, sharding and aliasing (no effect on values) ---------------------------
    def set_op_metadata(self, metadata: OpMetadata | Any) -> None:
        """Attach `metadata` (OpMetadata or any object with its fields) to every op added
        until clear_op_metadata(); printed as HLO `metadata={...}`."""
        m = metadata if isinstance(metadata, OpMetadata) else OpMetadata(
            *(getattr(metadata, f, d) for f, d in (("op_type", ""), ("op_name", ""),
                                                    ("source_file", ""), ("source_line", 0))))
        self._op_attrs["metadata"] = m.hlo_text()

    def clear_op_metadata(self) -> None:
        self._op_attrs.pop("metadata", None)

    def set_sharding(self, sharding: Any) -> None:
        """Attach `sharding` (HLO sharding text such as "{replicated}" or
        "{devices=[2,1]0,1}") to every op added until clear_sharding()."""
        text = str(sharding).strip()
        if not (text.startswith("{") and text.endswith("}")):
            raise BuilderError(f"set_sharding: {sharding!r} is not HLO sharding text "
                               "('{replicated}', '{maximal device=0}', '{devices=[...]...}')")
        self._op_attrs["sharding"] = text

    def clear_sharding(self) -> None:
        self._op_attrs.pop("sharding", None)

    def setup_alias(self, output_index: Sequence[int], param_number: int,
                    param_index: Sequence[int]) -> None:
        """Let the result at `output_index` reuse parameter `param_number`'s buffer at
        `param_index` (a buffer-donation hint: the value computed is the same). Checked at
        build(): both must exist with the same shape. Kept as module.meta["input_output_alias"]."""
        self._aliases.append((tuple(int(i) for i in output_index), int(param_number),
                              tuple(int(i) for i in param_index)))

    def _check_aliases(self) -> None:
        def sub(shape: Shape, index: tuple[int, ...]) -> Shape | None:
            for i in index:
                if not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
                    return None
                shape = shape.tuple_shapes[i]
            return shape

        params = {p.parameter_number: p.shape for p in self._comp.parameters}
        for out_index, number, param_index in self._aliases:
            out = sub(self._comp.root.shape, out_index)  # type: ignore[union-attr]
            src = sub(params[number], param_index) if number in params else None
            if out is None or src is None or out != src:
                raise BuilderError(f"setup_alias: output {list(out_index)} ({out}) and "
                                   f"parameter {number} at {list(param_index)} ({src}) are "
                                   "not the same shape")

    # ---- xla_client's CamelCase spellings ------------------------------------------------------
    def Build(self, root: XlaOp | None = None) -> XlaComputation:  # noqa: N802
        return self.build(root)

    def GetShape(self, op: XlaOp) -> Shape:  # noqa: N802
        return self.get_shape(op)

    def GetProgramShape(self, root: XlaOp | None = None) -> ProgramShape:  # noqa: N802
        return self.get_program_shape(root)

    def IsConstant(self, op: XlaOp) -> bool:  # noqa: N802
        return self.is_constant(op)

    def SetOpMetadata(self, metadata: OpMetadata | Any) -> None:  # noqa: N802
        self.set_op_metadata(metadata)

    def ClearOpMetadata(self) -> None:  # noqa: N802
        self.clear_op_metadata()

    def SetSharding(self, sharding: Any) -> None:  # noqa: N802
        self.set_sharding(sharding)

    def ClearSharding(self) -> None:  # noqa: N802
        self.clear_sharding()

    # ---- finishing --------------------------------------------------------------------------
    def build(self, root: XlaOp | None = None) -> XlaComputation:
        """The built computation; raises the first deferred error, naming its op."""
        if self._first_error is not None:
            raise BuilderError(self._first_error)
        if self._built:
            raise BuilderError(f"builder '{self.name}' was already built")
        if root is not None:
            if root.builder is not self or root.instr is None:
                raise BuilderError(f"build: root does not belong to builder '{self.name}'")
            self._comp.root = root.instr
        elif self._comp.instructions:
            self._comp.root = self._comp.instructions[-1]
        else:
            raise BuilderError(f"build: builder '{self.name}' has no operations")
        numbers = sorted(p.parameter_number for p in self._comp.parameters)
        if numbers != list(range(len(numbers))):
            raise BuilderError(f"build: parameter numbers {numbers} are not 0..{len(numbers)-1}")
        self._check_aliases()
        self._built = True
        module = Module(self.name)
        if self._aliases:
            module.meta["input_output_alias"] = list(self._aliases)
        for c in self._module_comps:
            module.add_computation(c)
        module.add_computation(self._comp, entry=True)
        return XlaComputation(module)

    def __repr__(self) -> str:
        return f"<XlaBuilder {self.name}>"


# ---- helpers shared by the op modules ---------------------------------------------------------
def tuple_op(builder: XlaBuilder, elements: Sequence[XlaOp]) -> XlaOp:
    return builder.add_op("tuple", list(elements), api_name="Tuple")


def get_tuple_element(op: XlaOp, index: int) -> XlaOp:
    return op.builder.add_op("get_tuple_element", [op], GetTupleElementAttrs(int(index)),
                             api_name="GetTupleElement")


def as_element_type(t: ElementType | np.dtype | type | str) -> ElementType:
    """Accept ElementType, numpy dtypes/types and HLO names (`f32`)."""
    if isinstance(t, ElementType):
        return t
    if isinstance(t, str):
        from xlapy.types import from_hlo_name

        try:
            return from_hlo_name(t)
        except XlapyError:
            pass
    return from_dtype(t)
