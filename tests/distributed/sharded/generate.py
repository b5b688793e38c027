"""Lower every program of programs.py with jax over 8 host devices and save, per program:
the StableHLO text, the inputs, jax's results and the collectives of XLA's own partitioned
program. Runs in its own process (`python -m tests.distributed.sharded.generate OUT MODE`):
jax reads XLA_FLAGS once, when its backend starts, and other tests share the pytest process.
MODE is `shardy` (jax's default) or `gspmd`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

_COLLECTIVE = re.compile(r"= (\([^=]*?\)|\S+) (all-gather|all-reduce|all-to-all|"
                         r"reduce-scatter|collective-permute)(?:-start)?\(")


def xla_collectives(hlo: str) -> list[str]:
    """`all-reduce f32[4,6]` for each collective of XLA's compiled (partitioned) HLO (a
    tuple-shaped one, such as XLA's many-operand all-to-all, with its tuple)."""
    return [f"{m.group(2)} {re.sub(r'{[^}]*}', '', m.group(1))}"
            for m in _COLLECTIVE.finditer(hlo)]


def main(out: Path, mode: str, names: list[str]) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from tests.distributed.sharded.programs import PROGRAMS

    jax.config.update("jax_use_shardy_partitioner", mode == "shardy")
    out.mkdir(parents=True, exist_ok=True)
    for name in names or list(PROGRAMS):
        fn, args = PROGRAMS[name](jax, jnp)
        lowered = fn.lower(*args)
        results = jax.tree.leaves(fn(*args))
        coll = xla_collectives(lowered.compile().as_text())
        np.savez(out / f"{name}.{mode}.npz", text=np.array(lowered.as_text()),
                 n_args=np.array(len(args)), n_results=np.array(len(results)),
                 collectives=np.array("\n".join(coll)),
                 **{f"arg{i}": a for i, a in enumerate(args)},
                 **{f"result{i}": np.asarray(r) for i, r in enumerate(results)})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
