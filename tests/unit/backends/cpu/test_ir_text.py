"""Functions written as IR text (ir_text.py): folded i64 arithmetic, for_range-shaped loops,
branches; the text parses, verifies and runs. And the cold module of a convolution nest
(conv_rows_text.py) is one text with its rows functions defined once. module_text's
attributes and loop metadata on such texts."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np

from xlapy.backends.cpu.conv_kernel import Nest, Source, emit
from xlapy.backends.cpu.ir_text import FunctionText
from xlapy.backends.cpu.llvm_util import F32, Engine, module_text


def test_folding() -> None:
    f = FunctionText("define void @f(i64 %a)")
    assert f.add(2, 3) == 5 and f.mul(4, 5) == 20
    assert f.add("%a", 0) == "%a" and f.add(0, "%a") == "%a"
    assert f.mul("%a", 1) == "%a" and f.mul(1, "%a") == "%a" and f.mul("%a", 0) == 0
    assert f.gep("i64", "%p", 0) == "%p"
    assert f.add("%a", 1).startswith("%t")


def _sum_fn() -> str:
    """sum(i * j for i < n for j < 3 if i != 2) into *out, through loops and branches."""
    f = FunctionText("define void @tsum(i64* %out, i64 %n)")
    f.store("i64", 0, "%out")
    with f.loop(0, "%n", "i") as i:
        with f.loop(0, 3, "j") as j:
            yes, no, end = f.if_else(f.icmp("ne", i, 2))
            f.label(yes)
            acc = f.load("i64", "%out")
            f.store("i64", f.add(acc, f.mul(i, j)), "%out")
            f.do(f"br label %{end}")
            f.label(no)
            with f.if_then(f.icmp("eq", j, 0)):
                f.do("call void @llvm.donothing()")
            f.do(f"br label %{end}")
            f.label(end)
    f.do("ret void")
    return "declare void @llvm.donothing()\n" + f.text()


def test_loops_and_branches_run() -> None:
    text = module_text(_sum_fn())
    llvm.parse_assembly(text).verify()
    eng = Engine(text, light=True, exports=["tsum"])
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(eng.address("tsum"))
    for n in (0, 1, 5):
        out = np.zeros(1, np.int64)
        fn(out.ctypes.data, n)
        assert out[0] == sum(i * j for i in range(n) for j in range(3) if i != 2)


def test_cold_module_defines_rows_once() -> None:
    nest = Nest(b=1, g=1, ci=16, cx=16, gx=16, apad=16, lanes=8, v=2, p=4, xvec=False,
                sp_out=(8, 10), ks=(3, 3), strides=(1, 1), rhs_dil=(1, 1), padded=(10, 12),
                sp_in=(8, 10), pad=((1, 1), (1, 1)), rows=True)
    split = emit("c_rows", F32, nest, source=Source(nest, None, 0))
    text = split.cold_text()
    llvm.parse_assembly(text).verify()
    assert text.count('@"c_rows.rows"(') == 2  # its definition and the entry's call
    assert 'declare void @"c_rows.rows"' not in text
    assert text.count('define internal void @"c_rows.src"') == 1
    # no constant tables, and the hot functions' table is read in the entry blocks only
    # (a global's address keeps -O0's fast instruction selector off the rest of a block)
    assert "internal constant" not in text
    for body in text.split("define internal void")[1:]:
        loops = body.split("\n", 1)[1].split(".body:", 1)[-1]
        assert '@"c_rows.blocks"' not in loops


def test_one_iteration_loop_is_its_body() -> None:
    """loop(k, k + 1) yields the int k and writes no blocks (the CNN's rows: groups,
    vector blocks and pixel blocks of one each); loop(0, 2) and a loop to a runtime
    bound stay loops. The function still computes the same sum."""
    f = FunctionText("define void @one(i64* %out)")
    with f.loop(3, 4, "i") as i:
        assert i == 3
        f.store("i64", f.mul(i, 5), "%out")
    f.do("ret void")
    text = f.text()
    assert "phi" not in text and "br " not in text and "store i64 15" in text
    g = FunctionText("define void @two(i64* %out, i64 %n)")
    with g.loop(0, 2, "i") as i:
        assert isinstance(i, str)
    with g.loop(0, "%n", "j") as j:
        assert isinstance(j, str)
    g.do("ret void")
    assert g.text().count("phi") == 2
    ref = llvm.parse_assembly(text)
    ref.verify()


def test_a_line_written_later_holds_a_phi_of_values_made_after_it() -> None:
    """`later` keeps a line's place and `write_at` fills it: a loop-carried sum whose phi
    names the latch's value (gemm_f32_text.py's accumulators)."""
    f = FunctionText("define i64 @tri(i64 %n)")
    f.do("br label %body")
    f.label("body")
    i, acc = f.fresh("i"), f.fresh("acc")
    at_i, at_acc = f.later(), f.later()
    nxt_acc = f.op(f"add i64 {acc}, {i}")
    nxt_i = f.add(i, 1)
    f.write_at(at_i, f"{i} = phi i64 [0, %entry], [{nxt_i}, %body]")
    f.write_at(at_acc, f"{acc} = phi i64 [0, %entry], [{nxt_acc}, %body]")
    f.do(f"br i1 {f.icmp('slt', nxt_i, '%n')}, label %body, label %done")
    f.label("done")
    f.do(f"ret i64 {nxt_acc}")
    text = module_text(f.text())
    llvm.parse_assembly(text).verify()
    eng = Engine(text, light=True, exports=["tri"])
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(eng.address("tri"))
    assert [fn(n) for n in (1, 2, 10)] == [0, 1, 45]


def test_module_text_marks_every_definition_and_resolves_loop_placeholders() -> None:
    """module_text finds definitions (llvmlite's `define ...` then `{` on a line of its own;
    after a newline, the text's first line included) and
    resolves the loop placeholders in the metadata at the text's end only; a text with no
    metadata comes back with just the attributes."""
    text = ('define void @a()\n{\nentry:\n  br label %l\nl:\n  br i1 0, label %l, label %e, '
            '!llvm.loop !0\ne:\n  ret void\n}\n\ndefine void @b() nounwind\n{\n  ret void\n}'
            '\n\n!0 = !{ !"xlapy.loop.ic.4" }\n!1 = !{ !"xlapy.access.group" }\n')
    out = module_text(text)
    assert out.startswith("define void @a() #7001\n{") and "@b() nounwind #7001\n{" in out
    assert '!0 = distinct !{!0, !{!"llvm.loop.interleave.count", i32 4}}' in out
    assert "!1 = distinct !{}" in out and "xlapy.loop" not in out
    plain = module_text("define void @c()\n{\n  ret void\n}\n")
    assert plain.startswith("define void @c() #7001\n{") and "distinct" not in plain
