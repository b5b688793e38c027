"""Which machine the cpu backend compiles for: the host by default, or a named target.

A target is an LLVM triple, a CPU name and the features codegen asks about (vector width,
AVX-512's scalef, native half conversions). Named x86 targets let one machine exercise the
code paths of others: code for a lower target (`x86-64-v2`, `x86-64-v3`) runs here, so the
AVX2-only and SSE4-only paths are tested on an AVX-512 machine; code for a higher target or
another architecture (`aarch64-linux-gnu`) is compiled to objects but never run.

The target comes from a compile option (`{"target": NAME}`: Client, xlapy.compile, the CLI's
`--target`), else `$XLAPY_CPU_TARGET`, else the host. It is part of every compile-cache key.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass

import llvmlite.binding as llvm

from xlapy.errors import XlapyError

X86_TRIPLE = "x86_64-unknown-linux-gnu"
AARCH64_TRIPLE = "aarch64-unknown-linux-gnu"

_V2 = frozenset({"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf"})
_V3 = _V2 | {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
_ICELAKE = _V4 | {"avx512vnni", "avx512vbmi", "avx512vbmi2", "avx512ifma", "avx512bitalg",
                  "avx512vpopcntdq", "gfni", "vaes", "vpclmulqdq"}
#: Named targets: (triple, LLVM CPU name, the features it has). LLVM derives the full feature
#: set from the CPU name; this table answers codegen's questions and `runs_here`, and
#: tests/unit/backends/test_target.py checks it against what LLVM generates for each name.
NAMED: dict[str, tuple[str, str, frozenset[str]]] = {
    "x86-64-v2": (X86_TRIPLE, "x86-64-v2", _V2),
    "x86-64-v3": (X86_TRIPLE, "x86-64-v3", _V3),
    "x86-64-v4": (X86_TRIPLE, "x86-64-v4", _V4),
    "skylake-avx512": (X86_TRIPLE, "skylake-avx512", _V4),
    # AVX-512 with VNNI and BF16 but not FP16 (Zen 4's combination, on an Intel CPU that runs
    # on any AVX512-BF16 machine): the bf16 paths without AVX512-FP16's half arithmetic.
    "cooperlake": (X86_TRIPLE, "cooperlake", _V4 | {"avx512vnni", "avx512bf16"}),
    "icelake-server": (X86_TRIPLE, "icelake-server", _ICELAKE),
    "sapphirerapids": (X86_TRIPLE, "sapphirerapids",
                       _ICELAKE | {"avx512bf16", "avx512fp16", "amx-tile", "amx-int8",
                                   "amx-bf16", "avxvnni"}),
    # Zen has AMD's SSE4A (LLVM emits its insertq and movntss), so its code faults on Intel.
    "znver4": (X86_TRIPLE, "znver4", _ICELAKE | {"avx512bf16", "sse4a"}),
    "znver5": (X86_TRIPLE, "znver5", _ICELAKE | {"avx512bf16", "avxvnni", "sse4a"}),
    "aarch64-linux-gnu": (AARCH64_TRIPLE, "generic", frozenset({"neon", "fp-armv8"})),
}
ALIASES = {"aarch64": "aarch64-linux-gnu", "x86-64-avx2": "x86-64-v3",
           "x86-64-avx512": "x86-64-v4"}
#: The features that choose code: what codegen asks (`has`; test_target.py checks every
#: `has("...")` in xlapy is here) and what LLVM lowers differently (half conversions without
#: F16C, fma without FMA, VNNI dot products). Two targets that agree on these run the same
#: code paths, whatever else (tuning, AES, SHA) they differ in.
CODE_FEATURES = frozenset({"sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c", "avxvnni",
                           "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
                           "avx512vnni", "avx512vbmi", "avx512bf16", "avx512fp16",
                           "amx-tile", "amx-int8", "amx-bf16"})


@dataclass(frozen=True)
class CpuTarget:
    """What the cpu backend compiles for. `llvm_features` is what LLVM is given ("" for a
    named CPU: LLVM knows its features); `features` is what codegen may rely on."""

    name: str
    triple: str
    cpu: str
    features: frozenset[str]
    llvm_features: str = ""

    @property
    def arch(self) -> str:
        return self.triple.split("-", 1)[0]

    @property
    def is_x86(self) -> bool:
        return self.arch == "x86_64"

    def has(self, feature: str) -> bool:
        return feature in self.features

    @property
    def vector_bits(self) -> int:
        """The widest vector registers: 512 (AVX-512), 256 (AVX), else 128 (SSE, NEON)."""
        return 512 if self.has("avx512f") else 256 if self.has("avx") else 128

    @property
    def runs_here(self) -> bool:
        """Code for this target can run in this process (same architecture, and every
        feature it uses is one the host has)."""
        return _runs_here(self)

    @property
    def covered_by_host(self) -> bool:
        """The host's own code paths are this target's (same CODE_FEATURES): a test run for
        it repeats the host's (x86-64-v3 on an AVX2 machine without AVX-512)."""
        host = host_target()
        return (self.runs_here
                and self.features & CODE_FEATURES == host.features & CODE_FEATURES)

    @property
    def key(self) -> str:
        """Part of every compile-cache key."""
        return f"{self.triple}|{self.cpu}|{self.llvm_features or ','.join(sorted(self.features))}"

    def __str__(self) -> str:
        return self.name if self.name != "host" else f"host ({self.cpu})"


@functools.cache
def _init_llvm() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.initialize_native_asmparser()  # (inline assembly: flush_ftz's scalar flush)


@functools.cache
def host_target() -> CpuTarget:
    """This machine: LLVM's host CPU name and its detected features."""
    _init_llvm()
    flat = llvm.get_host_cpu_features().flatten()
    feats = frozenset(f[1:] for f in flat.split(",") if f.startswith("+"))
    return CpuTarget("host", llvm.get_process_triple(), llvm.get_host_cpu_name(), feats, flat)


@functools.cache
def _runs_here(t: CpuTarget) -> bool:
    """CpuTarget.runs_here, once per target (run-time paths ask per call: ~1 us each)."""
    host = host_target()
    return t.arch == host.arch and t.features <= host.features


def names() -> list[str]:
    """Every name `resolve` accepts."""
    return ["host", *NAMED, *ALIASES]


@functools.cache
def resolve(name: str | None) -> CpuTarget:
    """The target a name stands for (None or "" or "host": this machine)."""
    if not name or name == "host":
        return host_target()
    key = ALIASES.get(name, name)
    if key not in NAMED:
        raise XlapyError(f"unknown cpu target '{name}'; known targets: {', '.join(names())}")
    _init_llvm()
    triple, cpu, feats = NAMED[key]
    return CpuTarget(key, triple, cpu, feats)


def default() -> CpuTarget:
    """`$XLAPY_CPU_TARGET` if set, else the host."""
    return _resolved(os.environ.get("XLAPY_CPU_TARGET", "").strip() or None)


@functools.lru_cache(maxsize=16)
def _resolved(name: str | None) -> CpuTarget:
    """`resolve`, once per name: every library call asks for the current target (a named
    one was a new CpuTarget each time, ~0.5 us)."""
    return resolve(name)


_CURRENT: contextvars.ContextVar[CpuTarget | None] = contextvars.ContextVar(
    "xlapy_cpu_target", default=None)


def current() -> CpuTarget:
    """The target being compiled for: set by `use` around a compile, else `default()`."""
    t = _CURRENT.get()
    return t if t is not None else default()


@contextlib.contextmanager
def use(target: CpuTarget | str | None) -> Iterator[CpuTarget]:
    """Compile for `target` inside the block (None: keep the current one)."""
    t = current() if target is None else target if isinstance(target, CpuTarget) \
        else resolve(target)
    token = _CURRENT.set(t)
    try:
        yield t
    finally:
        _CURRENT.reset(token)


def from_options(options: dict | None) -> CpuTarget:
    """The target a compile's options ask for (`target`), else the current one."""
    name = (options or {}).get("target")
    return current() if name is None else name if isinstance(name, CpuTarget) \
        else resolve(name)
