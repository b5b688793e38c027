"""A stand-in GPU for tests on machines without one: the gpu executable's runtime (runtime.py:
Runner, device arrays, kernel tables, host and alias steps) runs against `FakeDevice`, whose
memory is host memory and whose "launch" calls the kernels' NVPTX IR compiled for the host
CPU, as a grid of one thread (tid = ctaid = 0, ntid = nctaid = 1: the grid-stride loops
then walk every item). Warp shuffles return the lane's own value (a warp of one), which is
exact for idempotent reducers (max, min, and, or) only; libdevice calls go to libm.
cuBLAS is replaced by a column-major GEMM in numpy that follows the plan's transpose
flags and leading dimensions literally, so the plan's arithmetic is checked too."""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from xlapy.backends.gpu import cublas, libdevice

_SREG = {"tid.x": 0, "ctaid.x": 0, "ntid.x": 1, "nctaid.x": 1}
_SUPPORT = "\n".join(
    [f"define i32 @emu_sreg_{n.replace('.', '_')}() {{ ret i32 {v} }}" for n, v in _SREG.items()]
    + ["define i32 @emu_shfl(i32 %m, i32 %v, i32 %l, i32 %c) { ret i32 %v }",
       "define void @emu_barrier() { ret void }"])


def _host_ir(text: str) -> str:
    """The NVPTX module's IR retargeted to the host: special registers, shuffles and the
    barrier become emu_* functions, shared memory a plain global."""
    text = re.sub(r'target (triple|datalayout) = "[^"]*"\n', "", text)
    text = re.sub(r'@"?llvm\.nvvm\.read\.ptx\.sreg\.(\w+)\.x"?',
                  lambda m: f"@emu_sreg_{m.group(1)}_x", text)
    text = re.sub(r'@"?llvm\.nvvm\.shfl\.sync\.bfly\.i32"?', "@emu_shfl", text)
    text = re.sub(r'@"?llvm\.nvvm\.barrier0"?', "@emu_barrier", text)
    return text.replace("addrspace(3)", "").replace("ptx_kernel ", "")


class FakeDevice:
    """driver.Device's interface over host memory and host-compiled kernels."""

    arch = "sm_80"

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}
        self.engines: list[Any] = []
        self.launches: list[tuple[str, int, int]] = []
        self._names: dict[int, str] = {}
        self.exes: list[Any] = []

    def register(self, exe: Any) -> None:
        """The executable (and those its control flow runs) whose kernels it will load."""
        self.exes += exe.tree()

    def activate(self) -> None:
        pass

    def alloc(self, nbytes: int) -> int:
        buf = np.zeros(max(nbytes, 1) + 64, np.uint8)
        ptr = (buf.ctypes.data + 63) // 64 * 64
        self.buffers[ptr] = buf
        return ptr

    def free(self, ptr: int) -> None:
        self.buffers.pop(ptr, None)

    def to_device(self, ptr: int, host: int, nbytes: int) -> None:
        ctypes.memmove(ptr, host, nbytes)

    def to_host(self, host: int, ptr: int, nbytes: int) -> None:
        ctypes.memmove(host, ptr, nbytes)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def synchronize(self) -> None:
        pass

    def load_module(self, image: bytes) -> int:
        """Compiles the executable's IR (the PTX itself cannot run here)."""
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libm = ctypes.CDLL(ctypes.util.find_library("m"))
        for f32, f64 in libdevice.FUNCTIONS.values():
            for name in (f32, f64):
                base = name[len("__nv_"):]
                llvm.add_symbol(name, ctypes.cast(getattr(libm, base), ctypes.c_void_p).value)
        exe = next(e for e in self.exes if e.kernel_specs
                   and e.ptx(self.arch).encode() + b"\0" == image)
        ref = llvm.parse_assembly(_host_ir(exe.ir))
        ref.link_in(llvm.parse_assembly(_SUPPORT))
        ref.verify()
        tm = llvm.Target.from_default_triple().create_target_machine()
        engine = llvm.create_mcjit_compiler(ref, tm)
        engine.finalize_object()
        self.engines.append(engine)
        return len(self.engines) - 1

    def function(self, module: int, name: str) -> int:
        addr = self.engines[module].get_function_address(name)
        self._names[addr] = name
        return addr

    def launch(self, fn: int, grid: int, block: int, args: list[Any]) -> None:
        self.launches.append((self._names[fn], grid, block))
        proto = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64)
        proto(fn)(*(a.value for a in args))


def numpy_gemm(g: cublas.Gemm, lhs: int, rhs: int, out: int) -> None:
    """cublas.run's contract in numpy: column-major C^T = op(X) op(Y), per batch."""
    dt = np.float32 if g.et.shlo_name == "f32" else np.float64
    size = np.dtype(dt).itemsize

    def view(ptr: int, n: int) -> np.ndarray:
        return np.ctypeslib.as_array((ctypes.c_byte * (n * size)).from_address(ptr)).view(dt)

    def col_major(a: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
        return np.lib.stride_tricks.as_strided(a, (rows, cols), (size, ld * size))

    for i in range(g.batch):
        x = view(rhs + i * g.n * g.k * size, g.n * g.k)
        y = view(lhs + i * g.m * g.k * size, g.m * g.k)
        c = view(out + i * g.m * g.n * size, g.m * g.n)
        opx = col_major(x, g.n, g.k, g.ldx) if g.trans_x == cublas.CUBLAS_OP_N else \
            col_major(x, g.k, g.n, g.ldx).T
        opy = col_major(y, g.k, g.m, g.ldy) if g.trans_y == cublas.CUBLAS_OP_N else \
            col_major(y, g.m, g.k, g.ldy).T
        col_major(c, g.n, g.m, g.n)[...] = opx @ opy


def run(exe: Any, args: list[Any], monkeypatch: Any) -> tuple[Any, FakeDevice]:
    """Run a gpu executable on a FakeDevice; (host results, the device)."""
    from xlapy.backends.gpu import driver, runtime

    dev = FakeDevice()
    dev.register(exe)
    monkeypatch.setattr(driver, "device", lambda: dev)
    monkeypatch.setattr(cublas, "run", numpy_gemm)
    exe._runtime = None
    out = exe.run(args)
    exe._runtime = None
    return runtime.to_host(out), dev
