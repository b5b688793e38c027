"""`--freestanding` objects: no undefined symbol at all (no libc, libm or pthreads).

LLVM turns copies and fills into calls to libc's memcpy / memset / memmove in two ways:
the `llvm.mem*` intrinsics are lowered to libcalls by codegen (sizes it does not inline),
and the optimizer recognizes copy / fill loops (loop idiom) and store runs (memcpyopt) and
makes them intrinsics. `rewrite` closes both on the linked module's text, before it is
optimized: every function definition gets the "no-builtins" attribute (LLVM's
TargetLibraryInfo then has no library functions, so no pass creates a mem* intrinsic or a
libm call), and every call of a `llvm.memcpy` / `llvm.memset` / `llvm.memmove` intrinsic
calls a private byte loop of the object instead (`__xlapy_memcpy.p0.p0.i64`, ... :
internal linkage, so no global memcpy shadows libc's in the user's program; the loop
vectorizer still vectorizes them). `llvm.mem*.inline` intrinsics are left: codegen always
expands them inline.

libm: an object whose kernels call a libm function (e.g. pow for f64 `power`, atan2, cbrt,
the C99 complex functions) is refused with `Unimplemented` naming the function and the op
needing it (`refuse`); xlapy does not substitute its own versions of them here.
`NAME_run_threaded` runs on the calling thread (no pthread_create).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from xlapy.aot.errors import Unimplemented

_INTRINSIC = re.compile(r"@llvm\.(memcpy|memmove|memset)\.(p0\.p0|p0)\.i(32|64)\b")
_DECLARE = re.compile(r"^declare [^\n]*@__xlapy_mem(cpy|move|set)\.[^\n]*$", re.M)
_GROUP = re.compile(r"^(attributes #\d+ = \{)(.*)\}$", re.M)
_NEW_GROUP = 999_999
ATTRIBUTE = '"no-builtins"'


def has_mem_intrinsics(text: str) -> bool:
    """Whether an IR text still calls a memcpy / memset / memmove intrinsic."""
    return _INTRINSIC.search(text) is not None


_FMA = re.compile(r"@llvm\.fma\.((?:v\d+)?f32)\b")
_FMA_DECLARE = re.compile(r"^declare [^\n]*@__xlapy_fmaf\.[^\n]*$", re.M)


def rewrite(text: str, soft_fma: bool = False) -> str:
    """The module text with every definition "no-builtins" and the mem* intrinsics replaced
    by private loops (module docstring); `soft_fma`: f32 `llvm.fma` too (`_fmaf`: for
    targets without an FMA instruction, where codegen would call libm's fmaf)."""
    if soft_fma:
        sfx = sorted(set(_FMA.findall(text)))
        text = _FMA_DECLARE.sub("", _FMA.sub(lambda m: f"@__xlapy_fmaf.{m[1]}", text))
        text += "\n" + "\n".join(_fmaf(x) for x in sfx if not re.search(
            rf"^define [^\n]*@__xlapy_fmaf\.{x}\(", text, re.M))
    used = {m.groups() for m in _INTRINSIC.finditer(text)}
    text = _INTRINSIC.sub(lambda m: f"@__xlapy_{m[1]}.{m[2]}.i{m[3]}", text)
    text = _DECLARE.sub("", text)
    lines = [_no_builtins(line) for line in text.split("\n")]
    text = "\n".join(lines)
    text = _GROUP.sub(lambda m: m[1] + m[2].rstrip() + f" {ATTRIBUTE} }}"
                      if ATTRIBUTE not in m[2] else m[0], text)
    text += f"\nattributes #{_NEW_GROUP} = {{ nounwind {ATTRIBUTE} }}\n"
    new = [u for u in sorted(used)
           if not re.search(r"^define [^\n]*@__xlapy_{}\.{}\.i{}\(".format(*u), text, re.M)]
    return text + "\n".join(_loop(k, p, int(w)) for k, p, w in new) + "\n"


def _no_builtins(line: str) -> str:
    """A `define` line given an attribute group when it has none (the groups it has get
    the attribute in `rewrite`)."""
    if not line.startswith("define ") or re.search(r"\s#\d+\b", line):
        return line
    start = line.index("(", line.index("@"))
    depth, at = 0, start
    for at in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[at], 0)
        if depth == 0:
            break
    head, rest = line[:at + 1], line[at + 1:]
    for word in (" unnamed_addr", " local_unnamed_addr"):
        if rest.startswith(word):
            head, rest = head + word, rest[len(word):]
    return f"{head} #{_NEW_GROUP}{rest}"


def _loop(kind: str, ptrs: str, width: int) -> str:
    """The private function replacing `llvm.{kind}.{ptrs}.i{width}` (same signature)."""
    n = f"i{width}"
    name = f"@__xlapy_{kind}.{ptrs}.{n}"
    if kind == "memset":
        return (f"define private void {name}(ptr %d, i8 %c, {n} %n, i1 %v) #{_NEW_GROUP} {{\n"
                f"entry:\n  %z = icmp eq {n} %n, 0\n  br i1 %z, label %done, label %loop\n"
                f"loop:\n  %i = phi {n} [0, %entry], [%j, %loop]\n"
                f"  %pd = getelementptr i8, ptr %d, {n} %i\n  store i8 %c, ptr %pd\n"
                f"  %j = add {n} %i, 1\n  %e = icmp eq {n} %j, %n\n"
                f"  br i1 %e, label %done, label %loop\ndone:\n  ret void\n}}\n")
    alias = "noalias " if kind == "memcpy" else ""
    pred = "%entry" if kind == "memcpy" else "%dir"
    fwd = (f"fwd:\n  %i = phi {n} [0, {pred}], [%j, %fwd]\n"
           f"  %ps = getelementptr i8, ptr %s, {n} %i\n  %c = load i8, ptr %ps\n"
           f"  %pd = getelementptr i8, ptr %d, {n} %i\n  store i8 %c, ptr %pd\n"
           f"  %j = add {n} %i, 1\n  %e = icmp eq {n} %j, %n\n"
           f"  br i1 %e, label %done, label %fwd\n")
    if kind == "memcpy":
        entry = f"  %z = icmp eq {n} %n, 0\n  br i1 %z, label %done, label %fwd\n"
        back = ""
    else:  # backward when the destination starts inside the source
        entry = (f"  %z = icmp eq {n} %n, 0\n  br i1 %z, label %done, label %dir\n"
                 "dir:\n  %a = ptrtoint ptr %d to i64\n  %b = ptrtoint ptr %s to i64\n"
                 "  %up = icmp ule i64 %a, %b\n  br i1 %up, label %fwd, label %bwd\n")
        back = (f"bwd:\n  %k = phi {n} [%n, %dir], [%k1, %bwd]\n  %k1 = sub {n} %k, 1\n"
                f"  %qs = getelementptr i8, ptr %s, {n} %k1\n  %q = load i8, ptr %qs\n"
                f"  %qd = getelementptr i8, ptr %d, {n} %k1\n  store i8 %q, ptr %qd\n"
                f"  %f = icmp eq {n} %k1, 0\n  br i1 %f, label %done, label %bwd\n")
    return (f"define private void {name}(ptr {alias}%d, ptr {alias}%s, {n} %n, i1 %v) "
            f"#{_NEW_GROUP} {{\nentry:\n{entry}{fwd}{back}done:\n  ret void\n}}\n")


def _fmaf(sfx: str) -> str:
    """fma on f32 lanes (`sfx`: f32, v4f32, ...) without an FMA instruction or libm: x y is
    exact in f64; s = x y + z rounded, e = x y + z - s exactly (TwoSum); s rounded to odd
    (moved to its odd neighbour towards e when inexact and even), which rounds to f32 as the
    exact value would (f64 has more than 24 + 2 bits); NaN / inf pass through (e is NaN)."""
    n = sfx[1:-3] if sfx.startswith("v") else ""
    def ty(t: str) -> str:
        return f"<{n} x {t}>" if n else t
    def k(t: str, v: str) -> str:
        return f"splat ({t} {v})" if n else v
    f, d, i, c = ty("float"), ty("double"), ty("i64"), ty("i1")
    return "\n".join([
        f"define private {f} @__xlapy_fmaf.{sfx}({f} %x, {f} %y, {f} %z) #{_NEW_GROUP} {{",
        f"  %a = fpext {f} %x to {d}", f"  %b = fpext {f} %y to {d}",
        f"  %c = fpext {f} %z to {d}", f"  %p = fmul {d} %a, %b",
        f"  %s = fadd {d} %p, %c", f"  %bb = fsub {d} %s, %p", f"  %t = fsub {d} %s, %bb",
        f"  %u = fsub {d} %p, %t", f"  %v = fsub {d} %c, %bb", f"  %e = fadd {d} %u, %v",
        f"  %bits = bitcast {d} %s to {i}", f"  %ebits = bitcast {d} %e to {i}",
        f"  %lsb = and {i} %bits, {k('i64', '1')}",
        f"  %even = icmp eq {i} %lsb, {k('i64', '0')}",
        f"  %inexact = fcmp one {d} %e, {k('double', '0.0')}",
        f"  %need = and {c} %even, %inexact",
        f"  %xs = xor {i} %bits, %ebits", f"  %away = icmp sge {i} %xs, {k('i64', '0')}",
        f"  %up = add {i} %bits, {k('i64', '1')}", f"  %dn = sub {i} %bits, {k('i64', '1')}",
        f"  %dir = select {c} %away, {i} %up, {i} %dn",
        f"  %nb = select {c} %need, {i} %dir, {i} %bits",
        f"  %r = bitcast {i} %nb to {d}", f"  %o = fptrunc {d} %r to {f}",
        f"  ret {f} %o", "}", ""])


def users(symbol: str, texts: Iterable[str]) -> list[str]:
    """The functions (of the IR texts) calling libm's `symbol`, directly or through the
    LLVM intrinsic codegen lowers to it (`powf` <- llvm.pow.f32 / llvm.pow.v8f32 ...), and
    the functions calling those, transitively."""
    base, ty = (symbol[:-1], "f32") if symbol.endswith("f") and symbol not in {"erf"} \
        else (symbol, "f64")
    direct = re.compile(rf'@"?{re.escape(symbol)}"?\(|@"?llvm\.{re.escape(base)}\.'
                        rf'(v\d+)?{ty}"?\(')
    bodies: dict[str, str] = {}
    for text in texts:
        for m in re.finditer(r'^define [^\n]*?@"?([\w.$-]+)"?\((.*?)^\}', text,
                             re.M | re.S):
            bodies[m[1]] = m[0]
    found = [f for f, body in bodies.items() if direct.search(body.split("\n", 1)[-1])]
    seen = set(found)
    while True:
        more = [f for f, body in bodies.items() if f not in seen
                and any(re.search(rf'@"?{re.escape(g)}"?\(', body.split("\n", 1)[-1])
                        for g in seen)]
        if not more:
            return found
        found += more
        seen |= set(more)


#: The ops whose kernels call a libm function (its name without the f32 `f` / complex
#: `c`), most likely first, to name the op inside a fused kernel; else the kernel's root.
OPS = {"pow": ("power",), "atan2": ("atan2", "log"), "cbrt": ("cbrt",),
       "fmod": ("remainder",), "expm1": ("exponential_minus_one",),
       "log1p": ("log_plus_one",), "hypot": ("abs", "sqrt"), "exp": ("exponential",),
       "log": ("log",), "sin": ("sine",), "cos": ("cosine",), "tan": ("tan",),
       "tanh": ("tanh",), "erf": ("erf",), "sqrt": ("sqrt",), "fma": ()}


def refuse(symbols: list[str], texts: Iterable[str], ops: dict[str, Any]) -> Unimplemented:
    """The error for a freestanding object that would need `symbols`: the first symbol and
    the op needing it, found through the first function using it that `ops` (kernel
    function name -> its root instruction) knows, or that this package emitted."""
    sym = symbols[0]
    for fn in users(sym, list(texts)):
        if fn in ops:
            instr = _needing(ops[fn], sym)
            op, where = instr.opcode, f"%{instr.name} {instr.shape}"
            break
        if op := _emitted_op(fn):
            where = fn
            break
    else:
        op, where = "the program", "unknown"
    return Unimplemented(op, f"it needs libm's {sym} ({where}), and a --freestanding "
                         f"object has no libm / libc (undefined: {', '.join(symbols)})")


def _needing(root: Any, sym: str) -> Any:
    """The instruction among `root` and its operands (transitively) whose op calls `sym`
    per OPS (the likeliest op, then the nearest); `root` when none does."""
    bases = [b for b in (sym, sym[:-1], sym[1:], sym[1:-1]) if b in OPS]
    want = OPS[bases[0]] if bases else ()
    order, todo, seen = [], [root], set()
    while todo and len(seen) < 10_000:
        instr = todo.pop(0)
        if id(instr) not in seen:
            seen.add(id(instr))
            order.append(instr)
            todo += list(instr.operands)
    for op in want:
        for instr in order:
            if instr.opcode == op:
                return instr
    return root


def _emitted_op(fn: str) -> str | None:
    """The op of a function emitted by this package (`{name}__{op}{n}`, emit.Program.fresh)."""
    m = re.search(r"__([A-Za-z_.]+?)\d+(_|$)", fn)
    return m[1] if m and m[1] not in {"comp", "k", "const"} else None


__all__ = ["rewrite", "has_mem_intrinsics", "refuse", "users", "ATTRIBUTE"]
