"""Every convolution form runs natively on the cpu backend (conv_general.py): window strides,
lhs/rhs dilation, reversal, negative padding, feature groups (grouped, depthwise, channel
multiplier), batch groups, 0-3 spatial dimensions, odd layouts, integer / pred / half /
mixed element types and preferred result types - each against the interpreter (integers
bit-exact, floats within the dot bound), each planned as "library conv-..." and not as the
interpreter's numpy kernel."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_close_to_bound, magnitude_bound
from tests.unit.backends.cpu.util import values
from xlapy.ops.linalg_conv import num_windows
from xlapy.types.element_type import from_shlo_name

CONV = """
func.func @main(%x: tensor<{xs}x{t}>, %w: tensor<{ws}x{t}>) -> tensor<{os}x{ot}> {{
  %y = stablehlo.convolution(%x, %w) dim_numbers = [{xl}]x[{wl}]->[{ol}],
      window = {{{window}}}
      {{batch_group_count = {bg} : i64, feature_group_count = {fg} : i64}}
      : (tensor<{xs}x{t}>, tensor<{ws}x{t}>) -> tensor<{os}x{ot}>
  return %y : tensor<{os}x{ot}>
}}
"""


@dataclass
class Case:
    n: int
    c: int
    sp: tuple[int, ...]
    o: int
    ks: tuple[int, ...]
    stride: tuple[int, ...] = ()
    pad: tuple[tuple[int, int], ...] = ()
    lhs_dil: tuple[int, ...] = ()
    rhs_dil: tuple[int, ...] = ()
    reverse: tuple[bool, ...] = ()
    fg: int = 1
    bg: int = 1
    layout: tuple[str, str, str] = ("b01f", "01io", "b01f")  # digits: spatial dims
    extra: dict[str, Any] = field(default_factory=dict)

    def text(self, t: str, ot: str | None = None) -> tuple[str, list[int], list[int]]:
        s = len(self.sp)
        one = lambda v, d: v or (d,) * s  # noqa: E731
        out_sp = [num_windows(self.sp[i], self.ks[i], one(self.stride, 1)[i],
                              *one(self.pad, (0, 0))[i], one(self.lhs_dil, 1)[i],
                              one(self.rhs_dil, 1)[i]) for i in range(s)]

        def shape(lay: str, sizes: dict[str, int], spatial: list[int]) -> list[int]:
            return [spatial[int(ch)] if ch.isdigit() else sizes[ch] for ch in lay]

        xl, wl, ol = self.layout
        xs = shape(xl, {"b": self.n, "f": self.c}, list(self.sp))
        ws = shape(wl, {"i": self.c // self.fg, "o": self.o}, list(self.ks))
        os_ = shape(ol, {"b": self.n // self.bg, "f": self.o}, out_sp)
        win = []
        if self.stride:
            win.append(f"stride = {list(self.stride)}")
        if self.pad:
            win.append(f"pad = {[list(p) for p in self.pad]}")
        if self.lhs_dil:
            win.append(f"lhs_dilate = {list(self.lhs_dil)}")
        if self.rhs_dil:
            win.append(f"rhs_dilate = {list(self.rhs_dil)}")
        if self.reverse:
            win.append(f"reverse = {[bool(r) for r in self.reverse]}".lower())
        j = lambda v: "x".join(map(str, v))  # noqa: E731
        text = CONV.format(xs=j(xs), ws=j(ws), os=j(os_), t=t, ot=ot or t,
                           xl=", ".join(xl), wl=", ".join(wl), ol=", ".join(ol),
                           window=", ".join(win), bg=self.bg, fg=self.fg)
        return text, xs, ws


FORMS = {
    "stride2": Case(2, 3, (9, 8), 5, (3, 3), stride=(2, 2), pad=((1, 1), (1, 1))),
    "stride_rhs_dilate_nchw": Case(2, 3, (11, 9), 4, (3, 2), stride=(2, 3),
                                   rhs_dil=(2, 1), layout=("bf01", "oi01", "bf01")),
    "conv_transpose": Case(2, 3, (5, 4), 4, (3, 3), lhs_dil=(2, 2), pad=((2, 2), (2, 1))),
    "input_gradient": Case(2, 4, (4, 5), 3, (3, 3), lhs_dil=(2, 2), pad=((2, 2), (2, 2)),
                           reverse=(True, True)),
    "reverse_one": Case(1, 2, (6, 7), 3, (3, 2), reverse=(False, True)),
    "negative_pad": Case(2, 3, (8, 7), 4, (3, 3), pad=((-1, 2), (1, -2))),
    "negative_pad_dilated": Case(1, 2, (5, 6), 3, (2, 2), lhs_dil=(3, 2),
                                 pad=((-4, -1), (-3, 0))),
    "depthwise": Case(2, 12, (7, 9), 12, (3, 3), pad=((1, 1), (1, 1)), fg=12),
    "depthwise_stride": Case(2, 20, (9, 9), 20, (3, 3), stride=(2, 2), fg=20,
                             pad=((0, 1), (0, 1))),
    "channel_multiplier": Case(1, 4, (6, 6), 8, (3, 3), fg=4),
    "grouped_nchw": Case(2, 6, (7, 6), 9, (3, 3), fg=3, pad=((1, 1), (1, 1)),
                         layout=("bf01", "oi01", "bf01")),
    "batch_groups": Case(4, 3, (6, 5), 6, (3, 2), bg=2),
    "weight_gradient": Case(6, 2, (7, 7), 9, (5, 5), bg=3, pad=((1, 1), (1, 1)),
                            layout=("fb01", "io01", "bf01")),
    "one_d": Case(3, 4, (17,), 5, (3,), stride=(2,), pad=((2, 1),), layout=("b0f", "0io", "b0f")),
    "three_d": Case(2, 3, (5, 6, 4), 4, (3, 2, 2), pad=((1, 1), (0, 1), (1, 0)),
                    stride=(1, 2, 1), layout=("b012f", "012io", "b012f")),
    "no_spatial": Case(3, 5, (), 4, (), layout=("bf", "io", "bf")),
    "odd_layout": Case(2, 3, (6, 5), 4, (2, 3), pad=((1, 0), (1, 1)),
                       layout=("f1b0", "i1o0", "1f0b")),
    "one_by_one": Case(2, 8, (5, 6), 16, (1, 1)),
    "wide": Case(1, 3, (4, 40), 33, (3, 3), pad=((1, 1), (1, 1))),
}

TYPES = [  # (operand type, result type)
    ("f32", "f32"), ("f64", "f64"), ("bf16", "bf16"), ("f16", "f16"),
    ("i8", "i8"), ("i32", "i32"), ("i64", "i64"), ("ui8", "ui8"), ("ui32", "ui32"),
    ("i16", "i16"), ("i1", "i1"),
    ("i8", "i32"), ("bf16", "f32"), ("f16", "f32"), ("ui8", "ui32"), ("i16", "i64"),
    ("complex<f32>", "complex<f32>"), ("complex<f64>", "complex<f64>"),
]


def _check(case: Case, t: str, ot: str, seed: int = 0) -> None:
    text, xs, ws = case.text(t, ot)
    cpu = xlapy.compile(text, backend="cpu")
    labels = [line.split(None, 2)[2] for line in cpu._exe.explain().splitlines()
              if "convolution" in line]
    assert labels and all(lab.startswith("library conv-") for lab in labels), labels
    assert not cpu._exe.fallbacks()
    rng = np.random.default_rng(seed)
    x, w = _values(t, xs, rng), _values(t, ws, rng)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, w))
    got = np.asarray(cpu(x, w))
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        f64 = case.text("f64")[0]
        mag = np.asarray(xlapy.compile(f64, backend="interpreter")(
            np.abs(x).astype(np.float64), np.abs(w).astype(np.float64)))
        k = (case.c // case.fg) * int(np.prod(case.ks, dtype=np.int64))
        assert_close_to_bound(got, want, magnitude_bound(mag, max(k, 1), x.dtype,
                                                         out_dtype=got.dtype), text)
    np.testing.assert_array_equal(np.asarray(cpu(x, w)), got)  # deterministic


def _values(t: str, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    """Integers and pred: util.values (extremes: the sums wrap). Floats: finite values over
    eight binades with zeros and denormals (infinities would make the bound NaN)."""
    n = int(np.prod(shape, dtype=np.int64))
    et = from_shlo_name(t)
    if not (et.is_float or et.is_complex):
        return np.asarray(values(et, n, rng)).reshape(shape)

    def real() -> np.ndarray:
        v = rng.standard_normal(n) * np.exp(rng.uniform(-4, 4, n))
        v[: min(n, 4)] = [0.0, -0.0, 1e-40, -3e-39][: min(n, 4)]
        return v.astype(np.float32)

    v = real() + 1j * real() if et.is_complex else real()
    return v.astype(et.dtype).reshape(shape)


@pytest.mark.parametrize("form", list(FORMS))
def test_form_f32(form: str) -> None:
    _check(FORMS[form], "f32", "f32")


@pytest.mark.parametrize("types", TYPES, ids=lambda p: f"{p[0]}->{p[1]}")
@pytest.mark.parametrize("form", ["stride2", "input_gradient", "depthwise", "weight_gradient",
                                  "three_d"])
def test_form_types(form: str, types: tuple[str, str]) -> None:
    _check(FORMS[form], *types)


@pytest.mark.parametrize("form", list(FORMS))
def test_form_int8_wraps(form: str) -> None:
    _check(FORMS[form], "i8", "i8", seed=1)


def test_empty_shapes() -> None:
    _check(Case(0, 3, (4, 4), 2, (3, 3)), "f32", "f32")              # no batch
    _check(Case(2, 3, (2, 2), 2, (3, 3)), "f32", "f32")              # no output positions
    _check(Case(2, 0, (4, 4), 2, (3, 3)), "f32", "f32")              # no input features
    _check(Case(2, 3, (4, 4), 2, (3, 3), pad=((1, 1), (1, 1))), "i32", "i32")


def test_route_labels() -> None:
    """Unit-stride NCHW f32/f64 windows take conv.py's channels-first kernel; everything else
    the loop nest, complex ones too."""
    from xlapy.backends.cpu.conv_general import conv_route
    from xlapy.stablehlo import parse_module

    def route(case: Case, t: str) -> str | None:
        return conv_route(parse_module(case.text(t)[0]).entry_computation().root)

    nchw = ("bf01", "oi01", "bf01")
    assert route(Case(2, 8, (5, 6), 16, (1, 1), layout=nchw), "f32") == "nchw-direct"
    assert route(Case(2, 8, (5, 6), 16, (3, 3), layout=nchw), "f64") == "nchw-direct"
    assert route(Case(2, 8, (5, 6), 16, (3, 3), layout=nchw, stride=(2, 1)), "f32") == "direct"
    assert route(Case(2, 8, (5, 6), 16, (3, 3), layout=nchw), "bf16") == "direct"
    assert route(FORMS["one_by_one"], "f32") == "direct"
    assert route(FORMS["one_by_one"], "complex<f32>") == "direct"


def test_threads_do_not_change_bits() -> None:
    text, xs, ws = Case(2, 16, (24, 40), 24, (3, 3), pad=((1, 1), (1, 1)),
                        stride=(1, 1)).text("f32")
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    one = xlapy.compile(text, backend="cpu", options={"num_threads": 1})
    two = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    np.testing.assert_array_equal(np.asarray(one(x, w)), np.asarray(two(x, w)))


@pytest.mark.parametrize("form", list(FORMS))
def test_form_complex(form: str) -> None:
    """A complex convolution is a real one of twice the channels (re, im interleaved)."""
    _check(FORMS[form], "complex<f32>", "complex<f32>", seed=2)


@pytest.mark.parametrize("form", ["input_gradient", "negative_pad_dilated", "depthwise"])
def test_reused_padded_buffer(form: str) -> None:
    """The padded input buffer a plan keeps between calls holds nothing of the last call."""
    text, xs, ws = FORMS[form].text("f32")
    cpu = xlapy.compile(text, backend="cpu")
    ref = xlapy.compile(text, backend="interpreter")
    rng = np.random.default_rng(4)
    w = rng.standard_normal(ws).astype(np.float32)
    for scale in (1e6, 1.0):
        x = (rng.standard_normal(xs) * scale).astype(np.float32)
        got, want = np.asarray(cpu(x, w)), np.asarray(ref(x, w))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("t", ["i4", "ui4", "i2", "ui2", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ",
                               "f8E5M2FNUZ", "f8E4M3B11FNUZ"])
@pytest.mark.parametrize("form", ["stride2", "depthwise", "weight_gradient"])
def test_narrow_types(form: str, t: str) -> None:
    """2- and 4-bit integers wrap in their width like the interpreter's 64-bit sums
    truncated; f8 sums in f32 and rounds once (one f8 rounding apart at most)."""
    text, xs, ws = FORMS[form].text(t)
    cpu = xlapy.compile(text, backend="cpu")
    assert not cpu._exe.fallbacks() and "library conv-" in cpu._exe.explain()
    et = from_shlo_name(t)
    rng = np.random.default_rng(5)
    if et.is_float:
        x, w = ((rng.standard_normal(s) * 0.5).astype(np.float32).astype(et.dtype)
                for s in (xs, ws))
    else:
        info = ml_dtypes.iinfo(et.dtype)
        x, w = (rng.integers(int(info.min), int(info.max), s, endpoint=True).astype(et.dtype)
                for s in (xs, ws))
    got = np.asarray(cpu(x, w))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, w))
    assert got.dtype == want.dtype
    if et.is_float:
        eps = float(ml_dtypes.finfo(et.dtype).eps)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=2 * eps, atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64))


def test_weights_past_l1_take_two_vector_blocks() -> None:
    """Over WIDE_BLOCK_WEIGHTS bytes of weights the register blocks keep 2 vectors of output
    features (P up to 14: a 7-pixel row one block); the result stays within the bound on
    a small-spatial, many-channel layer (3x3 64 -> 128: 288 KB of f32 weights), padded and
    strided."""
    from xlapy.backends.cpu.conv_general import WIDE_BLOCK_WEIGHTS, _blocking

    assert _blocking(8, 7, 32, WIDE_BLOCK_WEIGHTS) == (4, 4)
    assert _blocking(8, 7, 32, WIDE_BLOCK_WEIGHTS + 1) == (2, 7)
    assert _blocking(8, 14, 16, 1 << 20) == (2, 5)  # 16 registers: 2 vectors anyway
    _check(Case(2, 64, (7, 9), 128, (3, 3), pad=((1, 1), (1, 1))), "f32", "f32")
    _check(Case(1, 64, (9, 9), 128, (3, 3), stride=(2, 2), pad=((1, 1), (0, 1))), "f32", "f32")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_big_weights_rows_inside_the_vector_blocks_same_bits(
        threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over VB_OUTER_WEIGHTS bytes of weights (3x3 128 -> 256: 1.2 MB of f32) a thread's rows
    run inside the vector-block loop (Nest.vb_outer) in at most VB_OUTER_CHUNKS chunks a
    thread: the same bits as rows outside it, padded, on any thread count."""
    from xlapy.backends.cpu import cache, conv_general

    text, xs, ws = Case(2, 128, (5, 7), 256, (3, 3), pad=((1, 1), (1, 1))).text("f32")
    rng = np.random.default_rng(11)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    cache.clear_memory()
    _check(Case(2, 128, (5, 7), 256, (3, 3), pad=((1, 1), (1, 1))), "f32", "f32")
    if threads == 1:  # f64, complex (twice the channels) and stride 2 over the same rule
        _check(Case(1, 96, (4, 5), 256, (3, 3), pad=((1, 1), (1, 1))), "f64", "f64")
        _check(Case(1, 64, (4, 5), 128, (3, 3), pad=((1, 1), (1, 1))), "complex<f32>",
               "complex<f32>")
        _check(Case(2, 128, (9, 9), 256, (3, 3), stride=(2, 2), pad=((1, 1), (1, 1))),
               "f32", "f32")
    got = np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": threads})(x, w))
    monkeypatch.setattr(conv_general, "VB_OUTER_WEIGHTS", 1 << 60)
    cache.clear_memory()
    rows_outside = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    np.testing.assert_array_equal(got, np.asarray(rows_outside(x, w)))


@pytest.mark.parametrize("rows, batch, parts", [(256, 16, 32), (256, 16, 8), (100, 1, 7),
                                                (48, 3, 2)])
def test_split_parts_job_table(monkeypatch: pytest.MonkeyPatch, rows: int, batch: int,
                               parts: int) -> None:
    """split_parts' chunks (built as one job table): contiguous, covering [0, rows), at
    image boundaries when there are as many images, each with its own 64-byte aligned
    scratch row and the shared arguments."""
    from xlapy.backends.cpu import conv_general, parallel
    from xlapy.backends.cpu.threads import JOB_WORDS

    seen: list[np.ndarray] = []

    class Pool:
        def share_table(self, table: np.ndarray, threads: int) -> None:
            seen.append(table.copy())

    monkeypatch.setattr(parallel, "pool", lambda threads: Pool())
    monkeypatch.setattr(conv_general, "fn_address", lambda fn: 1234)
    scratch = np.empty((parts, 200), np.uint8)
    conv_general.split_parts(None, (11, 22, 33), rows, parts, scratch, 99, batch, 2)
    table = seen[0]
    assert table[0] == 0 and table[1] == parts
    jobs = table[2:].reshape(parts, JOB_WORDS)
    assert (jobs[:, 0] == 1234).all() and (jobs[:, 1:4] == [11, 22, 33]).all()
    assert (jobs[:, 7] == 99).all() and (jobs[:, 8:] == 0).all()
    begin, end = jobs[:, 4], jobs[:, 5]
    assert begin[0] == 0 and end[-1] == rows and (begin[1:] == end[:-1]).all()
    assert (end >= begin).all()
    if batch >= parts:
        assert (begin % (rows // batch) == 0).all()
    base = scratch.ctypes.data
    for k, a in enumerate(jobs[:, 6]):
        assert a % 64 == 0 and base + 200 * k <= a < base + 200 * k + 64
