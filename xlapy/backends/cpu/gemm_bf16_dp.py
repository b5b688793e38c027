"""gemm_bf16.py's kernels without AMX: each 32 x 32 block of C summed in zmm registers by
AVX512-BF16's `vdpbf16ps` (Zen 4 and 5, Cooper Lake; Sapphire Rapids where Linux refuses the
tiles), 32 multiply-adds per instruction, twice an f32 FMA's.

Why: without AMX a bf16 dot widened both operands to f32 (widen_dots.py) and ran OpenBLAS's
sgemm: on Zen 4 the bf16 attention took 4.2 ms against XLA's 3.5 (XLA's bf16 beats its own
f32 there), and its f32 copies tripled peak memory. `vdpbf16ps` adds the two exact products of
each bf16 pair to an f32 lane, rounding to nearest even, inputs and results flushed whatever
MXCSR says: the AMX tiles' semantics, so gemm_bf16.takes' conditions (the `ftz` mode) hold
for both, and so does everything around the kernel (interface, B panels, splitting, the
BLAS-convention entry for batch chains): only the block's arithmetic differs.

A block is four register tiles of MR = 8 rows x 32 columns (16 accumulators): per k pair,
two 64-byte loads of the packed panels and one 4-byte broadcast of A per row. Each output
element is one accumulator's sum over k in order, so the bits never depend on threads. The
module goes through the light pipeline and -O3 code generation (the accumulators must stay in
registers, which -O0's allocator would spill); LLVM upgrades the intrinsic's i32-vector form
to its bfloat one.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.gemm_bf16 import BM, Block, emit_blocks
from xlapy.backends.cpu.llvm_util import I64, VOID, broadcast, for_range
from xlapy.types import ElementType as ET

#: Rows per register tile (x 2 vectors of 16 f32 columns: 16 zmm accumulators).
MR = 8
_I32 = ir.IntType(32)
_V16D = ir.VectorType(_I32, 16)
_V16F = ir.VectorType(ir.FloatType(), 16)


def _tile(b: ir.IRBuilder, dp: ir.Function, arow: ir.Value, lda: ir.Value, b0: ir.Value,
          b1: ir.Value, kq: ir.Value) -> list[list[ir.Value]]:
    """The MR x 32 sums of A rows at `arow` (stride lda bytes) times panels b0, b1 over kq k
    pairs, in accumulators held in phis."""
    pre = b.block
    body = b.function.append_basic_block("dp.body")
    done = b.function.append_basic_block("dp.end")
    b.branch(body)
    b.position_at_end(body)
    g = b.phi(I64, name="g")
    g.add_incoming(I64(0), pre)
    zero = ir.Constant(_V16F, [0.0] * 16)
    accs = [[b.phi(_V16F, name=f"acc{r}_{v}") for v in range(2)] for r in range(MR)]
    for row in accs:
        for acc in row:
            acc.add_incoming(zero, pre)
    off = b.mul(g, I64(64))
    bvecs = [b.load(b.bitcast(b.gep(p, [off]), _V16D.as_pointer()), align=1) for p in (b0, b1)]
    new = []
    for r in range(MR):
        at = b.gep(arow, [b.add(b.mul(lda, I64(r)), b.mul(g, I64(4)))])
        word = b.load(b.bitcast(at, _I32.as_pointer()), align=1)
        av = broadcast(b, word, 16)
        new.append([b.call(dp, [accs[r][v], av, bvecs[v]]) for v in range(2)])
    nxt = b.add(g, I64(1), flags=["nsw"])
    g.add_incoming(nxt, b.block)
    for r in range(MR):
        for v in range(2):
            accs[r][v].add_incoming(new[r][v], b.block)
    b.cbranch(b.icmp_signed("<", nxt, kq), body, done)
    b.position_at_end(done)
    return new


def emit_kernel(mod: ir.Module, name: str, transposed: bool, bf16_out: bool) -> None:
    """gemm_bf16._emit_kernel's function (same arguments, loops and blocks) on vdpbf16ps."""
    dp = ir.Function(mod, ir.FunctionType(_V16F, [_V16F, _V16D, _V16D]),
                     name="llvm.x86.avx512bf16.dpbf16ps.512")
    fn = ir.Function(mod, ir.FunctionType(VOID, [I64] * 8), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    width = 2 if bf16_out else 4

    def block(blk: Block) -> None:
        with for_range(b, I64(0), I64(BM), "rt", step=MR) as r0:
            sums = _tile(b, dp, b.gep(blk.arow, [b.mul(r0, blk.lda)]), blk.lda, blk.b0,
                         blk.b1, blk.kq)
            for r in range(MR):
                crow = b.gep(blk.crow, [b.mul(b.add(r0, I64(r)), blk.ldc)])
                for v, s in enumerate(sums[r]):
                    out = ew.to_storage(b, s, ET.BF16) if bf16_out else s
                    at = b.gep(crow, [I64(16 * width * v)])
                    b.store(out, b.bitcast(at, out.type.as_pointer()), align=1)

    emit_blocks(b, fn.args, transposed, bf16_out, block)
    b.ret_void()


__all__ = ["MR", "emit_kernel"]
