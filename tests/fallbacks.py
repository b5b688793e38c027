"""Interpreter fallbacks inside the cpu backend are bugs (issue 13): the ops still allowed
to fall back, each with its reason, and the check the cpu suites run on every program they
compile. An op not listed here that runs on the interpreter fails the test that compiled it.

`python -m tests.fallbacks` prints the count per op over the conformance corpus and the JAX
program suite (the numbers in the issue notes come from it).
"""

from __future__ import annotations

import collections
import sys
from typing import Any

#: opcode -> why the cpu backend still runs it on the interpreter. Keep it short; every
#: entry is a missing feature, not a design.
_HARNESS = ("the conformance harness's own op (compares with or records expected values on "
            "the host); not part of programs users run")
_DYNAMIC = ("dynamic shapes: sizes known only at run time (the cpu kernels are shape-specialized; "
            "sizes that fold to constants become the static op: passes/static_shapes.py)")
ALLOWED: dict[str, str] = {
    **{op: _HARNESS for op in ("check.expect_eq", "check.expect_eq_const", "check.expect_close",
                               "check.expect_almost_eq", "check.expect_almost_eq_const",
                               "check.expect_serialized_eq", "interpreter.probe")},
    **{op: _DYNAMIC for op in ("dynamic_broadcast_in_dim", "dynamic_conv", "dynamic_gather",
                               "dynamic_pad", "dynamic_reshape", "dynamic_iota",
                               "real_dynamic_slice", "get_dimension_size",
                               "set_dimension_size")},
    "custom_call": "a target registered at run time in RuntimeState.custom_calls (user Python "
                   "code); jaxlib's LAPACK targets are library thunks",
    **{f"chlo.next_after:{t}": "steps the stored bits; there is no 6-bit integer type to "
                               "bitcast f6 to (passes/chlo_lowering._next_after)"
       for t in ("f6E2M3FN", "f6E3M2FN")},
}


def fallback_ops(exe: Any) -> list[tuple[str, str]]:
    """(instruction, key) of every interpreter fallback in a compiled program (an
    `xlapy.compile` result or a backend executable); the key is `opcode:type`, the type
    being the first operand's element type (else the result's)."""
    inner = getattr(exe, "_exe", exe)
    out: list[tuple[str, str]] = []
    if not hasattr(inner, "report"):
        return out
    by_name = {i.name: i for i in inner.comp.instructions}
    for name, op, how in inner.report:
        if how == "interpreter fallback":
            instr = by_name.get(name)
            shape = instr.operands[0].shape if instr is not None and instr.operands \
                else instr.shape if instr is not None else None
            t = shape.element_type.shlo_name if shape is not None and shape.is_array else "-"
            out.append((name, f"{op}:{t}"))
    for _, sub in inner.subexecs:
        out += fallback_ops(sub)
    return out


def allowed(key: str) -> bool:
    """`opcode:type` listed as itself or by its opcode alone."""
    return key in ALLOWED or key.split(":")[0] in ALLOWED


def assert_no_unlisted_fallbacks(exe: Any, what: str) -> None:
    bad = sorted({key for _, key in fallback_ops(exe) if not allowed(key)})
    assert not bad, (f"{what}: {', '.join(bad)} ran on the interpreter inside the cpu "
                     "backend (a fallback is a missing feature: make it native, or list it "
                     "in tests/fallbacks.py with the reason)")


def _conformance() -> collections.Counter[str]:
    from tests.conformance import test_interpret as conf
    from xlapy.backends import get_backend
    from xlapy.cli.main import entry_functions, parse_module, verify_module_lenient

    count: collections.Counter[str] = collections.Counter()
    for cid, text, off in conf.CHUNKS:
        module = parse_module(text, cid.split(":")[0], None, off, None)
        verify_module_lenient(module)
        for name in entry_functions(module, None):
            exe = get_backend("cpu").compile_function(module, module.get(name))
            count.update(op for _, op in fallback_ops(exe))
    return count


def _jax_programs() -> tuple[collections.Counter[str], dict[str, set[str]]]:
    import xlapy
    from tests.differential.jax_programs.runner import lower
    from tests.differential.jax_programs.test_jax_programs import PROGRAMS

    count: collections.Counter[str] = collections.Counter()
    where: dict[str, set[str]] = collections.defaultdict(set)
    for p in PROGRAMS:
        for _, op in fallback_ops(xlapy.compile(lower(p).text, backend="cpu")):
            count[op] += 1
            where[op].add(p.id)
    return count, where


def main() -> None:
    conf = _conformance()
    print(f"conformance corpus: {sum(conf.values())} fallback instruction(s)")
    for op, n in conf.most_common():
        print(f"  {n:5d} {op}")
    if "--conformance" in sys.argv:
        return
    jx, where = _jax_programs()
    programs = set().union(*where.values()) if where else set()
    print(f"JAX programs: {sum(jx.values())} fallback instruction(s) in {len(programs)} "
          "program(s)")
    for op, n in jx.most_common():
        print(f"  {n:5d} {op:24s} e.g. {', '.join(sorted(where[op])[:3])}")


if __name__ == "__main__":
    main()
