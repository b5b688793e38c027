"""The conformance corpus of test_interpret.py through the full `cpu` pass pipeline.

Every chunk is parsed twice per entry function: once run as is (the reference), once after
`cpu_pipeline(verify=True)` (the verifier runs after every pass). Both runs log every
side-effecting op the interpreter evaluates (check.expect_*, interpreter.print/probe, infeed,
outfeed, rng, custom_call, ...) with the bits of its operands, so a check that DCE, CSE,
folding or fusion dropped, duplicated or reordered shows up as a different log, not as a
vacuous pass.

Two pipelines, two contracts:

* `exact`: `cpu_pipeline(exact_only=True, expand=False)` (no float-inexact simplifier row, no
  expander, only chlo lowerings that are bit-exact): results, printed lines and the effect log
  are bit-identical to the reference.
* `full`: the default `cpu_pipeline()`. Bit-identical unless a rewrite declared reassociating
  fired (a pass with `reassociating = True` that changed the module, or an algebraic
  simplifier row with `float_exact=False`); then every floating-point value meets
  `TOLERANCE` for its type (relative, plus an absolute term of the type's smallest normal for
  flushed denormals, -0 == +0, NaN == NaN) and everything else is still exact. The chunk's own
  checks must pass either way.

Chunks in test_interpret's XFAIL table (and any chunk that fails without the pipeline) are
reported as xfail: test_interpret.py owns them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tests.conformance.test_interpret import _CHECK, _RUN_ARGS, CHUNKS, XFAIL, ftz_text
from xlapy.cli.main import entry_functions, parse_args_attr
from xlapy.errors import XlapyError
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ir import Computation, make_instruction
from xlapy.ops.base import OPS
from xlapy.ops.core import ParameterAttrs
from xlapy.passes import cpu_pipeline
from xlapy.passes.algebraic_simplifier import AlgebraicSimplifier
from xlapy.passes.pass_base import Pass, Pipeline, sort_instructions
from xlapy.stablehlo import parse_module
from xlapy.stablehlo.values import format_value
from xlapy.verify import verify_module

#: Relative tolerance per floating-point type where a declared-reassociating rewrite fired
#: (the loosest tolerance the passes state: chlo lowering's approximate functions and the
#: expanders; bf16/f16/f8 lowerings compute in f32 and round back, so a couple of ulps).
TOLERANCE: dict[str, float] = {"float64": 1e-12, "float32": 2e-5}
LOW_PRECISION_RTOL = 2 ** -6


@dataclass
class Run:
    """One execution of a chunk's entry functions."""

    ok: bool
    message: str = ""
    outputs: list[Any] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)
    #: (opcode, operand values) of every side-effecting op evaluated, in order.
    effects: list[tuple[str, list[Any]]] = field(default_factory=list)
    #: A declared-reassociating rewrite fired in the pipeline.
    inexact: bool = False


def _copy(v: Any) -> Any:
    if isinstance(v, tuple):
        return tuple(_copy(x) for x in v)
    return np.array(v, copy=True) if isinstance(v, np.ndarray) else v


@contextmanager
def _log_effects() -> Iterator[list[tuple[str, list[Any]]]]:
    """Wrap `evaluate` of every side-effecting OpDef so the interpreter logs its operands."""
    log: list[tuple[str, list[Any]]] = []
    patched = []
    for name, op in OPS.items():
        if not op.side_effecting or "evaluate" in vars(op):
            continue
        original = op.evaluate

        def wrapped(operands: Any, attrs: Any, result: Any, ctx: Any, _n: str = name,
                    _f: Callable[..., Any] = original) -> Any:
            log.append((_n, [_copy(o) for o in operands]))
            return _f(operands, attrs, result, ctx)

        op.evaluate = wrapped  # type: ignore[method-assign]
        patched.append(op)
    try:
        yield log
    finally:
        for op in patched:
            del op.evaluate


def _walk(p: Pass) -> Iterator[Pass]:
    yield p
    if isinstance(p, Pipeline):
        for q in p.passes:
            yield from _walk(q)


def _inexact_fired(pipeline: Pipeline) -> bool:
    """Whether any rewrite declared reassociating / not float-exact changed the module."""
    from xlapy.passes.algebraic_rules import ARITH_RULES
    from xlapy.passes.algebraic_rules_shape import SHAPE_RULES

    inexact_rules = {r.name for r in ARITH_RULES + SHAPE_RULES if not r.float_exact}
    reassoc = {p.name for p in _walk(pipeline) if getattr(p, "reassociating", False)}
    if any(r.changed and r.name.rsplit(".", 1)[-1] in reassoc
           for r in pipeline.context.records):
        return True
    return any(set(p.fired) & inexact_rules for p in _walk(pipeline)
               if isinstance(p, AlgebraicSimplifier))


def lift_constants(comp: Computation) -> list[Any]:
    """Turn the array constants of a parameter-less computation into parameters and return
    their values (the arguments): otherwise constant folding evaluates nearly every chunk
    away and the other passes (algsimp, CSE, fusion, ...) never see its ops."""
    if comp.parameters:
        return []
    args: list[Any] = []
    for c in [i for i in comp.instructions if i.opcode == "constant" and i.shape.is_array]:
        p = comp.add(make_instruction("parameter", [], ParameterAttrs(len(args), c.shape),
                                      name=f"lifted{len(args)}"))
        args.append(c.attrs.literal.to_numpy())
        c.replace_all_uses_with(p)
        comp.remove(c)
    sort_instructions(comp)
    return args


def run_chunk_pipeline(text: str, filename: str, offset: int,
                       make: Callable[[], Pipeline] | None, lift: bool = False) -> Run:
    """Run every entry function of the chunk (each from a fresh parse with it as the module
    entry), after the pipeline `make()` when given; RUN-line `--args` chunks print their
    results and compare them with the CHECK lines like test_interpret. `lift` passes the
    entry's constants as arguments (`lift_constants`)."""
    m = _RUN_ARGS.search(text)
    run = Run(True)
    try:
        inputs = parse_args_attr(m.group(1)) if m else []
        names = entry_functions(parse_module(text, filename, None, offset), None)
        for fname in names:
            module = parse_module(text, filename, None, offset)
            has_entry = module.entry is not None
            module.entry = module.get(fname)
            args = inputs if has_entry else []
            if lift:
                args = args or lift_constants(module.entry)
            verify_module(module)
            if make is not None:
                pipeline = make()
                pipeline.run(module)
                run.inexact |= _inexact_fired(pipeline)
            runtime = RuntimeState()
            runtime.hooks["print"] = run.printed.append
            with _log_effects() as log:
                try:
                    out = Interpreter(runtime).run(module.entry, args)
                finally:
                    run.effects += log
            run.outputs.append(out)
    except XlapyError as e:
        return Run(False, f"{type(e).__name__}: {e}", run.outputs, run.printed, run.effects)
    except RecursionError:
        return Run(False, "RecursionError: nesting too deep", run.outputs, run.printed,
                   run.effects)
    if m is not None:
        printed = "\n".join(format_value(v) for v in run.outputs).splitlines()
        expected = _CHECK.findall(text)
        if [s.strip() for s in printed] != [s.strip() for s in expected]:
            return Run(False, f"printed {printed}, CHECK lines say {expected}", run.outputs,
                       run.printed, run.effects)
    return run


# ---- comparison -------------------------------------------------------------------------------
def _leaves(v: Any) -> list[Any]:
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _leaves(e)]
    return [v]


def _same_bits(a: Any, b: Any) -> bool:
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return type(a) is type(b) and repr(a) == repr(b)
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _close(a: Any, b: Any) -> bool:
    """Within TOLERANCE for floating types (bit-exact for everything else)."""
    if _same_bits(a, b):
        return True
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray) or \
            a.dtype != b.dtype or a.shape != b.shape:
        return False
    kind = a.dtype.kind
    is_low = a.dtype.name not in TOLERANCE and (kind == "f" or kind == "V" or
                                                a.dtype in _ML_FLOATS)
    if kind not in "fc" and not is_low:
        return False
    rtol = TOLERANCE.get(a.dtype.name, LOW_PRECISION_RTOL)
    finfo = ml_dtypes.finfo(a.dtype if kind != "c" else np.empty(0, a.dtype).real.dtype)
    wide = np.complex128 if kind == "c" else np.float64
    x, y = a.astype(wide), b.astype(wide)
    with np.errstate(all="ignore"):
        ok = (x == y) | (np.abs(x - y) <= rtol * np.abs(x) + float(finfo.smallest_normal))
        ok |= np.isnan(x) & np.isnan(y)
    return bool(ok.all())


_ML_FLOATS = {np.dtype(t) for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                    ml_dtypes.float8_e5m2, np.float16)}


def compare_runs(ref: Run, got: Run, exact: bool) -> str | None:
    """None when `got` matches `ref` under the contract, else what differs."""
    if not got.ok:
        return f"fails through the pipeline: {got.message}"
    same = _same_bits if exact or not got.inexact else _close
    if [n for n, _ in ref.effects] != [n for n, _ in got.effects]:
        return ("side effects differ:\n  without pipeline: "
                f"{[n for n, _ in ref.effects]}\n  with pipeline:    "
                f"{[n for n, _ in got.effects]}")
    for k, ((name, xs), (_, ys)) in enumerate(zip(ref.effects, got.effects)):
        lx, ly = _leaves(xs), _leaves(ys)
        if len(lx) != len(ly) or not all(same(x, y) for x, y in zip(lx, ly)):
            return f"operands of side effect #{k} ({name}) differ: {xs} vs {ys}"
    lx, ly = _leaves(ref.outputs), _leaves(got.outputs)
    if len(lx) != len(ly) or not all(same(x, y) for x, y in zip(lx, ly)):
        return f"results differ: {ref.outputs} vs {got.outputs}"
    if ref.printed != got.printed and (exact or not got.inexact):
        return f"printed lines differ: {ref.printed} vs {got.printed}"
    return None


PIPELINES: dict[str, Callable[[], Pipeline]] = {
    "exact": lambda: cpu_pipeline(verify=True, exact_only=True, expand=False),
    "full": lambda: cpu_pipeline(verify=True),
}


@pytest.mark.parametrize(("cid", "text", "offset"), CHUNKS, ids=[c[0] for c in CHUNKS])
def test_chunk_through_pipeline(cid: str, text: str, offset: int) -> None:
    filename = cid.split(":")[0]
    text = ftz_text(cid, text)
    ref = run_chunk_pipeline(text, filename, offset, None)
    if not ref.ok:
        pytest.xfail(XFAIL.get(cid, f"fails without the pipeline too: {ref.message}"))
    for mode, make in PIPELINES.items():
        problem = compare_runs(ref, run_chunk_pipeline(text, filename, offset, make),
                               exact=mode == "exact")
        assert problem is None, f"{mode} pipeline: {problem}"
    # The same with the entry's constants as arguments, so folding cannot hide the ops.
    ref = run_chunk_pipeline(text, filename, offset, None, lift=True)
    assert ref.ok, f"constants lifted to arguments, no pipeline: {ref.message}"
    for mode, make in PIPELINES.items():
        problem = compare_runs(ref, run_chunk_pipeline(text, filename, offset, make, True),
                               exact=mode == "exact")
        assert problem is None, f"{mode} pipeline, constants as arguments: {problem}"


def test_effect_log_sees_checks() -> None:
    """The log is what makes the comparison meaningful: a check op is recorded with its
    operands, and a pipeline that dropped it would give a different log."""
    text = ("func.func @main() {\n  %0 = stablehlo.constant dense<2.0> : tensor<f32>\n"
            "  %1 = stablehlo.add %0, %0 : tensor<f32>\n"
            "  check.expect_eq_const %1, dense<4.0> : tensor<f32>\n  func.return\n}\n")
    ref = run_chunk_pipeline(text, "t.mlir", 0, None)
    got = run_chunk_pipeline(text, "t.mlir", 0, PIPELINES["exact"])
    assert ref.ok and got.ok
    assert [n for n, _ in ref.effects] == ["check.expect_eq_const"]
    assert compare_runs(ref, got, exact=True) is None
    dropped = Run(True, outputs=got.outputs, printed=got.printed)
    assert "side effects differ" in (compare_runs(ref, dropped, exact=True) or "")
    changed = Run(True, outputs=got.outputs, printed=got.printed,
                  effects=[("check.expect_eq_const", [np.float32(-4.0)])])
    assert "differ" in (compare_runs(ref, changed, exact=True) or "")


def test_tolerance_only_for_declared_rewrites() -> None:
    a = np.array([1.0, 0.0, np.nan], np.float32)
    b = np.nextafter(a, np.float32(2))
    assert not _same_bits(a, b)
    assert _close(a, np.array([1.0, -0.0, np.nan], np.float32))
    assert _close(a, np.array([1.0 + 1e-6, 0.0, np.nan], np.float32))
    assert not _close(a, np.array([1.001, 0.0, np.nan], np.float32))
    assert not _close(np.array([1, 2], np.int32), np.array([1, 3], np.int32))
    ref = Run(True, outputs=[a])
    assert compare_runs(ref, Run(True, outputs=[b], inexact=False), exact=False)
    assert compare_runs(ref, Run(True, outputs=[b], inexact=True), exact=False) is None
    assert compare_runs(ref, Run(True, outputs=[b], inexact=True), exact=True)

