"""topk_select.py: a stable sort of (x, iota) sliced to k is chlo.top_k again on the cpu
backend - no iota kernel, no full-size temporary (lax.top_k's 4096x1024 peak was 16.5 MB),
the interpreter's bits (ties, -0.0, NaN, integers, largest and smallest); sorts that are not
exactly that keep their own path."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_topk_emit import _equal, _sort_slice_text, _ties, _top_k_text


def _compile(text: str, threads: int = 1) -> tuple[object, str]:
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    exe = cpu._exe
    assert not exe.fallbacks()
    return cpu, exe.explain()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("ty", "dt"), [("f32", np.float32), ("f64", np.float64),
                                        ("i32", np.int32)])
def test_top_k_selects_without_iota_or_full_results(ty: str, dt: type, threads: int) -> None:
    dims, k = (300, 256), 16
    text = _top_k_text(dims, k, ty)
    cpu, how = _compile(text, threads)
    assert "chlo.top_k" in how and "jit top-k selection" in how and "kernel" not in how
    exe = cpu._exe  # type: ignore[attr-defined]
    assert exe._arena_plan[1] == 0  # no temporary: the two [300, 16] results only
    x = _ties(np.random.default_rng(11), dims, dt)
    _equal(list(cpu(x)), list(xlapy.compile(text, backend="interpreter")(x)))


@pytest.mark.parametrize("direction", ["GT", "LT"])
def test_sort_of_iota_sliced_becomes_top_k(direction: str) -> None:
    """The chlo lowering's own form, written out: largest (GT) and smallest (LT) first."""
    dims, k = (40, 64), 9
    lim = dims[:-1] + (k,)
    t, ti = f"tensor<{dims[0]}x{dims[1]}xf32>", f"tensor<{dims[0]}x{dims[1]}xi32>"
    tv, tk = f"tensor<{lim[0]}x{k}xf32>", f"tensor<{lim[0]}x{k}xi32>"
    text = (f"func.func @main(%x: {t}) -> ({tv}, {tk}) {{\n"
            f"  %io = stablehlo.iota dim = 1 : {ti}\n"
            f'  %r:2 = "stablehlo.sort"(%x, %io) ({{\n'
            f"  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %p: tensor<i32>, %q: tensor<i32>):\n"
            f"    %c = stablehlo.compare {direction}, %a, %b, TOTALORDER : "
            f"(tensor<f32>, tensor<f32>) -> tensor<i1>\n"
            f"    stablehlo.return %c : tensor<i1>\n"
            f"  }}) {{dimension = 1 : i64, is_stable = true}} : ({t}, {ti}) -> ({t}, {ti})\n"
            f"  %v = stablehlo.slice %r#0 [0:{lim[0]}, 0:{k}] : ({t}) -> {tv}\n"
            f"  %i = stablehlo.slice %r#1 [0:{lim[0]}, 0:{k}] : ({ti}) -> {tk}\n"
            f"  return %v, %i : {tv}, {tk}\n}}\n")
    cpu, how = _compile(text)
    assert "chlo.top_k" in how
    x = _ties(np.random.default_rng(5), dims, np.float32)
    _equal(list(cpu(x)), list(xlapy.compile(text, backend="interpreter")(x)))


def test_other_sorts_keep_their_path() -> None:
    """A strided slice, a FLOAT compare, a sort along the first dimension, a sorted result
    read in full: not chlo.top_k (their results as before, the interpreter's)."""
    dims = (40, 44)
    x = _ties(np.random.default_rng(2), dims, np.float32, nan=False)
    for text in (_sort_slice_text(dims, 1, 7, "f32", "GT", "TOTALORDER"),
                 _sort_slice_text(dims, 1, 5, "f32", "GT", "FLOAT"),
                 _sort_slice_text(dims, 0, 5, "f32", "LT", "TOTALORDER"),
                 _sort_slice_text(dims, 1, 5, "f32", "GT", "TOTALORDER", True)):
        cpu, how = _compile(text)
        assert "chlo.top_k" not in how
        _equal(list(cpu(x)), list(xlapy.compile(text, backend="interpreter")(x)))


def test_top_k_selection_is_a_library_built_once_per_type_and_direction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """chlo.top_k's selection takes the rows, n and k as arguments: one module per element
    type, direction, target and denormal mode, built once (like XLA:CPU's TopK runtime
    function), not a module of each program (~8 ms of LLVM code generation a compile)."""
    from xlapy.backends.cpu import topk_emit
    from xlapy.backends.cpu.once import once

    built: list[tuple[object, ...]] = []
    raw = topk_emit._library.__wrapped__  # type: ignore[attr-defined]
    monkeypatch.setattr(topk_emit, "_library", once(
        lambda *a: (built.append(a[1:]), raw(*a))[1]))
    rng = np.random.default_rng(3)
    for dims, k, ty, dt, mode in [((30, 64), 4, "f32", np.float32, "ftz"),
                                  ((7, 5, 300), 60, "f32", np.float32, "ftz"),
                                  ((30, 64), 4, "f64", np.float64, "ftz"),
                                  ((30, 64), 4, "f32", np.float32, "ieee")]:
        text = _top_k_text(dims, k, ty)
        cpu = xlapy.compile(text, backend="cpu", options={"denormal": mode})
        x = _ties(rng, dims, dt)
        _equal(list(cpu(x)), list(xlapy.compile(text, backend="interpreter",
                                                options={"denormal": mode})(x)))
    assert len(built) == 3 and len(set(built)) == 3
