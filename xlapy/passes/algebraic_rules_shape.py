"""Algebraic simplifier rules, part 2: conversions, shape ops, tuples, dynamic slices and
the update shapes of scatters.

All of these move or relabel elements without arithmetic, so every one is bit-exact (except
the convert rows, which may skip a denormal flush on floats).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from xlapy.ir import Instruction
from xlapy.passes.algebraic_rules import Rule, splatted_scalar
from xlapy.passes.hlo_builder import Emitter
from xlapy.types import ElementType


def _op0(i: Instruction) -> Instruction:
    return i.operands[0]


def _lossless(inner: ElementType, wide: ElementType) -> bool:
    """Every value of `inner` survives a round trip through `wide`."""
    if inner == wide:
        return True
    if inner.is_integer and wide.is_integer:
        if inner.is_signed and wide.is_unsigned:
            return False
        extra = 1 if inner.is_unsigned and wide.is_signed else 0
        return wide.bits >= inner.bits + extra
    if inner.is_float and wide.is_float:
        return (inner.hlo_name, wide.hlo_name) in {("f16", "f32"), ("bf16", "f32"),
                                                    ("f16", "f64"), ("bf16", "f64"),
                                                    ("f32", "f64")}
    if inner.is_pred:
        return wide.is_integer
    return False


def _convert_roundtrip(i: Instruction, e: Emitter) -> Instruction | None:
    mid = _op0(i)
    if mid.opcode != "convert":
        return None
    src = _op0(mid)
    if src.shape.element_type != i.shape.element_type:
        return None
    return src if _lossless(src.shape.element_type, mid.shape.element_type) else None


def _transpose_transpose(i: Instruction, e: Emitter) -> Instruction | None:
    inner = _op0(i)
    if inner.opcode != "transpose":
        return None
    outer, first = i.attrs.permutation, inner.attrs.permutation
    perm = tuple(first[p] for p in outer)
    return e.transpose(_op0(inner), permutation=perm)


def _transposed_broadcast(i: Instruction, x: Instruction, e: Emitter) -> Instruction | None:
    """transpose(x, i's permutation) for a broadcast_in_dim x, as a broadcast_in_dim of x's
    operand (None where its dimensions would not stay in order)."""
    if x.opcode != "broadcast_in_dim":
        return None
    perm = i.attrs.permutation
    inv = {p: j for j, p in enumerate(perm)}
    dims = tuple(inv[d] for d in x.attrs.broadcast_dimensions)
    if list(dims) != sorted(dims):
        return None
    return e.broadcast_in_dim(_op0(x), shape=tuple(x.shape.dimensions[p] for p in perm),
                              broadcast_dimensions=dims)


def _transpose_concat(i: Instruction, e: Emitter) -> Instruction | None:
    """transpose(concatenate(broadcasts, d)) => concatenate(broadcasts', perm^-1(d)): jnp.cross
    and moveaxis after jnp.stack(axis=0) build [3, N] and transpose it, a kernel choosing
    the piece per element of its short last dimension (jnp.cross of 256K points: 4.5x
    XLA's time); concatenated along the last dimension it is jnp.stack(axis=-1)'s form."""
    c = _op0(i)
    if c.opcode != "concatenate" or len(c.users) != 1 or \
            any(o.opcode != "broadcast_in_dim" for o in c.operands):
        return None
    parts = [_transposed_broadcast(i, o, e) for o in c.operands]
    if any(p is None for p in parts):
        return None
    return e.concatenate(*parts, dimension=i.attrs.permutation.index(c.attrs.dimension))


def _broadcast_broadcast(i: Instruction, e: Emitter) -> Instruction | None:
    inner = _op0(i)
    if inner.opcode != "broadcast_in_dim":
        return None
    dims = tuple(i.attrs.broadcast_dimensions[d] for d in inner.attrs.broadcast_dimensions)
    return e.broadcast_in_dim(_op0(inner), shape=i.attrs.shape, broadcast_dimensions=dims)


def _is_identity_broadcast(i: Instruction) -> bool:
    return (i.shape.dimensions == _op0(i).shape.dimensions
            and i.attrs.broadcast_dimensions == tuple(range(i.shape.rank)))


def _slice_full(i: Instruction) -> bool:
    a = i.attrs
    return (i.shape.dimensions == _op0(i).shape.dimensions and all(s == 0 for s in
                                                                   a.start_indices)
            and all(st == 1 for st in a.strides))


def _slice_slice(i: Instruction, e: Emitter) -> Instruction | None:
    inner = _op0(i)
    if inner.opcode != "slice":
        return None
    a, b = inner.attrs, i.attrs
    starts, limits, strides = [], [], []
    for d in range(i.shape.rank):
        start = a.start_indices[d] + b.start_indices[d] * a.strides[d]
        stride = a.strides[d] * b.strides[d]
        n = i.shape.dimensions[d]
        if n == 0:  # an empty result: the composed start may lie past the operand's end
            start, stride = 0, 1
        starts.append(start)
        strides.append(stride)
        limits.append(start + (n - 1) * stride + 1 if n else start)
    return e.slice(_op0(inner), start_indices=tuple(starts), limit_indices=tuple(limits),
                   strides=tuple(strides))


def _slice_concat(i: Instruction, e: Emitter) -> Instruction | None:
    """slice(concatenate(A0, A1, ...)) taking elements of one operand only: that operand's
    slice, so the others may die (jnp.argpartition(x, k)[:, :k]: the concatenated rest was
    a second top_k over the whole row, 20 of its 24 ms)."""
    cat = _op0(i)
    if cat.opcode != "concatenate":
        return None
    d, a = cat.attrs.dimension, i.attrs
    n = i.shape.dimensions[d]
    if n == 0:
        return None
    first, last = a.start_indices[d], a.start_indices[d] + (n - 1) * a.strides[d]
    at = 0
    for o in cat.operands:
        size = o.shape.dimensions[d]
        if at <= first and last < at + size:
            starts, limits = list(a.start_indices), list(a.limit_indices)
            starts[d] -= at
            limits[d] = min(limits[d] - at, size)
            return e.slice(o, start_indices=tuple(starts), limit_indices=tuple(limits),
                           strides=tuple(a.strides))
        at += size
    return None


def _concat_flatten(i: Instruction, e: Emitter) -> Instruction | None:
    d = i.attrs.dimension
    if not any(o.opcode == "concatenate" and o.attrs.dimension == d and len(o.users) == 1
               for o in i.operands):
        return None
    flat: list[Instruction] = []
    for o in i.operands:
        if o.opcode == "concatenate" and o.attrs.dimension == d and len(o.users) == 1:
            flat.extend(o.operands)
        else:
            flat.append(o)
    return e.concatenate(*flat, dimension=d)


def _concat_drop_empty(i: Instruction, e: Emitter) -> Instruction | None:
    d = i.attrs.dimension
    keep = [o for o in i.operands if o.shape.dimensions[d] != 0]
    if len(keep) == len(i.operands) or not keep:
        return None
    return keep[0] if len(keep) == 1 else e.concatenate(*keep, dimension=d)


def _dynamic_slice_constant(i: Instruction, e: Emitter) -> Instruction | None:
    operand, *indices = i.operands
    if not all(x.opcode == "constant" for x in indices):
        return None
    sizes = i.attrs.slice_sizes
    starts = [min(max(int(x.attrs.literal.to_numpy()), 0), d - s)
              for x, d, s in zip(indices, operand.shape.dimensions, sizes)]
    return e.slice(operand, start_indices=tuple(starts),
                   limit_indices=tuple(s + n for s, n in zip(starts, sizes)),
                   strides=(1,) * len(sizes))


def _scatter_unit_window(i: Instruction, e: Emitter) -> Instruction | None:
    """scatter(A, I, reshape(U)) whose reshape only adds size-1 update window dims =>
    scatter(A, I, U) with those dims inserted_window_dims instead. XLA's optimized HLO writes
    scatters so (its canonical form, a `bitcast` of the updates); kept, the cpu backend
    would copy the updates into a buffer of the reshaped shape."""
    if len(i.operands) != 3 or i.operands[2].opcode != "reshape":
        return None
    dn = i.attrs.scatter_dimension_numbers
    upd = i.operands[2]
    u = _op0(upd)
    dims = upd.shape.dimensions
    unit = [w for w in dn.update_window_dims if dims[w] == 1]
    kept = tuple(d for k, d in enumerate(dims) if k not in unit)
    if dn.input_batching_dims or not unit or kept != tuple(u.shape.dimensions):
        return None
    operand_window = [d for d in range(i.operands[0].shape.rank)
                      if d not in dn.inserted_window_dims]
    inserted = set(dn.inserted_window_dims)
    inserted.update(operand_window[k] for k, w in enumerate(dn.update_window_dims) if w in unit)
    windows = tuple(w - sum(r < w for r in unit) for w in dn.update_window_dims if w not in unit)
    new = dataclasses.replace(dn, update_window_dims=windows,
                              inserted_window_dims=tuple(sorted(inserted)))
    return e.op("scatter", i.operands[0], i.operands[1], u, called=i.called,
                scatter_dimension_numbers=new, indices_are_sorted=i.attrs.indices_are_sorted,
                unique_indices=i.attrs.unique_indices)


#: Reducers `_reduce_unit` rewrites: one elementwise op of the two parameters.
_UNIT_REDUCERS = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})


def single_op(i: Instruction) -> tuple[str, bool] | None:
    """(opcode, whether its first operand is the accumulator) of a single-input reduce or
    reduce_window whose reducer is one op of `_UNIT_REDUCERS` on its two parameters."""
    if len(i.operands) != 2 or len(i.called) != 1 or not i.shape.is_array:
        return None
    comp = i.called[0]
    root, params = comp.root, comp.parameters
    if root is None or root.opcode not in _UNIT_REDUCERS or len(comp.instructions) != 3 or \
            len(params) != 2 or {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    return root.opcode, root.operands[0] is params[0]


def _reduce_unit(i: Instruction, e: Emitter) -> Instruction | None:
    """A single-input reduce over dimensions of extent 1 only: each result element is the
    reducer applied once, to the init and the one element (a row kernel over such a
    dimension computed it with no vector lanes: attention's backward pass, 5.4 ms)."""
    red = single_op(i)
    if red is None:
        return None
    x, init = i.operands
    if any(x.shape.dimensions[d] != 1 for d in i.attrs.dimensions):
        return None
    dims = tuple(i.shape.dimensions)
    acc = e.broadcast_in_dim(init, shape=dims, broadcast_dimensions=())
    one = e.reshape(x, shape=dims)
    op, first = red  # (the reducer's (accumulator, element) order kept)
    return e.op(op, acc, one) if first else e.op(op, one, acc)


def _reduce_squeeze(i: Instruction, e: Emitter) -> Instruction | None:
    """A single-input reduce whose operand's dimensions after its last longer reduced one all
    have extent 1: the same reduce of the operand without them (the same elements in the same
    order). A kept extent-1 innermost dimension made a full sum a column sum, its accumulator
    a memory cell stored per element: embedding rows of width 1 gathered and summed
    (e[i].sum(0)), 2.4x XLA's time. Other extent-1 dimensions stay (batch-1 attention's
    row reductions are what the batch chains match)."""
    if len(i.operands) != 2 or len(i.called) != 1 or not i.shape.is_array:
        return None
    x, init = i.operands
    dims = x.shape.dimensions
    red = set(i.attrs.dimensions)
    longer = [d for d in red if dims[d] > 1]
    if not longer or max(longer) == len(dims) - 1 or \
            any(n != 1 for n in dims[max(longer) + 1:]):
        return None
    end = max(longer) + 1
    flat = e.reshape(x, shape=tuple(dims[:end]))
    out = e.reduce(flat, init, sorted(d for d in red if d < end), i.called[0])
    return e.reshape(out, shape=tuple(i.shape.dimensions))


def _identity(op: str, t: ElementType) -> object:
    """The identity of reducer `op` on type t (None: none here); +0 for a float sum, what
    JAX pads with (backends/cpu/lanes.identity is the backend's, passes do not import it)."""
    if op in ("add", "or", "xor"):
        return 0
    if op == "multiply":
        return 1
    if op == "and":
        return True if t.is_pred else -1
    if op in ("maximum", "minimum"):
        if t.is_float:
            return -np.inf if op == "maximum" else np.inf
        if t.is_integer:
            info = np.iinfo(t.dtype)
            return info.min if op == "maximum" else info.max
    return None


def _is_value(x: Instruction, v: object) -> bool:
    """A scalar constant holding exactly v (bit for bit in its type)."""
    if x.opcode != "constant" or not x.shape.is_array or x.shape.rank or v is None:
        return False
    got = np.asarray(x.attrs.literal.to_numpy())
    return got.tobytes() == np.asarray(v).astype(got.dtype).tobytes()


def _reduce_window_pad(i: Instruction, e: Emitter) -> Instruction | None:
    """reduce_window(pad(A, p), init) with p and init the reducer's identity, no padding or
    base dilation of its own: the pad's edges and interior become its padding and base
    dilations, whose holes the spec fills with init (the average pool's gradient padded its
    8.9 MB operand in a kernel of its own first: 0.77 ms, XLA 0.58)."""
    red = single_op(i)
    if red is None:
        return None
    x, init = i.operands
    a = i.attrs
    if x.opcode != "pad" or any(d != 1 for d in (a.base_dilations or ())) or \
            any(p != (0, 0) for p in (a.padding or ())):
        return None
    pa = x.attrs
    if min(pa.edge_padding_low + pa.edge_padding_high, default=0) < 0:
        return None
    ident = _identity(red[0], i.shape.element_type)
    if not (_is_value(x.operands[1], ident) and _is_value(init, ident)):
        return None
    return e.op("reduce_window", x.operands[0], init, called=i.called,
                window_dimensions=a.window_dimensions, window_strides=a.window_strides,
                base_dilations=tuple(k + 1 for k in pa.interior_padding),
                window_dilations=a.window_dilations,
                padding=tuple(zip(pa.edge_padding_low, pa.edge_padding_high)))


def _reduce_window_upsample(i: Instruction, e: Emitter) -> Instruction | None:
    """reduce_window whose every window holds exactly one element of its operand (window w,
    base dilation w, padding (w - 1, w - 1), stride and window dilation 1 along every
    dimension) and otherwise holes and padding of init, the reducer's identity: each element
    repeated w times along each dimension, combined once with init (identity op identity is
    identity, so the order does not matter). The average pool's gradient after
    `reduce_window_pad`: a native window loop over 4x the elements, 0.46 ms (XLA ~0.4)."""
    red = single_op(i)
    if red is None:
        return None
    x, init = i.operands
    a, r = i.attrs, x.shape.rank
    w = tuple(a.window_dimensions)
    ones = (1,) * r
    if tuple(a.window_strides or ones) != ones or tuple(a.window_dilations or ones) != ones \
            or tuple(a.base_dilations or ones) != w or \
            tuple(tuple(p) for p in (a.padding or ((0, 0),) * r)) != tuple((k - 1, k - 1)
                                                                           for k in w):
        return None
    if not _is_value(init, _identity(red[0], i.shape.element_type)):
        return None
    dims: list[int] = []
    keep: list[int] = []
    for n, k in zip(x.shape.dimensions, w):
        keep.append(len(dims))
        dims += [n, k] if k > 1 else [n]
    out = tuple(i.shape.dimensions)
    up = e.reshape(e.broadcast_in_dim(x, shape=tuple(dims), broadcast_dimensions=tuple(keep)),
                   shape=out)
    acc = e.broadcast_in_dim(init, shape=out, broadcast_dimensions=())
    op, first = red  # (the reducer's (accumulator, element) order kept)
    return e.op(op, acc, up) if first else e.op(op, up, acc)


SHAPE_RULES: list[Rule] = [
    # convert(A: T -> T) => A
    Rule("convert_same", "convert",
         lambda i, e: _op0(i) if _op0(i).shape.element_type == i.shape.element_type else None,
         float_exact=False),
    # convert(convert(A: T -> W) -> T) => A   (W holds every value of T)
    Rule("convert_roundtrip", "convert", _convert_roundtrip, float_exact=False),
    # bitcast_convert(A: T -> T) => A
    Rule("bitcast_same", "bitcast_convert",
         lambda i, e: _op0(i) if _op0(i).shape.element_type == i.shape.element_type else None),
    # reshape(A) to A's own shape => A
    Rule("reshape_same", "reshape",
         lambda i, e: _op0(i) if _op0(i).shape.dimensions == i.shape.dimensions else None),
    # reshape(reshape(A)) => reshape(A)
    Rule("reshape_reshape", "reshape",
         lambda i, e: e.reshape(_op0(_op0(i)), shape=i.attrs.shape)
         if _op0(i).opcode == "reshape" else None),
    # reshape(broadcast(s)) => broadcast(s)   (s a scalar)
    Rule("reshape_broadcast_scalar", "reshape",
         lambda i, e: e.broadcast_in_dim(splatted_scalar(_op0(i)), shape=i.attrs.shape,
                                         broadcast_dimensions=())
         if splatted_scalar(_op0(i)) is not None else None),
    # transpose(A, identity) => A
    Rule("transpose_identity", "transpose",
         lambda i, e: _op0(i) if i.attrs.permutation == tuple(range(i.shape.rank)) else None),
    # transpose(transpose(A, p), q) => transpose(A, p o q)
    Rule("transpose_transpose", "transpose", _transpose_transpose),
    # transpose(concatenate(broadcast(A_k), d)) => concatenate(broadcast(A_k)', perm^-1(d))
    Rule("transpose_concat", "transpose", _transpose_concat),
    # transpose(broadcast(s)) => broadcast(s)   (s a scalar)
    Rule("transpose_broadcast_scalar", "transpose",
         lambda i, e: e.broadcast_in_dim(splatted_scalar(_op0(i)), shape=i.shape.dimensions,
                                         broadcast_dimensions=())
         if splatted_scalar(_op0(i)) is not None else None),
    # broadcast_in_dim(A) to A's shape with dims 0..r-1 => A
    Rule("broadcast_identity", "broadcast_in_dim",
         lambda i, e: _op0(i) if _is_identity_broadcast(i) else None),
    # broadcast_in_dim(broadcast_in_dim(A)) => broadcast_in_dim(A)
    Rule("broadcast_broadcast", "broadcast_in_dim", _broadcast_broadcast),
    # slice(A) covering all of A => A
    Rule("slice_full", "slice", lambda i, e: _op0(i) if _slice_full(i) else None),
    # slice(slice(A)) => slice(A)
    Rule("slice_slice", "slice", _slice_slice),
    # slice(concatenate(A, B, ...)) within one operand => slice(that operand)
    Rule("slice_concat", "slice", _slice_concat),
    # slice(broadcast(s)) => broadcast(s)   (s a scalar)
    Rule("slice_broadcast_scalar", "slice",
         lambda i, e: e.broadcast_in_dim(splatted_scalar(_op0(i)), shape=i.shape.dimensions,
                                         broadcast_dimensions=())
         if splatted_scalar(_op0(i)) is not None else None),
    # pad(A, v) with no padding => A
    Rule("pad_nothing", "pad",
         lambda i, e: _op0(i) if not any(i.attrs.edge_padding_low + i.attrs.edge_padding_high
                                         + i.attrs.interior_padding) else None),
    # concatenate(A) => A
    Rule("concat_single", "concatenate",
         lambda i, e: _op0(i) if len(i.operands) == 1 else None),
    # concatenate(concatenate(A, B), C) => concatenate(A, B, C)   (same dimension)
    Rule("concat_flatten", "concatenate", _concat_flatten),
    # concatenate(A, empty, B) => concatenate(A, B)
    Rule("concat_drop_empty", "concatenate", _concat_drop_empty),
    # scatter(A, I, reshape(U) adding unit window dims) => scatter(A, I, U)
    Rule("scatter_unit_window", "scatter", _scatter_unit_window),
    # reverse(reverse(A, d), d) => A
    Rule("reverse_reverse", "reverse",
         lambda i, e: _op0(_op0(i)) if _op0(i).opcode == "reverse"
         and sorted(_op0(i).attrs.dimensions) == sorted(i.attrs.dimensions) else None),
    # reverse(A, dims of size <= 1) => A
    Rule("reverse_trivial", "reverse",
         lambda i, e: _op0(i) if all(i.shape.dimensions[d] <= 1 for d in i.attrs.dimensions)
         else None),
    # get_tuple_element(tuple(A0, A1, ...), k) => Ak
    Rule("gte_tuple", "get_tuple_element",
         lambda i, e: _op0(i).operands[i.attrs.index] if _op0(i).opcode == "tuple" else None),
    # dynamic_slice(broadcast(s), starts) => broadcast(s)   (s a scalar: every window is s)
    Rule("dynamic_slice_broadcast_scalar", "dynamic_slice",
         lambda i, e: e.broadcast_in_dim(splatted_scalar(_op0(i)), shape=i.shape.dimensions,
                                         broadcast_dimensions=())
         if splatted_scalar(_op0(i)) is not None else None),
    # dynamic_slice(A, constant starts) => slice(A)   (starts clamped as at run time)
    Rule("dynamic_slice_constant", "dynamic_slice", _dynamic_slice_constant),
    # reduce(A, init) over dimensions of extent 1 => op(broadcast(init), reshape(A))
    Rule("reduce_unit_dims", "reduce", _reduce_unit),
    # reduce(A, dims) with A's dimensions after the last longer reduced one all extent 1
    #   => reshape(reduce(reshape(A) without them, the same dims))
    Rule("reduce_squeeze_units", "reduce", _reduce_squeeze),
    # reduce_window(pad(A, identity), identity) => reduce_window(A) padded and base-dilated
    Rule("reduce_window_pad", "reduce_window", _reduce_window_pad),
    # reduce_window(A) whose windows each hold one element of A, the rest identity
    #   => op(identity, upsample(A))
    Rule("reduce_window_upsample", "reduce_window", _reduce_window_upsample),
    # dynamic_update_slice(A, U, starts) with U as big as A => U
    Rule("dus_full", "dynamic_update_slice",
         lambda i, e: i.operands[1] if i.operands[1].shape.dimensions == i.shape.dimensions
         else None),
]
