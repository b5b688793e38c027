"""Helpers for cpu backend tests: build one-computation modules from IR and run both backends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from xlapy.backends.cpu import CpuBackend
from xlapy.backends.interpreter import InterpreterBackend
from xlapy.ir import Computation, Instruction, Module, make_instruction
from xlapy.ops.core import ParameterAttrs
from xlapy.types import ElementType, Shape


def module(shapes: Sequence[Shape],
           body: Callable[[Computation, list[Instruction]], Instruction | list[Instruction]]
           ) -> Module:
    """A module whose entry takes `shapes` and returns body(...) (a list becomes a tuple)."""
    comp = Computation("main")
    params = [comp.add(Instruction("parameter", [], s, ParameterAttrs(i, s), name=f"p{i}"))
              for i, s in enumerate(shapes)]
    root = body(comp, params)
    if isinstance(root, list):
        root = comp.add(make_instruction("tuple", root))
    comp.root = root
    return Module("m", comp)


def op(comp: Computation, opcode: str, operands: Sequence[Instruction], attrs: Any = None,
       called: Sequence[Computation] = ()) -> Instruction:
    return comp.add(make_instruction(opcode, list(operands), attrs, called))


def run_both(mod: Module, args: Sequence[Any], options: dict[str, Any] | None = None
             ) -> tuple[Any, Any, Any]:
    """(interpreter result, cpu result, cpu executable compiled with `options`)."""
    ref = InterpreterBackend().compile(mod).run(list(args))
    exe = CpuBackend().compile(mod, options)
    return ref, exe.run(list(args)), exe


_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.5, np.inf, -np.inf, np.nan, 1e-40, -1e-40,
            1e-310, 65504.0, 1e30, -1e30, 2.0 ** -126, 100.0, -100.0]


def values(t: ElementType, n: int, rng: np.random.Generator, small: bool = False) -> np.ndarray:
    """Random values of type t with edge cases mixed in (floats: specials and denormals)."""
    dt = t.dtype
    if t is ElementType.PRED:
        return rng.random(n) < 0.5
    if t.is_integer:
        info = np.iinfo(dt)
        if small:
            v = rng.integers(0, t.bits + 3, n)
        else:
            v = rng.integers(int(info.min), int(info.max), n, endpoint=True, dtype=np.int64
                             if info.min < 0 else np.uint64)
            edges = [0, 1, info.max, info.min, info.max - 1, 2]
            if info.min < 0:
                edges += [-1, -2, info.min + 1, -7]
            v[: min(n, len(edges))] = edges[:n]  # (fewer than the edges: the first ones)
        return np.asarray(v).astype(dt)
    x = rng.standard_normal(n) * np.exp(rng.uniform(-4, 4, n))
    k = min(len(_SPECIAL), n)
    x[:k] = _SPECIAL[:k]
    x[k: 2 * k] = rng.permutation(_SPECIAL)[: min(k, n - k)] if n > k else x[k:2 * k]
    if t is ElementType.BF16:
        return x.astype(np.float32).astype(ml_dtypes.bfloat16)
    return x.astype(dt)


def ulp_error(got: np.ndarray, ref: np.ndarray) -> float:
    """Max distance in units of the last place of `ref`'s type (NaN == NaN; inf exact)."""
    dt = ref.dtype
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    same = (np.isnan(g) & np.isnan(r)) | (g == r)
    if np.all(same):
        return 0.0
    if not np.all(np.isfinite(r[~same])) or not np.all(np.isfinite(g[~same])):
        return float("inf")
    fi = ml_dtypes.finfo(dt) if dt.kind == "V" or "bfloat" in str(dt) else np.finfo(dt)
    eps = float(fi.eps)
    tiny = float(fi.smallest_normal)
    spacing = np.maximum(np.abs(r), tiny) * eps
    spacing = 2.0 ** np.floor(np.log2(spacing))
    with np.errstate(invalid="ignore"):
        return float(np.max(np.where(same, 0.0, np.abs(g - r) / spacing)))


def plant_minmax_specials(x: np.ndarray, sign: int, chains: int, w: int, tiny: Any) -> None:
    """Specials for a row max (sign 1) or min (-1) over rows of `chains` accumulator chains
    of `w` lanes, in place: in chain j, in both rounds of chains, an infinity (row j), a
    denormal extreme among -sign ones (chains + j), a NaN (2 chains + j) and a signed zero
    among -sign denormals (3 chains + j); then an infinity in the scalar rest (row -4), a
    NaN in the vector after the chains (-3) and a row of NaN (-2)."""
    for j in range(chains):
        c = j * w + 1 + chains * w * (j % 2)
        x[j, c] = sign * np.inf
        x[chains + j, :] = -sign * 1.0
        x[chains + j, c] = sign * tiny  # the extreme is a denormal: a signed zero under FTZ
        x[2 * chains + j, c] = np.nan
        x[3 * chains + j, :] = -sign * tiny
        x[3 * chains + j, c] = 0.0 if sign > 0 else -0.0
    x[-4, -1] = sign * np.inf
    x[-3, 2 * chains * w + 2] = np.nan
    x[-2, :] = np.nan


def interrupted(code: str, root: Any, grace: float = 2.0) -> str:
    """Run `code` in a child Python that prints "running" when it gets going, send it Ctrl-C
    a second later and return its stderr; fails unless it exits (non-zero) within `grace`
    seconds. The code installs Python's Ctrl-C handler itself: a child of a CI script's
    background job inherits SIGINT ignored."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=root,
                            env=dict(os.environ, PYTHONPATH=str(root), XLAPY_CACHE_DIR=""))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "running\n", proc.stderr.read() if proc.stderr else ""
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            _, err = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"no exit {grace} s after Ctrl-C; stderr: {err}") from None
        assert time.monotonic() - sent < grace
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    return err


@contextlib.contextmanager
def recorded(owner: Any, name: str, pick: Callable[[Any, Any], Any] = lambda _, r: r
             ) -> Iterator[list[Any]]:
    """pick(self, result) of each call of method `owner.name` while inside (None: not
    recorded), in call order: which path the emitters took."""
    seen: list[Any] = []
    orig = getattr(owner, name)

    def wrapper(self: Any, *a: Any, **k: Any) -> Any:
        r = orig(self, *a, **k)
        v = pick(self, r)
        if v is not None:
            seen.append(v)
        return r

    setattr(owner, name, wrapper)
    try:
        yield seen
    finally:
        setattr(owner, name, orig)


def lowered_bits(fn: Callable[..., Any], x: np.ndarray) -> Any:
    """jax.jit(fn) lowered for x (x64 for f64), compiled for the cpu: its bits checked
    against the interpreter's; the CompiledProgram."""
    import jax

    import xlapy

    with jax.enable_x64(np.dtype(x.dtype) == np.float64):
        text = jax.jit(fn).lower(x).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    np.testing.assert_array_equal(np.asarray(cpu(x)), want)
    return cpu
