"""Every object the cpu backend emits for the conformance suite, for every target (aarch64
included, compiled and not run), needs only symbols the runtime library provides (rtlib.py):
checked by listing the undefined symbols of each object (objfile.py)."""

from __future__ import annotations

import pytest

from tests.conformance.test_interpret import CHUNKS
from xlapy.backends import get_backend
from xlapy.backends.cpu import llvm_util, objfile, rtlib, runtime_lib, target
from xlapy.cli.main import entry_functions, verify_module_lenient
from xlapy.errors import XlapyError
from xlapy.stablehlo import parse_module

TARGETS = ["host", "x86-64-v2", "x86-64-v3", "x86-64-v4", "sapphirerapids", "znver5",
           "aarch64-linux-gnu"]


def _conformance_objects() -> list[tuple[str, bytes]]:
    be = get_backend("cpu")
    out: list[tuple[str, bytes]] = []
    for cid, text, offset in CHUNKS:
        try:
            mod = parse_module(text, cid, None, offset)
            verify_module_lenient(mod)
        except XlapyError:
            continue  # chunks that test errors: nothing to compile
        for name in entry_functions(mod, None):
            exe = be.compile_function(mod, mod.get(name))
            out += [(f"{cid} {fn}", obj) for fn, obj in exe.all_objects()]
    return out


@pytest.mark.parametrize("name", TARGETS)
def test_conformance_kernels_need_only_the_runtime_library(name: str) -> None:
    t = target.resolve(name)
    with target.use(t):
        objs = _conformance_objects()
    assert len(objs) > 200  # the suite's kernels, not a vacuous pass
    needed: dict[str, str] = {}
    for where, obj in objs:
        assert objfile.machine(obj) == t.arch, where
        for sym in objfile.undefined(obj):
            needed.setdefault(sym, where)
    missing = {s: w for s, w in needed.items() if s not in rtlib.SYMBOLS}
    assert not missing, f"unresolved for {name}: {missing}"
    if name == "x86-64-v2":  # no F16C, no FMA: the check sees real libcalls
        assert {"__extendhfsf2", "__truncsfhf2", "fma"} <= set(needed)


@pytest.mark.parametrize("name", TARGETS)
def test_runtime_library_needs_only_bound_symbols(name: str) -> None:
    t = target.resolve(name)
    obj = runtime_lib.runtime_object(t)
    assert objfile.machine(obj) == t.arch
    defined = {s.name for s in objfile.symbols(obj) if s.defined}
    assert set(rtlib.DEFINED) <= defined
    assert objfile.undefined(obj) <= set(rtlib.LIBC + rtlib.LIBM)


def test_an_unknown_symbol_is_an_error_naming_it() -> None:
    text = ('declare i32 @puts(ptr)\n@s = private constant [3 x i8] c"hi\\00"\n'
            "define void @f() {\n  %r = call i32 @puts(ptr @s)\n  ret void\n}\n")
    with target.use(target.host_target()), pytest.raises(XlapyError, match="calls puts"):
        llvm_util.Engine(text, exports=["f"])


@pytest.mark.parametrize("name", TARGETS)
def test_support_code_compiles_for_every_target(name: str) -> None:
    """The worker pool (futex and spin-wait per architecture) and the native while driver
    (FTZ through MXCSR or FPCR) are built for the host: each compiles for every target and
    needs only the runtime library."""
    from xlapy.backends.cpu import threads, while_driver

    t = target.resolve(name)
    with target.use(t):
        mods = [threads._emit(), while_driver._emit_driver()]
    tm = llvm_util.target_machine(t)
    for mod in mods:
        ref = llvm_util.verify(mod)
        ref.triple = t.triple
        obj = tm.emit_object(ref)
        assert objfile.machine(obj) == t.arch
        assert objfile.undefined(obj) <= rtlib.SYMBOLS, (mod.name, objfile.undefined(obj))
