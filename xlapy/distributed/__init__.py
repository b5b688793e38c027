"""Layer 10: the process grid (replicas x partitions): threads in one Python process
(`ProcessGrid`) or one MPI rank per process (`xlapy.distributed.mpi`, needs mpi4py).

Importing this package registers the threaded grid as the one `interpreter.run_parallel` and
`execute_replicated` use.
"""

from xlapy.distributed.grid import (
    DEFAULT_TIMEOUT,
    FeedQueue,
    GridProcess,
    ProcessGrid,
    ProcessGridError,
)
from xlapy.ops.collectives import register_grid_factory
from xlapy.runtime.replicated import ReplicatedExecutable, execute_replicated


def threaded_grid(num_replicas: int, num_partitions: int = 1, **options: object) -> ProcessGrid:
    return ProcessGrid(num_replicas, num_partitions, **options)  # type: ignore[arg-type]


register_grid_factory(threaded_grid)

__all__ = [
    "DEFAULT_TIMEOUT", "FeedQueue", "GridProcess", "ProcessGrid", "ProcessGridError",
    "ReplicatedExecutable", "execute_replicated", "threaded_grid",
]
