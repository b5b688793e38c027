"""Kernels written in explicit vectors (lanes.py): every op and type, reductions of every
kind and extents that leave a scalar rest, against the interpreter; and which kernels fall
back to scalar IR for LLVM's vectorizer."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tolerance import (
    DOT_C,
    assert_close_to_bound,
    assert_ulp_close,
    eps,
    sum_bound,
    ulp_bound,
)
from tests.unit.backends.cpu.test_elementwise import TYPES, _check, _ops
from tests.unit.backends.cpu.util import module, op, run_both, values
from xlapy.backends.cpu import cache, lanes
from xlapy.ir import Computation, Instruction
from xlapy.ops.core import ConstantAttrs, ParameterAttrs
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.shape import BroadcastInDimAttrs, TransposeAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Literal, Shape

W = lanes.vector_width()
#: Rows of 2W + 5 columns: two vector iterations and a scalar rest in every innermost loop.
ROWS, COLS = 3, 2 * W + 5


@pytest.mark.parametrize("t,arity", [(t, a) for t in TYPES for a in (1, 2) if _ops(a, t)],
                         ids=str)
def test_ops_in_lanes_and_rest(t: ET, arity: int) -> None:
    """Each op on [3, 2W+5]: the vector loop and the scalar rest agree with the interpreter."""
    names = _ops(arity, t)
    rng = np.random.default_rng(arity)
    n = ROWS * COLS
    xs = [values(t, n, rng, small=(arity == 2)).reshape(ROWS, COLS) for _ in range(arity)]
    if arity == 2:
        xs[0] = values(t, n, rng).reshape(ROWS, COLS)
    shape = Shape.array(t, (ROWS, COLS))
    mod = module([shape] * arity, lambda c, p: [op(c, name, p) for name in names])
    ref, got, exe = run_both(mod, xs)
    assert all(k.explicit for k in exe.kernel_specs)
    for name, r, g in zip(names, ref, got):
        _check(name, t, r.reshape(-1), g.reshape(-1), xs[0].reshape(-1))


def _reducer(t: ET, opcode: str) -> Computation:
    c = Computation(f"{opcode}_{t}")
    s = Shape.array(t, ())
    a = c.add(Instruction("parameter", [], s, ParameterAttrs(0, s), name="a"))
    b = c.add(Instruction("parameter", [], s, ParameterAttrs(1, s), name="b"))
    c.root = op(c, opcode, [a, b])
    return c


def _const(c: Computation, t: ET, v: object) -> Instruction:
    lit = Literal.from_numpy(np.asarray(v, dtype=t.dtype), t)
    return op(c, "constant", [], ConstantAttrs(lit))


REDUCE_CASES = [  # (type, reducer, init)
    (ET.F32, "add", 0.0), (ET.F32, "maximum", -np.inf), (ET.F32, "minimum", 2.5),
    (ET.F32, "multiply", 1.0), (ET.F64, "add", 1.5), (ET.S32, "add", 7),
    (ET.S32, "maximum", -5), (ET.U8, "minimum", 200), (ET.U16, "multiply", 1),
    (ET.S64, "xor", 3), (ET.S8, "and", -1), (ET.PRED, "or", False), (ET.PRED, "and", True),
    (ET.BF16, "maximum", -np.inf), (ET.F16, "minimum", np.inf),
]
#: (operand dims, reduced dims): row, column, full, inner pair, outer pair, 1-D.
REDUCE_SHAPES = [((COLS, COLS), (1,)), ((ROWS, COLS), (0,)), ((ROWS, COLS), (0, 1)),
                 ((2, 3, COLS), (1, 2)), ((2, 3, COLS), (0, 1)), ((8 * COLS,), (0,))]


@pytest.mark.parametrize("t,opcode,init", REDUCE_CASES, ids=lambda v: str(v))
def test_reductions_in_lanes(t: ET, opcode: str, init: object) -> None:
    """Vector accumulators at the reducer's identity, folded with the init and the rest:
    exact for integers, max/min and pred; float sums reassociated (a tolerance)."""
    rng = np.random.default_rng(5)
    red = _reducer(t, opcode)

    def body(c: Computation, p: list[Instruction]) -> list[Instruction]:
        outs = []
        for x, (dims, rdims) in zip(p, REDUCE_SHAPES):
            out = tuple(d for i, d in enumerate(dims) if i not in rdims)
            outs.append(c.add(Instruction("reduce", [x, _const(c, t, init)],
                                          Shape.array(t, out), ReduceAttrs(tuple(rdims)),
                                          called=[red])))
        return outs

    shapes = [Shape.array(t, dims) for dims, _ in REDUCE_SHAPES]
    xs = []
    for dims, _ in REDUCE_SHAPES:
        n = int(np.prod(dims))
        v = values(t, n, rng, small=opcode == "multiply")
        if t.is_float and opcode in ("add", "multiply"):
            v = (rng.standard_normal(n) * (0.5 if opcode == "add" else 0.01) + (
                0 if opcode == "add" else 1)).astype(t.dtype)
        xs.append(v.reshape(dims))
    mod = module(shapes, body)
    ref, got, exe = run_both(mod, xs)
    assert all(k.explicit for k in exe.kernel_specs)
    for (_, rdims), x, r, g in zip(REDUCE_SHAPES, xs, ref, got):
        if t.is_float and opcode == "add":  # reassociated: any order's worst case
            assert_close_to_bound(g, r, sum_bound(x, rdims, t.dtype, init), str(t))
        elif t.is_float and opcode == "multiply":
            # n multiplications in any order: relative error gamma_n of |product| each side.
            n = x.size // g.size
            mag = np.abs(np.prod(x.astype(np.float64), axis=rdims) * init)
            assert_close_to_bound(g, r, DOT_C * (n + 1) * eps(t.dtype) * mag, str(t))
        else:
            assert g.dtype == r.dtype
            np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8),
                                          np.atleast_1d(r).view(np.uint8))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("t", [ET.F32, ET.F64])
@pytest.mark.parametrize("opcode", ["maximum", "minimum"])
def test_max_min_of_denormals_flush_once(opcode: str, t: ET, threads: int) -> None:
    """Float max/min accumulate unflushed values and flush the result once: rows whose
    extreme is a denormal (either sign, beside +-0) give the signed zero, bit for bit, in a
    row reduction feeding a kernel (softmax's max), a reduce root over the trailing
    dimensions, over dimension 0 split across threads, and into a kept innermost row."""
    tiny = np.finfo(t.dtype).smallest_subnormal
    sign = 1 if opcode == "maximum" else -1
    rng = np.random.default_rng(11)
    rows, cols = 6, 2 * W + 3
    x = (-sign * (1.0 + rng.random((rows, cols)))).astype(t.dtype)
    x[0, 5] = sign * tiny * 3  # the extreme: flushes to a zero of its sign
    x[1, :] = -sign * tiny * 2  # all denormals of the other sign: -0 (max) / +0 (min)
    x[1, 7] = -0.0 if sign > 0 else 0.0
    x[2, W + 1] = sign * tiny  # in the vector lanes' second group
    x[3, -1] = sign * tiny * 5  # in the scalar rest
    x[4, 3] = np.nan
    red = _reducer(t, opcode)
    init = -sign * np.inf

    def body(c: Computation, p: list[Instruction]) -> list[Instruction]:
        def reduce(dims: tuple[int, ...], out: tuple[int, ...]) -> Instruction:
            return c.add(Instruction("reduce", [p[0], _const(c, t, init)], Shape.array(t, out),
                                     ReduceAttrs(dims), called=[red]))

        m = reduce((1,), (rows,))  # row reduction computed inside the kernel below
        mb = op(c, "broadcast_in_dim", [m], BroadcastInDimAttrs((rows, cols), (0,)))
        return [op(c, "subtract", [p[0], mb]), reduce((1,), (rows,)), reduce((0,), (cols,)),
                reduce((0, 1), ())]

    mod = module([Shape.array(t, (rows, cols))], body)
    ref, got, exe = run_both(mod, [x], {"num_threads": threads, "split_cost": 1})
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8),
                                      np.atleast_1d(r).view(np.uint8))
    assert np.signbit(ref[1][1]) == (sign > 0) and ref[1][0] == 0 and ref[1][2] == 0


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_split_ranges_align_to_lanes(threads: int) -> None:
    """A 1-D kernel whose extent the lanes divide has no scalar rest: the thread pool must
    split it at multiples of its lanes (Kernel.align); a 1-D sum split across threads."""
    n = 64 * W * 3
    t = ET.F32
    red = _reducer(t, "add")

    def body(c: Computation, p: list[Instruction]) -> list[Instruction]:
        x = p[0]
        e = op(c, "exponential", [x])
        s = c.add(Instruction("reduce", [x, _const(c, t, 0.0)], Shape.array(t, ()),
                              ReduceAttrs((0,)), called=[red]))
        return [e, s]

    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    ref, got, exe = run_both(module([Shape.array(t, (n,))], body), [x],
                             {"num_threads": threads, "split_cost": 1})
    k = exe.kernel_specs[0]
    assert k.explicit and k.align % W == 0
    # exp within E ulp of the correctly rounded value: (E + 1/2) eps relative to the exact
    # one, at most 2 E + 1 ulp of it (an ulp is at least eps / 2 of the value).
    want = np.exp(x.astype(np.float64))
    assert_ulp_close(got[0], want, 2 * ulp_bound("exp", np.float32, "cpu") + 1, what="cpu")
    assert_ulp_close(ref[0], want, 2 * ulp_bound("exp", np.float32, "numpy") + 1,
                     what="interpreter")
    assert_close_to_bound(got[1], ref[1], sum_bound(x, 0, np.float32), "sum")


def test_strided_reads_keep_scalar_ir() -> None:
    """x + transpose(x) reads along a column: LLVM's vectorizer (O3) compiles that kernel;
    a row broadcast keeps lanes."""
    t = ET.F32
    n = 2 * W + 3
    sh = Shape.array(t, (n, n))

    def body(c: Computation, p: list[Instruction]) -> list[Instruction]:
        x, v = p
        xt = op(c, "transpose", [x], TransposeAttrs((1, 0)))
        vb = op(c, "broadcast_in_dim", [v], BroadcastInDimAttrs((n, n), (1,)))
        return [op(c, "add", [x, xt]), op(c, "multiply", [x, vb])]

    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, n)).astype(np.float32)
    v = rng.standard_normal(n).astype(np.float32)
    ref, got, exe = run_both(module([sh, Shape.array(t, (n,))], body), [x, v])
    assert [k.explicit for k in exe.kernel_specs] == [False, True]
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(g, r)


def test_softmax_rows_with_denormals_and_rest() -> None:
    """Row max and sum in lanes, exp cached per row, the divide reading the cache flushed:
    denormal inputs flush as on XLA CPU; 2W+5 columns leave a rest."""
    t = ET.F32
    sh = Shape.array(t, (ROWS, COLS))
    mx, add = _reducer(t, "maximum"), _reducer(t, "add")

    def body(c: Computation, p: list[Instruction]) -> Instruction:
        x = p[0]
        m = c.add(Instruction("reduce", [x, _const(c, t, -np.inf)], Shape.array(t, (ROWS,)),
                              ReduceAttrs((1,)), called=[mx]))
        mb = op(c, "broadcast_in_dim", [m], BroadcastInDimAttrs((ROWS, COLS), (0,)))
        e = op(c, "exponential", [op(c, "subtract", [x, mb])])
        s = c.add(Instruction("reduce", [e, _const(c, t, 0.0)], Shape.array(t, (ROWS,)),
                              ReduceAttrs((1,)), called=[add]))
        return op(c, "divide", [e, op(c, "broadcast_in_dim", [s],
                                      BroadcastInDimAttrs((ROWS, COLS), (0,)))])

    x = np.random.default_rng(4).standard_normal((ROWS, COLS)).astype(np.float32)
    x[0, :] = np.float32(1e-40)  # all denormal: max flushes to 0, exp(0) = 1 everywhere
    x[1, 3] = np.float32(-1e-40)
    ref, got, exe = run_both(module([sh], body), [x])
    assert len(exe.kernel_specs) == 1 and exe.kernel_specs[0].explicit
    # Exact softmax of the flushed input (x - max is one IEEE subtraction on every machine).
    xf = np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0), x)
    d = (xf - xf.max(1, keepdims=True)).astype(np.float64)
    want = np.exp(d) / np.exp(d).sum(1, keepdims=True)
    # Relative errors: exp within E ulp of its rounding, E + 1/2 ulp <= (E + 1/2) eps of the
    # exact value; the row sum of COLS positive terms, those errors plus gamma_{COLS-1} ~
    # (COLS - 1) eps / 2 for its additions in any order (lane width, tree); the divide, eps/2.
    # Together (2 E + 1 + COLS / 2) eps, and one ulp is at least eps / 2 of the value: so
    # 4 E + 2 + COLS ulp. (E = 1 for the cpu backend's exp, 3 for NumPy's f32 exp.)
    for name, res, impl in (("cpu", got, "cpu"), ("interpreter", ref, "numpy")):
        e = ulp_bound("exp", np.float32, impl)
        assert_ulp_close(res, want, 4 * e + 2 + COLS, np.float32, what=name)
    np.testing.assert_array_equal(got[0], np.full(COLS, 1 / COLS, np.float32))


@pytest.mark.parametrize("threads", [1, 2])
def test_big_results_stream_aligned(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result of at least `stream_bytes` is stored with aligned non-temporal vector stores
    (and an sfence) into a 64-byte aligned buffer, recycled across calls; a temporary and a
    result with a partial last vector per row are not."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")  # compile here: the optimized IR is kept
    cache.clear_memory()
    t = ET.F32
    rows, cols = 512, 512  # 1 MiB of f32, whole vectors per row for any width up to 32

    def body(c: Computation, p: list[Instruction]) -> list[Instruction]:
        e = op(c, "exponential", [p[0]])
        return [op(c, "multiply", [e, e]), op(c, "negate", [p[1]])]

    x = np.random.default_rng(6).standard_normal((rows, cols)).astype(np.float32)
    y = np.random.default_rng(7).standard_normal((rows, cols + 1)).astype(np.float32)
    mod = module([Shape.array(t, (rows, cols)), Shape.array(t, (rows, cols + 1))], body)
    ref, got, exe = run_both(mod, [x, y], {"num_threads": threads, "stream_bytes": 1 << 20})
    ir_text = exe.engine.asm_ir
    assert ir_text.count("!nontemporal") >= 1 and "llvm.x86.sse.sfence" in ir_text
    assert len(exe.kernel_specs) == 2
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-6)
    assert got[0].ctypes.data % 64 == 0
    del got
    again = exe.run([x, y])  # the recycled (aligned) buffer
    np.testing.assert_allclose(again[0], ref[0], rtol=1e-6)


def test_compile_restores_the_garbage_collector() -> None:
    """The cpu backend compiles with cyclic GC off and turns it back on, also after a
    failed compile; a caller's disabled GC stays disabled."""
    import gc

    from xlapy.backends.cpu import CpuBackend
    from xlapy.errors import VerificationError

    t = ET.F32
    mod = module([Shape.array(t, (4,))], lambda c, p: op(c, "exponential", p))
    assert gc.isenabled()
    CpuBackend().compile(mod)
    assert gc.isenabled()
    bad = module([Shape.array(t, (4,))], lambda c, p: op(c, "exponential", p))
    bad.entry_computation().root = None  # type: ignore[assignment]
    with pytest.raises(VerificationError):
        CpuBackend().compile(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        CpuBackend().compile(mod)
        assert not gc.isenabled()
    finally:
        gc.enable()
