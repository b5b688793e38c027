"""`execute_replicated`: run one program on every process of a replicas x partitions grid,
one argument list per process in, one result list per process out (PjRt's
`execute_sharded` / xla_client's `execute_replicated` shape of call).

The grid comes from `collectives.new_process_grid` (the threaded grid once
`xlapy.distributed` is imported, which `import xlapy` does); pass `grid=` to reuse one whose
infeeds, outfeeds and host channels the caller drives while the program runs.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.ops.collectives import new_process_grid
from xlapy.runtime.client import Client


class ReplicatedExecutable:
    """A program compiled once for a `num_replicas x num_partitions` grid."""

    def __init__(self, computation: Any, num_replicas: int, num_partitions: int = 1,
                 client: Client | None = None, timeout: float | None = None,
                 grid: Any = None) -> None:
        self.client = client or Client()
        self.executable = self.client.compile(computation)
        self.num_replicas, self.num_partitions = int(num_replicas), int(num_partitions)
        options = {} if timeout is None else {"timeout": timeout}
        self.grid = grid or new_process_grid(self.num_replicas, self.num_partitions, **options)
        if (self.grid.num_replicas, self.grid.num_partitions) != (self.num_replicas,
                                                                  self.num_partitions):
            raise XlapyError(f"grid {self.grid.num_replicas}x{self.grid.num_partitions} differs "
                             f"from {self.num_replicas}x{self.num_partitions}")

    @property
    def num_processes(self) -> int:
        return self.num_replicas * self.num_partitions

    def execute(self, arguments: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """`arguments[i]` is process i's list (row-major: replica-major, as flattened ids);
        returns each process's results as a list (the entry's tuple elements, or [value])."""
        if len(arguments) != self.num_processes:
            raise XlapyError(f"execute_replicated: {len(arguments)} argument list(s) for "
                             f"{self.num_processes} process(es) ({self.num_replicas}x"
                             f"{self.num_partitions})")
        entry = self.executable.module.entry_computation()
        args = [[self.client._as_literal(a).to_value() for a in per] for per in arguments]
        values = self.grid.run_programs([entry] * self.num_processes, args)
        return [list(v) if entry.result_shape.is_tuple else [v] for v in values]

    def execute_async(self, arguments: Sequence[Sequence[Any]]) -> Future[list[list[Any]]]:
        """Start `execute` in a thread, so the caller can feed infeeds and drain outfeeds."""
        future: Future[list[list[Any]]] = Future()

        def work() -> None:
            try:
                future.set_result(self.execute(arguments))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                future.set_exception(e)

        threading.Thread(target=contextvars.copy_context().run, args=(work,),  # the caller's
                         name="xlapy-execute-replicated", daemon=True).start()  # modes hold
        return future


def execute_replicated(computation: Any, arguments: Sequence[Sequence[Any]],
                       num_replicas: int | None = None, num_partitions: int = 1,
                       client: Client | None = None, timeout: float | None = None,
                       grid: Any = None) -> list[list[np.ndarray]]:
    """Compile `computation` for the grid and run it once; see `ReplicatedExecutable`."""
    if num_replicas is None:
        if len(arguments) % num_partitions:
            raise XlapyError(f"execute_replicated: {len(arguments)} argument lists do not fill "
                             f"{num_partitions} partition(s)")
        num_replicas = len(arguments) // num_partitions
    exe = ReplicatedExecutable(computation, num_replicas, num_partitions, client, timeout, grid)
    return exe.execute(arguments)


__all__ = ["ReplicatedExecutable", "execute_replicated"]
