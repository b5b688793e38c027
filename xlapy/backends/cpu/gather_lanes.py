"""One-element gathers with the kernel's lanes along a batch dimension: each lane reads its
own operand element, one `llvm.masked.gather` per vector (vpgatherdd/qps on AVX2 and
AVX-512), the starts clamped per lane as the scalar path clamps them (index_emit.py).

Why: a gather whose lane dimension was a batch dimension kept the whole kernel scalar
(lanes.LaneCheck), and LLVM's vectorizer did not vectorize its loop either: t[i] of 1M
indices into a 64-entry table ran 0.52 ms (now 0.36; XLA 0.6), and searchsorted's loop
(jnp.histogram, jnp.digitize, jnp.interp) compared its values with the knots it gathers
one element at a time (1.3x XLA's time, now 0.45). Only gathers of single elements of a
leaf (every slice size 1: offset dimensions, if any, have one element) take this path;
their element types are 32 or 64 bits wide. Operand batching dimensions (jnp.take_along_axis
pairs the operand's rows with the index rows) add the output's own index there, uniform
along lanes that run elsewhere (take_along's 1024 x 512 on Zen 4: 378 -> 294 us, XLA 265).
The lanes' pointers are one vector GEP of 32-bit element offsets off a scalar base (the
uniform terms): one vgatherdps of base + 4 * index, where 64-bit addresses took two
vgatherqps and the 64-bit multiply-adds making them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import Lane, vector_width
from xlapy.backends.cpu.llvm_util import I1, I32, I64, broadcast, intrinsic, splat
from xlapy.ir import Instruction
from xlapy.ops.indexing import batch_dims_of_indices


def eligible(instr: Instruction, leaves: dict[int, int], p: int) -> bool:
    """A gather of single elements of a leaf (every slice size 1, no operand batching) by one
    start index, along an output dimension p of at least a vector: lanes along a short
    dimension are mostly masked off (a lookup table over an image's 3 channels went 0.71
    -> 2.66 ms on Zen 4, whose gathers load slower than scalar loads). Several start
    components (x[i, j]) add their clamped starts times their strides: the index operand's
    LaneCheck refuses components read with a stride (a leaf [n, 2]), and JAX builds its
    pair of index vectors by a concatenate the kernel reads lane by lane (x[i, j] of 65536
    pairs into 512 x 512: 80-137 -> 43-61 us, XLA 71)."""
    operand = instr.operands[0]
    dn = instr.attrs.dimension_numbers
    et = instr.shape.element_type
    dims = operand.shape.dimensions
    return (id(operand) in leaves
            and index_dim(instr, p) not in dn.start_indices_batching_dims
            and all(s == 1 for s in instr.attrs.slice_sizes) and operand.shape.num_elements > 0
            and sum(dims[d] > 1 for d in dn.start_index_map) >= 1
            and instr.shape.dimensions[p] >= vector_width()
            and et.bits in (32, 64) and not et.is_complex and not et.is_pred)


#: Operands of at most this many elements are gathered by 32-bit element offsets.
I32_ELEMENTS = (1 << 31) - 1


class _VectorGEP(ir.Instruction):
    """`getelementptr inbounds T, T* base, <w x i32> off`: a vector of element pointers off
    one scalar base (llvmlite's gep takes scalar indices only)."""

    def __init__(self, parent: ir.Block, base: ir.Value, off: ir.Value, name: str = "") -> None:
        super().__init__(parent, ir.VectorType(base.type, off.type.count), "getelementptr",
                         [base, off], name=name)

    def descr(self, buf: list[str]) -> None:
        base, off = self.operands
        buf.append(f"getelementptr inbounds {base.type.pointee}, {base.type} "
                   f"{base.get_reference()}, {off.type} {off.get_reference()}\n")


def element_pointers(b: ir.IRBuilder, base: ir.Value, terms: list[ir.Value], w: int
                      ) -> ir.Value:
    """Pointers base + sum(terms) (element offsets, each below I32_ELEMENTS, their sum too):
    the uniform terms move the scalar base, the per-lane ones are summed in 32 bits, so
    LLVM selects one vgatherdps/vpgatherdd of base + 4 * index for 16 lanes, not two
    vgatherqps of 64-bit addresses and the 64-bit multiply-adds making them."""
    lanes = [t for t in terms if isinstance(t.type, ir.VectorType)]
    for t in terms:
        if not isinstance(t.type, ir.VectorType):
            base = b.gep(base, [t], inbounds=True)
    off = b.trunc(lanes[0], ir.VectorType(I32, w))
    for t in lanes[1:]:
        off = b.add(off, b.trunc(t, ir.VectorType(I32, w)), flags=["nuw", "nsw"])
    instr = _VectorGEP(b.block, base, off, b.block.scope.deduplicate("gather.at"))
    b._insert(instr)
    return instr


def _batch(instr: Instruction) -> list[int]:
    """The gather's output dimensions that are batch (not offset) dimensions."""
    offset = set(instr.attrs.dimension_numbers.offset_dims)
    return [r for r in range(instr.shape.rank) if r not in offset]


def index_dim(instr: Instruction, p: int) -> int:
    """The start-index tensor's dimension that the gather's batch output dimension p walks."""
    dn = instr.attrs.dimension_numbers
    return batch_dims_of_indices(instr.operands[1].shape.rank,
                                 dn.index_vector_dim)[_batch(instr).index(p)]


def emit(em: Any, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
    """The gathered elements at output index idx (a Lane among them) on emitter `em`."""
    from xlapy.backends.cpu.index_emit import clamp_start  # (it imports this module)

    b: ir.IRBuilder = em.b
    operand, indices = instr.operands
    dn = instr.attrs.dimension_numbers
    srank, ivd = indices.shape.rank, dn.index_vector_dim
    ibatch = dict(zip(batch_dims_of_indices(srank, ivd), [idx[r] for r in _batch(instr)]))
    dims = operand.shape.dimensions
    it = indices.shape.element_type
    terms: list[ir.Value] = []  # each start times its dimension's stride, scalar or vector
    stride = 1
    paired = dict(zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
    for d in reversed(range(operand.shape.rank)):
        if d in paired:  # (the output's own index there: uniform along the lanes, eligible)
            terms.append(b.mul(ibatch[paired[d]], ir.Constant(I64, stride)))
        elif d in dn.start_index_map and dims[d] > 1:
            k = list(dn.start_index_map).index(d)
            at = [ibatch[j] if j != ivd else ir.Constant(I64, k) for j in range(srank)]
            start = clamp_start(b, em._at(indices, at), it, dims[d] - 1)
            terms.append(start if stride == 1 else b.mul(start, splat(start.type, stride)))
        stride *= dims[d]
    et = instr.shape.element_type
    base = em.ptr(em.leaves[id(operand)], et)
    vt = next((t.type for t in terms if isinstance(t.type, ir.VectorType)), None)
    if vt is None:  # the starts are uniform along the lanes: one element
        off = terms[0] if terms else ir.Constant(I64, 0)
        for t in terms[1:]:
            off = b.add(off, t)
        return ew.from_storage(b, b.load(b.gep(base, [off], inbounds=True)), et)
    w = vt.count
    st = ew.storage_type(et)
    if operand.shape.num_elements <= I32_ELEMENTS:
        ptrs = element_pointers(b, base if base.type == st.as_pointer()
                                 else b.bitcast(base, st.as_pointer()), terms, w)
    else:
        off = broadcast(b, b.ptrtoint(base, I64), w)
        nbytes = et.bits // 8
        for t in terms:
            off = b.add(off, b.mul(broadcast(b, t, w), splat(vt, nbytes)))
        ptrs = b.inttoptr(off, ir.VectorType(st.as_pointer(), w))
    live = next(v for v in idx if isinstance(v, Lane)).live or w
    return ew.from_storage(b, masked_gather(b, ptrs, st, live), et)


def masked_gather(b: ir.IRBuilder, ptrs: ir.Value, st: ir.Type, live: int) -> ir.Value:
    """The values of storage type st at the w pointers `ptrs` (a vector), the first `live`
    lanes loaded (llvm.masked.gather), the others undefined."""
    w = ptrs.type.count
    mask = ir.Constant(ir.VectorType(I1, w), [1 if k < live else 0 for k in range(w)])
    bits = {"float": 32, "double": 64, "half": 16}.get(str(st))
    name = f"f{bits}" if bits else f"i{st.width}"
    out = ir.VectorType(st, w)
    nbytes = max((bits or st.width) // 8, 1)
    return intrinsic(b, f"llvm.masked.gather.v{w}{name}.v{w}p0{name}", out,
                     [ptrs, ir.Constant(I32, nbytes), mask, ir.Constant(out, None)])


__all__ = ["element_pointers", "eligible", "emit", "index_dim", "masked_gather"]
