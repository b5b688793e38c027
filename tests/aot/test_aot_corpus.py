"""The conformance corpus and the JAX program suite through `xlapy.aot`: each function
compiled to an object (check ops turned into results: tests/aot/corpus.py), all linked into
one generated C driver (one gcc run), run, and compared with the interpreter; a sample on
aarch64 under qemu.

CI runs a fixed sample (every HOST_STEP-th conformance function on the host, every
ARM_STEP-th on aarch64, every JAX_STEP-th JAX program); XLAPY_AOT_FULL=1 runs all of them.
A conformance function may be refused only for a process-grid / host-transfer op
(GRID_OPS), a JAX program for a reason listed in REFUSED (the op has no in-object
implementation); every other one must compile, link, run and match (probe values too,
where check.expect_serialized_eq compares them). Last full run (XLAPY_AOT_FULL=1): 479 of
515 conformance functions match on the host and on aarch64 under qemu, the other 36 use
interpreter.run_parallel.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.aot.compare import mismatch
from tests.aot.corpus import Case, conformance_cases
from tests.aot.phases import VECTORS, align
from tests.conformance import test_interpret as conf
from xlapy.aot import AotObject, Unimplemented, driver
from xlapy.aot import compile as aot_compile
from xlapy.interpreter import Interpreter

FULL = os.environ.get("XLAPY_AOT_FULL") == "1"
HOST_STEP = 1 if FULL else 5
ARM_STEP = 1 if FULL else 16
JAX_STEP = 1 if FULL else 40

_GRID = "process grids and host transfers run in Python (the grid thunks); not in an object"
_LIBRARY = "a library thunk (LAPACK / FFT through scipy or numpy) with no in-object loop yet"
#: opcode -> why a function using it is refused by xlapy aot.
REFUSED = {
    "interpreter.run_parallel": _GRID, "infeed": _GRID, "outfeed": _GRID, "send": _GRID,
    "recv": _GRID, "all_reduce": _GRID, "all_gather": _GRID, "all_to_all": _GRID,
    "reduce_scatter": _GRID, "collective_permute": _GRID, "collective_broadcast": _GRID,
    "replica_id": _GRID, "partition_id": _GRID,
    "triangular_solve": _LIBRARY, "fft": _LIBRARY,
    # geev with eigenvectors or complex (aot/lapack_geev.py refuses them by name), host
    # callbacks, unknown targets
    "custom_call": "a custom call with no in-object implementation",
}


#: What a conformance function may be refused for: a process grid or a host transfer (every
#: other op of the corpus compiles into objects, on x86-64 and on aarch64).
GRID_OPS = frozenset(op for op, why in REFUSED.items() if why == _GRID)


def _refusal_ok(e: Unimplemented) -> bool:
    """Listed in REFUSED, or an op the cpu backend itself runs on the interpreter (its
    fallback table, tests/fallbacks.py, says why)."""
    return e.opcode in REFUSED or "interpreter fallback" in e.why


def _sweep(cases: list[Case], tmp: Path, target: str | None, cc: str,
           runner: tuple[str, ...] = ()) -> tuple[int, dict[str, int]]:
    """Compile, link, run and compare; returns (functions matched, refusals per op). Only
    GRID_OPS may be refused."""
    objs, kept, refused, bad = [], [], {}, []
    for k, c in enumerate(cases):
        try:
            objs.append(aot_compile(c.module, name=f"f{k}", function=c.comp, target=target,
                                    probe_capacity=c.probe_capacity))
            kept.append(c)
        except Unimplemented as e:
            if e.opcode not in GRID_OPS:
                bad.append(f"{c.cid}: refused: {e}")
            refused[e.opcode] = refused.get(e.opcode, 0) + 1
    exe = driver.build(objs, tmp, cc=cc)
    got = driver.run(objs, {o.name: [] for o in objs}, tmp, exe, runner=runner)
    for c, o in zip(kept, objs):
        ref = Interpreter().run(c.comp, [])
        ref = ref if isinstance(ref, tuple) else (ref,)
        res = got[o.name]
        if isinstance(res, int):
            bad.append(f"{c.cid}: error {res}")
            continue
        for j, (g, r) in enumerate(zip(res, ref)):
            m = mismatch(g, r)
            if m is not None:
                bad.append(f"{c.cid} result {j}: {m}")
                break
        bad += _probe_mismatches(c, o, res)
    assert not bad, "\n".join(bad)
    return len(objs), refused


def _probe_mismatches(c: Case, o: AotObject, res: list[np.ndarray]) -> list[str]:
    """Where the harness compares a probe (check.expect_serialized_eq: the value recorded
    at `iteration` equals the operand, bit for bit), compare the object's probe results."""
    bad = []
    first = len(res) - 2 * len(o.probes)
    for at, pid, it in c.serialized:
        js = [j for j, p in enumerate(o.probes) if p == pid]
        if len(js) != 1:
            bad.append(f"{c.cid}: {len(js)} probes named {pid!r} in the object")
            continue
        values, count = res[first + 2 * js[0]], int(res[first + 2 * js[0] + 1])
        if count <= it:
            bad.append(f"{c.cid}: probe {pid!r} ran {count} time(s), checked at {it}")
        elif values[it].tobytes() != res[at].tobytes():
            bad.append(f"{c.cid}: probe {pid!r} value {it} is {values[it]}, "
                       f"expected {res[at]}")
    return bad


@pytest.mark.skipif(driver.tool("gcc") is None, reason="gcc is not installed (Debian: gcc)")
def test_conformance_on_host(tmp_path: Path) -> None:
    cases = conformance_cases(conf.CHUNKS)
    assert len(cases) > 400
    n, refused = _sweep(cases[::HOST_STEP], tmp_path, None, "gcc")
    assert n >= 0.75 * len(cases[::HOST_STEP]), refused


def test_conformance_on_aarch64_under_qemu(tmp_path: Path) -> None:
    missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if driver.tool(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: `make aot-tools` (Debian packages "
                    "gcc-aarch64-linux-gnu, qemu-user) enables the aarch64 AOT test")
    cases = conformance_cases(conf.CHUNKS)[::ARM_STEP]
    n, refused = _sweep(cases, tmp_path, "aarch64-linux-gnu", "aarch64-linux-gnu-gcc",
                        ("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"))
    assert n >= 0.7 * len(cases), refused


@pytest.mark.skipif(driver.tool("gcc") is None, reason="gcc is not installed (Debian: gcc)")
def test_jax_programs_sample(tmp_path: Path) -> None:
    """A sample of the JAX program suite, compared with JAX under each program's stated
    tolerance (the same check the cpu backend passes); eigen- and singular vectors after
    choosing each one's sign / phase closest to JAX's (tests/aot/phases.py)."""
    from tests.differential.jax_programs.runner import compare, lower
    from tests.differential.jax_programs.test_jax_programs import PROGRAMS

    sample = PROGRAMS[::JAX_STEP]
    objs, kept, refused = [], [], []
    for k, p in enumerate(sample):
        try:
            objs.append(aot_compile(lower(p).text, name=f"jax{k}"))
            kept.append(p)
        except Unimplemented as e:
            assert _refusal_ok(e), f"{p.id}: {e}"
            refused.append(p.id)
    exe = driver.build(objs, tmp_path)
    inputs = {o.name: [np.asarray(a) for a in p.args] for o, p in zip(objs, kept)}
    got = driver.run(objs, inputs, tmp_path, exe)
    for o, p in zip(objs, kept):
        res = got[o.name]
        assert not isinstance(res, int), f"{p.id}: error {res}"
        expected = lower(p).expected
        compare(p, tuple(align(VECTORS.get(p.id), res, list(expected))), expected)
    assert len(kept) >= 0.8 * len(sample), refused
