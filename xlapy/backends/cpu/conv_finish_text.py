"""A convolution's epilogue function (conv_kernel._finish_fn) written as IR text.

The finish function takes a block's sums from the spill through the epilogue (bias, relu:
conv_epilogue.Expr) or folds them into the pooled output (conv_kernel.Pool). Built from
llvmlite's IR objects and printed, the CNN's two were ~2 ms of its ~19 ms cold compile
(issue 14); here each instruction is one f-string (ir_text.py).

Same instructions as the llvmlite path, so the same bits: the ops are elementwise.emit's
for add, subtract, multiply, divide, maximum and minimum on f32 / f64 (their operands
flushed as elementwise.flush does: a denormal to the zero of its sign, once per value,
skipped where the value is known flushed: a float op's result under FTZ, a constant that
is not denormal, a select of flushed values, and here also the block's sums, fmuladd
results under the nest's FTZ, which the llvmlite path flushes again). Anything else
(compare, select, clamp, integer or narrow types, flush_ftz's multiply form inside a
kernel) makes `finish_text` return None and conv_kernel builds the function through
llvmlite as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import flush_ftz, target
from xlapy.backends.cpu.flush_avx512 import DENORMAL
from xlapy.backends.cpu.ir_text import FunctionText, Value
from xlapy.backends.cpu.llvm_util import F32, F64, sfx, splat
from xlapy.types import ElementType as ET

if TYPE_CHECKING:
    from xlapy.backends.cpu.conv_epilogue import Expr, Node
    from xlapy.backends.cpu.conv_kernel import Nest, Pool

#: elementwise ops written here: opcode -> its instruction or llvm intrinsic.
OPS: dict[str, str] = {"add": "fadd", "subtract": "fsub", "multiply": "fmul",
                       "divide": "fdiv", "maximum": "llvm.maximum", "minimum": "llvm.minimum"}


def expr_of(fn: Any) -> Expr | None:
    """The conv_epilogue.Expr whose bound `emit` is `fn` (None for anything else)."""
    from xlapy.backends.cpu.conv_epilogue import Expr

    owner = getattr(fn, "__self__", None)
    return owner if isinstance(owner, Expr) else None


def _ops_ok(n: Node, t: ir.Type) -> bool:
    if n.kind != "op":
        return True
    instr = n.instr
    assert instr is not None
    want = ET.F32 if t == F32 else ET.F64
    if OPS.get(instr.opcode) is None or instr.shape.element_type is not want or \
            any(o.shape.element_type is not want for o in instr.operands):
        return False
    return all(_ops_ok(a, t) for a in n.args)


class _Vectors:
    """Emits vector values of one type into a FunctionText the way elementwise.py's
    emitters do on llvmlite (module docstring); declares the intrinsics it calls in
    `mod` (the cold module's llvmlite part, which prints their declarations once)."""

    def __init__(self, f: FunctionText, mod: ir.Module, t: ir.Type, lanes: int) -> None:
        self.f, self.mod = f, mod
        self.vtype = ir.VectorType(t, lanes)
        self.vt = str(self.vtype)
        self.mt = ir.VectorType(ir.IntType(1), lanes)
        self.sfx = sfx(self.vtype)
        self.flushing = denormal.flushing()
        per = 16 if t == F32 else 8
        self.fpclass = lanes == per and target.current().has("avx512f")
        self.tiny = 2.0 ** -1022 if t == F64 else 2.0 ** -126
        self.flushed: set[str] = set()
        self._memo: dict[str, str] = {}
        # flush_ftz's one-multiply flush (llvm.canonicalize under the nest's FTZ) for the
        # operands of ops that quiet a NaN anyway: its `applies` for these vectors.
        n = lanes
        self.ftz = self.flushing and target.current().is_x86 and n & (n - 1) == 0 and \
            n * (32 if t == F32 else 64) >= 128
        self._memo_ftz: dict[str, str] = {}

    def _declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> str:
        if name not in self.mod.globals:
            ir.Function(self.mod, ir.FunctionType(ret, args), name=name)
        return f'@"{name}"'

    def const(self, value: Any, et: Any) -> str:
        """A splat of `value` (elementwise.constant of type `et`), flushed if not denormal."""
        c = splat(self.vtype, ew.constant(value, et).constant)
        ref = c.get_reference()
        if ew.is_flushed(c):
            self.flushed.add(ref)
        return ref

    def flush(self, x: str) -> str:
        """elementwise.flush(x) (once per value: the function's code is one block)."""
        if x in self.flushed or not self.flushing:
            return x
        got = self._memo.get(x)
        if got is not None:
            return got
        f, vt = self.f, self.vt
        copysign = self._declare(f"llvm.copysign.{self.sfx}", self.vtype,
                                 [self.vtype, self.vtype])
        zero = splat(self.vtype, 0.0).get_reference()
        z = f.op(f"call {vt} {copysign}({vt} {zero}, {vt} {x})")
        if self.fpclass:
            kind = "ps" if self.vtype.element == F32 else "pd"
            fpc = self._declare(f"llvm.x86.avx512.fpclass.{kind}.512", self.mt,
                                [self.vtype, ir.IntType(32)])
            tiny = f.op(f"call {self.mt} {fpc}({vt} {x}, i32 {DENORMAL})")
        else:
            fabs = self._declare(f"llvm.fabs.{self.sfx}", self.vtype, [self.vtype])
            ax = f.op(f"call {vt} {fabs}({vt} {x})")
            tiny = f.op(f"fcmp olt {vt} {ax}, {splat(self.vtype, self.tiny).get_reference()}")
        out = f.op(f"select {self.mt} {tiny}, {vt} {z}, {vt} {x}")
        self.flushed.add(out)
        self._memo[x] = out
        self._memo[out] = out
        return out

    def operand(self, x: str, opcode: str) -> str:
        """Float operand x of `opcode` flushed (flush_ftz.operand): x * 1.0 under FTZ
        (llvm.canonicalize: a denormal to the zero of its sign, a NaN quieted, which the
        op does anyway) for QUIETING ops, else `flush`."""
        if x in self.flushed or not self.ftz or opcode not in flush_ftz.QUIETING:
            return self.flush(x)
        got = self._memo_ftz.get(x)
        if got is None:
            fn = self._declare(f"llvm.canonicalize.{self.sfx}", self.vtype, [self.vtype])
            got = self._memo_ftz[x] = self.f.op(f"call {self.vt} {fn}({self.vt} {x})")
            self.flushed.add(got)
        return got

    def op(self, opcode: str, x: str, y: str) -> str:
        """elementwise.emit(opcode, [x, y]) for an opcode of OPS."""
        x, y = self.operand(x, opcode), self.operand(y, opcode)
        vt, inst = self.vt, OPS[opcode]
        if inst.startswith("llvm."):
            fn = self._declare(f"{inst}.{self.sfx}", self.vtype, [self.vtype, self.vtype])
            r = self.f.op(f"call {vt} {fn}({vt} {x}, {vt} {y})")
        else:
            r = self.f.op(f"{inst} {vt} {x}, {y}")
        self.flushed.add(r)  # FTZ results; maximum / minimum of flushed operands
        return r

    def select(self, mask: str, x: str, y: str) -> str:
        r = self.f.op(f"select {self.mt} {mask}, {self.vt} {x}, {self.vt} {y}")
        if x in self.flushed and y in self.flushed:
            self.flushed.add(r)
        return r

    def mask(self, cond: str) -> str:
        """`cond` in every lane (conv_kernel._Cell._mask)."""
        n = self.vtype.count
        one = self.f.op(f"insertelement {self.mt} zeroinitializer, i1 {cond}, i32 0")
        return self.f.op(f"shufflevector {self.mt} {one}, {self.mt} zeroinitializer, "
                         f"<{n} x i32> zeroinitializer")


class _ExprText:
    """An Expr's vectors (conv_epilogue.Expr.emit) as text; its leaves' pointers loaded
    once in the entry block."""

    def __init__(self, e: Expr, v: _Vectors) -> None:
        self.e, self.v = e, v
        self.base: dict[int, str] = {}
        self.align = 8 if v.vtype.element == F64 else 4
        et = str(v.vtype.element)
        for k in sorted(_leaves(e.expr)):
            slot = v.f.gep("i8*", "%extra", e.first + k)
            ptr = v.f.load("i8*", slot)
            self.base[k] = v.f.cast(ptr, "i8*", f"{et}*")

    def emit(self, val: str, feature: Value, at: Value) -> str:
        v, f = self.v, self.v.f
        et = str(v.vtype.element)

        def leaf(k: int) -> str:
            off = feature if self.e.leaves[k][1] == "channel" else at
            p = f.cast(f.gep(et, self.base[k], off), f"{et}*", f"{v.vt}*")
            return f.op(f"load {v.vt}, {v.vt}* {p}, align {self.align}")

        return self.e.walk(
            val, leaf,
            lambda n: v.const(n.value, n.instr.shape.element_type),  # type: ignore[union-attr]
            lambda n, args: v.op(n.instr.opcode, *args))  # type: ignore[union-attr]


def _leaves(n: Node) -> set[int]:
    if n.kind == "leaf":
        return {n.value}
    return set().union(*(_leaves(a) for a in n.args)) if n.args else set()


def finish_text(mod: ir.Module, name: str, t: ir.Type, nest: Nest,
                epilogue: Callable[..., Any] | None, pool: Pool | None) -> str | None:
    """The definition of conv_kernel._finish_fn's function `name` as text, or None when
    an op or type is not one this module writes (module docstring)."""
    if t not in (F32, F64) or getattr(flush_ftz._state, "on", False):
        return None
    fns = (epilogue, pool.post if pool is not None else None)
    exprs = [expr_of(fn) if fn is not None else None for fn in fns]
    if any(fn is not None and (e is None or not _ops_ok(e.expr, t))
           for fn, e in zip(fns, exprs)):
        return None
    parts = pool.parts if pool is not None else None
    if pool is not None and (parts is None or parts[0] not in OPS):
        return None
    lanes, v = nest.lanes, nest.v
    vt = f"<{lanes} x {t}>"
    tp = f"{t}*"
    f = FunctionText(f'define internal void @"{name}"({tp} noalias %out, {vt}* noalias %spill, '
                     f"i8** %extra, i64 %ob, i64 %fo, i64 %pix0, i64 %pr, i64 %dy, i64 %npix)")
    vec = _Vectors(f, mod, t, lanes)
    epi, post = (_ExprText(e, vec) if e is not None else None for e in exprs)
    align = 8 if t == F64 else 4
    opix = nest.g * nest.apad

    def at_out(off: Value) -> str:
        return f.cast(f.gep(str(t), "%out", off), tp, f"{vt}*")

    count: Value = "%npix"
    if pool is not None:  # the pixels past the last whole window are not folded
        left = f.binop("sub", pool.wp * pool.kw, "%pix0")
        lt = f.icmp("slt", left, "%npix")
        count = f.op(f"select i1 {lt}, i64 {left}, i64 %npix")
    with f.loop(0, count, "eq") as q:
        if pool is not None:
            px = f.add("%pix0", q)
            col = f.binop("udiv", px, pool.kw)
            dx = f.binop("urem", px, pool.kw)
            cell_at = f.mul(f.add(f.mul("%pr", pool.wp), col), opix)
            first = f.op(f"and i1 {f.icmp('eq', '%dy', 0)}, {f.icmp('eq', dx, 0)}")
            last = f.op(f"and i1 {f.icmp('eq', '%dy', pool.kh - 1)}, "
                        f"{f.icmp('eq', dx, pool.kw - 1)}")
            masks: dict[str, str] = {}
        for j in range(v):
            fj = f.add("%fo", j * lanes)
            val = f.load(vt, f.gep(vt, "%spill", f.add(f.mul(q, v), j)))
            # The sums are the hot blocks' fmuladd results, computed under the FTZ the
            # nest's entry sets whenever it has an epilogue: never denormal, no flush (the
            # llvmlite path flushes them anyway; 3 of ~14 vector instructions a vector).
            vec.flushed.add(val)
            at = f.add(f.add("%ob", f.mul(q, opix)), j * lanes)
            if epi is not None:
                val = epi.emit(val, fj, at)
            if pool is None:
                f.do(f"store {vt} {val}, {vt}* {at_out(at)}, align {align}")
                continue
            assert parts is not None
            cat = f.add(cell_at, fj)
            ptr = at_out(cat)
            ld = f.op(f"load {vt}, {vt}* {ptr}, align {align}")
            if first not in masks:
                masks[first] = vec.mask(first)
            acc = vec.op(parts[0], vec.select(masks[first], vec.const(parts[1], parts[2]), ld),
                         val)
            if post is not None:
                if last not in masks:
                    masks[last] = vec.mask(last)
                acc = vec.select(masks[last], post.emit(acc, fj, cat), acc)
            f.do(f"store {vt} {acc}, {vt}* {ptr}, align {align}")
    f.do("ret void")
    return f.text()


__all__ = ["OPS", "expr_of", "finish_text"]
