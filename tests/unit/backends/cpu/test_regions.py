"""Row-parallel regions (regions.py): GEMM and kernel chains run per thread on rows, against
NumPy; which runs become regions; the planner's invariants (hypothesis)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xlapy
from tests.tolerance import Bounded
from xlapy.backends.cpu import cache, executable, kernels, regions

MLP = """
func.func @main(%x: tensor<{m}x24x{t}>, %w0: tensor<24x40x{t}>, %b0: tensor<40x{t}>,
                %w1: tensor<40x7x{t}>, %b1: tensor<7x{t}>) -> tensor<{m}x7x{t}> {{
  %0 = stablehlo.dot_general %x, %w0, contracting_dims = [1] x [0]
       : (tensor<{m}x24x{t}>, tensor<24x40x{t}>) -> tensor<{m}x40x{t}>
  %1 = stablehlo.broadcast_in_dim %b0, dims = [1] : (tensor<40x{t}>) -> tensor<{m}x40x{t}>
  %2 = stablehlo.add %0, %1 : tensor<{m}x40x{t}>
  %z = stablehlo.constant dense<0.0> : tensor<{m}x40x{t}>
  %3 = stablehlo.maximum %2, %z : tensor<{m}x40x{t}>
  %4 = stablehlo.dot_general %3, %w1, contracting_dims = [1] x [0]
       : (tensor<{m}x40x{t}>, tensor<40x7x{t}>) -> tensor<{m}x7x{t}>
  %5 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<7x{t}>) -> tensor<{m}x7x{t}>
  %6 = stablehlo.add %4, %5 : tensor<{m}x7x{t}>
  return %6 : tensor<{m}x7x{t}>
}}
"""

#: softmax(q k^T) v, k given as [n, d] (the rhs contracts its dimension 1: a BLAS transpose).
ATTENTION = """
func.func @main(%q: tensor<{m}x16xf32>, %k: tensor<48x16xf32>, %v: tensor<48x16xf32>)
    -> tensor<{m}x16xf32> {{
  %s = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1]
       : (tensor<{m}x16xf32>, tensor<48x16xf32>) -> tensor<{m}x48xf32>
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %mx = stablehlo.reduce(%s init: %init) applies stablehlo.maximum across dimensions = [1]
        : (tensor<{m}x48xf32>, tensor<f32>) -> tensor<{m}xf32>
  %mb = stablehlo.broadcast_in_dim %mx, dims = [0] : (tensor<{m}xf32>) -> tensor<{m}x48xf32>
  %d = stablehlo.subtract %s, %mb : tensor<{m}x48xf32>
  %e = stablehlo.exponential %d : tensor<{m}x48xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
         : (tensor<{m}x48xf32>, tensor<f32>) -> tensor<{m}xf32>
  %sb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<{m}xf32>) -> tensor<{m}x48xf32>
  %p = stablehlo.divide %e, %sb : tensor<{m}x48xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0]
       : (tensor<{m}x48xf32>, tensor<48x16xf32>) -> tensor<{m}x16xf32>
  return %o : tensor<{m}x16xf32>
}}
"""


@pytest.fixture
def threads(request: pytest.FixtureRequest) -> int:
    n = getattr(request, "param", 2)
    cache.clear_memory()
    return n


def _compile(text: str, threads: int) -> tuple[xlapy.CompiledProgram,
                                               executable.CpuExecutable]:
    """Compiled for `threads` threads, splitting work of any size."""
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads, "split_cost": 1,
                                                       "entry_trip": False})
    return prog, prog._exe  # type: ignore[attr-defined]


def _region_lines(exe: executable.CpuExecutable) -> list[str]:
    return [line for line in exe.explain().splitlines() if "row-parallel" in line]


def _mlp_args(m: int, dt: type, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = [(m, 24), (24, 40), (40,), (40, 7), (7,)]
    return [rng.standard_normal(s).astype(dt) for s in shapes]


def _hidden(x: np.ndarray, w0: np.ndarray, b0: np.ndarray) -> Bounded:
    """relu(x w0 + b0) exactly (float64), with how far an f32/f64 computation may be from it
    (tests/tolerance.py: each GEMM's gamma_K sum|products|, in any BLAS kernel's order)."""
    return (Bounded.exact(x) @ Bounded.exact(w0) + Bounded.exact(b0)).maximum(0.0)


def _mlp_ref(x: np.ndarray, w0: np.ndarray, b0: np.ndarray, w1: np.ndarray,
             b1: np.ndarray) -> Bounded:
    return _hidden(x, w0, b0) @ Bounded.exact(w1) + Bounded.exact(b1)


@pytest.mark.parametrize("threads", [2, 3], indirect=True)
@pytest.mark.parametrize("m", [48, 37])
@pytest.mark.parametrize("t,dt", [("f32", np.float32), ("f64", np.float64)])
def test_mlp_is_one_region(threads: int, m: int, t: str, dt: type) -> None:
    """GEMM, bias + relu, GEMM, bias: one region, rows split over 2 or 3 threads (37 rows:
    uneven ranges), equal to NumPy."""
    prog, exe = _compile(MLP.format(m=m, t=t), threads)
    lines = _region_lines(exe)
    assert len(lines) == 1 and lines[0].count("%") == 4, exe.explain()
    args = _mlp_args(m, dt)
    got = prog(*args)
    assert got.dtype == dt
    _mlp_ref(*args).check(got)
    args2 = _mlp_args(m, dt, seed=1)  # new arguments: the region reads the new pointers
    _mlp_ref(*args2).check(prog(*args2))


def test_attention_region_with_transposed_rhs(threads: int) -> None:
    """q k^T (rhs contracting dimension 1), softmax (row reductions inside the kernel), p v."""
    m = 40
    prog, exe = _compile(ATTENTION.format(m=m), threads)
    lines = _region_lines(exe)
    assert len(lines) == 1 and lines[0].count("%") == 3, exe.explain()
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in [(m, 16), (48, 16), (48, 16)])
    s = Bounded.exact(q) @ Bounded.exact(k).T
    e = (s - s.max(1, keepdims=True)).exp()
    (e / e.sum(1, keepdims=True) @ Bounded.exact(v)).check(prog(q, k, v))


def test_whole_reads_end_a_region(threads: int) -> None:
    """A kernel reading the GEMM's result transposed (all rows), and a GEMM whose right
    operand is the run's own result, need every row first: neither joins the region."""
    text = """
func.func @main(%x: tensor<32x32xf32>, %w: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %1 = stablehlo.exponential %0 : tensor<32x32xf32>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
  %3 = stablehlo.add %1, %2 : tensor<32x32xf32>
  %4 = stablehlo.dot_general %3, %3, contracting_dims = [1] x [0]
       : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  return %4 : tensor<32x32xf32>
}
"""
    prog, exe = _compile(text, threads)
    for line in _region_lines(exe):
        assert "%transpose" not in line and "%add" not in line and "%dot_general.1" not in line
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((32, 32)) * 0.1).astype(np.float32)
    w = (rng.standard_normal((32, 32)) * 0.1).astype(np.float32)
    e = (Bounded.exact(x) @ Bounded.exact(w)).exp()
    h = e + e.T
    (h @ h).check(prog(x, w))


#: An LSTM cell's gates: column slices of x w + h u (rows kept), then element-wise.
GATES = """
func.func @main(%x: tensor<32x24xf32>, %h: tensor<32x16xf32>, %w: tensor<24x64xf32>,
                %u: tensor<16x64xf32>, %c: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<32x24xf32>, tensor<24x64xf32>) -> tensor<32x64xf32>
  %1 = stablehlo.dot_general %h, %u, contracting_dims = [1] x [0]
       : (tensor<32x16xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
  %2 = stablehlo.add %0, %1 : tensor<32x64xf32>
  %i = stablehlo.slice %2 [0:32, 0:16] : (tensor<32x64xf32>) -> tensor<32x16xf32>
  %g = stablehlo.slice %2 [0:32, 32:48] : (tensor<32x64xf32>) -> tensor<32x16xf32>
  %ti = stablehlo.tanh %i : tensor<32x16xf32>
  %tg = stablehlo.tanh %g : tensor<32x16xf32>
  %m = stablehlo.multiply %ti, %tg : tensor<32x16xf32>
  %r = stablehlo.add %m, %c : tensor<32x16xf32>
  return %r : tensor<32x16xf32>
}
"""


def test_gates_of_column_slices_join_the_region(threads: int) -> None:
    """A kernel reading column slices of the GEMMs' results (rows from 0, stride 1: its row
    r reads their row r) runs in the region (fusion_plan.row_walk kept the row through the
    slice; it read "?" before, and the gates ran as a thunk of their own)."""
    prog, exe = _compile(GATES, threads)
    lines = _region_lines(exe)
    assert len(lines) == 1 and lines[0].count("%") == 3, exe.explain()
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) * 0.3
            for s in [(32, 24), (32, 16), (24, 64), (16, 64), (32, 16)]]
    want = np.asarray(xlapy.compile(GATES, "interpreter")(*args))
    np.testing.assert_allclose(np.asarray(prog(*args)), want, rtol=2e-5, atol=2e-6)


def test_several_results_and_concurrent_calls(threads: int) -> None:
    """Members whose results leave the computation get fresh buffers each call; calls from
    several threads at once (private pointer tables) stay correct."""
    text = MLP.format(m=48, t="f32").replace(
        "-> tensor<48x7xf32> {", "-> (tensor<48x40xf32>, tensor<48x7xf32>) {").replace(
        "return %6 : tensor<48x7xf32>", "return %3, %6 : tensor<48x40xf32>, tensor<48x7xf32>")
    prog, exe = _compile(text, threads)
    assert len(_region_lines(exe)) == 1
    results: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    errors: list[BaseException] = []

    def call(seed: int) -> None:
        try:
            args = _mlp_args(48, np.float32, seed)
            want_y, want_h = _mlp_ref(*args), _hidden(*args[:3])
            for _ in range(20):
                h, y = prog(*args)
                want_y.check(y)
                want_h.check(h)
            results[seed] = (h, y)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    ts = [threading.Thread(target=call, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    assert len(results) == 4
    assert results[0][0] is not results[1][0]


def test_regions_from_the_disk_cache(threads: int, tmp_path: object,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A region's kernels come from a cached object file in a later compile; its GEMMs are
    called through addresses found at run time (none are baked into the object)."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    text = MLP.format(m=48, t="f32")
    args = _mlp_args(48, np.float32)
    first = _compile(text, threads)[0](*args)
    cache.clear_memory()
    prog, exe = _compile(text, threads)
    assert _region_lines(exe)
    np.testing.assert_array_equal(prog(*args), first)


@pytest.mark.parametrize("threads", [1], indirect=True)
def test_one_thread_forms_the_same_region(threads: int) -> None:
    """Regions do not depend on the thread count (the same chunks run serially), so one
    thread gives the bits two give."""
    prog, exe = _compile(MLP.format(m=48, t="f32"), threads)
    assert _region_lines(exe)
    args = _mlp_args(48, np.float32)
    got = prog(*args)
    _mlp_ref(*args).check(got)
    two = xlapy.compile(MLP.format(m=48, t="f32"), "cpu",
                        options={"num_threads": 2, "split_cost": 1})
    np.testing.assert_array_equal(two(*args), got)


# ---- the planner ------------------------------------------------------------------------------
@st.composite
def _members(draw: st.DrawFn) -> list[regions.Member | None]:
    n = draw(st.integers(0, 12))
    out: list[regions.Member | None] = []
    for j in range(n):
        if draw(st.booleans()) and draw(st.booleans()):
            out.append(None)
            continue
        earlier = list(range(j))
        reads = draw(st.lists(st.sampled_from(earlier), max_size=3)) if earlier else []
        whole = {r for r in reads if draw(st.booleans())}
        rows = draw(st.sampled_from([64, 64, 64, 8]))
        out.append(regions.Member(None, j, rows, whole,  # type: ignore[arg-type]
                                  draw(st.integers(0, 100))))
    return out


@settings(max_examples=300, deadline=None)
@given(_members(), st.integers(1, 3), st.integers(0, 150))
def test_plan_invariants(members: list[regions.Member | None], threads: int,
                         min_cost: int) -> None:
    """Runs are consecutive members with equal rows, at least two, enough work and rows per
    thread, none on one thread, and no member reads a run's earlier result other than at
    its own rows."""
    runs = regions.plan(members, threads, min_cost)
    if threads == 1:
        assert runs == []
    position = {id(m): k for k, m in enumerate(members) if m is not None}
    for run in runs:
        ks = [position[id(m)] for m in run]
        assert ks == list(range(ks[0], ks[0] + len(run))) and len(run) >= 2
        assert len({m.rows for m in run}) == 1
        assert run[0].rows >= regions.MIN_ROWS_PER_THREAD * threads
        assert sum(m.cost for m in run) >= min_cost
        made: set[int] = set()
        for m in run:
            assert not (m.other_reads & made)
            made.add(m.slot)
    used = [id(m) for run in runs for m in run]
    assert len(used) == len(set(used))


def test_a_region_splits_where_every_member_may() -> None:
    """A residue kernel (residue_emit.py: groups of 3 columns) beside a 16-lane one: the
    region's chunks start at multiples of both (the largest alignment, 16, split the
    3-column groups)."""
    def member(align: int) -> regions.Member:
        spec = kernels.Kernel("k", None, [], 0, 4800, 4800, True, align=align)  # type: ignore
        return regions.Member(None, 0, 4800, set(), 4800, kernel=spec)  # type: ignore

    region = regions.Region("r", [member(3), member(16), member(1)])
    assert region.align == 48
    assert all(c % 48 == 0 for c in region.cuts()[:-1]) and len(region.cuts()) > 2


#: tanh(x @ w) and x @ w: a row region of a GEMM and a kernel, and the product alone.
WIDE = """
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{k}x{n}xf32>)
    -> (tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>) {{
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %1 = stablehlo.tanh %0 : tensor<{m}x{n}xf32>
  return %1, %0 : tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_a_wide_region_gemm_runs_gemm_f32_in_chunks(threads: int) -> None:
    """A region's GEMM that blas.gemm would route to gemm_f32 calls it too, natively, in
    calls of at most MAX_M rows (regions.gemm_descriptor: its 512-row halves of a 1024^3
    product had gone to OpenBLAS, 1.1x XLA's time with a tanh; now 1.0): the product's bits
    are gemm_f32's for the whole product, for any thread count."""
    from xlapy.backends.cpu import gemm_f32

    if not gemm_f32.available():
        pytest.skip("no gemm_f32 here")
    from xlapy.backends.cpu import gemm_small

    m, k, n = 600, 512, 1024
    assert gemm_f32.routes(gemm_f32.MAX_M, n, k, b"N", b"N", 0.0)
    if gemm_small.shape(m, n, k, False) is not None:
        pytest.skip("gemm_small's here (its own loop nest, not BLAS)")
    made: list[np.ndarray] = []
    real = regions.gemm_descriptor
    orig = executable.regions.gemm_descriptor

    def spy(g: regions.Gemm, table: int) -> np.ndarray:
        made.append(real(g, table))
        return made[-1]
    regions.gemm_descriptor = spy  # type: ignore[assignment]
    try:
        rng = np.random.default_rng(4)
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        text = WIDE.format(m=m, k=k, n=n)
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
        assert "row-parallel" in prog._exe.explain()
        t, y = (np.asarray(v) for v in prog(x, w))
    finally:
        regions.gemm_descriptor = orig  # type: ignore[assignment]
    assert made and made[0][regions._G_FN] == gemm_f32.fortran_address()
    assert made[0][regions._G_STEP] == gemm_f32.MAX_M
    alone = np.empty((m, n), np.float32)
    gemm_f32.gemm(x, w, alone)  # (one call of all the rows: its bits depend on the shape)
    np.testing.assert_array_equal(y, alone)
    np.testing.assert_allclose(t, np.tanh(x.astype(np.float64) @ w), rtol=1e-5, atol=1e-4)
