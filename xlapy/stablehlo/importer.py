"""Import parsed StableHLO (`nodes`) into the HLO IR (Module / Computation / Instruction).

* Functions become computations; block arguments become parameters; `func.return %a, %b`
  becomes a root tuple with `multi_result = True` (one value: that value; none: `()`).
* `%x:2` / `%x#1`: an op with several results has a tuple shape; each result is a
  `get_tuple_element` of it.
* `func.call` is a `call` of the callee's computation; `composite` calls its decomposition.
* Regions become called computations. A region may use values of the enclosing scope:
  constants are cloned into the region; other captured values are lifted: a `while` carries
  them as extra loop variables (the body passes them through, the extra results are dropped);
  `case` / `if` branches receive them as one tuple operand per branch. Other region ops may
  only capture constants (a clear error otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from xlapy.errors import ParseError, Unimplemented, XlapyError
from xlapy.ir import Computation, Instruction, Module
from xlapy.ir.location import LazySpan, stamp
from xlapy.ops.base import NO_ATTRS, OPS, get_op, infer_shape
from xlapy.ops.core import ConstantAttrs, GetTupleElementAttrs, ParameterAttrs
from xlapy.ops.dynamic import DYNAMIC_OPS
from xlapy.ops.result_types import result_type_label
from xlapy.stablehlo import sdy
from xlapy.stablehlo.attrmap import build_attrs
from xlapy.stablehlo.dense import dense_to_array
from xlapy.stablehlo.generic_form import compatible, terminator_type_problem
from xlapy.stablehlo.legalize import LEGALIZE
from xlapy.stablehlo.lexer import Lexer
from xlapy.stablehlo.locations import resolve as resolve_loc
from xlapy.stablehlo.nodes import (
    BlockArg,
    DenseAttr,
    FuncNode,
    ModuleNode,
    OpaqueType,
    OpNode,
    RegionNode,
    SymbolRef,
    TensorType,
    type_str,
)
from xlapy.stablehlo.quant import QuantTypeError, import_quantized, involves_quant, storage_type
from xlapy.stablehlo.scope import Key, Scope, free_values, is_constant
from xlapy.stablehlo.specialize import (
    check_shape_assertion,
    has_dynamic_args,
    import_approx_top_k,
    import_dynamic,
    import_dynamic_reduce_window,
    register_targets,
    specialize_call,
)
from xlapy.types import Literal, Shape
from xlapy.types.limits import process_count_problem

TERMINATORS = {"func.return", "return", "stablehlo.return", "sdy.return"}
_UNKNOWN = object()  # (Importer._specials: not looked up yet)
_TUPLE_OPS = {"tuple", "get_tuple_element", "parameter", "constant"}
#: Deprecated StableHLO ops that are one spec op under another name (others: legalize.py).
_DEPRECATED = {"create_token": "after_all"}  # create_token: after_all with no operands


def opcode_of(name: str) -> str:
    """`stablehlo.add` -> `add`; `chlo.erf` -> `erf` when defined; other dialects kept."""
    if name.startswith("stablehlo."):
        short = name[len("stablehlo."):]
        return _DEPRECATED.get(short, short)
    if name.startswith("chlo."):
        short = name[len("chlo."):]
        return short if short in OPS else name
    if name in ("func.call", "call"):
        return "call"
    return name


class Importer:
    def __init__(self, node: ModuleNode, lex: Lexer) -> None:
        self.node = node
        self.lex = lex
        self.funcs: dict[str, FuncNode] = {}
        for f in node.funcs:
            if f.name in self.funcs:
                raise self.error(f.pos, f"function @{f.name} is defined twice")
            self.funcs[f.name] = f
        self.comps: dict[str, Computation] = {}
        self.specialized: dict[tuple[Any, ...], Computation] = {}
        self.in_progress: set[str] = set()
        self.module = Module(node.name)
        self._region_count = 0
        self.cur = Computation("<none>")
        #: opcode -> its own import (Importer._special) or None, found once per opcode.
        self._specials: dict[str, Any] = {}
        self._opcodes: dict[str, str] = {}  # op name -> opcode_of(name), once per name

    def error(self, pos: int, message: str) -> ParseError:
        return ParseError(self.lex.span(pos), message)

    # ---- functions --------------------------------------------------------------------------
    def function(self, name: str, pos: int, shapes: list[Shape] | None = None,
                 consts: dict[int, Any] | None = None, as_name: str | None = None
                 ) -> Computation:
        """Import function @name (once), or a specialization of it: parameters of the given
        `shapes`, parameters `consts` bound to those constant values (`specialize`)."""
        spec = shapes is not None
        if not spec and name in self.comps:
            return self.comps[name]
        f = self.funcs.get(name)
        if f is None:
            raise self.error(pos, f"call to undefined function @{name}")
        if name in self.in_progress:
            raise self.error(pos, f"recursive call to @{name} is not supported")
        if shapes is not None and len(shapes) != len(f.args):
            raise self.error(pos, f"@{name} takes {len(f.args)} argument(s), got {len(shapes)}")
        self.in_progress.add(name)
        saved = self.cur
        comp = Computation(as_name or name)
        self.cur = comp
        scope = Scope(self, comp, None)
        params = []
        for i, a in enumerate(f.args):
            if shapes is not None:
                if not compatible(shapes[i], a.type):
                    raise self.error(a.pos, f"argument {a.name} of @{name} has type "
                                            f"{type_str(a.type)}; got {shapes[i].to_shlo()}")
                a = BlockArg(a.name, shapes[i], a.pos)
            params.append(self.param(comp, i, a))
        for i, (a, p) in enumerate(zip(f.args, params)):
            if consts and i in consts:
                lit = Literal(p.shape, np.asarray(consts[i], p.shape.element_type.dtype))
                p = comp.add(Instruction("constant", [], p.shape, ConstantAttrs(lit), (),
                                         a.name.lstrip("%")))
            scope.bind(a.name, [p], a.pos)
        returned, ret_pos = self.body(f.body, scope, f.pos, f"function @{name}")
        declared = f.result_types
        if len(returned) != len(declared) or any(
                not compatible(r.shape, t) for r, t in zip(returned, declared)):
            raise self.error(ret_pos, f"function @{name} returns "
                                      f"({', '.join(r.shape.to_shlo() for r in returned)}) but its "
                                      f"signature says ({', '.join(map(type_str, declared))})")
        self.set_root(comp, returned)
        sdy.attach_signature(self, f, comp)
        self.in_progress.discard(name)
        if not spec:
            self.comps[name] = comp
        self.module.add_computation(comp)
        self.cur = saved
        return comp

    def param(self, comp: Computation, number: int, arg: BlockArg) -> Instruction:
        shape = self.static(arg.type, arg.pos, f"argument {arg.name}")
        return comp.add(Instruction("parameter", [], shape, ParameterAttrs(number, shape), (),
                                    arg.name.lstrip("%")))

    def static(self, t: Any, pos: int, what: str) -> Shape:
        try:
            t = storage_type(t)
        except QuantTypeError as e:
            raise self.error(pos, f"{what}: {e}") from None
        if isinstance(t, Shape):
            return t
        if isinstance(t, TensorType):
            raise self.error(pos, f"dynamic shape not supported: {what} has type {t}")
        if isinstance(t, OpaqueType):
            raise self.error(pos, f"type not supported: {what} has type {t}")
        raise self.error(pos, f"{what} has no type")

    def set_root(self, comp: Computation, values: list[Instruction]) -> None:
        if len(values) == 1:
            comp.root = values[0]
            comp.multi_result = False
        else:
            comp.root = comp.add(Instruction("tuple", values,
                                             Shape.tuple([v.shape for v in values])))
            comp.multi_result = True

    def body(self, ops: list[OpNode], scope: Scope, pos: int, what: str
             ) -> tuple[list[Instruction], int]:
        for i, op in enumerate(ops):
            if op.name in TERMINATORS:
                if i != len(ops) - 1:
                    raise self.error(ops[i + 1].pos, f"op after the terminator of {what}")
                values = [scope.lookup(r) for r in op.operands]
                problem = terminator_type_problem(op, [v.shape for v in values])
                if problem:
                    raise self.error(op.pos, problem)
                return values, op.pos
            try:
                self.op(op, scope)
            except ParseError:
                raise
            except XlapyError as e:
                raise self.error(op.pos, f"{op.name}: {_clean(e)}") from None
        raise self.error(pos, f"{what} has no terminator (func.return / stablehlo.return)")

    # ---- regions ----------------------------------------------------------------------------
    def region(self, node: RegionNode, outer: Scope, hint: str, lift: list[Key] | None = None,
               tuple_lift: bool = False, arg_types: list[Any] | None = None) -> Computation:
        self._region_count += 1
        comp = Computation(f"{hint}_region{self._region_count}")
        saved = self.cur
        lifted: dict[Key, Instruction] = {}
        scope = Scope(self, comp, outer, lifted)
        for i, a in enumerate(node.args):
            t = a.type if a.type is not None else (arg_types[i] if arg_types else None)
            p = self.param(comp, i, BlockArg(a.name, t, a.pos))
            scope.bind(a.name, [p], a.pos)
        lift = lift or []
        outer_values = [outer.resolve_outer(k, 0) for k in lift]
        if tuple_lift and lift:
            tshape = Shape.tuple([v.shape for v in outer_values])
            tp = comp.add(Instruction("parameter", [], tshape,
                                      ParameterAttrs(len(node.args), tshape), (), "captured"))
            for j, k in enumerate(lift):
                lifted[k] = comp.add(Instruction("get_tuple_element", [tp],
                                                 tshape.tuple_shapes[j], GetTupleElementAttrs(j)))
        else:
            for j, (k, v) in enumerate(zip(lift, outer_values)):
                lifted[k] = comp.add(Instruction("parameter", [], v.shape,
                                                 ParameterAttrs(len(node.args) + j, v.shape), (),
                                                 k[0].lstrip("%")))
        returned, _ = self.body(node.ops, scope, 0, f"a region of {hint}")
        self.set_root(comp, returned)
        self.module.add_computation(comp)
        self.cur = saved
        return comp

    def captures(self, regions: list[RegionNode], scope: Scope) -> list[Key]:
        """Non-constant values the regions capture from `scope`."""
        keys: list[Key] = []
        for r in regions:
            for key, pos in free_values(r):
                if key not in keys and not is_constant(scope.resolve_outer(key, pos)):
                    keys.append(key)
        return keys

    # ---- ops ----------------------------------------------------------------------------------
    def op(self, node: OpNode, scope: Scope) -> None:
        comp = scope.comp
        first = len(comp.instructions)
        try:
            self._op(node, scope)
        except QuantTypeError as e:
            raise self.error(node.pos, f"{node.name}: {e}") from None
        stamp(comp.instructions[first:],
              resolve_loc(node.loc, self.node.locs, LazySpan(partial(self.lex.span, node.pos))))

    def _op(self, node: OpNode, scope: Scope) -> None:
        opcode = self._opcodes.get(node.name)
        if opcode is None:
            opcode = self._opcodes[node.name] = opcode_of(node.name)
        self.cur = scope.comp
        if involves_quant(node) or (opcode in ("uniform_quantize", "uniform_dequantize")
                                    and not ({"result", "operand"} & set(node.attrs))):
            results = import_quantized(self, node, scope, opcode)
            self.bind_results(node, scope, results)
            return
        special = self._specials.get(opcode, _UNKNOWN)
        if special is _UNKNOWN:
            special = self._specials[opcode] = self._special(opcode)
        if special is not None:
            results = special(node, scope)
        else:
            operands = [scope.lookup(r) for r in node.operands]
            self.check_operand_types(node, operands)
            regions = [self.region(r, scope, opcode) for r in node.regions]
            results = self.emit(node, opcode, operands, regions)
        self.bind_results(node, scope, results)

    def _special(self, opcode: str) -> Callable[[OpNode, Scope], list[Instruction]] | None:
        """The import of `opcode` when it has its own (an op_* method, a dynamic op, a chlo
        broadcast, a legalized or sdy op), None for emit's; _op asks once per opcode."""
        if opcode in DYNAMIC_OPS:
            return self.op_dynamic
        if opcode.startswith("chlo.broadcast_"):
            return self.op_chlo_broadcast
        if opcode in LEGALIZE or opcode in sdy.IMPORTERS:  # legalize.py, sdy.py
            return partial(LEGALIZE.get(opcode) or sdy.IMPORTERS[opcode], self)
        return getattr(self, "op_" + opcode.replace(".", "_"), None)

    def check_operand_types(self, node: OpNode, operands: list[Instruction]) -> None:
        types = node.operand_types
        if types is None:
            return
        for t in types:
            if isinstance(t, OpaqueType):
                raise Unimplemented(f"type not supported: {t}")
        if len(types) != len(operands):
            raise self.error(node.pos, f"{node.name} has {len(operands)} operand(s) but its type "
                                       f"lists {len(types)}")
        for i, (o, t) in enumerate(zip(operands, types)):
            if not compatible(o.shape, t):
                raise self.error(node.operands[i].pos,
                                 f"{node.name}: operand {i} ({node.operands[i].name}) has type "
                                 f"{o.shape.to_shlo()} but the op's type says {type_str(t)}")

    def declared_results(self, node: OpNode) -> list[Any]:
        rt = node.result_types or []
        for t in rt:
            if isinstance(t, OpaqueType):
                raise Unimplemented(f"type not supported: {t}")
        n = node.num_results
        if node.operand_types is None and len(rt) > n:  # `: t_operand, t_result` forms
            rt = rt[len(rt) - n:] if n else []
        return rt

    def emit(self, node: OpNode, opcode: str, operands: list[Instruction],
             regions: list[Computation], attrs: Any = None) -> list[Instruction]:
        op = get_op(opcode)
        declared = self.declared_results(node)
        shapes_in = [o.shape for o in operands]
        if attrs is None:
            attrs = build_attrs(opcode, op.attrs, node.attrs, [_as_static(t) for t in declared],
                                shapes_in)
        shape = infer_shape(opcode, shapes_in, attrs, regions)
        instr = self.add(opcode, operands, shape, attrs, regions, node).mark_inferred()
        n = node.num_results
        results = split_results(instr, n)
        if node.result_types is not None and declared:
            shapes = [r.shape for r in results] if n else []
            if len(declared) == len(shapes):
                for i, (s, t) in enumerate(zip(shapes, declared)):
                    if s != t and not compatible(s, t):  # (equal: compatible, quant or not)
                        label = result_type_label(opcode, s, t)  # the spec constraint
                        raise self.error(node.pos, f"{node.name}: result {i} has type "
                                                   f"{s.to_shlo()} but is declared as "
                                                   f"{type_str(t)} ({label})")
        return results

    def bind_results(self, node: OpNode, scope: Scope, values: list[Instruction]) -> None:
        if node.num_results != len(values):
            raise self.error(node.pos, f"{node.name} has {len(values)} result(s) but "
                                       f"{node.num_results} are named")
        i = 0
        for name, count in node.results:
            scope.bind(name, values[i:i + count], node.pos)
            i += count

    # ---- ops with their own import ------------------------------------------------------------
    def op_constant(self, node: OpNode, scope: Scope) -> list[Instruction]:
        value = node.attrs.get("value")
        if not isinstance(value, DenseAttr):
            raise self.error(node.pos, "stablehlo.constant needs a dense<...> value")
        shape = self.static(value.type, node.pos, "constant")
        try:
            arr = dense_to_array(value.body, shape)
        except XlapyError as e:
            raise self.error(value.pos or node.pos, str(e)) from None
        lit = Literal(shape, arr)
        name = node.results[0][0].lstrip("%") if node.results else ""
        return [scope.comp.add(Instruction("constant", [], shape, ConstantAttrs(lit), (), name))]

    def op_call(self, node: OpNode, scope: Scope) -> list[Instruction]:
        callee = node.attrs.get("callee")
        if not isinstance(callee, SymbolRef):
            raise self.error(node.pos, "func.call needs a callee @name")
        operands = [scope.lookup(r) for r in node.operands]
        f = self.funcs.get(callee.name)
        if f is not None and has_dynamic_args(f):
            comp = specialize_call(self, callee.name, operands, node.pos)
        else:
            comp = self.function(callee.name, node.pos)
        want = comp.parameter_shapes
        if [o.shape for o in operands] != want:
            raise self.error(node.pos, f"call to @{callee.name} with "
                                       f"({', '.join(o.shape.to_shlo() for o in operands)}) but it "
                                       f"takes ({', '.join(s.to_shlo() for s in want)})")
        return self.emit(node, "call", operands, [comp], NO_ATTRS)

    def op_composite(self, node: OpNode, scope: Scope) -> list[Instruction]:
        dec = node.attrs.get("decomposition")
        if not isinstance(dec, SymbolRef):
            raise self.error(node.pos, "stablehlo.composite needs decomposition = @name")
        comp = self.function(dec.name, node.pos)
        operands = [scope.lookup(r) for r in node.operands]
        return self.emit(node, "composite", operands, [comp])

    def op_custom_call(self, node: OpNode, scope: Scope) -> list[Instruction]:
        target = node.attrs.get("call_target_name", "")
        operands = [scope.lookup(r) for r in node.operands]
        if target == "stablehlo.dynamic_reduce_window":
            return import_dynamic_reduce_window(self, node, scope, operands)
        if target == "ApproxTopK":
            return import_approx_top_k(self, node, scope, operands)
        if target == "shape_assertion" and not node.results:
            message = node.attrs.get("error_message", "")
            if check_shape_assertion(operands, message if isinstance(message, str) else ""):
                return []
            register_targets()
        if isinstance(target, str) and target.startswith("check.") and target in OPS:
            return self.emit(node, target, operands, [])
        declared = [self.static(t, node.pos, "custom_call result")
                    for t in self.declared_results(node)]
        attrs = dict(node.attrs)
        if isinstance(attrs.get("backend_config"), dict):
            # api_version 4 (typed FFI): a dictionary, the attributes jaxlib otherwise puts
            # in mhlo.backend_config; kept there and printed back under that name.
            attrs.setdefault("mhlo.backend_config", attrs.pop("backend_config"))
        attrs.setdefault("shape", declared[0] if len(declared) == 1 else Shape.tuple(declared))
        op = get_op("custom_call")
        built = build_attrs("custom_call", op.attrs, attrs, [])
        return self.emit(node, "custom_call", operands, [], built)

    def op_while(self, node: OpNode, scope: Scope) -> list[Instruction]:
        if len(node.regions) != 2:
            raise self.error(node.pos, "stablehlo.while needs cond and body regions")
        operands = [scope.lookup(r) for r in node.operands]
        self.check_operand_types(node, operands)
        lift = self.captures(node.regions, scope)
        extra = [scope.resolve_outer(k, node.pos) for k in lift]
        types = [o.shape for o in operands]
        cond = self.region(node.regions[0], scope, "while_cond", lift, arg_types=types)
        body = self.region(node.regions[1], scope, "while_body", lift, arg_types=types)
        if lift:  # the body passes lifted values through
            n = len(node.regions[1].args)
            outs = list(body.root.operands) if body.multi_result else [body.root]
            outs += body.parameters[n:]
            old = body.root
            self.set_root(body, outs)
            if body.multi_result and old.opcode == "tuple" and not old.users:
                body.remove(old)
        if not lift:
            return self.emit(node, "while", operands, [cond, body], NO_ATTRS)
        all_ops = operands + extra
        shape = infer_shape("while", [o.shape for o in all_ops], NO_ATTRS, [cond, body])
        instr = self.add("while", all_ops, shape, NO_ATTRS, [cond, body], node)
        return split_results(instr, len(all_ops))[:len(operands)]

    def op_dynamic(self, node: OpNode, scope: Scope) -> list[Instruction]:
        return import_dynamic(self, node, scope)

    def op_chlo_broadcast(self, node: OpNode, scope: Scope) -> list[Instruction]:
        from xlapy.stablehlo.chlo_import import import_broadcast

        return import_broadcast(self, node, scope)

    def op_chlo_constant_like(self, node: OpNode, scope: Scope) -> list[Instruction]:
        from xlapy.stablehlo.chlo_import import import_constant_like

        return import_constant_like(self, node, scope)

    def add(self, opcode: str, operands: list[Instruction], shape: Shape, attrs: Any,
            regions: list[Computation], node: OpNode) -> Instruction:
        name = node.results[0][0].lstrip("%") if node.results else ""
        instr = Instruction(opcode, operands, shape, attrs, regions, name)
        sdy.attach_sharding(self, instr, node.attrs)
        return self.cur.add(instr)

    def op_case(self, node: OpNode, scope: Scope) -> list[Instruction]:
        return self._branches(node, scope, "case")

    def op_if(self, node: OpNode, scope: Scope) -> list[Instruction]:
        return self._branches(node, scope, "if")

    def _branches(self, node: OpNode, scope: Scope, opcode: str) -> list[Instruction]:
        operands = [scope.lookup(r) for r in node.operands]
        self.check_operand_types(node, operands)
        lift = self.captures(node.regions, scope)
        branches = [self.region(r, scope, opcode, lift, tuple_lift=True) for r in node.regions]
        if lift:
            values = [scope.resolve_outer(k, node.pos) for k in lift]
            packed = scope.comp.add(Instruction("tuple", values,
                                                Shape.tuple([v.shape for v in values])))
            operands = operands + [packed] * len(branches)
        return self.emit(node, opcode, operands, branches, NO_ATTRS)

    def op_interpreter_run_parallel(self, node: OpNode, scope: Scope) -> list[Instruction]:
        programs = node.attrs.get("programs")
        feed = node.attrs.get("infeed", [])
        if not (isinstance(programs, list) and all(
                isinstance(row, list) and all(isinstance(s, SymbolRef) for s in row)
                for row in programs)):
            raise self.error(node.pos, "interpreter.run_parallel needs programs = [[@f, ...]] "
                                       "(a list of lists of function names)")
        if not isinstance(feed, list) or not all(isinstance(s, SymbolRef) for s in feed):
            raise self.error(node.pos, "interpreter.run_parallel needs infeed = [@f, ...]")
        names = [[s.name for s in row] for row in programs]
        infeed = [s.name for s in feed]
        comps = [self.function(n, node.pos) for row in names for n in row]
        comps += [self.function(n, node.pos) for n in infeed]
        from xlapy.stablehlo.check import RunParallelAttrs

        attrs = RunParallelAttrs(tuple(tuple(r) for r in names), tuple(infeed))
        operands = [scope.lookup(r) for r in node.operands]
        return self.emit(node, "interpreter.run_parallel", operands, comps, attrs)


def split_results(instr: Instruction, n: int) -> list[Instruction]:
    """The op's results: itself, or one get_tuple_element per result of a multi-result op."""
    if n == 0:
        return []
    if n == 1:
        return [instr]
    if not instr.shape.is_tuple or len(instr.shape.tuple_shapes) != n:
        raise XlapyError(f"{instr.opcode} has result {instr.shape} but {n} results are named")
    comp = instr.parent
    assert comp is not None
    return [comp.add(Instruction("get_tuple_element", [instr], s, GetTupleElementAttrs(i)))
            for i, s in enumerate(instr.shape.tuple_shapes)]


def _as_static(t: Any) -> Any:
    return t if isinstance(t, Shape) else None


def _clean(e: Exception) -> str:
    return str(e)


def import_module(node: ModuleNode, lex: Lexer, entry: str | None = None,
                  arg_shapes: list[Shape] | None = None) -> Module:
    """Import every function; the entry is `entry`, else `main`, else the only function.

    `arg_shapes` specializes the entry's `?` argument dimensions (`specialize`); functions
    with `?` arguments are imported per call site."""
    imp = Importer(node, lex)
    if entry is not None and entry not in imp.funcs:
        raise ParseError(None, f"{lex.filename}: no function named @{entry} (functions: "
                               f"{', '.join('@' + n for n in imp.funcs) or 'none'})")
    name = entry or ("main" if "main" in imp.funcs else
                     node.funcs[0].name if len(node.funcs) == 1 else None)
    if name is not None and arg_shapes is not None:
        imp.comps[name] = imp.function(name, imp.funcs[name].pos, list(arg_shapes))
    for f in node.funcs:
        if has_dynamic_args(f) and f.name != name:
            continue  # imported per call site with static shapes
        imp.function(f.name, f.pos)
    module = imp.module
    if name is not None:
        module.entry = imp.comps[name]
    module.meta["functions"] = [f.name for f in node.funcs]
    module.meta["visibility"] = {f.name: f.visibility for f in node.funcs}
    module.meta["attributes"] = node.attrs
    for key, attr in (("mhlo.num_replicas", "num_replicas"),
                      ("mhlo.num_partitions", "num_partitions")):
        value = getattr(node.attrs.get(key), "value", node.attrs.get(key))
        if value is not None and not isinstance(value, int):
            raise imp.error(node.pos, f"module attribute {key} must be an integer")
        setattr(module, attr, getattr(module, attr) if value is None else value)
    if problem := process_count_problem(module.num_replicas, module.num_partitions):
        raise imp.error(node.pos, f"module: {problem}")
    return module
