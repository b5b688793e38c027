"""The CUDA driver API through ctypes over libcuda (no CUDA Python package needed): the
device and its primary context, device memory, copies, PTX modules and kernel launches.

Everything here needs an NVIDIA GPU and its driver. Without them `device()` raises
Unimplemented saying what is missing (no libcuda, cuInit failed, no device); compiling to
PTX never comes here."""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Sequence
from typing import Any

from xlapy.errors import Unimplemented, XlapyError

_NO_GPU = ("the gpu backend needs an NVIDIA GPU and its driver to run programs (compiling "
           "to PTX works without them: xlapy.compile(..., backend='gpu') then .ptx())")
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
_LIBNAMES = ("libcuda.so.1", "libcuda.so")
_LOCK = threading.Lock()


class CudaError(XlapyError):
    """A CUDA driver call failed (its name, error code and the driver's message)."""


@functools.cache
def _lib() -> ctypes.CDLL:
    errors = []
    for name in _LIBNAMES:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise Unimplemented(f"no CUDA driver found ({'; '.join(errors)}): {_NO_GPU}")


def _call(name: str, *args: Any) -> None:
    rc = getattr(_lib(), name)(*args)
    if rc != CUDA_SUCCESS:
        msg = ctypes.c_char_p()
        _lib().cuGetErrorString(rc, ctypes.byref(msg))
        text = msg.value.decode() if msg.value else "unknown error"
        raise CudaError(f"{name} failed: CUDA error {rc} ({text})")


class Device:
    """GPU 0 with its primary context current on the calling thread."""

    def __init__(self) -> None:
        lib = _lib()
        rc = lib.cuInit(0)
        if rc == CUDA_ERROR_NO_DEVICE:
            raise Unimplemented(f"the CUDA driver found no GPU (cuInit: error {rc}): {_NO_GPU}")
        if rc != CUDA_SUCCESS:
            raise Unimplemented(f"the CUDA driver did not start (cuInit: error {rc}): {_NO_GPU}")
        count = ctypes.c_int()
        _call("cuDeviceGetCount", ctypes.byref(count))
        if count.value == 0:
            raise Unimplemented(f"the CUDA driver found no GPU: {_NO_GPU}")
        self.handle = ctypes.c_int()
        _call("cuDeviceGet", ctypes.byref(self.handle), 0)
        self.context = ctypes.c_void_p()
        _call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), self.handle)
        major, minor = ctypes.c_int(), ctypes.c_int()
        _call("cuDeviceGetAttribute", ctypes.byref(major),
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.handle)
        _call("cuDeviceGetAttribute", ctypes.byref(minor),
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.handle)
        #: The PTX architecture of the device (sm_80, sm_90, ...).
        self.arch = f"sm_{major.value}{minor.value}"
        self.activate()

    def activate(self) -> None:
        """Make the primary context current on this thread."""
        _call("cuCtxSetCurrent", self.context)

    # ---- memory ----
    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        _call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1)))
        return ptr.value

    def free(self, ptr: int) -> None:
        _call("cuMemFree_v2", ctypes.c_uint64(ptr))

    def to_device(self, ptr: int, host: Any, nbytes: int) -> None:
        if nbytes:
            _call("cuMemcpyHtoD_v2", ctypes.c_uint64(ptr), ctypes.c_void_p(host),
                  ctypes.c_size_t(nbytes))

    def to_host(self, host: Any, ptr: int, nbytes: int) -> None:
        if nbytes:
            _call("cuMemcpyDtoH_v2", ctypes.c_void_p(host), ctypes.c_uint64(ptr),
                  ctypes.c_size_t(nbytes))

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            _call("cuMemcpyDtoD_v2", ctypes.c_uint64(dst), ctypes.c_uint64(src),
                  ctypes.c_size_t(nbytes))

    def synchronize(self) -> None:
        _call("cuCtxSynchronize")

    # ---- code ----
    def load_module(self, image: bytes) -> int:
        """A module from PTX text (the driver compiles it for this device) or a cubin."""
        mod = ctypes.c_void_p()
        _call("cuModuleLoadData", ctypes.byref(mod), ctypes.c_char_p(image))
        return mod.value or 0

    def function(self, module: int, name: str) -> int:
        fn = ctypes.c_void_p()
        _call("cuModuleGetFunction", ctypes.byref(fn), ctypes.c_void_p(module), name.encode())
        return fn.value or 0

    def launch(self, fn: int, grid: int, block: int, args: Sequence[Any]) -> None:
        """Launch `fn` on `grid` blocks of `block` threads with ctypes scalar `args`."""
        ptrs = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                                for a in args])
        _call("cuLaunchKernel", ctypes.c_void_p(fn), grid, 1, 1, block, 1, 1, 0, None,
              ptrs, None)


@functools.cache
def _device() -> Device:
    with _LOCK:
        return Device()


def device() -> Device:
    """The process's GPU (started on first use); Unimplemented when there is none."""
    dev = _device()
    dev.activate()
    return dev


def available() -> tuple[bool, str]:
    """Whether a GPU can run programs here, else why not."""
    try:
        device()
    except (Unimplemented, CudaError) as e:
        return False, str(e)
    return True, ""
