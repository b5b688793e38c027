"""Random 2-D channels-last convolutions (hypothesis) against the interpreter: output rows of
any width, so the register blocks rarely divide them and the row's last block overlaps the
one before it (conv_rows_text.py), with strides, window dilations, padding and feature
groups. i32 compares bit for bit (the sums wrap the same way), f32 within the dot bound."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.unit.backends.cpu.test_conv_general import Case, _check
from xlapy.ops.linalg_conv import num_windows


@st.composite
def cases(draw: st.DrawFn) -> Case:
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    c = groups * draw(st.integers(1, 4))
    o = groups * draw(st.integers(1, 12))
    h, w = draw(st.integers(1, 4)), draw(st.integers(1, 45))
    ks = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(2))
    out = [num_windows(n, k, s, lo, hi, 1, d)
           for n, k, s, (lo, hi), d in zip((h, w), ks, stride, pad, dil)]
    assume(min(out) >= 1)
    return Case(draw(st.integers(1, 2)), c, (h, w), o, ks, stride=stride, pad=pad,
                rhs_dil=dil, fg=groups)


@settings(deadline=None)
@given(case=cases(), t=st.sampled_from(["i32", "f32"]))
def test_random_convolutions_match_the_interpreter(case: Case, t: str) -> None:
    _check(case, t, t)
