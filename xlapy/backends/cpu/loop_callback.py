"""Library thunks no native step runs (FFTs, convolutions, some dots, LAPACK calls such as
gesdd and geev, a lone integer sort key) as steps of a native loop (native_loop.py), through
a callback into Python.

An FFT runs in DUCC or pocketfft (fft_lib.py), libraries with Python entry points only, so a
loop whose body took an FFT ran through Python altogether: every kernel of every iteration a
thunk, ~54 us an iteration of jnp.fft.ifft(jnp.fft.fft(c) * 0.99) on 1024 points against
XLA's 13. As a step, the native driver calls back into Python for the FFT alone (a ctypes
callback takes the GIL the driver's ctypes call released): the thunk's own function over
views of the loop's buffers, its result copied into the step's buffer. The same function
on the same values: the same bits as the Python path. A convolution's thunk (library.py's
conv_plan: JIT loop nests behind a Python wrapper) writes into the step's buffer directly: a
fori_loop of a 3x3 convolution and a tanh over 16 x 16 x 8 ran 3.8x XLA's time. So does a
dot no native step takes (a weight gradient over 1M multiply-adds: the Python path splits
it over the threads; a bf16 or integer product), and a sort of one integer key (numpy's SIMD
sort in place there: lapack._sort's `into`). A LAPACK call loop_lapack.py has no step for
(an SVD, a general eigensolver) copies each of its results into the step's buffers (an 8 x 8
jnp.linalg.svd per step: 7x XLA's time). As loop_lapack's steps do, such a call runs the
library whatever custom-call targets the call's RuntimeState registers (the Python path
looks those up per call).

A failure inside the callback (an error the function raises) cannot unwind through native
code: it is kept, the driver's stop word set (it stops after the body, as when an inner
loop runs out of its budget), and native_loop raises it when the driver returns. In an
inner loop (nested_loop.py) the stop reads as a spent budget: the outer iteration goes on
through Python from its start, where the transform raises again, from its thunk.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.ir.location import locate_error

if TYPE_CHECKING:
    from xlapy.backends.cpu.loop_library import LibStep

#: Opcodes whose library thunk a loop runs as a callback step.
OPCODES = ("fft", "convolution", "dot_general")
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
#: Views kept per operand (its buffer changes when the loop swaps state buffers).
_MAX_VIEWS = 8


@dataclass(frozen=True)
class Callback:
    """A library thunk's function for a callback step: operands -> its one array result, or
    (`into`) operands and the result's buffer -> None."""

    run: Callable[..., Any]
    into: bool = False


def native(opcode: str, run: Callable[..., Any], into: bool = False) -> Callback | None:
    """The Callback of a library thunk `run` of `opcode`, when a step may call it."""
    return Callback(run, into) if opcode in OPCODES else None


def _view(address: int, shape: Any) -> np.ndarray:
    """The array of `shape` (an xlapy Shape) at `address`."""
    dtype = np.dtype(shape.dtype)
    n = shape.num_elements * dtype.itemsize
    raw = (ctypes.c_char * max(n, 1)).from_address(address)
    return np.frombuffer(raw, np.uint8)[:n].view(dtype).reshape(tuple(shape.dimensions))


def entry(keep: list[Any], st: LibStep, outs: list[int], table: int, slots: int,
          failed: list[BaseException], stop: int) -> list[int]:
    """The driver's words of callback step `st`: its function called on the operands the
    table at `table` (`slots` entries) points at, the results copied to `outs` (in order);
    an error kept in `failed`, the word at `stop` set."""
    instr = st.instr
    tab = (ctypes.c_int64 * slots).from_address(table)
    shapes = [o.shape for o in instr.operands]
    many = instr.shape.is_tuple
    results = [_view(a, sh) for a, sh in zip(
        outs, instr.shape.tuple_shapes if many else [instr.shape])]
    result = results[0]
    views: list[dict[int, np.ndarray]] = [{} for _ in st.ins]
    run, into = st.native.run, st.native.into

    def operand(j: int) -> np.ndarray:
        address = int(tab[st.ins[j]])
        got = views[j].get(address)
        if got is None:
            if len(views[j]) >= _MAX_VIEWS:
                views[j].clear()
            got = views[j][address] = _view(address, shapes[j])
        return got

    def call(arg: Any, lo: int, hi: int) -> None:
        try:
            with np.errstate(all="ignore"):
                ops = [operand(j) for j in range(len(st.ins))]
                if into:
                    run(*ops, result)
                else:
                    val = run(*ops)
                    for r, v in zip(results, val if many else [val]):
                        np.copyto(r, v)
        except BaseException as e:  # (it cannot unwind through the driver)
            failed[:] = [locate_error(e, instr) if isinstance(e, XlapyError) else e]
            ctypes.c_int64.from_address(stop).value = 1

    fn = _CALLBACK(call)
    keep.extend([fn, results, views])
    return [int(ctypes.cast(fn, ctypes.c_void_p).value or 0), table, 0]


__all__ = ["Callback", "OPCODES", "entry", "native"]
