"""Element-wise loops marked parallel (llvm_util.for_range's `parallel`): a scalar kernel
whose result is written over an operand it reads (inplace.py, a native loop's state carried
in place) is vectorized with no run-time overlap check, which such a loop always failed (a
Mandelbrot loop over complex values ran scalar: one thread 15.7 ms -> 2.9 for 256 x 256 x
30 steps); complex elements are loaded and stored part by part so the access group stays
on them. The results stay the interpreter's bits."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import llvm_util, target

#: z <- z * z + c, n <- n + (|z| < 2), 30 times: both state arrays written in place.
MANDEL = """
func.func public @main(%c: tensor<{r}x{k}xcomplex<{p}>>) -> tensor<{r}x{k}xi32> {{
  %z0 = stablehlo.constant dense<(0.0, 0.0)> : tensor<{r}x{k}xcomplex<{p}>>
  %n0 = stablehlo.constant dense<0> : tensor<{r}x{k}xi32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %w:3 = stablehlo.while(%i = %i0, %z = %z0, %n = %n0)
      : tensor<i32>, tensor<{r}x{k}xcomplex<{p}>>, tensor<{r}x{k}xi32>
    cond {{
      %t = stablehlo.constant dense<30> : tensor<i32>
      %l = stablehlo.compare LT, %i, %t, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %l : tensor<i1>
    }} do {{
      %zz = stablehlo.multiply %z, %z : tensor<{r}x{k}xcomplex<{p}>>
      %z1 = stablehlo.add %zz, %c : tensor<{r}x{k}xcomplex<{p}>>
      %a = stablehlo.abs %z1 : (tensor<{r}x{k}xcomplex<{p}>>) -> tensor<{r}x{k}x{p}>
      %two = stablehlo.constant dense<2.0> : tensor<{r}x{k}x{p}>
      %in = stablehlo.compare LT, %a, %two, FLOAT
        : (tensor<{r}x{k}x{p}>, tensor<{r}x{k}x{p}>) -> tensor<{r}x{k}xi1>
      %one = stablehlo.convert %in : (tensor<{r}x{k}xi1>) -> tensor<{r}x{k}xi32>
      %n1 = stablehlo.add %n, %one : tensor<{r}x{k}xi32>
      %s = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %s : tensor<i32>
      stablehlo.return %i1, %z1, %n1 : tensor<i32>, tensor<{r}x{k}xcomplex<{p}>>,
        tensor<{r}x{k}xi32>
    }}
  return %w#2 : tensor<{r}x{k}xi32>
}}
"""


def _points(r: int, k: int, dt: type, rng: np.random.Generator) -> np.ndarray:
    c = (rng.standard_normal((r, k)) + 1j * rng.standard_normal((r, k))) * 0.7
    c.flat[:6] = [np.nan, complex(np.inf, 0), complex(0, -np.inf), 1e-40 + 1e-40j,
                  complex(0.25, 1e-310), -2.0]
    return c.astype(dt)


@pytest.mark.parametrize("p,dt", [("f32", np.complex64), ("f64", np.complex128)])
@pytest.mark.parametrize("r,k", [(64, 64), (9, 37)])
@pytest.mark.parametrize("threads", [1, 2])
def test_complex_state_in_place(p: str, dt: type, r: int, k: int, threads: int) -> None:
    text = MANDEL.format(r=r, k=k, p=p)
    c = _points(r, k, dt, np.random.default_rng(r + k))
    got = xlapy.compile(text, backend="cpu", options={"num_threads": threads})(c)
    want = xlapy.compile(text, backend="interpreter")(c)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _body_texts(text: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The module texts the O3 pipeline compiles for `text` (one thread: state in place)."""
    seen: list[str] = []
    orig = llvm_util.Engine.__init__

    def init(self, mod=None, *a, **k):  # type: ignore[no-untyped-def]
        orig(self, mod, *a, **k)
        if self.pipeline.startswith("O") and isinstance(mod, str):
            seen.append(mod)

    monkeypatch.setattr(llvm_util.Engine, "__init__", init)
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    from xlapy.backends.cpu import cache

    cache.clear_memory()
    xlapy.compile(text, backend="cpu", options={"num_threads": 1})
    return seen


def test_in_place_loop_vectorized_without_overlap_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _body_texts(MANDEL.format(r=64, k=64, p="f32"), monkeypatch)
    body = [t for t in texts if "llvm.loop.parallel_accesses" in t]
    assert body, "no element-wise loop marked parallel"
    opts = []
    for t in body:
        assert "load {float, float}" not in t and "store {float, float}" not in t
        ref = llvm_util.verify(t)
        llvm_util.optimize(ref, llvm_util._codegen_machine(target.current()))
        opts.append(str(ref))
    step = [o for o in opts if "llvm.sqrt" in o]  # (the loop body's: |z|)
    assert len(step) == 1 and "vector.body" in step[0]  # vectorized ...
    assert not any("vector.memcheck" in o for o in opts)  # ... with no overlap check
