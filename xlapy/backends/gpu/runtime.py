"""Running a gpu executable's steps on the device (driver.py): device arrays per slot,
kernels launched with a device table of slot pointers, GEMMs through cuBLAS, host steps
through the interpreter's op kernels (operands copied out, the result copied back).

Needs a GPU: `Runner(exe)` raises Unimplemented (from driver.device) where there is none.
Results stay on the device (`run_device`) until `to_host()`; `run` copies them out."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlapy import denormal
from xlapy.backends.cpu.thunks import FallbackContext
from xlapy.backends.gpu import cublas, driver
from xlapy.errors import InterpreterError
from xlapy.interpreter import RuntimeState
from xlapy.interpreter.evaluator import check_value
from xlapy.ops.base import OPS
from xlapy.types.literal import TOKEN_VALUE


class DeviceArray:
    """An array in device memory (freed with the object)."""

    def __init__(self, dev: driver.Device, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.dev = dev
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.ptr = dev.alloc(self.nbytes)

    @classmethod
    def from_host(cls, dev: driver.Device, value: np.ndarray) -> DeviceArray:
        a = np.asarray(value)  # (not ascontiguousarray: it makes a scalar 1-d)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")
        out = cls(dev, a.shape, a.dtype)
        dev.to_device(out.ptr, a.ctypes.data, out.nbytes)
        return out

    def to_host(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self.dev.to_host(out.ctypes.data, self.ptr, self.nbytes)
        return out

    # Host code reading a device value (a loop predicate, a branch index) copies it out.
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.to_host()
        return a if dtype is None else a.astype(dtype)

    def __bool__(self) -> bool:
        return bool(self.to_host())

    def __int__(self) -> int:
        return int(self.to_host())

    __index__ = __int__

    def __del__(self) -> None:
        try:
            self.dev.free(self.ptr)
        except Exception:  # noqa: BLE001  (interpreter shutdown: the context is gone)
            pass


def to_host(value: Any) -> Any:
    """Device arrays (in tuples) as host numpy arrays."""
    if isinstance(value, tuple):
        return tuple(to_host(v) for v in value)
    return value.to_host() if isinstance(value, DeviceArray) else value


class _DeviceContext(FallbackContext):
    """EvalContext of a control-flow step: its computations run as gpu sub-executables on
    device values (the op's host code reads predicates and indices through __array__)."""

    def call(self, index: int, *args: Any) -> Any:
        return self.subs[index].run_on_device(list(args), self.runtime)


class _Table:
    """The device copy of a call's slot pointers and the host table it was copied from."""

    def __init__(self, dev: driver.Device, n: int) -> None:
        self.size = max(n, 1)
        self.array = DeviceArray(dev, (self.size,), np.dtype(np.uint64))
        self.host: Any = b""


class Runner:
    """The device side of one GpuExecutable: its module loaded, its constants uploaded."""

    def __init__(self, exe: Any) -> None:
        self.exe = exe
        self.dev = driver.device()
        self.functions: dict[str, int] = {}
        if exe.kernel_specs:
            mod = self.dev.load_module(exe.ptx(self.dev.arch).encode() + b"\0")
            self.functions = {k.name: self.dev.function(mod, k.name) for k in exe.kernel_specs}
        self.constants = {s: DeviceArray.from_host(self.dev, a) for s, a in exe.static.items()}

    def run(self, args: Sequence[Any], runtime: RuntimeState | None, process: Any) -> Any:
        return to_host(self.run_device(args, runtime, process))

    def run_device(self, args: Sequence[Any], runtime: RuntimeState | None = None,
                   process: Any = None) -> Any:
        exe = self.exe
        rt = runtime or RuntimeState()
        #: Per slot its value; last, the device slot table kernels read (one per call).
        vals: list[Any] = [None] * len(exe.shapes) + [None]
        if exe.kernel_specs:
            vals[-1] = _Table(self.dev, len(exe.shapes))
        for s, a in self.constants.items():
            vals[s] = a
        params = exe.comp.parameters
        if len(args) != len(params):
            raise InterpreterError(f"computation {exe.comp.name} takes {len(params)} "
                                   f"argument(s), got {len(args)}")
        for p, a in zip(params, args):
            vals[exe.slot[id(p)]] = self._upload(a, p.shape, f"argument {p.parameter_number}")
        with denormal.use(exe.denormal):
            for step in exe.steps:
                getattr(self, f"_{step.kind}")(step, vals, rt, process)
        self.dev.synchronize()
        return vals[exe.slot[id(exe.comp.root)]]

    def _upload(self, value: Any, shape: Any, what: str) -> Any:
        if isinstance(value, DeviceArray):
            return value
        if isinstance(value, tuple):
            return tuple(self._upload(v, s, what) for v, s in zip(value, shape.tuple_shapes))
        if not shape.is_array:
            return value
        return DeviceArray.from_host(self.dev, np.asarray(check_value(value, shape, what)))

    def _output(self, step: Any) -> DeviceArray:
        sh = step.instr.shape
        return DeviceArray(self.dev, tuple(sh.dimensions), sh.dtype)

    def _kernel(self, step: Any, vals: list[Any], rt: Any, pr: Any) -> None:
        """Launch on the slot table: one device array per call, copied in again only
        when a slot it holds changed (copies and launches are ordered on one stream)."""
        k = step.kernel
        vals[step.out] = self._output(step)
        dtab = vals[-1]
        table = (ctypes.c_uint64 * dtab.size)(
            *[v.ptr if isinstance(v, DeviceArray) else 0 for v in vals[:-1]])
        if bytes(dtab.host) != bytes(table):
            dtab.host = table
            self.dev.to_device(dtab.array.ptr, ctypes.addressof(table), dtab.array.nbytes)
        grid, block = k.grid()
        if k.items:
            self.dev.launch(self.functions[k.name], grid, block,
                            [ctypes.c_uint64(dtab.array.ptr), ctypes.c_int64(0),
                             ctypes.c_int64(k.items)])

    def _cublas(self, step: Any, vals: list[Any], rt: Any, pr: Any) -> None:
        out = self._output(step)
        a, b = (vals[i] for i in step.ins)
        cublas.run(step.gemm, a.ptr, b.ptr, out.ptr)
        vals[step.out] = out

    def _alias(self, step: Any, vals: list[Any], rt: Any, pr: Any) -> None:
        op, ins = step.instr.opcode, step.ins
        if op == "tuple":
            vals[step.out] = tuple(vals[i] for i in ins)
        elif op == "get_tuple_element":
            vals[step.out] = vals[ins[0]][step.instr.attrs.index]
        elif op == "after_all":
            vals[step.out] = TOKEN_VALUE
        else:  # optimization_barrier
            vals[step.out] = vals[ins[0]] if len(ins) == 1 else tuple(vals[i] for i in ins)

    def _control(self, step: Any, vals: list[Any], rt: Any, pr: Any) -> None:
        instr = step.instr
        ctx = _DeviceContext(instr, step.extra["subs"], rt, pr)
        vals[step.out] = OPS[instr.opcode].evaluate([vals[i] for i in step.ins], instr.attrs,
                                                    instr.shape, ctx)

    def _host(self, step: Any, vals: list[Any], rt: Any, pr: Any) -> None:
        instr = step.instr
        operands = [to_host(vals[i]) for i in step.ins]
        with np.errstate(all="ignore"):
            val = OPS[instr.opcode].evaluate(operands, instr.attrs, instr.shape,
                                             FallbackContext(instr, [], rt, pr))
        val = check_value(val, instr.shape, f"{instr.opcode} %{instr.name}", internal=True)
        vals[step.out] = self._upload(val, instr.shape, f"{instr.opcode} %{instr.name}")
