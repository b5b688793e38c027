"""The arena of temporaries (arena.py): live ranges over the thunk schedule, region steps,
alias groups of non-native thunks, results live to the end; a property test that no two
temporaries live at the same step overlap; and programs whose temporaries share memory."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xlapy
from tests.tolerance import Bounded
from xlapy.backends.cpu import arena, cache

KB = 1024


def _overlap(off: dict[int, int], sizes: dict[int, int], a: int, b: int) -> bool:
    return off[a] < off[b] + sizes[b] and off[b] < off[a] + sizes[a]


def test_dead_temporaries_share_memory() -> None:
    """t0 -> t1 -> t2 -> t3 by kernels: t0 is dead once t1 is written, so t2 can take its
    place; t1 and t2 are live together and cannot share."""
    steps = arena.schedule([0, 1, 2, 3], [[9], [0], [1], [2]], {}, {0, 1, 2, 3})
    sizes = {0: 4 * KB, 1: 4 * KB, 2: 4 * KB}
    off, total = arena.offsets(steps, sizes, [3])
    assert total == 8 * KB
    assert not _overlap(off, sizes, 0, 1) and not _overlap(off, sizes, 1, 2)
    assert off[2] == off[0]


def test_region_members_never_share() -> None:
    """Members of one region run at once on different rows: one step, disjoint memory,
    even when the first member's result is dead after the second."""
    steps = arena.schedule([0, 1, 2, 3], [[9], [0], [1], [2]], {0: "r", 1: "r", 2: "r"},
                           {0, 1, 2, 3})
    assert [s.step for s in steps] == [0, 0, 0, 1]
    sizes = {0: 4 * KB, 1: 4 * KB, 2: 4 * KB}
    off, total = arena.offsets(steps, sizes, [3])
    assert total == 12 * KB


def test_views_keep_their_source_alive() -> None:
    """A tuple (not native code) of temporary t0 is read by a later thunk: t0 stays live
    until then, so t2 written in between may not take its memory."""
    steps = arena.schedule([0, 1, 2, 3], [[9], [0], [9], [1, 2]], {}, {0, 2, 3})
    sizes = {0: 4 * KB, 2: 4 * KB}
    off, _ = arena.offsets(steps, sizes, [3])
    assert not _overlap(off, sizes, 0, 2)


def test_results_live_to_the_end() -> None:
    """A temporary whose view is a result (through a non-native thunk) is never reused."""
    steps = arena.schedule([0, 1, 2], [[9], [0], [9]], {}, {0, 2})
    sizes = {0: 4 * KB, 2: 4 * KB}
    off, _ = arena.offsets(steps, sizes, [1])
    assert not _overlap(off, sizes, 0, 2)


@st.composite
def _schedules(draw: st.DrawFn) -> tuple[list[arena.Step], dict[int, int], list[int]]:
    n = draw(st.integers(1, 14))
    outs = list(range(n))
    ins = [draw(st.lists(st.integers(0, k - 1), max_size=3)) if k else [] for k in range(n)]
    native = {k for k in outs if draw(st.booleans())}
    group: dict[int, str] = {}
    k = 0
    while k < n:  # some consecutive runs become regions
        run = draw(st.integers(1, 3))
        if draw(st.booleans()):
            for j in range(k, min(n, k + run)):
                group[j] = f"r{k}"
        k += run
    sizes = {s: draw(st.sampled_from([64, 128, 640, 4096])) for s in outs
             if s in native and draw(st.booleans())}
    results = draw(st.lists(st.sampled_from(outs), max_size=2))
    return arena.schedule(outs, ins, group, native), sizes, results


@settings(max_examples=300, deadline=None)
@given(_schedules())
def test_live_temporaries_never_overlap(case: tuple[list[arena.Step], dict[int, int],
                                                     list[int]]) -> None:
    """Recomputed naively: a value is needed from the step that writes it to the last step
    that reads it or any value a non-native thunk made from it (transitively), results to
    the end; temporaries needed at a common step get disjoint, aligned memory."""
    steps, sizes, results = case
    off, total = arena.offsets(steps, sizes, results)
    end = steps[-1].step + 1
    made_from: dict[int, set[int]] = {st_.out: set() for st_ in steps}
    for st_ in steps:
        if not st_.fresh_memory:
            for i in st_.ins:
                made_from[i].add(st_.out)
                made_from[st_.out].add(i)

    def group(s: int) -> set[int]:
        seen, todo = {s}, [s]
        while todo:
            for t in made_from[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen

    written = {st_.out: st_.step for st_ in steps}
    needed: dict[int, tuple[int, int]] = {}
    for s in sizes:
        g = group(s)
        lo = min(written[t] for t in g)
        hi = max([written[t] for t in g] + [st_.step for st_ in steps if g & set(st_.ins)])
        needed[s] = (lo, end if g & set(results) else hi)
    for a in sizes:
        assert off[a] % 64 == 0 and off[a] + sizes[a] <= total
        for b in sizes:
            if a < b and needed[a][0] <= needed[b][1] and needed[b][0] <= needed[a][1]:
                assert not _overlap(off, sizes, a, b), (a, b, needed[a], needed[b])


CHAIN = """
func.func @main(%x: tensor<64x256xf32>, %y: tensor<256x64xf32>) -> (tensor<64x64xf32>,
    tensor<64x256xf32>) {
  %a = stablehlo.exponential %x : tensor<64x256xf32>
  %b = stablehlo.dot_general %a, %y, contracting_dims = [1] x [0]
       : (tensor<64x256xf32>, tensor<256x64xf32>) -> tensor<64x64xf32>
  %c = stablehlo.tanh %b : tensor<64x64xf32>
  %d = stablehlo.dot_general %c, %y, contracting_dims = [0] x [1]
       : (tensor<64x64xf32>, tensor<256x64xf32>) -> tensor<64x256xf32>
  %e = stablehlo.sine %d : tensor<64x256xf32>
  %f = stablehlo.dot_general %e, %y, contracting_dims = [1] x [0]
       : (tensor<64x256xf32>, tensor<256x64xf32>) -> tensor<64x64xf32>
  %g = stablehlo.cosine %f : tensor<64x64xf32>
  %s = "stablehlo.sort"(%e) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %lt = stablehlo.compare LT, %p, %q : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<64x256xf32>) -> tensor<64x256xf32>
  return %g, %s : tensor<64x64xf32>, tensor<64x256xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_programs_with_shared_temporaries_match_the_interpreter(
        threads: int) -> None:
    """Temporaries of a GEMM/kernel chain reuse each other's memory: %d reads %c whole
    (c^T y^T), so the chain is two row-parallel regions (formed for any thread count),
    and the second reuses the first's temporaries; results agree with the interpreter over
    repeated calls."""
    cache.clear_memory()
    prog = xlapy.compile(CHAIN, backend="cpu", options={"num_threads": threads})
    exe = prog._exe  # type: ignore[attr-defined]
    where, total = exe._arena_plan
    sizes = [int(np.prod(exe.shapes[s].dimensions)) * 4 for s in exe.temp_slots]
    assert len(sizes) >= 4
    assert exe.explain().count("row-parallel") == 2, exe.explain()
    assert total < sum(sizes), (total, sizes, exe.explain())
    ref = xlapy.compile(CHAIN, backend="interpreter")
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = (rng.standard_normal((64, 256)) * 0.1).astype(np.float32)
        y = (rng.standard_normal((256, 64)) * 0.1).astype(np.float32)
        want = _chain_bounds(x, y)
        for g, r, b in zip(prog(x, y), ref(x, y), want):
            b.check(g, "cpu")
            b.check(r, "interpreter")


def _chain_bounds(x: np.ndarray, y: np.ndarray) -> tuple[Bounded, Bounded]:
    """CHAIN's exact results (float64) and how far any f32 computation may be from them: the
    GEMMs' own rounding grows with their sums of |products| (K = 256, 64, 256), and each
    GEMM and function passes on its operands' errors (tests/tolerance.py), whatever BLAS
    kernel and exp/tanh/sin/cos path the machine takes."""
    bx, by = Bounded.exact(x), Bounded.exact(y)
    e = (bx.exp() @ by).tanh().T.dot(by.T).sin()
    return (e @ by).cos(), e.sort(axis=1)
