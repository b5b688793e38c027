"""Shared helpers for the element-wise differential tests: inputs, our run, XLA's run.

XLA's result comes from `jax.jit(jax.lax.<op>)` where jax accepts the element type; where it
does not (integer power, pred arithmetic, int4 shifts...), the same StableHLO op is compiled
as text by jax's CPU backend, so every reference is XLA itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

import xlapy
from tests.differential.compare import jax_x64
from xlapy import ElementType, Shape, XlaBuilder
from xlapy.types import from_dtype

E = ElementType

INT_TYPES = [E.S8, E.S16, E.S32, E.S64, E.U8, E.U16, E.U32, E.U64, E.S4, E.U4]
FLOAT_TYPES = [E.BF16, E.F16, E.F32, E.F64, E.F8E4M3FN, E.F8E5M2]
COMPLEX_TYPES = [E.C64, E.C128]


def values(t: ElementType, n: int, rng: np.random.Generator, denormals: bool = True,
           wide: bool = True) -> np.ndarray:
    """`n` random values of type `t` with the type's edge cases mixed in."""
    if t.is_pred:
        return rng.integers(0, 2, n).astype(bool)
    if t.is_integer:
        info = ml_dtypes.iinfo(t.dtype)
        lo, hi = int(info.min), int(info.max)
        edges = [0, 1, lo, hi, lo + 1, hi - 1, 2, 3] + ([-1, -2] if lo < 0 else [])
        r = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if t.bits < 64 or lo < 0
                         else np.uint64)
        small = rng.integers(max(lo, -9), min(hi, 9), n, endpoint=True)
        pick = rng.random(n)
        arr = np.where(pick < 0.4, small, r.astype(object)).tolist()
        arr[: len(edges)] = edges[:n]
        return np.array(arr, dtype=object).astype(np.int64 if lo < 0 else np.uint64) \
            .astype(t.dtype)
    if t.is_complex:
        c = t.component_type
        out = np.empty(n, t.dtype)
        out.real = values(c, n, rng, denormals, wide)
        out.imag = rng.permutation(values(c, n, rng, denormals, wide))
        return out
    scale = rng.choice([1.0, 1e3, 1e-3, 1e8, 1e-8, 1e30] if wide else [1.0, 3.0, 0.1], n)
    base = rng.standard_normal(n) * scale
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0]
    if denormals:
        edges += [1e-40, -1e-40, 1e-310, 2e-45]
    base[: len(edges)] = edges[:n]
    with np.errstate(all="ignore"):
        return rng.permutation(base).astype(t.dtype)


def ours(opcode: str, args: Sequence[np.ndarray], attrs: Any = None) -> np.ndarray:
    """Build `opcode(*args)` with XlaBuilder.add_op and run it on xlapy's client."""
    b = XlaBuilder(opcode)
    params = [b.parameter(i, Shape.array(from_dtype(a.dtype), a.shape))
              for i, a in enumerate(args)]
    if attrs is None:
        b.add_op(opcode, params)
    else:
        b.add_op(opcode, params, attrs)
    return np.asarray(xlapy.Client().execute_and_transfer(b.build(), list(args)).to_numpy())


def _ttype(a: np.ndarray | tuple[ElementType, tuple[int, ...]]) -> str:
    t, shape = (from_dtype(a.dtype), a.shape) if isinstance(a, np.ndarray) else a
    return "tensor<" + "".join(f"{d}x" for d in shape) + t.shlo_name + ">"


_CACHE: dict[str, Any] = {}


def stablehlo(op: str, args: Sequence[np.ndarray], result: tuple[ElementType, tuple[int, ...]],
              attr_text: str = "") -> np.ndarray:
    """Run `"stablehlo.<op>"(args) {attr_text}` compiled by XLA's CPU backend."""
    jax = jax_x64()
    from jax._src.lib import xla_client as xc
    from jax.extend import backend

    names = ", ".join(f"%a{i}: {_ttype(a)}" for i, a in enumerate(args))
    ins = ", ".join(f"%a{i}" for i in range(len(args)))
    sig = "(" + ", ".join(_ttype(a) for a in args) + ") -> " + _ttype(result)
    text = (f"func.func public @main({names}) -> {_ttype(result)} {{\n"
            f"  %0 = \"stablehlo.{op}\"({ins}) {attr_text} : {sig}\n"
            f"  return %0 : {_ttype(result)}\n}}")
    exe = _CACHE.get(text)
    if exe is None:
        be = backend.get_backend()
        exe = be.compile_and_load(text, xc.DeviceList(tuple(be.devices()[:1])),
                                  xc.CompileOptions())
        _CACHE[text] = exe
    out = exe.execute([jax.device_put(a) for a in args])
    return np.asarray(out[0])


def jax_or_stablehlo(lax_fn: Callable[..., Any] | None, op: str, args: Sequence[np.ndarray],
                     result: tuple[ElementType, tuple[int, ...]],
                     attr_text: str = "") -> np.ndarray:
    """XLA's result through jax.lax when jax accepts the types, else through StableHLO text."""
    jax = jax_x64()
    if lax_fn is not None:
        try:
            return np.asarray(jax.jit(lax_fn)(*args))
        except (TypeError, ValueError, NotImplementedError):
            pass
    return stablehlo(op, args, result, attr_text)
