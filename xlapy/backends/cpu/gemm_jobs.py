"""blas.gemm's and blas.batched_gemm's BLAS calls as native jobs, planned once per shape and
layout.

A product is one ?gemm call or, split (blas.split: chunks fixed by the shape), one call a
chunk. Each call built its 13 by-reference ctypes arguments in Python (blas._gemm_args, ~9
us) and was called through ctypes (~5 us more), so a 16-chunk product paid ~220 us before
any arithmetic: on Zen 3, 3072x64x128 (a bilinear resize's row pass) took 873 us where one
call took 604 and numpy's OpenBLAS 587. Here the calls of a shape are planned once, as a
job table (the scalars it points at kept with the plan, the operands as offsets from their
bases); a call copies the table, adds its operands' addresses and runs every job from native
code (NativePool.share_table: the caller and up to threads - 1 workers take the next left).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.backends.cpu.threads import JOB_WORDS, job_table

#: Plans kept (a dict cleared when full: a program's shapes are few).
MAX_PLANS = 256
#: Where _gemm_args's 13 words hold the pointers of b, a and out (column-major: B^T A^T).
_B, _A, _C = 6, 8, 11

Parts = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass
class _Plan:
    """The calls' job table (threads.job_table) with 0 where the pointers go, the table
    indices of each call's a, b and out pointers, their byte offsets from the operands'
    bases; the scalars the table points at."""

    table: np.ndarray
    at: np.ndarray
    offsets: np.ndarray
    scalars: list[Any]


#: None: the layout needs copies (blas._op), so the Python calls make them.
_PLANS: dict[tuple[Any, ...], _Plan | None] = {}


def _addr(x: np.ndarray) -> int:
    return int(x.__array_interface__["data"][0])


def table(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float, key: Any,
          parts: Callable[[], Parts], args: Callable[..., Any]
          ) -> tuple[np.ndarray, _Plan] | None:
    """The job table (threads.job_table) of out = a @ b + beta * out as the calls `parts()`
    makes (`key`: what else decides them, the chunks and the routing), or None where the
    operands need copies (blas._op) and the caller keeps its Python calls; `args` is
    blas._gemm_args. The table is the caller's (a copy of the plan's); the plan, which holds
    what it points at, is to be kept until the jobs have run (a full cache drops plans)."""
    full = (a.shape, a.strides, b.shape, b.strides, out.shape, out.strides, a.dtype.char,
            beta, key)
    bases = np.array([_addr(a), _addr(b), _addr(out)], np.int64)
    if full in _PLANS:
        plan = _PLANS[full]
    else:
        plan = _plan(parts(), beta, bases, args)
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        _PLANS[full] = plan
    if plan is None:
        return None
    t = plan.table.copy()
    t[plan.at] = plan.offsets + bases
    return t, plan


def _plan(parts: Parts, beta: float, bases: np.ndarray, args: Callable[..., Any]
          ) -> _Plan | None:
    """The plan of `parts`' calls, or None where _gemm_args copied an operand (its call
    reads the copy, at no fixed offset from the operand)."""
    jobs, at, offsets, scalars = [], [], [], []
    for pa, pb, po in parts:
        call = args(pa, pb, po, beta)
        if call is None:  # an empty chunk
            continue
        fn, words, keep = call
        if keep[0] is not pa or keep[1] is not pb:  # (keep: the arrays the call reads)
            return None
        scalars.extend(x for x in keep if not isinstance(x, np.ndarray))
        addr = [int(x.value or 0) if isinstance(x, ctypes.c_void_p) else ctypes.addressof(x)
                for x in words]
        base = 2 + JOB_WORDS * len(jobs) + 1  # (job_table: the function, then its words)
        at.append([base + _A, base + _B, base + _C])
        offsets.append(np.array([_addr(pa), _addr(pb), _addr(po)], np.int64) - bases)
        addr[_A] = addr[_B] = addr[_C] = 0
        jobs.append((int(ctypes.cast(fn, ctypes.c_void_p).value or 0), tuple(addr)))
    return _Plan(job_table(jobs), np.array(at, np.int64).reshape(-1, 3),
                 np.array(offsets, np.int64).reshape(-1, 3), scalars)


__all__ = ["table", "MAX_PLANS"]
