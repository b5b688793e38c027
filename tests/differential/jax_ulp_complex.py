"""xlapy against jax.jit (XLA CPU) on complex functions: the ULP histogram (issue 15).

`python -m tests.differential.jax_ulp_complex [N]` is jax_ulp's comparison for c64/c128: each
function is lowered with `jax.jit(f).lower(z)`, run on both xlapy backends and on XLA with N
(default 5000) inputs. The inputs start with every pair of edge parts (0, -0, the smallest
normal, 1, -1, 1e19-ish (sqrt of the largest), the largest finite, inf, -inf, NaN: on the
axes, the branch cuts and the overflow corners), then random values (half log-uniform over
every magnitude and sign per part, half in [-3, 3]^2), seeded. Real and imaginary parts are
measured separately (two histogram rows per function); the buckets are jax_ulp's.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.differential import jax_ulp
from tests.differential.jax_ulp import histogram

#: name -> (jax function, arity).
FUNCTIONS: dict[str, tuple[Callable[..., Any], int]] = {}


def _functions() -> None:
    import jax
    import jax.numpy as jnp

    FUNCTIONS.update({
        "acos": (jnp.arccos, 1), "asin": (jnp.arcsin, 1), "acosh": (jnp.arccosh, 1),
        "asinh": (jnp.arcsinh, 1), "atanh": (jnp.arctanh, 1), "atan": (jnp.arctan, 1),
        "sin": (jnp.sin, 1),
        "cos": (jnp.cos, 1), "exp": (jnp.exp, 1), "expm1": (jnp.expm1, 1),
        "log": (jnp.log, 1), "log1p": (jnp.log1p, 1), "sinh": (jnp.sinh, 1),
        "cosh": (jnp.cosh, 1), "sqrt": (jnp.sqrt, 1), "rsqrt": (jax.lax.rsqrt, 1),
        "tan": (jnp.tan, 1), "tanh": (jnp.tanh, 1),
        "sign": (jnp.sign, 1), "square": (jnp.square, 1),
        "cube": (lambda z: jax.lax.integer_pow(z, 3), 1),
        "inv2": (lambda z: jax.lax.integer_pow(z, -2), 1),
        "multiply": (jnp.multiply, 2), "divide": (jnp.divide, 2), "pow": (jax.lax.pow, 2),
        "prod": (lambda z: jnp.prod(z.reshape(-1, 4), axis=1), 1),
        "cumprod": (lambda z: jnp.cumprod(z.reshape(-1, 4), axis=1), 1),
    })


def inputs(name: str, dtype: type, n: int, seed: int = 15) -> list[np.ndarray]:
    """n complex inputs per argument: edge pairs first, then random values."""
    part = np.float32 if dtype == np.complex64 else np.float64
    info = np.finfo(part)
    big = float(info.max)
    edge = [0.0, -0.0, float(info.tiny), 1.0, -1.0, math.sqrt(big), big, -big, math.inf,
            -math.inf, math.nan]
    re = np.array([a for a in edge for _ in edge], part)
    im = np.array([b for _ in edge for b in edge], part)
    rng = np.random.default_rng(seed)
    lim = 300 if part == np.float64 else 38
    out = []
    for k in range(FUNCTIONS[name][1]):
        m = n - len(re)
        h = m // 2

        def spread(c: int) -> np.ndarray:
            return 10.0 ** rng.uniform(-lim, lim, c) * rng.choice([-1.0, 1.0], c)

        r = np.concatenate([re if k == 0 else rng.permutation(re), spread(h),
                            rng.uniform(-3, 3, m - h)]).astype(part)
        i = np.concatenate([im if k == 0 else rng.permutation(im), spread(h),
                            rng.uniform(-3, 3, m - h)]).astype(part)
        z = np.empty(n, dtype)
        z.real, z.imag = r, i
        out.append(z)
    return out


def compare(n: int, names: list[str] | None = None,
            dtypes: tuple[type, ...] = (np.complex64, np.complex128)
            ) -> dict[tuple[str, str, str], list[int]]:
    """(function.part, dtype, backend) -> histogram counts (BUCKETS order); the extra
    backend "cpu~interpreter" compares the two xlapy backends."""
    import jax

    import xlapy

    jax.config.update("jax_enable_x64", True)
    if not FUNCTIONS:
        _functions()
    out = {}
    for name in names or list(FUNCTIONS):
        fn = FUNCTIONS[name][0]
        for dtype in dtypes:
            zs = inputs(name, dtype, n)
            jitted = jax.jit(fn)
            want = np.asarray(jitted(*zs)).reshape(-1)
            text = jitted.lower(*zs).as_text()
            got = {}
            for backend in ("interpreter", "cpu"):
                with np.errstate(all="ignore"):
                    got[backend] = np.asarray(
                        xlapy.compile(text, backend=backend)(*zs)).reshape(-1)
            pairs = {"interpreter": (got["interpreter"], want), "cpu": (got["cpu"], want),
                     "cpu~interpreter": (got["cpu"], got["interpreter"])}
            for be, (g, w) in pairs.items():
                for p in ("real", "imag"):
                    out[(f"{name}.{p}", np.dtype(dtype).name, be)] = histogram(
                        getattr(g, p), getattr(w, p))
    return out


def worst(name: str, dtype: type, n: int, backend: str = "interpreter",
          count: int = 10) -> list[tuple[complex, ...]]:
    """The inputs whose results differ most from XLA's: (input..., xlapy, jax)."""
    import jax

    import xlapy
    from xlapy.stablehlo.check import ulp_difference

    jax.config.update("jax_enable_x64", True)
    if not FUNCTIONS:
        _functions()
    zs = inputs(name, dtype, n)
    jitted = jax.jit(FUNCTIONS[name][0])
    want = np.asarray(jitted(*zs)).reshape(-1)
    with np.errstate(all="ignore"):
        got = np.asarray(xlapy.compile(jitted.lower(*zs).as_text(), backend=backend)(*zs))
    got = got.reshape(-1)
    d = np.maximum(ulp_difference(got.real, want.real), ulp_difference(got.imag, want.imag))
    idx = np.argsort(d)[::-1][:count]
    if len(want) != n:  # reductions: report per output
        return [(complex(got[i]), complex(want[i])) for i in idx]
    return [(*(complex(z[i]) for z in zs), complex(got[i]), complex(want[i])) for i in idx]


def table(result: dict[tuple[str, str, str], list[int]], backend: str) -> str:
    return jax_ulp.table(result, backend, ", complex", "function.part")


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 5000
    result = compare(n)
    for backend in ("interpreter", "cpu", "cpu~interpreter"):
        print(table(result, backend))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
