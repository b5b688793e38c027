"""The denormal flush of an arithmetic op's operands as one multiply by 1.0, in kernels.

A kernel flushes every float it loads before arithmetic (FTZ without DAZ, elementwise.py):
with AVX2 that is and + and + compare + blend, five uops per vector, 16 of the ~30
instructions of layernorm's x86-64-v3 loops; with AVX-512 vfpclass + a masked and
(flush_avx512.py). Inside a kernel MXCSR.FTZ is set (fp_env.set_ftz_daz at its entry),
and under FTZ x * 1.0 returns a denormal x as the zero of its sign and every other value
unchanged, a signaling NaN quieted: one vmulps. `llvm.canonicalize` is that multiply (its
x86 lowering; the module's "denormal-fp-math"="preserve-sign" makes it a flush for LLVM's
folds too). Only for operands of ops that quiet a NaN operand anyway (QUIETING: the bits
are the select's), and only while KernelEmitter.build emits a kernel (`in_kernel`): other
code may run with FTZ clear.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F32, F64, elem, intrinsic, sfx

#: Ops whose float operands go straight into arithmetic that returns a quiet NaN for a NaN
#: operand (the same NaN, quieted, whether or not the flush quieted it first).
QUIETING = frozenset({"add", "subtract", "multiply", "divide", "exponential", "rsqrt"})

_state = threading.local()


@contextlib.contextmanager
def in_kernel(scalars: bool | None = None) -> Iterator[None]:
    """Code emitted inside runs with MXCSR.FTZ set (a kernel's body). `scalars`: scalar
    operands are flushed by a multiply too (an inline mulss: only in loops no vectorizer
    could widen anyway, a scatter's updates; it keeps LLVM's vectorizers off the code);
    None keeps the enclosing setting."""
    prev = getattr(_state, "on", False), getattr(_state, "scalars", False)
    _state.on = True
    _state.scalars = prev[1] if scalars is None else scalars
    try:
        yield
    finally:
        _state.on, _state.scalars = prev


def applies(opcode: str, x: ir.Value) -> bool:
    """Whether operand x of `opcode` may be flushed by a multiply here: a scalar (`operand`'s
    multiply by an opaque 1.0, or its inline mulss where `in_kernel` says `scalars`) or an
    explicit vector of at least 128 bits (LLVM 22's x86 backend aborts on a <2 x float>
    canonicalize, which its SLP vectorizer makes of scalar ones)."""
    t = x.type
    if not (opcode in QUIETING and getattr(_state, "on", False) and denormal.flushing()
            and elem(t) in (F32, F64) and target.current().is_x86):
        return False
    if not isinstance(t, ir.VectorType):
        return True
    n = t.count
    return n & (n - 1) == 0 and n * (32 if elem(t) == F32 else 64) >= 128


def operand(b: ir.IRBuilder, x: ir.Value, opcode: str,
            fallback: Callable[[ir.IRBuilder, ir.Value], ir.Value]) -> ir.Value:
    """Float operand x of `opcode` flushed: by a multiply where `applies`, else fallback(b, x)
    (elementwise.flush). Once per value and block, like that."""
    from xlapy.backends.cpu.elementwise import is_flushed, mark_flushed

    if is_flushed(x) or not applies(opcode, x):
        return fallback(b, x)
    memo = b.block.__dict__.setdefault("_xlapy_flushed_ftz", {})
    hit = memo.get(id(x))
    if hit is not None and hit[0] is x:
        return hit[1]
    if isinstance(x.type, ir.VectorType):
        out = intrinsic(b, f"llvm.canonicalize.{sfx(x.type)}", x.type, [x])
    elif not getattr(_state, "scalars", False):  # times a 1.0 LLVM cannot see (no fold to
        # x): a loop its vectorizer widens widens it to one vmulps, where and + and + compare
        # + blend flushed each part of a complex multiply's operands (z <- z w: 45 -> 29
        # instructions a vector of 4 elements)
        out = b.fmul(x, opaque_one(b, x.type))
    else:  # one mulss by 1.0 as inline assembly: opaque, so no vectorizer pairs it into
        # the <2 x float> canonicalize LLVM aborts on (and + and + compare + blend before:
        # half of a scatter-add's update)
        t = x.type
        op = "mulss" if t == F32 else "mulsd"
        asm = ir.InlineAsm(ir.FunctionType(t, [t, t]), f"v{op} $2, $1, $0", "=x,x,x") \
            if target.current().has("avx") else \
            ir.InlineAsm(ir.FunctionType(t, [t, t]), f"{op} $2, $0", "=x,0,x")
        out = b.call(asm, [x, ir.Constant(t, 1.0)])
    out = mark_flushed(out)
    memo[id(x)] = (x, out)
    return out


def opaque_one(b: ir.IRBuilder, t: ir.Type) -> ir.Value:
    """1.0 of float type `t` through an empty inline asm in the function's entry block (once
    per function and type): LLVM folds x * 1.0 to x, denormal and all, but not x * this."""
    fn = b.function
    memo = fn.__dict__.setdefault("_xlapy_one", {})
    if str(t) not in memo:
        with b.goto_block(fn.entry_basic_block):
            asm = ir.InlineAsm(ir.FunctionType(t, [t]), "", "=x,0")
            memo[str(t)] = b.call(asm, [ir.Constant(t, 1.0)])
    return memo[str(t)]


def scaled_by_small(opcode: str, args: list[ir.Value], k: int) -> bool:
    """Operand k of a multiply by a constant c with 0 < |c| < 1 in every lane needs no
    flush in a kernel (MXCSR.FTZ set): a denormal x times c is smaller still, so FTZ returns
    the zero of the product's sign, as flush(x) * c; every other x is unchanged by the flush
    (a NaN quieted by the multiply either way). |c| = 1 is left out: LLVM folds x * 1.0 to
    x, denormal and all. Attention's x * (1/sqrt(d)) before its row max and exp: one vmulps
    per vector fewer in each pass."""
    from xlapy.backends.cpu.elementwise import constant_lanes

    if opcode != "multiply" or len(args) != 2 or not getattr(_state, "on", False) \
            or not denormal.flushing():
        return False
    vs = constant_lanes(args[1 - k])
    return vs is not None and all(isinstance(v, float) and 0.0 < abs(v) < 1.0 for v in vs)


__all__ = ["QUIETING", "applies", "operand", "in_kernel", "opaque_one", "scaled_by_small"]
