"""LLVM plumbing for the cpu backend: target setup, verified modules, engines, loop helpers.

Measured decisions (../shared/design.md): llvmlite on LLVM 22; every emitted module is
verified by parsing its text back with `llvm.parse_assembly(...).verify()`. One shared
TargetMachine optimizes and emits; object files are linked into one ORC LLJIT per process
(no MCJIT engine, which would take ownership of a TargetMachine of its own).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
import struct
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

import llvmlite.binding as llvm
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import loop_metadata, objfile, perf_map, rtlib, sched_mode, target
from xlapy.backends.cpu.ir_print import function_text
from xlapy.backends.cpu.target import CpuTarget
from xlapy.errors import XlapyError
from xlapy.phases import phase

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
VOID = ir.VoidType()
I8P = I8.as_pointer()
T = TypeVar("T")
#: Every kernel is `void kernel(i8** buffers, i64 begin, i64 end)`: the buffer table (one slot
#: per value: parameters, temporaries, outputs) and a range of its outermost loop, so the
#: thread pool can split it.
KERNEL_TYPE = ir.FunctionType(VOID, [I8P.as_pointer(), I64, I64])

_LOCK = threading.Lock()
OPT_LEVEL = 3


@functools.cache
def _init() -> None:
    target.resolve(None)  # every LLVM target and asm printer initialized (aarch64 objects too)
    # No vectorized epilogue loop after the main vector loop (the scalar remainder stays):
    # less code to compile (GELU chain 39 -> 33 ms), no measured run-time cost.
    llvm.set_option("", "-enable-epilogue-vectorization=0")
    # No loop strength reduction in codegen: 10% of a softmax kernel's codegen time; the
    # loops are simple counted ones over base + index addresses x86 addresses directly.
    llvm.set_option("", "-disable-lsr")


def target_machine(t: CpuTarget | None = None, opt: int = OPT_LEVEL) -> llvm.TargetMachine:
    """A fresh TargetMachine for `t` (default: the current target). Code that runs in this
    process is built for the JIT's code model; objects for another machine as PIC."""
    _init()
    t = t or target.current()
    tgt = llvm.Target.from_triple(t.triple)
    if t.runs_here:
        return tgt.create_target_machine(cpu=t.cpu, features=t.llvm_features, opt=opt,
                                         jit=True, reloc="default", codemodel="jitdefault")
    return tgt.create_target_machine(cpu=t.cpu, features=t.llvm_features, opt=opt,
                                     reloc="pic", codemodel="small")


@functools.cache
def o0_machine(t: CpuTarget) -> llvm.TargetMachine:
    """The process's -O0 TargetMachine for `t` (used under _LOCK): LLVM's fast code generator
    for code whose time is not in its instruction choice (the AMX tile loops, a convolution's
    row bookkeeping and epilogues), one for every such module, created once."""
    return target_machine(t, opt=0)


@functools.cache
def _codegen_machine(t: CpuTarget) -> llvm.TargetMachine:
    """The TargetMachine that optimizes and emits every module for `t` (under _LOCK). Kept
    for the process: its subtarget for FN_ATTRS is built once (about 1 ms a compile
    otherwise)."""
    return target_machine(t)


def new_module(name: str) -> ir.Module:
    """An empty module for the current target."""
    mod = ir.Module(name=name)
    mod.triple = target.current().triple
    return mod


#: Attributes of every defined function. 512-bit vectors: LLVM's tuning for this CPU family
#: prefers 256 (measured: the GELU chain 2x faster with zmm). Denormal outputs are flushed
#: (FTZ is set in every kernel), so constant folding flushes as the hardware does; inputs stay
#: "ieee" (no DAZ: explicit flushes must not be folded away).
FN_ATTRS = ('"prefer-vector-width"="512" "min-legal-vector-width"="0" '
            '"denormal-fp-math"="preserve-sign,ieee" '
            '"denormal-fp-math-f32"="preserve-sign,ieee"')
#: FN_ATTRS in the `ieee` denormal mode (xlapy.denormal): no flushing anywhere.
FN_ATTRS_IEEE = FN_ATTRS.replace("preserve-sign,ieee", "ieee,ieee")
_ATTR_GROUP = 7001
#: A definition's line (after a newline: a literal prefix the search skips to, where `^` in
#: multi-line mode is tried at every character, 8x the time).
_DEFINE = re.compile(r"\n(define [^\n]*\)(?: [a-z]+)*)(\s*\n\{)")


def module_text(mod: ir.Module | str) -> str:
    """The module's IR text with FN_ATTRS on every defined function. An llvmlite module is
    printed as module_texts prints one, llvmlite's text character for character in a third
    of the time: the library modules a program's first run builds (gemm_small 8.3 -> 2.3
    ms, gemm_f32 8.3 -> 3.0, the while driver 1.5 -> 0.5)."""
    if not isinstance(mod, str):
        return module_texts(mod, [])[0]
    text = mod
    if f"attributes #{_ATTR_GROUP}" in text:
        return text
    text = _DEFINE.sub(rf"\n\1 #{_ATTR_GROUP}\2", "\n" + text)[1:]
    text = loop_metadata.resolve(text)
    attrs = FN_ATTRS if denormal.flushing() else FN_ATTRS_IEEE
    return f"{text}\nattributes #{_ATTR_GROUP} = {{ {attrs} }}\n"


_GLOBAL_REF = re.compile(r'@(?:"([^"]+)"|([-A-Za-z0-9_.$]+))')


def module_head(mod: ir.Module) -> list[str]:
    """The lines a module's text starts with: its ID, triple, data layout and types."""
    head = [f'; ModuleID = "{mod.name}"', f'target triple = "{mod.triple}"',
            f'target datalayout = "{mod.data_layout}"', ""]
    return head + [t.get_declaration() for t in mod.get_identified_types().values()]


def references(text: str) -> Iterator[str]:
    """The names of the globals an IR text refers to (@name, @"name")."""
    return (m.group(1) or m.group(2) for m in _GLOBAL_REF.finditer(text))


def module_texts(mod: ir.Module, groups: Sequence[Collection[str]]) -> tuple[str, list[str]]:
    """The whole module's text (module_text) and one module text per group of its defined
    functions, each printed value once (llvmlite's printer is the slow part; defined
    functions go through ir_print.function_text, the same text in about half the time). A group's
    module keeps every declaration and metadata node and the definitions (helper functions,
    tables) its functions reach, so it compiles on its own; one reached from two groups is
    defined in both (each object is a JIT library of its own)."""
    with phase("ir text"):
        head = module_head(mod)
        # (a kernel compiled early is printed already: early_compile.group_text)
        values = [(v.name, getattr(v, "_xlapy_text", None) or function_text(v), False)
                  if isinstance(v, ir.Function) and v.blocks
                  else (v.name, str(v), isinstance(v, ir.Function)) for v in mod.globals.values()]
        meta = mod._get_metadata_lines()
        defined = {name: text for name, text, decl in values if not decl}
        whole = module_text("\n".join(head + [text for _, text, _ in values] + meta))
        out = []
        for group in groups:
            keep: set[str] = set()
            todo = [n for n in group if n in defined]
            while todo:
                name = todo.pop()
                if name in keep:
                    continue
                keep.add(name)
                todo += [ref for ref in references(defined[name])
                         if ref in defined and ref not in keep]
            if len(keep) == len(defined):  # the whole module (one group: the common case)
                out.append(whole)
                continue
            body = [text for name, text, decl in values if decl or name in keep]
            out.append(module_text("\n".join(head + body + meta)))
        return whole, out


def verify(mod: ir.Module | str) -> llvm.ModuleRef:
    """Parse the module's text back and let LLVM verify it; returns the parsed module."""
    _init()
    text = module_text(mod)
    with phase("llvm parse"):
        ref = llvm.parse_assembly(text)
        ref.verify()
    return ref


def optimize(ref: llvm.ModuleRef, tm: llvm.TargetMachine, vectorize: bool = True,
             light: bool | str = False) -> None:
    """O3 with loop and SLP vectorization for the host CPU. `vectorize=False` (modules of
    tiny kernels only) skips loop vectorization and unrolling: 200 ops on f32[4] compile in
    35 ms instead of 86, and their run time is call overhead anyway. `light`: only SROA and
    CFG simplification, for modules already written in explicit vectors with hoisted
    addresses (the direct convolution: 3 ms instead of 12, same code speed); instcombine
    cost 0.6 ms of a softmax compile for no measured run-time gain on any workload. Functions
    marked `alwaysinline` (a comparator called per element: sort_emit._less) are inlined
    first: top_k's module compiles in 17 ms instead of O3's 25, its run time within 1%."""
    with phase("llvm optimize"):
        _optimize(ref, tm, vectorize, light)


def _optimize(ref: llvm.ModuleRef, tm: llvm.TargetMachine, vectorize: bool,
              light: bool | str) -> None:
    mpm, pb = pass_pipeline(tm, vectorize, light)
    mpm.run(ref, pb)


#: The passes of pipeline INLINE (`pass_pipeline`'s light="inline"): a fused loop's module
#: (loop_fused.py), kernels already compiled once as they are, inlined into one loop whose
#: tables and small buffers are allocas. Inlining, SROA (the tables' loads become the
#: addresses stored at entry, scalar state lives in registers), instcombine and GVN are
#: what it needs; O3's other passes cost 8.4 of its 14 ms on a histogram loop and changed
#: no loop's time (Zen 4, 20,000 steps: histogram 12 us, logistic map 80 -> 73-74 us,
#: fori_nested's tanh and sin on 64 floats 92-93 us either way).
INLINE_PASSES = ("always_inliner", "global_dead_code_eliminate", "sroa", "instruction_combine",
                 "simplify_cfg", "new_gvn", "dead_code_elimination")
INLINE = "inline"


def pass_pipeline(tm: llvm.TargetMachine, vectorize: bool, light: bool | str
                  ) -> tuple[Any, Any]:
    """(module pass manager, pass builder) of `optimize`'s pipeline; keep both alive while
    the manager runs. `light` INLINE: INLINE_PASSES."""
    if light:
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
        mpm = llvm.create_new_module_pass_manager()
        for name in INLINE_PASSES if light == INLINE else ("always_inliner", "sroa",
                                                             "simplify_cfg"):
            getattr(mpm, f"add_{name}_pass")()
        return mpm, pb
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pto.loop_vectorization = vectorize
    pto.slp_vectorization = True
    # No interleaving (several vector bodies per iteration) and no unrolling: 15-25% less
    # compile time, and no kernel of the reference workloads ran slower (big_sum faster).
    pto.loop_interleaving = False
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    return pb.getModulePassManager(), pb


class Engine:
    """One optimized module (or an object file from the cache) for the current target,
    linked into the process's ORC LLJIT as a library of its own; `exports` are the functions
    `address` can find. The library resolves calls only through the target's runtime
    library (rtlib.py), never through the process's symbols.

    Linking an object into the one LLJIT takes 0.1 ms; a fresh MCJIT engine per module (with
    the fresh TargetMachine MCJIT takes ownership of) took 0.9 ms of a 10 ms compile. The
    library is unloaded when the engine is garbage collected. For a target that cannot run
    here the object is emitted and not linked (`linked` is False, `address` is 0)."""

    def __init__(self, mod: ir.Module | str | None = None, obj: bytes | None = None,
                 vectorize: bool = True, light: bool | str = False, *,
                 exports: Sequence[str],
                 compiled: tuple[bytes, llvm.ModuleRef] | None = None) -> None:
        self._ref: llvm.ModuleRef | None = None
        #: The LLVM pipeline its module goes through (optimize): light, inline, O3 or O3
        #: unvectorized.
        self.pipeline = light if isinstance(light, str) else "light" if light else \
            f"O{OPT_LEVEL}" + ("" if vectorize else "-novec")
        self.target = t = target.current()
        if compiled is not None:  # compiled already, with the others (parallel_compile.py)
            self.object, self._ref = compiled
        else:
            self.object = obj if obj is not None else self._compile(mod, vectorize, light)
        self.linked = t.runs_here
        self._library: Any = None
        try:
            self._load(obj is not None, exports)
        except XlapyError:
            if obj is None or mod is None:
                raise
            # A cached object that does not load (another program's, calling a symbol the
            # runtime library lacks, unlinkable): never run it; drop it and recompile.
            from xlapy.backends.cpu import cache

            self.object = self._compile(mod, vectorize, light)
            cache.reject(obj, self.object)
            self._load(False, exports)
        self._exports = frozenset(exports)
        if self._library is not None and os.environ.get("XLAPY_PERF_MAP"):
            perf_map.record(self.object, {n: self.address(n) for n in exports})
        sink = _OBJECTS.get()
        if sink is not None:
            sink.append((str(exports[0]) if exports else "module", self.object))

    def _compile(self, mod: ir.Module | str | None, vectorize: bool, light: bool | str
                 ) -> bytes:
        assert mod is not None
        with _LOCK:
            ctm = _codegen_machine(self.target)
            ref = verify(mod)
            ref.triple = self.target.triple
            ref.data_layout = str(ctm.target_data)
            optimize(ref, ctm, vectorize, light)
            self._ref = ref
            with phase("llvm codegen"), sched_mode.use(sched_mode.tracks_pressure(
                    mod if isinstance(mod, str) else None)):
                return ctm.emit_object(ref)

    def _load(self, cached: bool, exports: Sequence[str]) -> None:
        """Check the object's undefined symbols against the runtime library (and, for a
        cached object, that it is an object for this target at all), then link it."""
        t = self.target
        if cached or self.linked:
            try:
                missing = objfile.undefined(self.object) - rtlib.SYMBOLS
                arch = objfile.machine(self.object)
            except (XlapyError, struct.error, IndexError, ValueError) as e:
                raise XlapyError(f"cpu backend: unreadable object for {t}: {e}") from None
            if missing:
                raise XlapyError(f"cpu backend: compiled code for {t} calls "
                                 f"{', '.join(sorted(missing))}, which the runtime library "
                                 f"(rtlib.py) does not provide")
            if cached and arch != t.arch:
                raise XlapyError(f"cpu backend: a cached {arch} object for {t}")
        if not self.linked:
            return
        from xlapy.backends.cpu import runtime_lib

        rt = runtime_lib.runtime_library(t)
        with _LOCK, phase("link"):
            builder = llvm.JITLibraryBuilder().add_object_img(self.object)
            builder.add_jit_library(rt)
            for name in exports:
                builder.export_symbol(name)
            try:
                name = f"xlapy{next(runtime_lib.LIBRARIES)}"
                self._library = builder.link(runtime_lib.lljit(), name)
            except RuntimeError as e:
                raise XlapyError(f"cpu backend: linking compiled code for {t} failed "
                                 f"(a symbol the runtime library does not provide?): "
                                 f"{e}") from None

    @property
    def asm_ir(self) -> str:
        """The optimized module's text ("" for an object file from the cache)."""
        return str(self._ref) if self._ref is not None else ""

    @property
    def assembly(self) -> str:
        """The target's assembly for the optimized module ("" for a cached object)."""
        if self._ref is None:
            return ""
        with _LOCK:
            return _codegen_machine(self.target).emit_assembly(self._ref)

    def address(self, name: str) -> int:
        if name not in self._exports:
            raise KeyError(f"no function {name} in the compiled module")
        if self._library is None:
            return 0  # compiled for another machine: never called (the executable refuses)
        addr = self._library[name]
        if not addr:
            raise KeyError(f"no function {name} in the compiled module")
        return int(addr)


_OBJECTS: contextvars.ContextVar[list[tuple[str, bytes]] | None] = contextvars.ContextVar(
    "xlapy_objects", default=None)


@contextlib.contextmanager
def collect_objects() -> Iterator[list[tuple[str, bytes]]]:
    """Every object file an Engine emits (or loads from the cache) inside the block:
    (first export, bytes)."""
    objs: list[tuple[str, bytes]] = []
    token = _OBJECTS.set(objs)
    try:
        yield objs
    finally:
        _OBJECTS.reset(token)


def on_host(fn: Callable[..., T]) -> Callable[..., T]:
    """Run `fn` compiling for the host: the process's own native support code (worker pool,
    region runner, while driver) runs here whatever the executables target, and is no part
    of their objects (`collect_objects`)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        token = _OBJECTS.set(None)
        try:
            with target.use(target.host_target()):
                return fn(*args, **kwargs)
        finally:
            _OBJECTS.reset(token)

    return wrapper


# ---- IR helpers ------------------------------------------------------------------------------
def elem(t: ir.Type) -> ir.Type:
    """The element type of a vector type; a scalar type itself."""
    return t.element if isinstance(t, ir.VectorType) else t


def like(t: ir.Type, s: ir.Type) -> ir.Type:
    """Scalar type `s` with as many lanes as `t` (the emitters work on scalars or vectors)."""
    return ir.VectorType(s, t.count) if isinstance(t, ir.VectorType) else s


class Splat(ir.Constant):
    """A vector constant with one value in every lane, printed as LLVM's `splat (T v)`
    (llvmlite spells out every lane: 16x the text, and printing was most of a kernel's
    Python time). `constant` lists the lanes, as for any vector constant."""

    def __init__(self, t: ir.VectorType, v: Any) -> None:
        # Not ir.Constant.__init__: it would wrap every lane in a Constant of its own.
        self.type = t
        self.constant = [v] * t.count
        self._lane = v

    def _get_reference(self) -> str:
        e = self.type.element
        return f"splat ({e} {e.format_constant(self._lane)})"


def splat(t: ir.Type, v: Any) -> ir.Constant:
    """A constant of type `t` (scalar, or every lane of a vector) holding `v`."""
    if isinstance(t, ir.VectorType):
        v = v.constant if isinstance(v, ir.Constant) else v
        key = (t.count, str(t.element), repr(v))  # repr keeps -0.0 apart from 0.0
        c = _SPLATS.get(key)
        if c is None:
            c = _SPLATS[key] = Splat(t, v)
        return c
    return ir.Constant(t, v)


_SPLATS: dict[Any, Splat] = {}


def sfx(t: ir.Type) -> str:
    """An overloaded intrinsic's type suffix: f32, f64, i16, v16f32, ..."""
    e = elem(t)
    name = "f32" if e == F32 else "f64" if e == F64 else "f16" if e == F16 else \
        f"i{e.width}"
    return f"v{t.count}{name}" if isinstance(t, ir.VectorType) else name


def broadcast(b: ir.IRBuilder, v: ir.Value, n: int) -> ir.Value:
    """Scalar `v` in every lane of an n-lane vector (`v` itself if already a vector)."""
    if isinstance(v.type, ir.VectorType):
        return v
    if isinstance(v, ir.Constant):
        return splat(ir.VectorType(v.type, n), v.constant)
    vt = ir.VectorType(v.type, n)
    one = b.insert_element(zeros(vt), v, I32(0))
    return b.shuffle_vector(one, zeros(vt), zeros(ir.VectorType(I32, n)))


class Zeros(ir.Constant):
    """A vector of zeros printed as LLVM's `zeroinitializer` (llvmlite spells out every
    lane: a tenth of a softmax kernel's text was broadcasts' zero vectors, each lane
    formatted on its own). Otherwise llvmlite's `Constant(t, None)`, `constant` included
    (the emitters read its lanes: elementwise.is_flushed, constant_lanes)."""

    def __init__(self, t: ir.VectorType) -> None:
        super().__init__(t, None)

    def _get_reference(self) -> str:
        return "zeroinitializer"


def zeros(t: ir.VectorType) -> ir.Constant:
    """The zero vector of type `t` (one object per type, as `splat`'s constants)."""
    key = str(t)
    c = _ZEROS.get(key)
    if c is None:
        c = _ZEROS[key] = Zeros(t)
    return c


_ZEROS: dict[str, Zeros] = {}


def smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The smaller of signed integers x and y (a loop block's end clamped to its range)."""
    return b.select(b.icmp_signed("<", x, y), x, y)


@contextlib.contextmanager
def for_range(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, name: str = "i",
              step: int | ir.Value = 1, interleave: int | Callable[[], int] = 0,
              parallel: bool = False, vectorize: bool = True) -> Iterator[ir.Value]:
    """`for (i = start; i < stop; i += step)` (a positive step: an int, or an i64 value),
    bottom-tested (one branch per iteration, the
    form LLVM's loop passes want; a guard in front unless start < stop is known);
    `interleave` > 1 asks the vectorizer for that many independent vector bodies per
    iteration (llvm.loop.interleave.count: long dependent chains hide their latency); a
    callable is asked when the loop closes, once the body is known. `parallel`: no
    iteration reads what another writes (an element-wise kernel's loop, whose in-place
    operand is read at the element being written: inplace.py), so a body of one block has
    its loads and stores in an access group the loop's llvm.loop.parallel_accesses names:
    the vectorizer needs no run-time overlap check, which an in-place loop always failed
    (a scalar loop of complex values carried in place ran 4-5x slower than one copied).
    `vectorize` False: the loop vectorizer leaves it (its body is vectorized across, not
    along, its iterations: complex_reduce_emit's columns)."""
    fn = b.function
    pre = b.block
    body = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.end")
    if isinstance(start, ir.Constant) and isinstance(stop, ir.Constant) and \
            start.constant < stop.constant:
        b.branch(body)
    else:
        b.cbranch(b.icmp_signed("<", start, stop), body, done)
    b.position_at_end(body)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    yield i
    inc = ir.Constant(I64, step) if isinstance(step, int) else step
    nxt = b.add(i, inc, name=f"{name}.next", flags=["nsw"])
    i.add_incoming(nxt, b.block)
    br = b.cbranch(b.icmp_signed("<", nxt, stop), body, done)
    if callable(interleave):
        interleave = interleave()
    if vectorize:
        loop_metadata.mark(br, body if parallel and b.block is body else None, interleave)
    else:
        loop_metadata.novec(br)
    b.position_at_end(done)


def const(t: ir.Type, v: Any) -> ir.Constant:
    return ir.Constant(t, v)


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def type_bytes(t: ir.Type) -> int:
    """The size of a scalar (or complex {re, im} struct) IR type in bytes."""
    if isinstance(t, ir.LiteralStructType):
        return sum(type_bytes(e) for e in t.elements)
    return t.width // 8 if isinstance(t, ir.IntType) else \
        {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(t)]


def any_lane(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    """Whether any lane of an i1 vector is set (the i1 itself for a scalar): the mask's bits
    as one integer compared with 0, for a branch around a rarely needed slow path."""
    t = mask.type
    if not isinstance(t, ir.VectorType):
        return mask
    bits = ir.IntType(t.count)
    return b.icmp_unsigned("!=", b.bitcast(mask, bits), ir.Constant(bits, 0))


def intrinsic(b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
    """Call `llvm.<name>` overloaded on the argument types (declared once per module)."""
    mod = b.module
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ret, [a.type for a in args]), name=name)
    return b.call(fn, args)


def scalar_maximum(b: ir.IRBuilder, x: ir.Value, y: ir.Value, is_max: bool) -> ir.Value:
    """llvm.maximum / minimum of two f32 or f64 scalars (x if it is NaN, else y if y is;
    -0 < +0) as compares and selects that stay in vector registers: x86's lowering of the
    scalar intrinsic moves x's sign bit to a general register and back into a mask or blend,
    ~20 cycles on a loop-carried chain (jax.ops.segment_max's sorted scatter on Zen 4, 5.8
    ms against 2.8 for AVX2 code). A tie is x & y for max (+0 over -0), x | y for min."""
    it = ir.IntType(64 if x.type == ir.DoubleType() else 32)
    pick = b.select(b.fcmp_ordered(">" if is_max else "<", x, y), x, y)
    bx, by = b.bitcast(x, it), b.bitcast(y, it)
    tie = b.bitcast(b.and_(bx, by) if is_max else b.or_(bx, by), x.type)
    return b.select(b.fcmp_unordered("uno", x, x), x,
                    b.select(b.fcmp_ordered("==", x, y), tie, pick))


def prefetch(b: ir.IRBuilder, p: ir.Value, locality: int = 3) -> None:
    """Ask for the cache line at pointer p ahead of a read (llvm.prefetch: `locality` 3
    into L1, 2 into L2)."""
    q = p if p.type == I8P else b.bitcast(p, I8P)
    # rw 0 (read), locality, cache 1 (data)
    intrinsic(b, "llvm.prefetch.p0", VOID, [q, I32(0), I32(locality), I32(1)])


def store_fence(b: ir.IRBuilder) -> None:
    """Order non-temporal stores before what follows (sfence on x86, a fence elsewhere)."""
    if target.current().is_x86:
        b.call(declared(b.module, "llvm.x86.sse.sfence", VOID, []), [])
    else:
        b.fence("seq_cst")


def declared(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """Function `name` of `mod` (an intrinsic), declared on first use."""
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ret, args), name=name)
    return fn
