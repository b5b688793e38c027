"""GPU kernels: the cpu backend's per-index emitters (kernels.KernelEmitter: element-wise
ops, data movement, index ops; elementwise.py per element) inside GPU loop structures.

Every kernel has the cpu kernel signature `void(i8** buffers, i64 begin, i64 end)` as a
`ptx_kernel`: `buffers` is a device array of device pointers (one per slot), [begin, end)
the range of work items it covers, walked grid-stride (item = begin + global thread id,
step = threads in the grid), so any launch shape covers it. Three shapes of work:

* elements: one item per output element (its index delinearized from the item);
* row reduction (`Launch.BLOCK`): the reduced dimensions are the trailing ones (a row, or
  the whole array: a full reduction): one block per output element; each thread folds a
  strided part of the row, the warp combines with `shfl.sync.bfly`, the warps through
  shared memory, thread 0 adds the init value and stores;
* other reductions (columns, leading dimensions): one thread per output element, folding
  its elements in order (consecutive threads read consecutive addresses when the kept
  dimensions are the inner ones).

Math goes through libdevice (libdevice.py); the cpu target is pinned to one with no
AVX-512 while emitting (math_poly would otherwise emit x86 intrinsics).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.kernels import KernelEmitter
from xlapy.backends.cpu.llvm_util import I32, I64, for_range, i64, intrinsic
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.backends.gpu import libdevice
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Threads per block.
BLOCK = 256
WARP = 32
#: Blocks at most per launch (the grid-stride loops cover the rest).
MAX_GRID = 1 << 16
I1 = ir.IntType(1)
#: Reduced elements below which a row reduction runs one thread per output element.
MIN_BLOCK_ROW = 64


class Launch(enum.Enum):
    ELEMENTS = "elements"  # one thread per item
    BLOCK = "block"  # one block per item (row reductions)


@dataclass
class GpuKernel:
    """A kernel's interface: its name, the slots it reads and writes, how many items its
    [begin, end) range holds and how they map to threads."""

    name: str
    root: Instruction
    inputs: list[int]
    output: int
    items: int
    launch: Launch

    def grid(self) -> tuple[int, int]:
        """(blocks, threads per block) of a launch covering every item."""
        if self.launch is Launch.BLOCK:
            return max(1, min(self.items, MAX_GRID)), BLOCK
        return max(1, min(-(-self.items // BLOCK), MAX_GRID)), BLOCK


def sreg(b: ir.IRBuilder, name: str) -> ir.Value:
    """A PTX special register (tid.x, ctaid.x, ntid.x, nctaid.x) as i64."""
    return b.zext(intrinsic(b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, []), I64)


@contextlib.contextmanager
def strided(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: ir.Value,
            name: str) -> Iterator[ir.Value]:
    """`for (i = start; i < stop; i += step)` with a run-time step (grid-stride loops)."""
    pre = b.block
    body = b.function.append_basic_block(f"{name}.body")
    done = b.function.append_basic_block(f"{name}.end")
    b.cbranch(b.icmp_signed("<", start, stop), body, done)
    b.position_at_end(body)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    yield i
    nxt = b.add(i, step, flags=["nsw"])
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, stop), body, done)
    b.position_at_end(done)


def _bits(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """A compute value as an i32 or i64 (what shuffles and shared memory carry)."""
    t = v.type
    if isinstance(t, ir.IntType):
        return v if t.width in (32, 64) else b.zext(v, I32)
    return b.bitcast(v, I64 if t == ir.DoubleType() else I32)


def _unbits(b: ir.IRBuilder, v: ir.Value, t: ir.Type) -> ir.Value:
    if isinstance(t, ir.IntType):
        return v if t.width in (32, 64) else b.trunc(v, t)
    return b.bitcast(v, t)


def shuffle_xor(b: ir.IRBuilder, v: ir.Value, lane_mask: int) -> ir.Value:
    """The value of lane (lane ^ lane_mask) of the warp (shfl.sync.bfly, all lanes)."""
    bits = _bits(b, v)

    def shfl(x: ir.Value) -> ir.Value:
        return intrinsic(b, "llvm.nvvm.shfl.sync.bfly.i32", I32,
                         [ir.Constant(I32, -1), x, ir.Constant(I32, lane_mask),
                          ir.Constant(I32, WARP - 1)])

    if bits.type == I64:
        lo = shfl(b.trunc(bits, I32))
        hi = shfl(b.trunc(b.lshr(bits, i64(32)), I32))
        bits = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), i64(32)))
    else:
        bits = shfl(bits)
    return _unbits(b, bits, v.type)


def identity(op: str, t: ET) -> ir.Constant:
    """The identity of a reducer op on type `t` (partial folds start from it; the reduce's
    own init value is added once, at the end)."""
    if op in ("add", "or", "xor"):
        return ew.constant(0, t)
    if op == "multiply":
        return ew.constant(1, t)
    if op == "and":
        return ew.constant(True if t is ET.PRED else -1 if t.is_signed else
                           np.iinfo(t.dtype).max, t)
    if op in ("maximum", "minimum"):
        big = op == "minimum"
        if t is ET.PRED:
            return ew.constant(big, t)
        if t.is_float:
            return ew.constant(float("inf") if big else float("-inf"), t)
        info = np.iinfo(t.dtype)
        return ew.constant(int(info.max if big else info.min), t)
    raise KeyError(op)


def block_row(root: Instruction) -> bool:
    """A reduce whose reduced dimensions are the trailing ones, long enough for a block."""
    dims = root.operands[0].shape.dimensions
    red = sorted(root.attrs.dimensions)
    return red == list(range(len(dims) - len(red), len(dims))) and \
        int(np.prod([dims[d] for d in red])) >= MIN_BLOCK_ROW


class GpuKernelEmitter(KernelEmitter):
    """One GPU kernel into `mod`: `root` computed from `leaves` (id -> slot)."""

    FLAT = False  # (a thread per element: no lanes to fill)

    def __init__(self, mod: ir.Module, name: str, root: Instruction,
                 leaves: dict[int, int], out_slot: int) -> None:
        super().__init__(mod, name, root, leaves, out_slot)
        self.width = 0  # scalar per thread
        self.fn.calling_convention = "ptx_kernel"

    def _gen(self, instr: Instruction, idx: Sequence[ir.Value]) -> ir.Value:
        if id(instr) in self.leaves or not libdevice.handles(instr):
            return super()._gen(instr, idx)
        self.ops += 1
        t = instr.operands[0].shape.element_type
        return libdevice.emit(self.b, instr.opcode,
                              [self.gen(o, idx) for o in instr.operands], t,
                              instr.shape.element_type)

    def delinear(self, i: ir.Value, dims: Sequence[int]) -> list[ir.Value]:
        """The multi-index of linear (row-major) index i in `dims`."""
        b = self.b
        out: list[ir.Value] = [i64(0)] * len(dims)
        q = i
        for d in range(len(dims) - 1, -1, -1):
            if dims[d] == 1:
                continue
            if d == 0 or all(n == 1 for n in dims[:d]):
                out[d] = q
                break
            out[d] = b.urem(q, i64(dims[d]))
            q = b.udiv(q, i64(dims[d]))
        return out

    def build(self) -> GpuKernel:  # type: ignore[override]
        b = self.b
        root = self.root
        begin, end = self.fn.args[1], self.fn.args[2]
        if root.opcode == "reduce" and id(root) not in self.leaves:
            src = root.operands[0].shape.dimensions
            kept = [n for d, n in enumerate(src) if d not in root.attrs.dimensions]
            items = int(np.prod(kept))
            if block_row(root):
                self._block_reduce(begin, end)
                launch = Launch.BLOCK
            else:
                self._thread_reduce(begin, end)
                launch = Launch.ELEMENTS
        else:
            items = int(np.prod(root.shape.dimensions))
            self._elements(begin, end)
            launch = Launch.ELEMENTS
        b.ret_void()
        return GpuKernel(self.name, root, sorted(set(self.leaves.values())), self.out_slot,
                         items, launch)

    def _thread_ids(self) -> tuple[ir.Value, ir.Value]:
        """(global thread index, threads in the grid)."""
        b = self.b
        ntid = sreg(b, "ntid.x")
        gid = b.add(b.mul(sreg(b, "ctaid.x"), ntid), sreg(b, "tid.x"))
        return gid, b.mul(sreg(b, "nctaid.x"), ntid)

    def _store(self, i: ir.Value, v: ir.Value) -> None:
        et = self.root.shape.element_type
        out = self.ptr(self.out_slot, et)
        self.b.store(ew.to_storage(self.b, v, et), self.b.gep(out, [i], inbounds=True))

    def _elements(self, begin: ir.Value, end: ir.Value) -> None:
        gid, step = self._thread_ids()
        dims = self.root.shape.dimensions
        with strided(self.b, self.b.add(begin, gid), end, step, "e") as i:
            self.memo.clear()
            self._store(i, self.gen(self.root, self.delinear(i, dims)))
        self.memo.clear()

    def _operand_index(self, kept: Sequence[ir.Value], red: Sequence[ir.Value]
                       ) -> list[ir.Value]:
        rdims = set(self.root.attrs.dimensions)
        k, r = iter(kept), iter(red)
        return [next(r) if d in rdims else next(k)
                for d in range(self.root.operands[0].shape.rank)]

    def _dims(self) -> tuple[list[int], list[int]]:
        src = self.root.operands[0].shape.dimensions
        rdims = set(self.root.attrs.dimensions)
        return ([n for d, n in enumerate(src) if d not in rdims],
                [n for d, n in enumerate(src) if d in rdims])

    def _combine(self, x: ir.Value, y: ir.Value) -> ir.Value:
        op = reducer_op(self.root)
        et = self.root.shape.element_type
        return ew.emit(self.b, str(op), [x, y], et, et)

    def _accumulator(self, start: ir.Value) -> ir.Value:
        b = self.b
        with b.goto_entry_block():
            acc = b.alloca(start.type)
        b.store(start, acc)
        return acc

    def _thread_reduce(self, begin: ir.Value, end: ir.Value) -> None:
        b = self.b
        kept, red = self._dims()
        src, init = self.root.operands
        gid, step = self._thread_ids()
        with strided(b, b.add(begin, gid), end, step, "o") as o:
            self.memo.clear()
            kidx = self.delinear(o, kept)
            acc = self._accumulator(self.gen(init, []))

            def nest(ridx: list[ir.Value]) -> None:
                if len(ridx) == len(red):
                    self.memo.clear()
                    v = self.gen(src, self._operand_index(kidx, ridx))
                    b.store(self._combine(b.load(acc), v), acc)
                    return
                with for_range(b, i64(0), i64(red[len(ridx)]), name=f"r{len(ridx)}") as r:
                    nest(ridx + [r])

            nest([])
            self.memo.clear()
            self._store(o, b.load(acc))
        self.memo.clear()

    def _block_reduce(self, begin: ir.Value, end: ir.Value) -> None:
        b = self.b
        kept, red = self._dims()
        src, init = self.root.operands
        et = self.root.shape.element_type
        op = str(reducer_op(self.root))
        ident = identity(op, et)
        smem = ir.GlobalVariable(self.mod, ir.ArrayType(I64, WARP), f"{self.name}_smem",
                                 addrspace=3)
        smem.linkage = "internal"
        smem.initializer = ir.Constant(ir.ArrayType(I64, WARP), ir.Undefined)
        tid, ntid = sreg(b, "tid.x"), sreg(b, "ntid.x")
        lane, warp = b.and_(tid, i64(WARP - 1)), b.lshr(tid, i64(5))
        with strided(b, b.add(begin, sreg(b, "ctaid.x")), end, sreg(b, "nctaid.x"), "o") as o:
            self.memo.clear()
            kidx = self.delinear(o, kept)
            acc = self._accumulator(ident)
            with strided(b, tid, i64(int(np.prod(red))), ntid, "j") as j:
                self.memo.clear()
                v = self.gen(src, self._operand_index(kidx, self.delinear(j, red)))
                b.store(self._combine(b.load(acc), v), acc)
            self.memo.clear()
            v = self._warp_fold(b.load(acc))
            slot = b.gep(smem, [ir.Constant(I64, 0), warp], inbounds=True)
            bits = _bits(b, v)
            narrow = bits.type == I32
            with b.if_then(b.icmp_unsigned("==", lane, i64(0))):
                b.store(b.zext(bits, I64) if narrow else bits, slot)
            intrinsic(b, "llvm.nvvm.barrier0", ir.VoidType(), [])
            with b.if_then(b.icmp_unsigned("==", warp, i64(0))):
                nwarps = b.lshr(b.add(ntid, i64(WARP - 1)), i64(5))
                mine = b.load(b.gep(smem, [ir.Constant(I64, 0), lane], inbounds=True))
                t = v.type
                raw = b.trunc(mine, I32) if narrow else mine
                part = b.select(b.icmp_unsigned("<", lane, nwarps), _unbits(b, raw, t), ident)
                total = self._warp_fold(part)
                with b.if_then(b.icmp_unsigned("==", tid, i64(0))):
                    self.memo.clear()
                    self._store(o, self._combine(self.gen(init, []), total))
            intrinsic(b, "llvm.nvvm.barrier0", ir.VoidType(), [])  # smem reused next item
        self.memo.clear()

    def _warp_fold(self, v: ir.Value) -> ir.Value:
        for m in (16, 8, 4, 2, 1):
            v = self._combine(v, shuffle_xor(self.b, v, m))
        return v
