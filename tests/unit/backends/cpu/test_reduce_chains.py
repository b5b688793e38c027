"""Float max/min along a row in MINMAX_CHAINS independent vector accumulators
(reduce_emit.py): rows long enough for the chains, with a vector and a scalar rest, give the
interpreter's bits with the extreme, NaN, signed zeros and denormals in every chain, in a
reduce root, in a row reduction feeding a kernel (softmax's max), and split over threads."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.backends.cpu.test_lanes import _const, _reducer
from tests.unit.backends.cpu.util import module, op, plant_minmax_specials, run_both
from xlapy.backends.cpu import lanes
from xlapy.backends.cpu.reduce_emit import MINMAX_CHAINS
from xlapy.ir import Computation, Instruction
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

W = lanes.vector_width()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16])
@pytest.mark.parametrize("opcode", ["maximum", "minimum"])
def test_chained_row_max_min_match_the_interpreter(opcode: str, t: ET, threads: int) -> None:
    sign = 1 if opcode == "maximum" else -1
    cols = 2 * MINMAX_CHAINS * W + W + 3  # two rounds of chains, one more vector, a rest
    rows = 4 * MINMAX_CHAINS + 4
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((rows, cols)) * 100).astype(t.dtype)
    tiny = np.float32(1e-40) if t != ET.F64 else np.finfo(np.float64).smallest_subnormal
    plant_minmax_specials(x, sign, MINMAX_CHAINS, W, tiny)  # specials in every chain
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
    assert all(k.explicit for k in exe.kernel_specs)
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype
        np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8))
    assert np.isnan(ref[1][2 * MINMAX_CHAINS]) and ref[1][0] == sign * np.inf
