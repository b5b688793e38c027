"""llvm_util.once: native code built on a program's first run is built once, even when
several threads make that first run at the same time (a thread grid's shards)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

from xlapy.backends.cpu.once import once


def test_concurrent_first_calls_build_once() -> None:
    built: list[int] = []

    @once
    def build(k: int) -> object:
        built.append(k)
        time.sleep(0.05)  # long enough for every thread to ask before the first returns
        return object()

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(build(1))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == [1]
    assert len({id(g) for g in got}) == 1
    assert build(2) is not build(1) and built == [1, 2]
    build.cache_clear()  # type: ignore[attr-defined]
    build(1)
    assert built == [1, 2, 1]


PROGRAM = textwrap.dedent("""
    import threading
    import numpy as np
    import xlapy
    text = '''
    func.func @main(%x: tensor<256x1024xf32>, %w: tensor<1024x1024xf32>, %b: tensor<1024xf32>)
        -> tensor<256x1024xf32> {
      %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
          : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32>
      %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<1024xf32>) -> tensor<256x1024xf32>
      %s = stablehlo.add %d, %bb : tensor<256x1024xf32>
      %z = stablehlo.constant dense<0.0> : tensor<256x1024xf32>
      %r = stablehlo.maximum %s, %z : tensor<256x1024xf32>
      %e = stablehlo.tanh %r : tensor<256x1024xf32>
      return %e : tensor<256x1024xf32>
    }
    '''
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 1024), dtype=np.float32)
    w = rng.standard_normal((1024, 1024), dtype=np.float32) / 32
    b = rng.standard_normal(1024, dtype=np.float32)
    progs = [xlapy.compile(text, backend="cpu") for _ in range(8)]
    out = [None] * 8
    go = threading.Barrier(8)
    def run(i):
        go.wait()
        out[i] = progs[i](x, w, b)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    want = np.tanh(np.maximum(x.astype(np.float64) @ w + b, 0))
    for o in out:
        assert np.max(np.abs(np.asarray(o) - want)) < 1e-4
    print("ok")
""")


def test_programs_first_run_on_threads() -> None:
    """Eight compiled programs make their first run at once on eight threads (a fresh
    process, so the native runners are built then): no crash, right values. With
    functools.cache this crashed: a runner built twice was dropped while in use."""
    r = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "XLAPY_CACHE_DIR": ""})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
