"""The reference workloads of issue 6, as XlaBuilder programs.

`WORKLOADS[name]` is `(build, small)`: `build(**sizes)` makes the program at the issue's sizes
by default; `small` are sizes for running it quickly (tests check semantics at those sizes and
structure - kernels, passes over memory, buffer sizes - at full size, which needs no data).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.workloads.elementwise import big_sum, gelu_chain, tiny_ops, x_plus_xt
from benchmarks.workloads.networks import attention, cnn, fori_loop, mlp
from benchmarks.workloads.normalization import layernorm, softmax

WORKLOADS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "gelu_chain": (gelu_chain, {"n": 64}),
    "softmax": (softmax, {"rows": 8, "cols": 16}),
    "layernorm": (layernorm, {"rows": 8, "cols": 16}),
    "mlp": (mlp, {"batch": 4, "sizes": (8, 6, 5, 3)}),
    "cnn": (cnn, {"batch": 1, "size": 6, "channels": (2, 3, 3)}),
    "attention": (attention, {"seq": 8, "dim": 4}),
    "fori_loop": (fori_loop, {"iterations": 5, "n": 4}),
    "big_sum": (big_sum, {"n": 100}),
    "tiny_ops": (tiny_ops, {}),
    "x_plus_xt": (x_plus_xt, {"n": 5}),
}

__all__ = ["WORKLOADS"]
