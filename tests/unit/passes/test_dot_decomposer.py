"""Dot decomposition into [batch, M, K] x [batch, K, N] and its bit-exactness."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.dot_canonicalizer import DotCanonicalizer
from xlapy.passes.dot_decomposer import DotDecomposer, is_canonical
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.passes.pass_base import run_passes


def _dot(ls: tuple[int, ...], rs: tuple[int, ...], lb: tuple[int, ...], rb: tuple[int, ...],
         lc: tuple[int, ...], rc: tuple[int, ...], et: str = "f32") -> Module:
    g = HloBuilder()
    x = g.param(f"{et}[{','.join(map(str, ls))}]")
    y = g.param(f"{et}[{','.join(map(str, rs))}]")
    return g.build(g.dot_general(x, y, lhs_batching_dimensions=lb, rhs_batching_dimensions=rb,
                                 lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc))


CASES = [
    # (lhs dims, rhs dims, lhs batch, rhs batch, lhs contracting, rhs contracting)
    ((3, 4), (4, 5), (), (), (1,), (0,)),            # plain matmul (already canonical)
    ((4, 3), (4, 5), (), (), (0,), (0,)),            # lhs transposed
    ((2, 3, 4), (4, 2, 5), (0,), (1,), (2,), (0,)),  # batch not leading in rhs
    ((3, 2, 4, 6), (6, 4, 2, 7), (1,), (2,), (2, 3), (1, 0)),  # two contracting dims
    ((5, 2, 3), (2, 3, 4, 6), (1,), (0,), (2,), (1,)),  # two rhs free dims
    ((4,), (4,), (), (), (0,), (0,)),                # vector dot: no free dims
    ((3, 2), (5,), (), (), (), ()),                  # outer product: K = 1
    ((2, 3, 4), (2, 4), (0,), (0,), (2,), (1,)),     # batched matrix-vector
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("et", ["f32", "s32"])
def test_dot_decomposer_canonical_and_bit_exact(case: tuple, et: str) -> None:
    m = _dot(*case, et=et)
    rng = np.random.default_rng(7)
    dt = np.float32 if et == "f32" else np.int32
    args = [(rng.standard_normal(tuple(p.shape.dimensions)) * 4).astype(dt)
            for p in m.entry.parameters]
    before = Interpreter().run_module(m, args)
    was = is_canonical([i for i in m.entry.instructions if i.opcode == "dot_general"][0])
    changed = run_passes(m, [DotDecomposer(), DeadCodeElimination()])
    assert changed != was
    (dot,) = [i for i in m.entry.instructions if i.opcode == "dot_general"]
    assert is_canonical(dot)
    nb = len(case[2])
    assert dot.attrs.lhs_batching_dimensions == tuple(range(nb))
    after = Interpreter().run_module(m, args)
    assert after.shape == before.shape and after.tobytes() == before.tobytes()


def test_is_canonical_rejects_non_leading_batch_and_two_contracting() -> None:
    m = _dot((3, 2, 4), (2, 4, 5), (1,), (0,), (2,), (1,))
    assert not is_canonical(m.entry.root)
    m = _dot((3, 4, 6), (4, 6, 5), (), (), (1, 2), (0, 1))
    assert not is_canonical(m.entry.root)


def test_decomposer_after_transpose_folding_keeps_one_transpose() -> None:
    g = HloBuilder()
    a = g.param("f32[3,2]")
    b = g.param("f32[3,4]")
    d = g.dot_general(g.transpose(a, permutation=(1, 0)), b, lhs_contracting_dimensions=(1,),
                      rhs_contracting_dimensions=(0,))
    m = g.build(d)
    run_passes(m, [DotCanonicalizer(), DotDecomposer(), DeadCodeElimination()])
    ops = [i.opcode for i in m.entry.instructions]
    assert ops.count("transpose") == 1 and is_canonical(m.entry.root)
