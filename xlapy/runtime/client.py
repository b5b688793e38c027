"""Seed 001's client flow: transfer to the service, compile, execute, transfer back.

A computation never names its device; the client's backend (by name) runs it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlapy.backends import get_backend
from xlapy.errors import XlapyError
from xlapy.ir import Module
from xlapy.types import Literal, Shape


class GlobalData:
    """A handle to a value held by the service (seed 001's GlobalData / a device buffer).

    A result of a backend that keeps values on its device (the gpu backend's
    `run_on_device`) holds the device value: it is copied to the host only when asked for
    (`transfer_to_client`), and passed to later executions without copies."""

    _ids = itertools.count(1)

    def __init__(self, client: Client, literal: Literal | None, device: Any = None,
                 shape: Shape | None = None, fetch: Any = None) -> None:
        self.client = client
        self.handle = next(GlobalData._ids)
        self._literal: Literal | None = literal
        self._device = device
        self._shape = shape if shape is not None else literal.shape if literal else None
        self._fetch = fetch
        self._freed = False

    @property
    def shape(self) -> Shape:
        if self._freed or self._shape is None:
            return self._get().shape
        return self._shape

    @property
    def device_value(self) -> Any:
        """The value on the backend's device, or None (held on the host)."""
        return None if self._freed else self._device

    def _get(self) -> Literal:
        if self._freed:
            raise XlapyError(f"GlobalData {self.handle} was already deallocated")
        if self._literal is None:
            self._literal = Literal.from_value(self._fetch(self._device), self._shape)
        return self._literal

    def deallocate(self) -> None:
        self._literal = self._device = None
        self._freed = True

    def __repr__(self) -> str:
        return f"GlobalData({self.handle}: {'freed' if self._freed else self._shape})"


class Executable:
    """A compiled computation bound to a client's backend: compile once, execute many."""

    def __init__(self, client: Client, module: Module, compiled: Any) -> None:
        self.client = client
        self.module = module
        self.compiled = compiled

    @property
    def result_shape(self) -> Shape:
        return self.module.entry_computation().result_shape

    def execute(self, arguments: Sequence[GlobalData | Literal | Any]) -> GlobalData:
        on_device = getattr(self.compiled, "run_on_device", None)
        if on_device is not None:  # results stay on the device until asked for
            args = [self.client._device_or_value(a) for a in arguments]
            return GlobalData(self.client, None, on_device(args), self.result_shape,
                              self.compiled.fetch)
        args = [self.client._as_literal(a).to_value() for a in arguments]
        value = self.compiled.run(args)
        return GlobalData(self.client, Literal.from_value(value, self.result_shape))

    def execute_and_transfer(self, arguments: Sequence[GlobalData | Literal | Any]) -> Literal:
        return self.execute(arguments)._get()


def _copied(lit: Literal) -> Literal:
    def copy(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(copy(e) for e in v)
        return v.copy() if isinstance(v, np.ndarray) else v

    return Literal.from_value(copy(lit.to_value()), lit.shape)


def _module_of(computation: Any) -> Module:
    if isinstance(computation, Module):
        return computation
    module = getattr(computation, "module", None)
    if isinstance(module, Module):
        return module
    raise XlapyError(f"cannot compile {type(computation).__name__}: expected an XlaComputation "
                     "or a Module")


class Client:
    """The service front: `Client()` uses the default backend; `Client("interpreter")` names one.
    `options` are every compile's defaults (e.g. `{"target": "x86-64-v3"}` for the cpu
    backend); `compile(..., options)` adds to them."""

    def __init__(self, backend: str | None = None, options: dict[str, Any] | None = None
                 ) -> None:
        self.options = dict(options or {})
        if backend is None:
            from xlapy.backends import default_backend

            backend = default_backend()
        self.backend_name = backend
        self.backend = get_backend(backend)
        self._lock = threading.Lock()

    # ---- transfers ----------------------------------------------------------------------------
    def transfer_to_server(self, value: Literal | Any) -> GlobalData:
        """Copy a host value (Literal or numpy-compatible) to the service: later writes to
        the host array do not change the service's value."""
        return GlobalData(self, _copied(self._as_literal(value)))

    def transfer_to_client(self, data: GlobalData, shape_with_layout: Shape | None = None
                           ) -> Literal:
        lit = data._get()
        if shape_with_layout is not None and shape_with_layout.layout is not None:
            return lit.relayout(shape_with_layout.layout)
        return lit

    def _device_or_value(self, value: Any) -> Any:
        """An argument for a device backend: a result it keeps on the device as is."""
        if isinstance(value, GlobalData) and value.client is self and \
                value.device_value is not None:
            return value.device_value
        return self._as_literal(value).to_value()

    def _as_literal(self, value: Any) -> Literal:
        if isinstance(value, GlobalData):
            if value.client is not self:
                raise XlapyError(f"{value!r} belongs to another client")
            return value._get()
        if isinstance(value, Literal):
            return value
        if isinstance(value, np.ma.MaskedArray) and np.ma.getmaskarray(value).any():
            raise XlapyError("a masked array with masked elements has no value for them; "
                             "pass np.ma.filled(value, fill) or its data")
        return Literal.from_numpy(np.asarray(value) if not isinstance(value, tuple) else value)

    # ---- compile and run ------------------------------------------------------------------------
    def compile(self, computation: Any, options: dict[str, Any] | None = None) -> Executable:
        module = _module_of(computation)
        return Executable(self, module, self.backend.compile(module, {**self.options,
                                                                      **(options or {})}))

    def execute(self, computation: Any, arguments: Sequence[Any] = ()) -> GlobalData:
        exe = computation if isinstance(computation, Executable) else self.compile(computation)
        return exe.execute(arguments)

    def execute_and_transfer(self, computation: Any, arguments: Sequence[Any] = ()) -> Literal:
        return self.execute(computation, arguments)._get()

    def __repr__(self) -> str:
        return f"<Client backend={self.backend_name}>"


class ClientLibrary:
    """Seed 001's `ClientLibrary::LocalClientOrDie()`."""

    _local: Client | None = None

    @classmethod
    def local_client(cls, backend: str | None = None) -> Client:
        if backend is None:
            from xlapy.backends import default_backend

            backend = default_backend()
        if cls._local is None or cls._local.backend_name != backend:
            cls._local = Client(backend)
        return cls._local

    LocalClientOrDie = local_client
