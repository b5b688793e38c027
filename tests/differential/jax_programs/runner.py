"""Lower a `Program` with `jax.jit(f).lower(*args)`, run the text through `xlapy.compile` and
compare with what JAX's own compiled executable returns. Lowerings are cached per session."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from tests.differential.compare import assert_same, assert_within, jax_x64, magnitudes
from tests.differential.jax_programs.table import Program, Sums
from tests.tolerance import magnitude_bound


@dataclass(frozen=True)
class Lowered:
    """The lowered StableHLO text and JAX's outputs (flattened leaves)."""

    text: str
    expected: tuple[np.ndarray, ...]


@cache
def lower(program: Program) -> Lowered:
    jax = jax_x64()
    lowered = jax.jit(program.fn, keep_unused=True).lower(*program.args)
    out = lowered.compile()(*program.args)
    leaves = tuple(np.asarray(v) for v in jax.tree_util.tree_leaves(out))
    return Lowered(lowered.as_text(), leaves)


def run_ours(text: str, args: tuple[Any, ...], backend: str | None = None
             ) -> tuple[np.ndarray, ...]:
    import xlapy

    prog = xlapy.compile(text, backend=backend)
    if backend == "cpu":
        from tests.fallbacks import assert_no_unlisted_fallbacks

        assert_no_unlisted_fallbacks(prog, "JAX program")
    result = prog(*args)
    return tuple(result) if isinstance(result, tuple) else (result,)


def check_program(program: Program, backend: str | None = None) -> None:
    low = lower(program)
    compare(program, run_ours(low.text, program.args, backend), low.expected)


def compare(program: Program, ours: tuple[np.ndarray, ...],
            expected: tuple[np.ndarray, ...]) -> None:
    """`ours` against JAX's results under the program's tolerance."""
    assert len(ours) == len(expected), \
        f"{len(ours)} results, JAX gives {len(expected)}"
    if isinstance(program.tol, Sums):
        mags = magnitudes(program.fn, *program.args)
        for i, (a, b, m) in enumerate(zip(ours, expected, mags)):
            what = f"{program.id} result {i}"
            if np.asarray(b).dtype.kind in "biu":
                assert_same(a, b, what=what)
            else:
                bound = magnitude_bound(m, program.tol.k, np.asarray(b).dtype,
                                        acc_dtype=program.tol.acc)
                assert_within(a, b, bound, what)
        return
    rtol, atol = program.tol or (0.0, 0.0)
    for i, (a, b) in enumerate(zip(ours, expected)):
        assert_same(a, b, rtol=rtol, atol=atol, what=f"{program.id} result {i}")


def check_round_trip(program: Program) -> None:
    from xlapy.stablehlo import parse_module, print_module
    from xlapy.stablehlo.equality import modules_equal

    module = parse_module(lower(program).text)
    for generic in (False, True):
        again = parse_module(print_module(module, generic=generic))
        assert modules_equal(again, module), \
            f"parse(print(m)) != m ({'generic' if generic else 'pretty'} form)"
