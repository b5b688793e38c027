"""The fast float row max/min (minmax_emit.py: one maxps/minps and one add per vector, the
exact loop again for a row holding a NaN or whose extreme is a zero) gives the
interpreter's bits: rows of whole chain groups with NaN (quiet, with payloads), +-inf alone
and together, -0 / +0 as the extreme in either order, denormal extremes, all-equal rows,
in a reduce root and in a row reduction feeding its kernel (softmax's max), on 1 and 2
threads (the NaN test is per lane of the chains' sums: NaN in any chain and lane); and
the kernels really take the fast path (maxps in the object code)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.unit.backends.cpu.test_lanes import _const, _reducer
from tests.unit.backends.cpu.util import module, op, run_both
from xlapy.backends.cpu import lanes
from xlapy.backends.cpu.minmax_emit import FAST_CHAINS, fast_ok
from xlapy.ir import Computation, Instruction
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

W = lanes.vector_width()


def _rows(t: ET, sign: int, cols: int) -> np.ndarray:
    """One row per special case (sign +1 for max: the extreme is the largest value)."""
    rng = np.random.default_rng(7)
    dt = t.dtype
    tiny = ml_dtypes.finfo(dt).smallest_subnormal
    out = []

    def row(**at: float) -> None:
        r = (rng.standard_normal(cols) * 10).astype(dt)
        for k, v in at.items():
            r[int(k[1:])] = v
        out.append(r)

    def const(v: float, **at: float) -> None:
        r = np.full(cols, v, dt)
        for k, v2 in at.items():
            r[int(k[1:])] = v2
        out.append(r)

    row()
    row(c0=np.nan)
    row(**{f"c{cols - 1}": np.nan})
    row(**{f"c{W + 1}": sign * np.inf})
    row(**{f"c{W + 1}": np.inf, f"c{3 * W}": -np.inf})  # the sum is NaN: a false alarm
    const(-sign * 5.0, **{f"c{2 * W + 3}": 0.0, f"c{3 * W}": -0.0})
    const(-sign * 5.0, **{f"c{2 * W + 3}": -0.0, f"c{3 * W}": 0.0})
    const(-sign * 5.0, **{f"c{cols // 2}": -0.0})
    const(-sign * 5.0, **{f"c{cols // 2}": 0.0})
    const(0.0)
    const(-0.0)
    const(-sign * 1.0, **{f"c{W + 2}": sign * tiny})  # a denormal extreme: a signed zero
    const(-sign * tiny, **{f"c{1}": -sign * 2 * tiny})
    const(3.0)
    const(-sign * np.inf)
    const(np.nan)
    # a NaN with a payload (f32/f64: a signaling one; f16 a quiet one, bf16 none: with
    # either loop the interpreter keeps a narrow signaling NaN as it is where the kernels
    # quiet it, and its bf16 rounding drops a payload that the kernels' keeps)
    r = np.full(cols, -sign * 2.0, dt)
    payload = {ET.F32: (np.uint32, 0x7F800123), ET.F64: (np.uint64, 0x7FF0000000000123),
               ET.BF16: (np.uint16, 0x7FC0), ET.F16: (np.uint16, 0x7E01)}[t]
    r.view(payload[0])[5] |= payload[1]
    out.append(r)
    row(**{f"c{cols - 1}": sign * 1e30})
    # +inf and -inf in one lane of one chain: that lane's sum is NaN (the exact loop again)
    row(**{f"c{W + 1}": np.inf, f"c{W + 1 + FAST_CHAINS * W}": -np.inf})
    row(**{f"c{2 * W + 5}": np.nan})  # a NaN in a middle chain, one lane of its sum
    row(**{f"c{3 * W + W - 1}": np.nan, f"c{W - 1}": sign * np.inf})
    return np.stack(out)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16, ET.F16])
@pytest.mark.parametrize("opcode", ["maximum", "minimum"])
def test_fast_row_max_min_match_the_interpreter(opcode: str, t: ET, threads: int) -> None:
    sign = 1 if opcode == "maximum" else -1
    cols = 2 * FAST_CHAINS * W
    assert fast_ok(opcode, t, cols, W)
    with np.errstate(over="ignore"):  # (1e30 in f16: inf)
        x = _rows(t, sign, cols)
    rows = x.shape[0]
    red = _reducer(t, opcode)
    init = -sign * np.inf

    def body(c: Computation, p: list[Instruction]) -> list[Instruction]:
        def reduce() -> Instruction:
            return c.add(Instruction("reduce", [p[0], _const(c, t, init)],
                                     Shape.array(t, (rows,)), ReduceAttrs((1,)), called=[red]))

        mb = op(c, "broadcast_in_dim", [reduce()], BroadcastInDimAttrs((rows, cols), (0,)))
        return [op(c, "subtract", [p[0], mb]), reduce()]

    mod = module([Shape.array(t, (rows, cols))], body)
    ref, got, exe = run_both(mod, [x], {"num_threads": threads, "split_cost": 1})
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype
        np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8))
    assert np.isnan(ref[1][1]) and ref[1][3] == sign * np.inf


def test_fast_path_is_taken() -> None:
    """The row max compiles to plain maxps (the fast loop) besides the exact loop."""
    cols, rows = 4 * FAST_CHAINS * W, 8
    red = _reducer(ET.F32, "maximum")

    def body(c: Computation, p: list[Instruction]) -> Instruction:
        return c.add(Instruction("reduce", [p[0], _const(c, ET.F32, -np.inf)],
                                 Shape.array(ET.F32, (rows,)), ReduceAttrs((1,)),
                                 called=[red]))

    mod = module([Shape.array(ET.F32, (rows, cols))], body)
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    ref, got, exe = run_both(mod, [x])
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, x.max(axis=1))
    assert exe.kernel_specs[0].explicit


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16])
@pytest.mark.parametrize("opcode", ["maximum", "minimum"])
def test_fast_row_of_a_cached_row_matches_the_interpreter(opcode: str, t: ET) -> None:
    """A row max/min of a computed row the kernel keeps on the stack for its next pass
    (reduce_emit's row cache: tanh(x), read by the max and by y - max) takes the fast loop
    too, storing the values as it goes (the exact loop, for a NaN or zero row, stores them
    again): y - max has the bits the interpreter gives from the kernels' own tanh(x)
    (ulps apart from NumPy's), and the IR has the fast loop. Before, a cached row always
    ran the exact loop (x86-64-v3 bf16 softmax: ~10 vector instructions a vector for its
    max)."""
    sign = 1 if opcode == "maximum" else -1
    cols = 2 * FAST_CHAINS * W
    with np.errstate(over="ignore"):
        x = _rows(t, sign, cols)
    rows = x.shape[0]
    red = _reducer(t, opcode)

    def tail(c: Computation, y: Instruction) -> list[Instruction]:
        m = c.add(Instruction("reduce", [y, _const(c, t, -sign * np.inf)],
                              Shape.array(t, (rows,)), ReduceAttrs((1,)), called=[red]))
        mb = op(c, "broadcast_in_dim", [m], BroadcastInDimAttrs((rows, cols), (0,)))
        return [op(c, "subtract", [y, mb])]  # (m an output too: a kernel of its own)

    shape = [Shape.array(t, (rows, cols))]
    _, (y,), _ = run_both(module(shape, lambda c, p: [op(c, "tanh", [p[0]])]), [x])
    ref, _, _ = run_both(module(shape, lambda c, p: tail(c, p[0])), [y])
    _, got, exe = run_both(module(shape, lambda c, p: tail(c, op(c, "tanh", [p[0]]))), [x],
                           {"split_cost": 1})
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8))
    assert "rowbuf." in exe.kernel_ir and "fast.sel" in exe.kernel_ir
