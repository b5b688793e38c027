"""xlapy against jax.jit (XLA CPU) per function and dtype: the ULP histogram (issue 15).

`python -m tests.differential.jax_ulp [N]` lowers each function with `jax.jit(f).lower(x)`,
runs the StableHLO text on both xlapy backends (ftz mode: jax's) and on XLA, with N (default
5000) inputs per function and dtype: the edge values (0, -0, subnormals, the smallest
normal, 1, -1, the largest finite, inf, -inf, NaN, the function's branch points) then
random values (half log-uniform over every magnitude and sign, half in the working range),
seeded. It prints one markdown table per backend: how many results lie 0, 1, 2, 3-4, 5-16,
17-256 and over 256 ulp from XLA's, and how many differ in a non-finite way (NaN or inf
where the other is not). test_jax_ulp.py runs a small sample of it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.stablehlo.check import UNBOUNDED, ulp_difference

#: name -> (jax function, working range, branch points).
FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[float, float], tuple[float, ...]]] = {}
BINARY = {"pow", "atan2"}
BUCKETS = ("0", "1", "2", "3-4", "5-16", "17-256", ">256", "non-finite")


def _functions() -> None:
    import jax
    import jax.numpy as jnp
    import jax.scipy.special as jss

    FUNCTIONS.update({
        "exp": (jnp.exp, (-90, 90), ()), "expm1": (jnp.expm1, (-5, 5), ()),
        "log": (jnp.log, (1e-3, 1e3), (0.0, 1.0)), "log1p": (jnp.log1p, (-0.9, 5), (-1.0,)),
        "sin": (jnp.sin, (-10, 10), ()), "cos": (jnp.cos, (-10, 10), ()),
        "tan": (jnp.tan, (-10, 10), (math.pi / 2,)), "tanh": (jnp.tanh, (-10, 10), ()),
        "logistic": (jax.nn.sigmoid, (-20, 20), ()), "cbrt": (jnp.cbrt, (-100, 100), ()),
        "sqrt": (jnp.sqrt, (0, 100), ()), "rsqrt": (jax.lax.rsqrt, (0, 100), ()),
        "erf": (jss.erf, (-5, 5), ()), "erf_inv": (jss.erfinv, (-1, 1), (1.0, -1.0)),
        "lgamma": (jax.lax.lgamma, (0.1, 30), (1.0, 2.0, -1.0, -2.5)),
        "acos": (jnp.arccos, (-1, 1), (1.0, -1.0)), "asin": (jnp.arcsin, (-1, 1), (1.0, -1.0)),
        "atan": (jnp.arctan, (-20, 20), ()), "acosh": (jnp.arccosh, (1, 100), (1.0,)),
        "asinh": (jnp.arcsinh, (-100, 100), ()), "atanh": (jnp.arctanh, (-1, 1), (1.0, -1.0)),
        "sinh": (jnp.sinh, (-20, 20), ()), "cosh": (jnp.cosh, (-20, 20), ()),
        "pow": (jax.lax.pow, (-10, 10), ()), "atan2": (jnp.arctan2, (-10, 10), ()),
    })


def inputs(name: str, dtype: type, n: int, seed: int = 15) -> list[np.ndarray]:
    """n inputs per argument: the edges first, then random values."""
    info = np.finfo(dtype)
    tiny, big = float(info.tiny), float(info.max)
    edges = [0.0, -0.0, tiny / 3, -tiny / 3, float(info.smallest_subnormal), tiny, -tiny, 1.0,
             -1.0, big, -big, math.inf, -math.inf, math.nan, *FUNCTIONS[name][2]]
    edges += [math.nextafter(v, math.inf) for v in FUNCTIONS[name][2]]
    rng = np.random.default_rng(seed)
    lo, hi = FUNCTIONS[name][1]
    lim = 300 if dtype == np.float64 else 38
    out = []
    for _ in range(2 if name in BINARY else 1):
        k = n - len(edges)
        spread = 10.0 ** rng.uniform(-lim, lim, k // 2) * rng.choice([-1.0, 1.0], k // 2)
        x = np.concatenate([edges, spread, rng.uniform(lo, hi, k - k // 2)])
        out.append(x.astype(dtype))
    if name in BINARY:
        out[1][len(edges):] = rng.permutation(out[1][len(edges):])
        if name == "pow":  # negative bases with integer exponents
            m = n // 4
            out[0][-m:] = -rng.uniform(0.1, 10, m)
            out[1][-m:] = rng.integers(-12, 13, m)
    return out


def histogram(got: np.ndarray, want: np.ndarray) -> list[int]:
    d = ulp_difference(got, want)
    nonfinite = d == UNBOUNDED
    f = d[~nonfinite]
    counts = [int((f == 0).sum()), int((f == 1).sum()), int((f == 2).sum()),
              int(((f >= 3) & (f <= 4)).sum()), int(((f >= 5) & (f <= 16)).sum()),
              int(((f >= 17) & (f <= 256)).sum()), int((f > 256).sum()), int(nonfinite.sum())]
    return counts


def compare(n: int, names: list[str] | None = None,
            dtypes: tuple[type, ...] = (np.float32, np.float64)) -> dict[tuple[str, str, str],
                                                                         list[int]]:
    """(function, dtype, backend) -> histogram counts (BUCKETS order)."""
    import jax

    import xlapy

    jax.config.update("jax_enable_x64", True)
    if not FUNCTIONS:
        _functions()
    out = {}
    for name in names or list(FUNCTIONS):
        fn = FUNCTIONS[name][0]
        for dtype in dtypes:
            xs = inputs(name, dtype, n)
            jitted = jax.jit(fn)
            want = np.asarray(jitted(*xs))
            text = jitted.lower(*xs).as_text()
            for backend in ("interpreter", "cpu"):
                with np.errstate(all="ignore"):
                    got = np.asarray(xlapy.compile(text, backend=backend)(*xs))
                out[(name, np.dtype(dtype).name, backend)] = histogram(got, want)
    return out


def table(result: dict[tuple[str, str, str], list[int]], backend: str,
          what: str = "", column: str = "function") -> str:
    lines = [f"xlapy {backend} vs jax.jit (XLA CPU){what}: results per ulp distance",
             f"| {column} | dtype | " + " | ".join(BUCKETS) + " |",
             "|---|---|" + "---|" * len(BUCKETS)]
    for (name, dt, be), counts in result.items():
        if be == backend:
            lines.append(f"| {name} | {dt} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 5000
    result = compare(n)
    for backend in ("interpreter", "cpu"):
        print(table(result, backend))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
