"""Random reshape -> transpose -> (element-wise) -> reshape chains on the cpu backend give the
interpreter's bits: the kernels read a reshaped leaf at its own row-major offset and walk a
reshape root in its operand's dims (kernel_flat.peel_reshape), so any split, merge and
permutation of dimensions must land every element where the interpreter puts it."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import xlapy
from xlapy.passes.hlo_builder import HloBuilder


def _factors(n: int, draw: st.DrawFn) -> list[int]:
    """n split into 1-3 factors (in order)."""
    out = []
    for _ in range(draw(st.integers(0, 2))):
        divs = [d for d in range(2, n) if n % d == 0]
        if not divs:
            break
        d = draw(st.sampled_from(divs))
        out.append(d)
        n //= d
    return out + [n]


@st.composite
def chains(draw: st.DrawFn) -> tuple[list[int], list[int], list[int], list[int], bool]:
    base = draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24]), min_size=1,
                         max_size=3))
    split = [f for d in base for f in _factors(d, draw)]
    perm = draw(st.permutations(range(len(split))))
    moved = [split[p] for p in perm]
    # the final reshape: merge runs of the permuted dims, or split the total another way
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(moved) - 1)), max_size=2)))
        bounds = [0, *[c for c in cuts if c < len(moved)], len(moved)]
        out = [math.prod(moved[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]
    else:
        out = _factors(math.prod(moved), draw)
    return base, split, list(perm), out, draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(chains(), st.integers(0, 2**16))
def test_reshape_transpose_reshape_chains_keep_the_interpreters_bits(
        chain: tuple[list[int], list[int], list[int], list[int], bool], seed: int) -> None:
    base, split, perm, out, elementwise = chain
    g = HloBuilder()
    x = g.param(f"f32[{','.join(map(str, base))}]")
    y = g.transpose(g.op("reshape", x, shape=tuple(split)), permutation=tuple(perm))
    if elementwise:
        y = g.multiply(y, y)
    g.build(g.op("reshape", y, shape=tuple(out)))
    arg = np.random.default_rng(seed).standard_normal(base).astype(np.float32)
    got = np.asarray(xlapy.compile(g.module, backend="cpu")(arg))
    want = np.asarray(xlapy.compile(g.module, backend="interpreter")(arg))
    assert got.shape == want.shape and got.tobytes() == want.tobytes(), (base, split, perm,
                                                                          out)
