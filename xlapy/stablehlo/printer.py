"""Print an HLO-IR module as StableHLO text, generic or pretty; the parser reads both back.

Attributes print from each op's attrs dataclass (the inverse of `attrmap`): 1-d integer
tuples as `array<i64: ...>`, nested ones as `dense<...>`, enums as `#stablehlo<kind NAME>`,
nested dataclasses as `#stablehlo.name<field = value>`. Fields the result type carries
(`shape`, `new_element_type`, ...) are not printed. Computations that are the entry or
called by `call` / `composite` / `run_parallel` print as `func.func`; others inline as regions.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any

import numpy as np

from xlapy.ir import Computation, Instruction, Module
from xlapy.ir.sharding import to_text as sharding_text
from xlapy.ops.base import OPS
from xlapy.stablehlo.attrmap import _FROM_RESULT, ALIASES
from xlapy.stablehlo.printer_pretty import pretty_op
from xlapy.types import ElementType, Literal, Shape

_FUNC_CALLERS = {"call", "composite", "interpreter.run_parallel"}
_NOT_MULTI = {"tuple", "get_tuple_element", "parameter", "constant"}
_DOT_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions",
               "lhs_contracting_dimensions", "rhs_contracting_dimensions")
_STRUCT_NAMES = {"GatherDimensionNumbers": "gather", "ScatterDimensionNumbers": "scatter",
                 "ChannelHandle": "channel_handle"}
_ENUM_KINDS = {"ComparisonDirection": "comparison_direction",
               "ComparisonType": "comparison_type"}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def is_multi_result(instr: Instruction) -> bool:
    if not instr.shape.is_tuple or instr.opcode in _NOT_MULTI:
        return False
    if instr.opcode in ("call", "if", "case", "while") and instr.called:
        # XLA's single tuple-valued result (a While over a tuple state) is not several.
        return instr.called[-1].multi_result
    return True


def _used_whole(instr: Instruction, comp: Computation) -> bool:
    """Is the tuple value itself used (not only its elements through get_tuple_element)?"""
    if comp.root is instr:
        return True
    return any(u.opcode != "get_tuple_element" for u in instr.users)


#: Ops of the IR that StableHLO spells only in the chlo dialect (XLA's HLO `erf`).
_CHLO_ONLY = {"erf"}


def dialect_name(opcode: str) -> str:
    if "." in opcode:
        return opcode
    if opcode in _CHLO_ONLY:
        return f"chlo.{opcode}"
    return "func.call" if opcode == "call" else f"stablehlo.{opcode}"


class Printer:
    def __init__(self, module: Module, generic: bool) -> None:
        self.module = module
        self.generic = generic
        self.funcs = self._functions()
        self.lines: list[str] = []
        #: `%x` of a multi-result op whose whole-tuple name is `%x_t`.
        self.base: dict[int, str] = {}

    def _functions(self) -> list[Computation]:
        names: set[int] = set()
        if self.module.entry is not None:
            names.add(id(self.module.entry))
        for comp in self.module.computations:
            for instr in comp.instructions:
                if instr.opcode in _FUNC_CALLERS:
                    names.update(id(c) for c in instr.called)
        listed = self.module.meta.get("functions")
        if isinstance(listed, list):
            for c in self.module.computations:
                if c.name in listed:
                    names.add(id(c))
        return [c for c in self.module.computations if id(c) in names]

    # ---- module / function ---------------------------------------------------------------------
    def print(self) -> str:
        attrs = []
        if self.module.num_replicas != 1:
            attrs.append(f"mhlo.num_replicas = {self.module.num_replicas} : i32")
        if self.module.num_partitions != 1:
            attrs.append(f"mhlo.num_partitions = {self.module.num_partitions} : i32")
        if self.generic:
            self.lines.append(f'"builtin.module"() <{{sym_name = {_str(self.module.name)}}}> ({{')
        else:
            head = f"module @{_sym(self.module.name)}"
            if attrs:
                head += " attributes {" + ", ".join(attrs) + "}"
            self.lines.append(head + " {")
        vis = self.module.meta.get("visibility", {})
        for comp in self.funcs:
            v = vis.get(comp.name, "public") if isinstance(vis, dict) else "public"
            if v == "public" and comp is not self.module.entry and not isinstance(vis, dict):
                v = "private"
            self.function(comp, v)
        if self.generic:
            self.lines.append("})" + (" {" + ", ".join(attrs) + "}" if attrs else "") +
                              " : () -> ()")
        else:
            self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def function(self, comp: Computation, vis: str) -> None:
        names: dict[int, str] = {}
        args = []
        for i, p in enumerate(comp.parameters):
            names[id(p)] = f"%arg{i}"
            args.append(f"%arg{i}: {p.shape.to_shlo()}{_sharding_attr(p.meta.get('sharding'))}")
        results = comp.result_shapes
        outs = self.module.meta.get("result_shardings", {}).get(comp.name) or []
        res = ", ".join(s.to_shlo() + (_sharding_attr(outs[k]) if k < len(outs) else "")
                        for k, s in enumerate(results))
        counter = [0]
        if self.generic:
            ins = ", ".join(p.shape.to_shlo() for p in comp.parameters)
            props = f"function_type = ({ins}) -> {res if len(results) == 1 else f'({res})'}, " \
                    f"sym_name = {_str(comp.name)}, sym_visibility = {_str(vis)}"
            self.lines.append(f'  "func.func"() <{{{props}}}> ({{')
            if args:
                self.lines.append(f"  ^bb0({', '.join(args)}):")
            self.body(comp, names, counter, "    ", "func.return")
            self.lines.append("  }) : () -> ()")
            return
        sig = f"({', '.join(args)})"
        if results:
            sig += f" -> ({res})" if len(results) != 1 or outs else f" -> {res}"
        vis = "" if vis == "public" else vis + " "
        self.lines.append(f"  func.func {vis}@{_sym(comp.name)}{sig} {{")
        self.body(comp, names, counter, "    ", "func.return")
        self.lines.append("  }")

    def body(self, comp: Computation, names: dict[int, str], counter: list[int], indent: str,
             ret: str) -> None:
        for instr in comp.instructions:
            if instr.opcode == "parameter":
                continue
            if instr is comp.root and comp.multi_result and instr.opcode == "tuple":
                continue
            if instr.opcode == "get_tuple_element" and is_multi_result(instr.operands[0]):
                src = self.base.get(id(instr.operands[0]), names[id(instr.operands[0])])
                names[id(instr)] = f"{src}#{instr.attrs.index}"
                continue
            self.lines.extend(indent + line for line in self.op(instr, names, counter, indent))
            if is_multi_result(instr) and _used_whole(instr, comp):
                # A multi-result op used as one tuple value (XLA's tuple-shaped results).
                base = names[id(instr)]
                self.base[id(instr)] = base
                parts = [f"{base}#{i}" for i in range(len(instr.shape.tuple_shapes))]
                types = ", ".join(t.to_shlo() for t in instr.shape.tuple_shapes)
                tname = f"{base}_t"
                self.lines.append(f'{indent}{tname} = "stablehlo.tuple"({", ".join(parts)}) : '
                                  f"({types}) -> {instr.shape.to_shlo()}")
                names[id(instr)] = tname
        values = comp.root.operands if comp.multi_result and comp.root.opcode == "tuple" \
            else [comp.root]
        vals = ", ".join(names[id(v)] for v in values)
        types = ", ".join(v.shape.to_shlo() for v in values)
        if self.generic:
            self.lines.append(f'{indent}"{ret}"({vals}) : ({types}) -> ()')
        elif values:
            self.lines.append(f"{indent}{ret} {vals} : {types}")
        else:
            self.lines.append(f"{indent}{ret}")

    # ---- ops ------------------------------------------------------------------------------------
    def op(self, instr: Instruction, names: dict[int, str], counter: list[int],
           indent: str) -> list[str]:
        name = f"%{counter[0]}"
        counter[0] += 1
        shape = instr.shape
        if is_multi_result(instr):
            n = len(shape.tuple_shapes)
            lhs = f"{name}:{n} = " if n else ""
            result_types = list(shape.tuple_shapes)
        elif shape.is_tuple and not shape.tuple_shapes and instr.opcode not in _NOT_MULTI:
            lhs, result_types = "", []
        else:
            lhs, result_types = f"{name} = ", [shape]
        names[id(instr)] = name
        operands = ", ".join(names[id(o)] for o in instr.operands)
        otypes = ", ".join(o.shape.to_shlo() for o in instr.operands)
        rtypes = ", ".join(t.to_shlo() for t in result_types)
        ftype = f"({otypes}) -> " + (f"({rtypes})" if len(result_types) != 1 else rtypes)
        op = dialect_name(instr.opcode)
        if instr.opcode == "constant":
            return [f"{lhs}stablehlo.constant {dense(instr.attrs.literal)}"]
        if instr.opcode == "call":
            return [f"{lhs}func.call @{_sym(instr.called[0].name)}({operands}) : {ftype}"]
        if not self.generic and instr.opcode == "while" and instr.operands:
            return self._while(instr, names, counter, lhs)
        if not self.generic and instr.opcode.startswith("check.expect_") and \
                not self.attrs(instr)[1:] and instr.operands:
            if instr.opcode.endswith("_const"):  # `check.expect_eq_const %x, dense<..> : t`
                return [f"{instr.opcode} {operands}, {dense(instr.attrs.value)}"]
            if not self.attrs(instr):  # `check.expect_eq %a, %b : t`
                return [f"{instr.opcode} {operands} : {instr.operands[0].shape.to_shlo()}"]
        if not self.generic and instr.opcode == "custom_call":
            rest = [(k, v) for k, v in self.attrs(instr) if k != "call_target_name"]
            text = f"stablehlo.custom_call @{_sym(instr.attrs.call_target_name)}({operands})"
            if rest:
                text += " {" + ", ".join(f"{k} = {v}" for k, v in rest) + "}"
            return [f"{lhs}{text} : {ftype}"]
        if not self.generic and instr.opcode == "convolution":
            return [lhs + self._convolution(instr, operands, ftype)]
        if not self.generic and instr.opcode == "reduce":
            text = _reduce_applies(instr, names, ftype)
            if text is not None:
                return [lhs + text]
        if not self.generic and result_types:
            text = pretty_op(instr, operands, ftype)
            if text is not None:
                return [lhs + text]
        attrs = self.attrs(instr)
        if not self.generic and not instr.called and not attrs and result_types and \
                all(o.shape == shape for o in instr.operands) and instr.operands:
            return [f"{lhs}{op} {operands} : {shape.to_shlo()}"]
        if not self.generic and not instr.called and not attrs and len(result_types) == 1 and \
                instr.operands and not instr.shape.is_tuple:  # `op %a : (t) -> t'`
            return [f"{lhs}{op} {operands} : {ftype}"]
        text = f'{lhs}"{op}"({operands})'
        regions = bool(instr.called) and instr.opcode not in _FUNC_CALLERS
        if attrs:
            inner = ", ".join(f"{k} = {v}" for k, v in attrs)
            text += f" <{{{inner}}}>" if regions else f" {{{inner}}}"
        lines = [text]
        if regions:
            lines[-1] += " ({"
            for i, comp in enumerate(instr.called):
                if i:
                    lines.append("}, {")
                args = []
                for p in comp.parameters:
                    pname = f"%{counter[0]}"
                    counter[0] += 1
                    names[id(p)] = pname
                    args.append(f"{pname}: {p.shape.to_shlo()}")
                lines.append(f"^bb0({', '.join(args)}):")
                saved = self.lines
                self.lines = []
                self.body(comp, names, counter, "  ", "stablehlo.return")
                lines.extend(self.lines)
                self.lines = saved
            lines.append("})")
        lines[-1] += f" : {ftype}"
        return lines

    def _region_lines(self, comp: Computation, names: dict[int, str],
                      counter: list[int]) -> list[str]:
        saved = self.lines
        self.lines = []
        self.body(comp, names, counter, "  ", "stablehlo.return")
        out, self.lines = self.lines, saved
        return out

    def _while(self, instr: Instruction, names: dict[int, str], counter: list[int],
               lhs: str) -> list[str]:
        """`stablehlo.while(%i = %a, ...) : types cond { ... } do { ... }` (JAX's form)."""
        cond, body = instr.called
        pairs = []
        for j, o in enumerate(instr.operands):
            pname = f"%iterArg{counter[0]}"
            counter[0] += 1
            names[id(cond.parameters[j])] = names[id(body.parameters[j])] = pname
            pairs.append(f"{pname} = {names[id(o)]}")
        types = ", ".join(o.shape.to_shlo() for o in instr.operands)
        lines = [f"{lhs}stablehlo.while({', '.join(pairs)}) : {types}", " cond {"]
        lines += self._region_lines(cond, names, counter)
        lines.append(" } do {")
        lines += self._region_lines(body, names, counter)
        lines.append(" }")
        return lines

    def _convolution(self, instr: Instruction, operands: str, ftype: str) -> str:
        """`stablehlo.convolution(%a, %b) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f],
        window = {stride = [..], pad = [[l, h], ..], ...} {other attributes} : type`."""
        a = instr.attrs
        window = []
        for key, field in (("stride", "window_strides"), ("lhs_dilate", "lhs_dilation"),
                           ("rhs_dilate", "rhs_dilation")):
            v = getattr(a, field)
            if v:
                window.append(f"{key} = [{', '.join(map(str, v))}]")
        if a.padding:
            window.append("pad = [" + ", ".join(f"[{lo}, {hi}]" for lo, hi in a.padding) + "]")
        if a.window_reversal:
            window.append("reverse = [" + ", ".join("true" if r else "false"
                                                    for r in a.window_reversal) + "]")
        text = f"stablehlo.convolution({operands}) dim_numbers = " \
               f"{conv_text(a.dimension_numbers)}"
        if window:
            text += ", window = {" + ", ".join(window) + "}"
        skip = {"dimension_numbers", "window_strides", "lhs_dilation", "rhs_dilation",
                "padding", "window_reversal"}
        rest = [(k, v) for k, v in self.attrs(instr) if k not in skip]
        if rest:
            text += " {" + ", ".join(f"{k} = {v}" for k, v in rest) + "}"
        return f"{text} : {ftype}"

    def attrs(self, instr: Instruction) -> list[tuple[str, str]]:
        a = instr.attrs
        out: list[tuple[str, str]] = []
        if instr.meta.get("sharding") is not None:  # GSPMD text (Shardy's imports as it)
            out.append(("mhlo.sharding", _str(sharding_text(instr.meta["sharding"]))))
        if instr.opcode in _FUNC_CALLERS:
            if instr.opcode == "interpreter.run_parallel":
                progs = ", ".join("[" + ", ".join(f"@{_sym(n)}" for n in row) + "]"
                                  for row in a.programs)
                out.append(("programs", f"[{progs}]"))
                if a.infeed:
                    out.append(("infeed", "[" + ", ".join(f"@{_sym(n)}" for n in a.infeed)
                                + "]"))
                return out
            if instr.opcode == "composite":
                out.append(("name", _str(a.name)))
                if a.composite_attributes:
                    out.append(("composite_attributes", _dict(a.composite_attributes)))
                out.append(("decomposition", f"@{_sym(instr.called[0].name)}"))
                if a.version:
                    out.append(("version", f"{a.version} : i32"))
                return out
        if not dataclasses.is_dataclass(a):
            return out
        op = instr.opcode
        if op == "dot_general":
            fields = ", ".join(f"{f} = [{', '.join(map(str, getattr(a, f)))}]"
                               for f in _DOT_FIELDS)
            out.append(("dot_dimension_numbers", f"#stablehlo.dot<{fields}>"))
        for f in dataclasses.fields(a):
            value = getattr(a, f.name)
            if op == "dot_general" and f.name in _DOT_FIELDS:
                continue
            if f.name in _FROM_RESULT or f.name == "result_element_type":
                continue
            if value is None or (f.default is not dataclasses.MISSING and value == f.default
                                 and not isinstance(value, (tuple,)) and f.name != "value"):
                continue
            key = ALIASES.get((op, f.name), f.name)
            if key == "channel_handle":
                handle, kind = (value, 0) if isinstance(value, int) else \
                    (value.handle, value.type.value)
                out.append((key, f"#stablehlo.channel_handle<handle = {handle}, "
                                 f"type = {kind}>"))
                continue
            if op == "infeed" and key == "layout":  # an array of integer arrays in MLIR
                out.append((key, "[" + ", ".join(_list(v) for v in value) + "]"))
                continue
            out.append((key, attr_text(value)))
        return out


_APPLIES = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}


def _sharding_attr(s: Any) -> str:
    return f" {{mhlo.sharding = {_str(sharding_text(s))}}}" if s is not None else ""


def _reduce_applies(instr: Instruction, names: dict[int, str], ftype: str) -> str | None:
    """`stablehlo.reduce(%a init: %b) applies stablehlo.add across dimensions = [..]` when
    the body applies one binary op to (lhs_i, rhs_i) for every input."""
    comp = instr.called[0]
    n = len(instr.operands) // 2
    params = comp.parameters
    roots = list(comp.root.operands) if comp.multi_result else [comp.root]
    if n == 0 or len(params) != 2 * n or len(roots) != n:
        return None
    if len(comp.instructions) != 3 * n + (1 if comp.multi_result else 0):
        return None
    kinds = {r.opcode for r in roots}
    if len(kinds) != 1 or not kinds <= _APPLIES:
        return None
    for i, r in enumerate(roots):
        if list(r.operands) != [params[i], params[n + i]]:
            return None
    pairs = ", ".join(f"({names[id(a)]} init: {names[id(b)]})"
                      for a, b in zip(instr.operands[:n], instr.operands[n:]))
    dims = ", ".join(map(str, instr.attrs.dimensions))
    return (f"stablehlo.reduce{pairs} applies stablehlo.{kinds.pop()} across dimensions = "
            f"[{dims}] : {ftype}")


def _struct_field(cls: str, value: Any) -> str:
    """A struct field; dot_algorithm's precision types print as bare types (`tf32`)."""
    if cls == "DotAlgorithm" and isinstance(value, str):
        return value
    return _list(value)


def attr_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ElementType):
        return Shape.scalar(value).to_shlo()
    if isinstance(value, enum.Enum):
        kind = _ENUM_KINDS.get(type(value).__name__, _snake(type(value).__name__))
        return f"#stablehlo<{kind} {value.name}>"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{_float(value)} : f32"
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, Shape):
        return value.to_shlo()
    if isinstance(value, ElementType):
        return Shape.scalar(value).to_shlo()
    if isinstance(value, Literal):
        return dense(value)
    if dataclasses.is_dataclass(value):
        cls = type(value).__name__
        if "input_batch_dimension" in {f.name for f in dataclasses.fields(value)}:
            return f"#stablehlo.conv<{conv_text(value)}>"
        name = _STRUCT_NAMES.get(cls, _snake(cls))
        inner = ", ".join(f"{f.name} = {_struct_field(cls, getattr(value, f.name))}"
                          for f in dataclasses.fields(value))
        return f"#stablehlo.{name}<{inner}>"
    if isinstance(value, tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)
                         for v in value):
            return _dict(value)
        if value and all(isinstance(v, bool) for v in value):
            return "array<i1: " + ", ".join("true" if v else "false" for v in value) + ">"
        if all(isinstance(v, int) for v in value):
            return "array<i64: " + ", ".join(map(str, value)) + ">" if value else "array<i64>"
        if value and all(isinstance(v, tuple) for v in value) and \
                all(isinstance(x, int) for v in value for x in v) and \
                len({len(v) for v in value}) == 1 and len(value[0]):
            arr = np.array(value, dtype=np.int64)
            return dense(Literal.from_numpy(arr))
        return "[" + ", ".join(attr_text(v) for v in value) + "]"
    return _str(str(value))


def _list(value: Any) -> str:
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return attr_text(value)


def conv_text(d: Any) -> str:
    def group(rank: int, named: dict[int, str], spatial: tuple[int, ...]) -> str:
        labels = [""] * rank
        for pos, c in named.items():
            labels[pos] = c
        for i, pos in enumerate(spatial):
            labels[pos] = str(i)
        return "[" + ", ".join(labels) + "]"

    n = len(d.input_spatial_dimensions) + 2
    lhs = group(n, {d.input_batch_dimension: "b", d.input_feature_dimension: "f"},
                d.input_spatial_dimensions)
    rhs = group(n, {d.kernel_input_feature_dimension: "i",
                    d.kernel_output_feature_dimension: "o"}, d.kernel_spatial_dimensions)
    out = group(n, {d.output_batch_dimension: "b", d.output_feature_dimension: "f"},
                d.output_spatial_dimensions)
    return f"{lhs}x{rhs}->{out}"


def _dict(pairs: tuple[tuple[str, Any], ...]) -> str:
    return "{" + ", ".join(f"{k} = {_plain_text(v)}" for k, v in pairs) + "}"


def _plain_text(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_plain_text(x) for x in v) + "]"
    return attr_text(v)


def _float(x: float) -> str:
    text = repr(float(x))
    return text if ("." in text or "e" in text) and "inf" not in text and "nan" not in text \
        else (f"{x:.1f}" if np.isfinite(x) else "0x" + np.float64(x).tobytes()[::-1].hex())


def _str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _sym(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name) else _str(name)


def dense(lit: Literal) -> str:
    """`dense<...> : type`; floats print exactly (hex bit patterns where decimal would not)."""
    arr = lit.to_numpy()
    shape = lit.shape
    et = shape.element_type
    if lit.is_splat:
        return f"dense<{_elem(arr.reshape(-1)[0], et)}> : {shape.to_shlo()}"
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).reshape(arr.size,
                                                                       arr.dtype.itemsize)
    if arr.size > 1 and np.all(raw == raw[:1]) or arr.size == 1:
        body = _elem(arr.reshape(-1)[0], et)
    elif arr.size == 0:
        body = "[]" if arr.ndim == 1 else _nested(arr, et)
    else:
        body = _nested(arr, et)
    return f"dense<{body}> : {shape.to_shlo()}"


def _uint(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _nested(arr: np.ndarray, et: ElementType) -> str:
    if arr.ndim == 0:
        return _elem(arr[()], et)
    return "[" + ", ".join(_nested(x, et) for x in arr) + "]"


def _elem(x: Any, et: ElementType) -> str:
    if et.is_pred:
        return "true" if x else "false"
    if et.is_integer:
        return str(int(x))
    if et.is_complex:
        part = ElementType.F32 if et is ElementType.C64 else ElementType.F64
        return f"({_elem(np.asarray(x.real, part.dtype), part)}, " \
               f"{_elem(np.asarray(x.imag, part.dtype), part)})"
    a = np.asarray(x, et.dtype)
    f = float(a)
    if np.isfinite(f) and np.asarray(f).astype(et.dtype).view(_uint(a.dtype)) == \
            a.view(_uint(a.dtype)) and not (f == 0 and np.signbit(f)):
        return repr(f) if "e" in repr(f) or "." in repr(f) else f"{f:.1f}"
    bits = int(a.reshape(1).view(_uint(a.dtype))[0])
    if et.bits < 8:
        bits &= (1 << et.bits) - 1
    return f"0x{bits:0{max(1, (et.bits + 3) // 4)}X}"


def print_module(module: Module, generic: bool = False) -> str:
    return Printer(module, generic).print()


def known_ops() -> list[str]:
    return sorted(OPS)
