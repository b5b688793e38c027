"""A generated C program that runs compiled objects on buffers from files: how the tests
check objects against the interpreter, many programs in one process (one compiler and
one linker run for a whole batch, natively or under an emulator such as qemu-aarch64).

    build(objs, directory, cc)          # writes the objects, headers, driver.c; links
    run(objs, inputs, directory, exe)   # NAME.in -> NAME.out for each program

The driver takes the directory: for each program, it reads `NAME.in` (the arguments'
bytes, concatenated in order), calls `NAME_run` with 64-byte aligned scratch, and writes
`NAME.out` (the results' bytes, concatenated) or `NAME.err` (the error code).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from xlapy.aot import AotObject

_PRELUDE = """\
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

static char dir[4096];
static int threads;  /* 0: NAME_run, else NAME_run_threaded with this many threads */

static void *buffer(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) { perror("posix_memalign"); exit(2); }
    return p;
}

static int run_one(const char *name, int (*fn)(const void *const *, void *const *, void *),
                   int (*tfn)(const void *const *, void *const *, void *, int),
                   int nargs, const size_t *abytes, int nres, const size_t *rbytes,
                   size_t scratch_bytes) {
    char path[4200];
    void *args[64], *res[64];
    snprintf(path, sizeof path, "%s/%s.in", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;  /* not asked for */
    for (int i = 0; i < nargs; i++) {
        args[i] = buffer(abytes[i]);
        if (abytes[i] && fread(args[i], 1, abytes[i], f) != abytes[i]) {
            fprintf(stderr, "%s: short input\\n", name); exit(2);
        }
    }
    fclose(f);
    for (int i = 0; i < nres; i++) res[i] = buffer(rbytes[i]);
    void *scratch = buffer(scratch_bytes);
    int rc = threads ? tfn((const void *const *)args, (void *const *)res, scratch, threads)
                     : fn((const void *const *)args, (void *const *)res, scratch);
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, rc ? "err" : "out");
    f = fopen(path, "wb");
    if (rc) fprintf(f, "%d\\n", rc);
    else for (int i = 0; i < nres; i++) fwrite(res[i], 1, rbytes[i], f);
    fclose(f);
    for (int i = 0; i < nargs; i++) free(args[i]);
    for (int i = 0; i < nres; i++) free(res[i]);
    free(scratch);
    return 1;
}
"""


def source(objs: Sequence[AotObject]) -> str:
    """driver.c for these programs."""
    lines = [_PRELUDE] + [f'#include "{o.name}.h"' for o in objs]
    lines += ["", "int main(int argc, char **argv) {",
              '    if (argc < 2) { fprintf(stderr, "usage: driver DIR [THREADS]\\n"); '
              "return 2; }",
              "    strncpy(dir, argv[1], sizeof dir - 1);",
              "    if (argc > 2) threads = atoi(argv[2]);"]
    for o in objs:
        up = o.name.upper()
        ab = ", ".join(f"{up}_ARG{k}_BYTES" for k in range(len(o.args))) or "0"
        rb = ", ".join(f"{up}_RESULT{k}_BYTES" for k in range(len(o.results))) or "0"
        lines += ["    {",
                  f"        static const size_t ab[] = {{{ab}}}, rb[] = {{{rb}}};",
                  f'        run_one("{o.name}", {o.name}_run, {o.name}_run_threaded, '
                  f"{up}_NUM_ARGS, ab, "
                  f"{up}_NUM_RESULTS, rb, {up}_SCRATCH_BYTES);",
                  "    }"]
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def build(objs: Sequence[AotObject], directory: Path, cc: str = "gcc",
          flags: Sequence[str] = ("-O1",)) -> Path:
    """Write the objects, headers and driver.c into `directory` and link `driver`."""
    directory.mkdir(parents=True, exist_ok=True)
    for o in objs:
        o.write(directory)
    (directory / "driver.c").write_text(source(objs))
    exe = directory / "driver"
    cmd = [cc, *flags, "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-I", str(directory), "-o",
           str(exe), str(directory / "driver.c"),
           *(str(directory / f"{o.name}.o") for o in objs), "-lm", "-pthread"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return exe


def run(objs: Sequence[AotObject], inputs: dict[str, Sequence[np.ndarray]], directory: Path,
        exe: Path, runner: Sequence[str] = (), timeout: float = 300, threads: int = 0
        ) -> dict[str, list[np.ndarray] | int]:
    """Run the driver on `inputs` (name -> arguments); name -> results (or an error code).
    `threads` > 0 calls NAME_run_threaded with that many threads."""
    for o in objs:
        for old in (directory / f"{o.name}.{ext}" for ext in ("in", "out", "err")):
            old.unlink(missing_ok=True)
        if o.name in inputs:
            xs = [np.asarray(a, order="C") for a in inputs[o.name]]
            want = [(tuple(s.dimensions), s.dtype) for s in o.args]
            if [(a.shape, a.dtype) for a in xs] != want:
                raise ValueError(f"{o.name}: arguments {[(a.shape, a.dtype) for a in xs]}, "
                                 f"the object takes {want}")
            data = b"".join(a.tobytes() for a in xs)
            (directory / f"{o.name}.in").write_bytes(data)
    subprocess.run([*runner, str(exe), str(directory), *([str(threads)] if threads else [])],
                   check=True, timeout=timeout,
                   capture_output=True)
    out: dict[str, list[np.ndarray] | int] = {}
    for o in objs:
        if o.name not in inputs:
            continue
        err = directory / f"{o.name}.err"
        if err.exists():
            out[o.name] = int(err.read_text())
            continue
        raw = (directory / f"{o.name}.out").read_bytes()
        vals, at = [], 0
        for s in o.results:
            dt = s.dtype
            n = int(np.prod(s.dimensions)) * dt.itemsize
            vals.append(np.frombuffer(raw[at:at + n], dt).reshape(s.dimensions).copy())
            at += n
        out[o.name] = vals
    return out


def tool(name: str) -> str | None:
    """The path of a command-line tool, or None."""
    return shutil.which(name)


__all__ = ["source", "build", "run", "tool"]
