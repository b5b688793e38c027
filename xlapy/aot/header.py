"""The C99 header of an ahead-of-time compiled program: its calling convention, buffer
sizes and types as macros, the entry point's prototype, the symbols the object needs."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xlapy.types import Shape

#: C spellings of element types (storage: pred is one byte 0/1, bf16/f16 their bits).
C_TYPES = {"pred": "uint8_t", "s8": "int8_t", "s16": "int16_t", "s32": "int32_t",
           "s64": "int64_t", "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t",
           "u64": "uint64_t", "f16": "uint16_t", "bf16": "uint16_t", "f32": "float",
           "f64": "double", "c64": "float", "c128": "double"}


def c_type(shape: Shape) -> str:
    """The C element type a buffer of `shape` is an array of (complex: interleaved pairs,
    f16/bf16: the raw bits, sub-byte integers: one byte each)."""
    name = str(shape.element_type)
    return C_TYPES.get(name, "uint8_t")


def header(name: str, args: Sequence[Shape], results: Sequence[Shape], scratch: int,
           align: int, undefined: Sequence[str], target: str, source: str,
           extra: Sequence[str] = (), freestanding: bool = False) -> str:
    """The header's text; `extra`: more macro lines (probe.py's); `freestanding`: the
    object needs no symbol at all (NAME_FREESTANDING 1)."""
    up = name.upper()
    guard = f"XLAPY_AOT_{up}_H"
    lines = [
        f"/* {name}.h: `{source}` compiled ahead of time by xlapy for {target}.",
        " *",
        f" * int {name}_run(const void *const *args, void *const *results, void *scratch);",
        " *",
        " * args[i] points to argument i, results[i] to result i: dense row-major arrays of",
        f" * {up}_ARGi_BYTES / {up}_RESULTi_BYTES bytes of {up}_ARGi_TYPE elements (pred: one",
        " * byte 0 or 1; f16/bf16: their 16 bits; complex: (real, imaginary) pairs). Results",
        " * must not overlap the arguments or each other. scratch: at least",
        f" * {up}_SCRATCH_BYTES bytes aligned to {up}_SCRATCH_ALIGN, its contents ignored and",
        " * clobbered. Returns 0, or a nonzero error code for a failure inside the program.",
        " * No global state: calls on different threads with distinct scratch buffers are",
        " * safe. A scalar (rank 0) has no _SHAPE macro.",
        " *",
        f" * int {name}_run_threaded(const void *const *args, void *const *results,",
        " *                         void *scratch, int num_threads);",
        " *",
        " * The same, with each large element-wise / reduction kernel split over up to",
        " * num_threads POSIX threads (created and joined per kernel; products, convolutions",
        " * and sorts stay on the calling thread). Results are identical to the one-thread",
        *((" * call. Freestanding: it runs on the calling thread (num_threads is ignored).",
           " *",
           " * Freestanding object: it needs no symbol at all (no libc, libm or pthreads;",
           f" * {up}_FREESTANDING is 1).") if freestanding else
          (" * call. Link with -pthread where pthread_create is not in libc (glibc < 2.34).",
           " *",
           " * The object needs only these symbols from libc / libm / pthreads:",
           f" *   {', '.join(undefined) if undefined else '(none)'}")),
        " */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"#define {up}_NUM_ARGS {len(args)}",
        f"#define {up}_NUM_RESULTS {len(results)}",
        f"#define {up}_SCRATCH_BYTES {scratch}",
        f"#define {up}_SCRATCH_ALIGN {align}",
        *([f"#define {up}_FREESTANDING 1"] if freestanding else []),
        "",
    ]
    for kind, shapes in (("ARG", args), ("RESULT", results)):
        for k, s in enumerate(shapes):
            dims = list(s.dimensions)
            p = f"{up}_{kind}{k}"
            lines += [
                f"/* {kind.lower()} {k}: {s} */",
                f"#define {p}_TYPE {c_type(s)}",
                f'#define {p}_ELEMENT_TYPE "{s.element_type}"',
                f"#define {p}_RANK {len(dims)}",
                *([f"#define {p}_SHAPE {{{', '.join(map(str, dims))}}}"] if dims else []),
                f"#define {p}_ELEMENTS {prod(dims)}",
                f"#define {p}_BYTES {prod(dims) * s.dtype.itemsize}",
            ]
    lines += [*extra,
        "",
        f"int {name}_run(const void *const *args, void *const *results, void *scratch);",
        f"int {name}_run_threaded(const void *const *args, void *const *results, "
        "void *scratch,",
        "    int num_threads);",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        f"#endif /* {guard} */",
        "",
    ]
    return "\n".join(lines)


__all__ = ["header", "c_type", "C_TYPES"]
