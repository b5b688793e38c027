"""Bad HLO text: every error is a ParseError naming file:line:col with the source line and a
caret under the offending text."""

from __future__ import annotations

import pytest

from xlapy.errors import ParseError
from xlapy.hlo_text import parse_hlo_module


def entry(body: str) -> str:
    return f"HloModule m\n\nENTRY %main {{\n  %x = f32[2] parameter(0)\n{body}\n}}\n"


@pytest.mark.parametrize("text,message,line", [
    ("Module m", "expected 'HloModule'", 1),
    (entry("  ROOT %y = f32[2] frobnicate(%x)"), "unknown or unsupported HLO opcode", 5),
    (entry("  ROOT %y = f32[2] negate(%z)"), "use of undefined value z", 5),
    (entry("  ROOT %y = f32[3] negate(%x)"), r"declared f32\[3\] but negate", 5),
    (entry("  ROOT %y = f33[2] negate(%x)"), "unknown element type 'f33'", 5),
    (entry("  ROOT %y = f32[2]{0,0} negate(%x)"), "is not a permutation", 5),
    (entry("  ROOT %y = f32[2,2] broadcast(%x)"), "missing attribute dimensions=", 5),
    (entry("  ROOT %y = f32[2,2] broadcast(%x), dimensions={a}"), "expected an integer", 5),
    (entry("  ROOT %y = f32[1] slice(%x), slice={[0:1:1}"), "'}' does not match '\\['", 5),
    (entry("  %z = f32[] constant(0)\n  ROOT %y = f32[4] pad(%x, %z), padding=1_x"),
     "bad padding", 6),
    (entry("  ROOT %y = pred[2] compare(%x, %x), direction=LESS"), "direction=LESS is not one",
     5),
    (entry("  ROOT %y = f32[3] constant({1, 2})"), r"needs 3 element\(s\), got 2", 5),
    (entry("  ROOT %y = s8[] constant(300)"), "out of range for s8", 5),
    (entry("  ROOT %y = f32[2] call(%x), to_apply=%nowhere"), "no computation named nowhere",
     5),
    (entry("  ROOT %y = f32[2] negate(%x"), "expected ','", 6),
    (entry("  %x = f32[2] negate(%x)"), "defined twice", 5),
    (entry("  ROOT %y = f32[] reduce(%x, %x), dimensions={0}, to_apply=%main"),
     "calls itself", 5),
    ("HloModule m\nENTRY %e {\n  %p = f32[] parameter(1)\n}\n", "parameter numbers", 2),
    ("HloModule m\nENTRY %e (a: f32[3]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}\n",
     "signature says", 2),
    ("HloModule m\nENTRY %e {\n  ROOT %p = f32[] parameter(0)\n", "is not closed", 3),
    (entry("  ROOT %y = f32[2] reduce-window(%x, %x), window={size=2 bad=1}, to_apply=%main"),
     "unknown window field 'bad'", 5),
])
def test_errors_have_location_and_caret(text: str, message: str, line: int) -> None:
    with pytest.raises(ParseError, match=message) as info:
        parse_hlo_module(text, "prog.hlo")
    err = info.value
    assert err.span is not None and err.span.file == "prog.hlo"
    assert err.span.line == line, str(err)
    rendered = str(err)
    assert rendered.startswith(f"prog.hlo:{line}:{err.span.col}: ")
    assert "^" in rendered.splitlines()[-1]


def test_caret_points_at_the_unknown_name() -> None:
    with pytest.raises(ParseError) as info:
        parse_hlo_module(entry("  ROOT %y = f32[2] negate(%nope)"))
    source, caret = str(info.value).splitlines()[-2:]
    assert source[caret.index("^"):].startswith("%nope")


def test_compile_accepts_hlo_text(tmp_path: object) -> None:
    import numpy as np

    import xlapy

    text = entry("  ROOT %y = f32[2] negate(%x)")
    np.testing.assert_array_equal(xlapy.compile(text)(np.float32([1, -2])), [-1, 2])
    from pathlib import Path

    path = Path(str(tmp_path)) / "m.hlo"
    path.write_text(text)
    np.testing.assert_array_equal(xlapy.compile(str(path))(np.float32([3, 0])), [-3, -0.0])
