# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""conv_polyphase.py: lhs-dilated convolutions run as one ordinary convolution per phase on
the cpu backend, with the interpreter's values (layouts, 1-3 spatial dimensions, unequal
dilations, negative padding, kernels smaller than the dilation, feature groups, f64, bf16,
integers), infinities and NaNs in the kernel where the interpreter has them; convolutions
it does not take stay whole."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.conv_polyphase import PolyphaseConvolution
from xlapy.ops.linalg_conv import num_windows
from xlapy.stablehlo import parse_module
from xlapy.types import ElementType

_T = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "i32": np.int32}


def _conv(n: int, sp: list[int], c: int, k: list[int], o: int, ld: list[int],
          pad: list[tuple[int, int]], layout: str = "nhwc", et: str = "f32", groups: int = 1,
          stride: list[int] | None = None, rd: list[int] | None = None
          ) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """A StableHLO convolution and its operand shapes."""
    stride = stride or [1] * len(sp)
    rd = rd or [1] * len(sp)
    out = [num_windows(h, kk, s, lo, hi, d, r)
           for h, kk, s, (lo, hi), d, r in zip(sp, k, stride, pad, ld, rd)]
    s = ", ".join(str(i) for i in range(len(sp)))
    if layout == "nhwc":
        dims = f"[b, {s}, f]x[{s}, i, o]->[b, {s}, f]"
        xs, ws, os_ = (n, *sp, c), (*k, c // groups, o), (n, *out, o)
    else:
        dims = f"[b, f, {s}]x[o, i, {s}]->[b, f, {s}]"
        xs, ws, os_ = (n, c, *sp), (o, c // groups, *k), (n, o, *out)

    def t(shape: tuple[int, ...]) -> str:
        return f"tensor<{'x'.join(map(str, shape))}x{et}>"

    def lst(v: list[object]) -> str:
        return "[" + ", ".join(str(x) for x in v) + "]"

    window = (f"stride = {lst(stride)}, pad = {lst([[lo, hi] for lo, hi in pad])}, "  # type: ignore[list-item]
              f"lhs_dilate = {lst(ld)}, rhs_dilate = {lst(rd)}")  # type: ignore[arg-type]
    text = f"""func.func @main(%x: {t(xs)}, %w: {t(ws)}) -> {t(os_)} {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = {dims}, window = {{{window}}} {{batch_group_count = 1 : i64, feature_group_count = {groups} : i64}} : ({t(xs)}, {t(ws)}) -> {t(os_)}
  return %0 : {t(os_)}
}}"""
    return text, xs, ws


def _data(shape: tuple[int, ...], et: str, rng: np.random.Generator) -> np.ndarray:
    if et == "i32":
        return rng.integers(-5, 6, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32).astype(_T[et])


CASES = {
    "jax_same_s2": dict(n=2, sp=[5, 6], c=3, k=[3, 3], o=4, ld=[2, 2], pad=[(2, 1), (2, 1)]),
    "full_s2": dict(n=1, sp=[4, 5], c=2, k=[3, 3], o=3, ld=[2, 2], pad=[(2, 2), (2, 2)]),
    "s3_k4": dict(n=1, sp=[4, 4], c=2, k=[4, 4], o=3, ld=[3, 3], pad=[(2, 2), (1, 3)]),
    "mixed_s2_s3": dict(n=2, sp=[4, 5], c=3, k=[3, 2], o=2, ld=[2, 3], pad=[(1, 1), (1, 0)]),
    "k1_s2": dict(n=1, sp=[3, 4], c=2, k=[1, 1], o=3, ld=[2, 2], pad=[(0, 1), (0, 1)]),
    "negative_pad": dict(n=1, sp=[6, 6], c=2, k=[3, 3], o=2, ld=[2, 2], pad=[(-1, 1), (0, -2)]),
    "one_d": dict(n=3, sp=[7], c=4, k=[5], o=2, ld=[2], pad=[(4, 3)]),
    "three_d": dict(n=1, sp=[3, 3, 4], c=2, k=[3, 3, 3], o=2, ld=[2, 2, 2],
                    pad=[(2, 1), (1, 1), (2, 2)]),
    "nchw": dict(n=2, sp=[5, 4], c=3, k=[3, 3], o=5, ld=[2, 2], pad=[(1, 1), (2, 1)],
                 layout="nchw"),
    "groups": dict(n=1, sp=[4, 4], c=4, k=[3, 3], o=6, ld=[2, 2], pad=[(2, 1), (2, 1)],
                   groups=2),
    "f64": dict(n=1, sp=[5, 5], c=3, k=[3, 3], o=2, ld=[2, 2], pad=[(2, 1), (2, 1)], et="f64"),
    "bf16": dict(n=1, sp=[5, 5], c=3, k=[3, 3], o=2, ld=[2, 2], pad=[(2, 1), (2, 1)], et="bf16"),
    "i32": dict(n=1, sp=[5, 5], c=3, k=[3, 3], o=2, ld=[2, 2], pad=[(2, 1), (2, 1)], et="i32"),
}


def _tol(et: str) -> dict[str, float]:
    return {"f32": dict(rtol=1e-5, atol=1e-5), "f64": dict(rtol=1e-12, atol=1e-12),
            "bf16": dict(rtol=2e-2, atol=2e-2), "i32": dict(rtol=0, atol=0)}[et]


@pytest.mark.parametrize("name", list(CASES))
def test_phases_give_the_interpreters_values(name: str) -> None:
    case = CASES[name]
    text, xs, ws = _conv(**case)  # type: ignore[arg-type]
    et = str(case.get("et", "f32"))
    module = parse_module(text)
    assert PolyphaseConvolution().run(module)
    ld = case["ld"]
    convs = sum(i.opcode == "convolution" for i in module.entry_computation().instructions)
    with_taps = sum(all(len(range((lo - q) % s, k, s)) for (lo, _), q, s, k in
                        zip(case["pad"], p, ld, case["k"]))  # type: ignore[arg-type]
                    for p in itertools.product(*(range(s) for s in ld)))  # type: ignore[union-attr]
    assert convs == with_taps
    rng = np.random.default_rng(7)
    x, w = _data(xs, et, rng), _data(ws, et, rng)
    cpu = xlapy.compile(text, backend="cpu")
    got = np.asarray(cpu(x, w)).astype(np.float64)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, w)).astype(np.float64)
    np.testing.assert_allclose(got, want, **_tol(et))


@pytest.mark.parametrize("name", ["jax_same_s2", "full_s2", "s3_k4", "mixed_s2_s3", "k1_s2",
                                  "negative_pad", "three_d", "nchw", "groups", "f64", "bf16"])
def test_non_finite_weights_give_nans_where_the_interpreter_does(name: str) -> None:
    case = CASES[name]
    text, xs, ws = _conv(**case)  # type: ignore[arg-type]
    et = str(case.get("et", "f32"))
    rng = np.random.default_rng(8)
    x, w = _data(xs, et, rng), _data(ws, et, rng)
    flat = w.reshape(-1)
    flat[0], flat[flat.size // 2] = np.inf, np.nan
    got = np.asarray(xlapy.compile(text, backend="cpu")(x, w)).astype(np.float64)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, w)).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], **_tol(et))


@pytest.mark.parametrize("extra", [dict(stride=[2, 2]), dict(rd=[2, 2]), dict(ld=[1, 1])])
def test_other_convolutions_stay(extra: dict[str, object]) -> None:
    case = {**CASES["jax_same_s2"], **extra}
    text, _, _ = _conv(**case)  # type: ignore[arg-type]
    assert not PolyphaseConvolution().run(parse_module(text))


def test_every_phase_flags_its_skipped_non_finite_taps_in_two_boolean_reduces() -> None:
    """Each tap's `or` of non-finite weights over the input features, then each phase's
    over the taps it skips, for all four phases at once (one per phase compiled two kernels
    each, ~3 ms of LLVM apiece; one f32 add-reduce of the masked [phases, taps, in, out]
    products was a 611-line kernel, ~23 ms); values as the interpreter's (above)."""
    case = CASES["jax_same_s2"]
    text, xs, ws = _conv(**case)  # type: ignore[arg-type]
    module = parse_module(text)
    assert PolyphaseConvolution().run(module)
    instrs = module.entry_computation().instructions
    assert [i.opcode for i in instrs].count("convolution") == 4
    reduces = [i for i in instrs if i.opcode == "reduce"]
    assert len(reduces) == 2 and all(r.shape.element_type is ElementType.PRED for r in reduces)


def test_the_phases_compile_one_register_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """The phases' nests differ only in their windows (2x2, 2x1, 1x2, 1x1), which the
    register block reads at run time: one hot module is compiled for the four (it was four
    texts, ~12 ms of -O3 code generation each), and the values are the interpreter's."""
    from xlapy.backends.cpu import cache, parallel_compile

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    cache.clear_memory()
    hot: list[str] = []
    for name in ("submit", "codegen"):
        real = getattr(parallel_compile, name)

        def spy(text: str, *a: object, real: object = real, **k: object) -> object:
            if "conv_general.hot" in text:
                hot.append(text)
            return real(text, *a, **k)  # type: ignore[operator]

        monkeypatch.setattr(parallel_compile, name, spy)
    text, xs, ws = _conv(n=2, sp=[9, 8], c=16, k=[3, 3], o=16, ld=[2, 2],
                         pad=[(2, 1), (2, 1)])
    cpu = xlapy.compile(text, backend="cpu")
    assert str(cpu._exe.explain()).count("conv-direct") == 4
    assert len(hot) == 1
    rng = np.random.default_rng(9)
    x, w = _data(xs, "f32", rng), _data(ws, "f32", rng)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, w))
    np.testing.assert_allclose(np.asarray(cpu(x, w)), want, rtol=1e-5, atol=1e-5)
