"""topk_emit.py: a sort read only through slices of its first k positions (top_k) runs as a
JIT partial selection - the interpreter's results bit for bit (ties by lower index, -0.0 / NaN
in total order, integers, bf16, any sort dimension), never a fallback; a sort whose result is
read otherwise keeps the full sort."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import topk_emit


def _tensor(dims: tuple[int, ...], ty: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in dims)}{ty}>"


def _top_k_text(dims: tuple[int, ...], k: int, ty: str) -> str:
    t = _tensor(dims, ty)
    out = dims[:-1] + (k,)
    tv, ti = _tensor(out, ty), _tensor(out, "i32")
    return (f"func.func @main(%x: {t}) -> ({tv}, {ti}) {{\n"
            f"  %v, %i = chlo.top_k(%x, k = {k}) : {t} -> ({tv}, {ti})\n"
            f"  return %v, %i : {tv}, {ti}\n}}\n")


def _sort_slice_text(dims: tuple[int, ...], dim: int, k: int, ty: str, direction: str,
                     compare_type: str, also_root: bool = False) -> str:
    """A stable sort of (x, iota) along `dim`, then both results sliced to k along `dim`
    (the values with stride 2); `also_root` returns the full sorted values too."""
    t, ti = _tensor(dims, ty), _tensor(dims, "i32")
    lim = list(dims)
    lim[dim] = k
    strides = [1] * len(dims)
    strides[dim] = 2
    tv = _tensor(tuple(-(-d // s) for d, s in zip(lim, strides)), ty)
    tk = _tensor(tuple(lim), "i32")
    rets, types = ["%v", "%i"], [tv, tk]
    if also_root:
        rets.append("%r#0")
        types.append(t)
    return (f"func.func @main(%x: {t}) -> ({', '.join(types)}) {{\n"
            f"  %io = stablehlo.iota dim = {dim} : {ti}\n"
            f'  %r:2 = "stablehlo.sort"(%x, %io) ({{\n'
            f"  ^bb0(%a: tensor<{ty}>, %b: tensor<{ty}>, %p: tensor<i32>, %q: tensor<i32>):\n"
            f"    %c = stablehlo.compare {direction}, %a, %b, {compare_type} : "
            f"(tensor<{ty}>, tensor<{ty}>) -> tensor<i1>\n"
            f"    stablehlo.return %c : tensor<i1>\n"
            f"  }}) {{dimension = {dim} : i64, is_stable = true}} : ({t}, {ti}) -> ({t}, {ti})\n"
            f"  %v = stablehlo.slice %r#0 [{', '.join(f'0:{m}:{s}' for m, s in zip(lim, strides))}]"
            f" : ({t}) -> {tv}\n"
            f"  %i = stablehlo.slice %r#1 [{', '.join(f'0:{m}' for m in lim)}] : ({ti}) -> {tk}\n"
            f"  return {', '.join(rets)} : {', '.join(types)}\n}}\n")


def _run(text: str, x: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], str]:
    cpu = xlapy.compile(text, backend="cpu")
    how = cpu._exe.explain()
    assert not cpu._exe.fallbacks(), how
    got, want = cpu(x), xlapy.compile(text, backend="interpreter")(x)
    return list(got), list(want), how


def _ties(rng: np.random.Generator, dims: tuple[int, ...], dt: type,
          nan: bool = True) -> np.ndarray:
    """Few distinct values (many ties), with -0.0 / 0.0, inf and NaNs for floats."""
    x = rng.integers(-6, 7, dims).astype(np.float64)
    if np.dtype(dt).kind == "f" or dt is ml_dtypes.bfloat16:
        flat = x.reshape(-1)
        if nan:
            flat[rng.integers(0, flat.size, max(1, flat.size // 20))] = np.nan
        flat[rng.integers(0, flat.size, max(1, flat.size // 10))] = -0.0
        flat[rng.integers(0, flat.size, max(1, flat.size // 10))] = np.inf
    return x.astype(dt)


def _equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()  # bit for bit (-0.0 and NaN payloads too)


@pytest.mark.parametrize(("ty", "dt"), [("f32", np.float32), ("f64", np.float64),
                                        ("bf16", ml_dtypes.bfloat16), ("i32", np.int32),
                                        ("ui8", np.uint8)])
@pytest.mark.parametrize(("dims", "k"), [((37, 300), 16), ((3, 5, 64), 1), ((2, 40), 10),
                                         ((5, 2000), 100), ((3, 1300), 300)])
def test_top_k_matches_interpreter(ty: str, dt: type, dims: tuple[int, ...], k: int) -> None:
    rng = np.random.default_rng(3)
    for x in (_ties(rng, dims, dt), rng.standard_normal(dims).astype(dt) if ty[0] in "fb"
              else rng.integers(0, 100, dims).astype(dt)):
        got, want, how = _run(_top_k_text(dims, k, ty), x)
        assert "jit top-k selection" in how
        _equal(got, want)


@pytest.mark.parametrize("k", [8, 32, 100])  # the walk from the end; a binary search
@pytest.mark.parametrize("order", ["ascending", "descending", "equal"])
def test_adversarial_rows(order: str, k: int) -> None:
    """Rows where every element enters the buffer (ascending for a largest-first top_k), or
    none after the first k, or all tie (indices 0..k-1)."""
    n = 500
    row = np.arange(n, dtype=np.float32)
    x = np.stack([row if order == "ascending" else row[::-1] if order == "descending"
                  else np.zeros(n, np.float32)] * 4)
    got, want, how = _run(_top_k_text(x.shape, k, "f32"), x)
    assert "jit top-k selection" in how
    _equal(got, want)


@pytest.mark.parametrize(("dim", "direction"), [(0, "LT"), (1, "GT"), (2, "LT")])
def test_sort_then_slices_any_dimension(dim: int, direction: str) -> None:
    dims = (40, 44, 48)
    x = _ties(np.random.default_rng(dim), dims, np.float32)
    got, want, how = _run(_sort_slice_text(dims, dim, 7, "f32", direction, "TOTALORDER"), x)
    assert "jit top-k selection" in how
    _equal(got, want)


def test_full_sort_when_read_elsewhere() -> None:
    """The sorted values also leave the computation: every position is read, a full sort."""
    dims = (4, 64)
    x = _ties(np.random.default_rng(1), dims, np.float32)
    got, want, how = _run(_sort_slice_text(dims, 1, 5, "f32", "GT", "TOTALORDER", True), x)
    assert "jit top-k selection" not in how and "sort" in how
    _equal(got, want)


def test_float_compare_keeps_full_sort() -> None:
    """A FLOAT compare is no strict weak order once a NaN comes: no selection, the full
    sort's. (Inputs without NaN here: the interpreter's merge sort under a comparator that
    is no strict weak order is not deterministic.)"""
    dims = (4, 64)
    x = _ties(np.random.default_rng(2), dims, np.float32, nan=False)
    got, want, how = _run(_sort_slice_text(dims, 1, 5, "f32", "GT", "FLOAT"), x)
    assert "jit top-k selection" not in how
    _equal(got, want)


def test_k_bounds() -> None:
    """k above MAX_K, or above a quarter of the row, sorts fully."""
    for dims, k in (((2, 4 * topk_emit.MAX_K + 8), topk_emit.MAX_K + 1), ((2, 40), 11)):
        x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
        got, want, how = _run(_top_k_text(dims, k, "f32"), x)
        assert "jit top-k selection" not in how
        _equal(got, want)


def test_split_over_threads() -> None:
    """Enough rows to split over the native workers: the same result."""
    dims = (512, 256)
    x = _ties(np.random.default_rng(5), dims, np.float32)
    text = _top_k_text(dims, 8, "f32")
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    _equal(list(cpu(x)), list(xlapy.compile(text, backend="interpreter")(x)))
