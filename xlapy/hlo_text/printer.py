"""Print any xlapy Module as HloModule text that `parse_hlo_module` reads back.

Each op's attributes are written in XLA's spelling (the inverse of `opcodes.py`); shapes keep
their layouts when they have one. Names are made valid and unique (computations per module,
instructions per computation). A computation whose root tuple stands for several results
(`multi_result`) marks its ROOT with `frontend_attributes={xlapy_multi_result="true"}`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from xlapy.errors import Unimplemented
from xlapy.hlo_text.attrs import format_dim_labels, format_window
from xlapy.hlo_text.importer import MULTI_RESULT_MARK
from xlapy.hlo_text.opcodes import CUSTOM_CALL_API, FUSION_KINDS, RNG_ALGORITHMS, RNG_DISTRIBUTIONS
from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.base import OPS, NoAttrs
from xlapy.types import Literal, Shape
from xlapy.types.literal import format_array

_VALID = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
Writer = Callable[[Instruction, Callable[[Computation], str]], tuple[str, list[str]]]
WRITERS: dict[str, Writer] = {}


def writes(*ops: str) -> Callable[[Writer], Writer]:
    def deco(fn: Writer) -> Writer:
        for op in ops:
            WRITERS[op] = fn
        return fn
    return deco


def ints(vals: Any) -> str:
    return "{" + ",".join(str(int(v)) for v in vals) + "}"


def _b(v: bool) -> str:
    return "true" if v else "false"


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _plain(hlo: str) -> Writer:
    return lambda i, name: (hlo, [])


for _op in list(OPS):
    if OPS[_op].attrs is NoAttrs and OPS[_op].num_regions == 0:
        WRITERS[_op] = _plain(OPS[_op].hlo_name or _op)


def _key(table: dict[str, Any], value: Any) -> str:
    return next(k for k, v in table.items() if v == value)


@writes("broadcast_in_dim")
def _broadcast(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "broadcast", [f"dimensions={ints(i.attrs.broadcast_dimensions)}"]


@writes("reshape", "convert", "bitcast_convert", "iota_shape_only")
def _from_shape(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return OPS[i.opcode].hlo_name or i.opcode, []


@writes("transpose")
def _transpose(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "transpose", [f"dimensions={ints(i.attrs.permutation)}"]


@writes("reverse")
def _reverse(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "reverse", [f"dimensions={ints(i.attrs.dimensions)}"]


@writes("slice")
def _slice(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    parts = [f"[{s}:{e}:{t}]" for s, e, t in zip(a.start_indices, a.limit_indices, a.strides)]
    return "slice", ["slice={" + ", ".join(parts) + "}"]


@writes("dynamic_slice")
def _dynamic_slice(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "dynamic-slice", [f"dynamic_slice_sizes={ints(i.attrs.slice_sizes)}"]


@writes("concatenate")
def _concatenate(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "concatenate", [f"dimensions={{{i.attrs.dimension}}}"]


@writes("pad")
def _pad(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    p = "x".join(f"{lo}_{hi}_{it}" if it else f"{lo}_{hi}" for lo, hi, it in
                 zip(a.edge_padding_low, a.edge_padding_high, a.interior_padding))
    return "pad", [f"padding={p}"]


@writes("iota")
def _iota(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "iota", [f"iota_dimension={i.attrs.iota_dimension}"]


@writes("get_tuple_element")
def _gte(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "get-tuple-element", [f"index={i.attrs.index}"]


@writes("compare")
def _compare(i: Instruction, name: Any) -> tuple[str, list[str]]:
    out = [f"direction={i.attrs.comparison_direction.name}"]
    if i.attrs.compare_type is not None:
        out.append(f"type={i.attrs.compare_type.name}")
    return "compare", out


@writes("reduce_precision")
def _reduce_precision(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "reduce-precision", [f"exponent_bits={i.attrs.exponent_bits}",
                                f"mantissa_bits={i.attrs.mantissa_bits}"]


@writes("get_dimension_size", "set_dimension_size")
def _dimension_size(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return OPS[i.opcode].hlo_name or i.opcode, [f"dimensions={{{i.attrs.dimension}}}"]


@writes("reduce")
def _reduce(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "reduce", [f"dimensions={ints(i.attrs.dimensions)}", f"to_apply={name(i.called[0])}"]


@writes("reduce_window")
def _reduce_window(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    w = format_window(a.window_dimensions, a.window_strides, a.padding, a.base_dilations,
                      a.window_dilations)
    return "reduce-window", [f"window={w}", f"to_apply={name(i.called[0])}"]


@writes("select_and_scatter")
def _select_and_scatter(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    w = format_window(a.window_dimensions, a.window_strides, a.padding)
    return "select-and-scatter", [f"window={w}", f"select={name(i.called[0])}",
                                  f"scatter={name(i.called[1])}"]


@writes("sort")
def _sort(i: Instruction, name: Any) -> tuple[str, list[str]]:
    d = i.attrs.dimension
    if d < 0:
        d += i.operands[0].shape.rank
    out = [f"dimensions={{{d}}}"]
    if i.attrs.is_stable:
        out.append("is_stable=true")
    return "sort", out + [f"to_apply={name(i.called[0])}"]


@writes("map")
def _map(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "map", [f"dimensions={ints(i.attrs.dimensions)}", f"to_apply={name(i.called[0])}"]


@writes("while")
def _while(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "while", [f"condition={name(i.called[0])}", f"body={name(i.called[1])}"]


@writes("call")
def _call(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "call", [f"to_apply={name(i.called[0])}"]


@writes("case")
def _case(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "conditional", ["branch_computations={" + ", ".join(name(c) for c in i.called) + "}"]


@writes("if")
def _if(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "conditional", [f"true_computation={name(i.called[0])}",
                           f"false_computation={name(i.called[1])}"]


@writes("fusion")
def _fusion(i: Instruction, name: Any) -> tuple[str, list[str]]:
    kind = getattr(getattr(i.attrs, "kind", None), "name", "LOOP")
    hlo_kind = next((k for k, v in FUSION_KINDS.items() if v == kind), "kLoop")
    return "fusion", [f"kind={hlo_kind}", f"calls={name(i.called[0])}"]


def _precision(a: Any) -> list[str]:
    if not a.precision_config:
        return []
    return ["operand_precision={" + ",".join(p.name.lower() for p in a.precision_config) + "}"]


@writes("dot_general")
def _dot(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    out = []
    for key, vals in (("lhs_batch_dims", a.lhs_batching_dimensions),
                      ("rhs_batch_dims", a.rhs_batching_dimensions),
                      ("lhs_contracting_dims", a.lhs_contracting_dimensions),
                      ("rhs_contracting_dims", a.rhs_contracting_dimensions)):
        if vals:
            out.append(f"{key}={ints(vals)}")
    return "dot", out + _precision(a)


@writes("convolution")
def _convolution(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    dn = a.dimension_numbers
    kernel = i.operands[1].shape.dimensions
    size = tuple(kernel[d] for d in dn.kernel_spatial_dimensions)
    w = format_window(size, a.window_strides, a.padding, a.lhs_dilation, a.rhs_dilation,
                      a.window_reversal)
    out = [f"window={w}", f"dim_labels={format_dim_labels(dn)}"]
    if a.feature_group_count != 1:
        out.append(f"feature_group_count={a.feature_group_count}")
    if a.batch_group_count != 1:
        out.append(f"batch_group_count={a.batch_group_count}")
    return "convolution", out + _precision(a)


@writes("fft")
def _fft(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "fft", [f"fft_type={i.attrs.fft_type.name}", f"fft_length={ints(i.attrs.fft_length)}"]


@writes("triangular_solve")
def _triangular_solve(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    return "triangular-solve", [f"left_side={_b(a.left_side)}", f"lower={_b(a.lower)}",
                                f"unit_diagonal={_b(a.unit_diagonal)}",
                                f"transpose_a={a.transpose_a.name}"]


@writes("cholesky")
def _cholesky(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "cholesky", [f"lower={_b(i.attrs.lower)}"]


@writes("batch_norm_training", "batch_norm_inference", "batch_norm_grad")
def _batch_norm(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return i.opcode.replace("_", "-"), [f"epsilon={i.attrs.epsilon!r}",
                                        f"feature_index={i.attrs.feature_index}"]


@writes("gather")
def _gather(i: Instruction, name: Any) -> tuple[str, list[str]]:
    d = i.attrs.dimension_numbers
    out = [f"offset_dims={ints(d.offset_dims)}",
           f"collapsed_slice_dims={ints(d.collapsed_slice_dims)}",
           f"start_index_map={ints(d.start_index_map)}"]
    if d.operand_batching_dims:
        out += [f"operand_batching_dims={ints(d.operand_batching_dims)}",
                f"start_indices_batching_dims={ints(d.start_indices_batching_dims)}"]
    out += [f"index_vector_dim={d.index_vector_dim}",
            f"slice_sizes={ints(i.attrs.slice_sizes)}"]
    if i.attrs.indices_are_sorted:
        out.append("indices_are_sorted=true")
    return "gather", out


@writes("scatter")
def _scatter(i: Instruction, name: Any) -> tuple[str, list[str]]:
    d = i.attrs.scatter_dimension_numbers
    out = [f"update_window_dims={ints(d.update_window_dims)}",
           f"inserted_window_dims={ints(d.inserted_window_dims)}",
           f"scatter_dims_to_operand_dims={ints(d.scatter_dims_to_operand_dims)}"]
    if d.input_batching_dims:
        out += [f"input_batching_dims={ints(d.input_batching_dims)}",
                f"scatter_indices_batching_dims={ints(d.scatter_indices_batching_dims)}"]
    out.append(f"index_vector_dim={d.index_vector_dim}")
    if i.attrs.indices_are_sorted:
        out.append("indices_are_sorted=true")
    if i.attrs.unique_indices:
        out.append("unique_indices=true")
    return "scatter", out + [f"to_apply={name(i.called[0])}"]


@writes("rng")
def _rng(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "rng", [f"distribution={_key(RNG_DISTRIBUTIONS, i.attrs.rng_distribution)}"]


@writes("rng_bit_generator")
def _rng_bit_generator(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "rng-bit-generator", [f"algorithm={_key(RNG_ALGORITHMS, i.attrs.rng_algorithm)}"]


@writes("custom_call")
def _custom_call(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    out = [f"custom_call_target={_quote(a.call_target_name)}"]
    if a.has_side_effect:
        out.append("custom_call_has_side_effect=true")
    if a.backend_config:
        out.append(f"backend_config={_quote(a.backend_config)}")
    if a.api_version != 1:
        out.append(f"api_version={_key(CUSTOM_CALL_API, a.api_version)}")
    if i.called:
        out.append("called_computations={" + ", ".join(name(c) for c in i.called) + "}")
    return "custom-call", out


@writes("chlo.top_k")
def _top_k(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "topk", [f"k={i.attrs.k}", f"largest={_b(i.attrs.largest)}"]


@writes("infeed")
def _infeed(i: Instruction, name: Any) -> tuple[str, list[str]]:
    cfg = i.attrs.infeed_config
    return "infeed", [f"infeed_config={_quote(cfg)}"] if cfg else []


@writes("outfeed")
def _outfeed(i: Instruction, name: Any) -> tuple[str, list[str]]:
    cfg = i.attrs.outfeed_config
    return "outfeed", [f"outfeed_config={_quote(cfg)}"] if cfg else []


def _common(a: Any) -> list[str]:
    out = []
    if getattr(a, "replica_groups", ()):  # collective_permute has none
        out.append("replica_groups={" + ",".join(ints(g) for g in a.replica_groups) + "}")
    if a.channel_id:
        out.append(f"channel_id={a.channel_id}")
    if getattr(a, "use_global_device_ids", False):
        out.append("use_global_device_ids=true")
    return out


@writes("all_reduce")
def _all_reduce(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "all-reduce", _common(i.attrs) + [f"to_apply={name(i.called[0])}"]


@writes("all_gather")
def _all_gather(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "all-gather", [f"dimensions={{{i.attrs.all_gather_dim}}}"] + _common(i.attrs)


@writes("reduce_scatter")
def _reduce_scatter(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "reduce-scatter", ([f"dimensions={{{i.attrs.scatter_dimension}}}"] + _common(i.attrs)
                              + [f"to_apply={name(i.called[0])}"])


@writes("all_to_all")
def _all_to_all(i: Instruction, name: Any) -> tuple[str, list[str]]:
    a = i.attrs
    if a.split_dimension != a.concat_dimension:
        raise Unimplemented("HLO text all-to-all needs split_dimension == concat_dimension")
    return "all-to-all", [f"dimensions={{{a.split_dimension}}}"] + _common(a)


@writes("collective_permute")
def _collective_permute(i: Instruction, name: Any) -> tuple[str, list[str]]:
    pairs = ",".join(ints(p) for p in i.attrs.source_target_pairs)
    out = ["source_target_pairs={" + pairs + "}"]
    return "collective-permute", out + _common(i.attrs)


@writes("collective_broadcast")
def _collective_broadcast(i: Instruction, name: Any) -> tuple[str, list[str]]:
    return "collective-broadcast", _common(i.attrs)


# ---- module printing -----------------------------------------------------------------------------
def literal_text(lit: Literal) -> str:
    if lit.shape.is_tuple:
        return "(" + ", ".join(literal_text(e) for e in lit.elements) + ")"
    return format_array(lit.to_numpy())


def _sig_shape(s: Shape) -> str:
    if s.is_tuple:
        return "(" + ", ".join(_sig_shape(t) for t in s.tuple_shapes) + ")"
    return str(Shape(s.element_type, s.dimensions)) if s.is_array else str(s)


class _Names:
    """Valid, unique names: `%add.1` stays; others get a cleaned spelling and a suffix."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.of: dict[int, str] = {}

    def __call__(self, obj: Any, hint: str) -> str:
        if id(obj) in self.of:
            return self.of[id(obj)]
        base = hint if _VALID.match(hint) else (re.sub(r"[^A-Za-z0-9_.\-]", "_", hint) or "v")
        if not re.match(r"[A-Za-z_]", base):
            base = "v" + base
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}.{k}"
        self.taken.add(name)
        self.of[id(obj)] = name
        return name


    def fresh(self, hint: str) -> str:
        """A unique name that no object keeps (the start of a send/recv pair)."""
        base = hint if _VALID.match(hint) else "v"
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}.{k}"
        self.taken.add(name)
        return name


def _channel_pair(instr: Instruction, names: _Names, root: bool) -> str:
    """The IR's send/recv as XLA's start + done pair: `send` -> (payload, u32[], token[]),
    `send-done` -> token[]; `recv` -> the same triple, `recv-done` -> (payload, token[])."""
    a = instr.attrs
    if instr.opcode == "send":
        if len(instr.operands) != 2 or not instr.operands[0].shape.is_array:
            raise Unimplemented("HLO text send takes one array payload")
        payload = instr.operands[0].shape
    else:
        if len(a.result_shapes) != 2 or not a.result_shapes[0].is_array:
            raise Unimplemented("HLO text recv gives one array payload")
        payload = a.result_shapes[0]
    chan = [f"channel_id={a.channel_handle.handle}"]
    if a.is_host_transfer:
        chan.append("is_host_transfer=true")
    meta = [f"{k}={v}" for k, v in instr.meta.get("hlo_attrs", {}).items()]
    done = names(instr, instr.name)
    start = names.fresh(instr.meta.get("hlo_start_name", f"{done}.start"))
    args = ", ".join(f"%{names(o, o.name)}" for o in instr.operands)
    triple = f"({payload}, u32[], token[])"
    done_shape = "token[]" if instr.opcode == "send" else str(instr.shape)
    return (f"  %{start} = {triple} {instr.opcode}({args}), " + ", ".join(chan + meta) + "\n"
            + f"  {'ROOT ' if root else ''}%{done} = {done_shape} {instr.opcode}-done(%{start}), "
            + ", ".join(chan))


def print_instruction(instr: Instruction, names: _Names, comp_name: Callable[[Computation], str],
                      root: bool, multi: bool) -> str:
    if instr.opcode in ("send", "recv"):
        return _channel_pair(instr, names, root)
    writer = WRITERS.get(instr.opcode)
    if instr.opcode == "parameter":
        opcode, args, extra = "parameter", str(instr.parameter_number), []
    elif instr.opcode == "constant":
        opcode, args, extra = "constant", literal_text(instr.attrs.literal), []
    elif writer is None:
        raise Unimplemented(f"op {instr.opcode} has no HLO text form")
    else:
        opcode, extra = writer(instr, comp_name)
        operands = instr.operands[:2] if instr.opcode == "rng" else instr.operands
        args = ", ".join(f"%{names(o, o.name)}" for o in operands)
    meta = dict(instr.meta.get("hlo_attrs", {}))
    if root and multi:
        meta["frontend_attributes"] = "{" + MULTI_RESULT_MARK + "}"
    extra = extra + [f"{k}={v}" for k, v in meta.items()]
    tail = "".join(", " + e for e in extra)
    prefix = "ROOT " if root else ""
    return f"  {prefix}%{names(instr, instr.name)} = {instr.shape} {opcode}({args}){tail}"


def _implicit(i: Instruction) -> bool:
    """A constant that only gives rng its result shape (HLO's rng takes it from the result)."""
    return (i.opcode == "constant" and i is not (i.parent.root if i.parent else None)
            and bool(i.users) and all(u.opcode == "rng" and u.operands.index(i) == 2
                                      for u in i.users))


def print_computation(comp: Computation, comp_name: Callable[[Computation], str],
                      entry: bool) -> str:
    names = _Names()
    for p in comp.parameters:
        names(p, p.name)
    params = ", ".join(f"{names(p, p.name)}: {_sig_shape(p.shape)}" for p in comp.parameters)
    head = f"{'ENTRY ' if entry else ''}%{comp_name(comp)} ({params}) -> " \
           f"{_sig_shape(comp.result_shape)} {{"
    body = [print_instruction(i, names, comp_name, i is comp.root, comp.multi_result)
            for i in comp.post_order() if not _implicit(i)]
    return "\n".join([head, *body, "}"])


def print_hlo_module(module: Module) -> str:
    """HloModule text: callees before callers, the entry last and marked ENTRY."""
    cnames = _Names()
    for c in module.computations:
        cnames(c, c.name)

    def comp_name(c: Computation) -> str:
        return "%" + cnames(c, c.name)

    head = f"HloModule {_Names()(module, module.name)}"
    if module.num_replicas != 1:
        head += f", replica_count={module.num_replicas}"
    if module.num_partitions != 1:
        head += f", num_partitions={module.num_partitions}"
    # The header's other attributes as read (is_scheduled, allow_spmd_..., ...).
    head += "".join(f", {k}={v}" for k, v in dict(module.meta.get("hlo_attrs", {})).items())
    parts = [head]
    for c in module.post_order():
        parts.append(print_computation(c, lambda x: comp_name(x).lstrip("%"),
                                       c is module.entry))
    return "\n\n".join(parts) + "\n"
