"""Fuzz of the XlaBuilder API: random sequences of `xlapy.builder.ops` calls, then build and run.

`python -m tests.fuzz.builder_fuzz --n 20000 [--seed S]` prints the counts per outcome.

Each case makes a builder with a few parameters and constants, then calls random builder ops
(every public function of `xlapy.builder.ops`, arguments chosen from its signature): random
and often wrong shapes, element types, dimension lists, attribute values (negative, huge, out
of range), operands from another builder, None and values of the wrong Python type. The
contract: every call returns an XlaOp or raises an XlapyError (BuilderError), `build()` either
succeeds or raises an XlapyError, a built computation verifies, and it runs on the interpreter
or fails with an XlapyError. Anything else (another exception type, a verifier error after a
successful build, a case longer than 10 s) is a failure `fail:<Kind>(<phase>)`.
"""

from __future__ import annotations

import argparse
import inspect
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.fuzz.deadline import Hang, deadline
from tests.fuzz.harness import Outcome, _runnable
from xlapy.builder import XlaBuilder, XlaComputation, XlaOp, ops
from xlapy.errors import XlapyError
from xlapy.types import ElementType, Shape

_TYPES = [ElementType.F32, ElementType.F32, ElementType.S32, ElementType.S32, ElementType.PRED,
          ElementType.F64, ElementType.F16, ElementType.BF16, ElementType.U8, ElementType.S8,
          ElementType.C64, ElementType.S64, ElementType.U32, ElementType.F8E4M3FN,
          ElementType.S4, ElementType.C128]
_INTS = [0, 1, 1, 2, 2, 3, -1, -2, 4, 5, 7, 100, 2**31, 2**31 - 1, 2**63, -(2**63), 10**30]
_WEIRD = [None, "x", "", 1.5, -1, (), [], {}, object(), b"ab", float("nan"), True, [None],
          ["a", 1], np.array([1, 2]), (1, (2, 3)), -(10**20)]
_STRS = ["", "x", "foo", "EQ", "LT", "GE", "TOTALORDER", "FLOAT", "SIGNED", "SAME", "VALID",
         "FFT", "IFFT", "RFFT", "IRFFT", "THREE_FRY", "PHILOX", "DEFAULT", "f32", "s32", "pred",
         "NE", "GT", "LE", "UNSIGNED", "print"]


OPS: list[tuple[str, Callable[..., Any]]] = []


def _ops() -> list[tuple[str, Callable[..., Any]]]:
    if not OPS:
        names = {n for n in dir(ops) if n[:1].isupper()}
        for name in sorted(names):
            fn = getattr(ops, name)
            if inspect.isfunction(fn) and name not in ("MakePadding", "make_padding_config"):
                OPS.append((name, fn))
    return OPS


@dataclass
class Case:
    rng: random.Random
    b: XlaBuilder
    other: XlaBuilder
    pool: list[XlaOp] = field(default_factory=list)
    foreign: list[XlaOp] = field(default_factory=list)
    comps: list[XlaComputation] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    weird: float = 0.05  # how often a value is of the wrong kind (per case)
    first: XlaOp | None = None  # the first operand of the current call

    # ---- values -------------------------------------------------------------------------------
    def etype(self) -> Any:
        r = self.rng.random()
        if r < 0.8:
            return self.rng.choice(_TYPES)
        if r < 0.9:
            return self.rng.choice([np.float32, np.int32, np.dtype("bool"), "f32", "s32", "u8"])
        return self.rng.choice(_WEIRD)

    def dims(self) -> list[int]:
        return [self.rng.choice([0, 1, 1, 2, 2, 3, 4]) for _ in range(self.rng.choice(
            [0, 1, 1, 2, 2, 3, 4]))]

    def shape(self, weird: bool = True) -> Any:
        r = self.rng.random()
        if weird and r < 0.05:
            return self.rng.choice(_WEIRD + [[2, 3]])
        if r < 0.12:
            return Shape.tuple([self.shape(False) for _ in range(self.rng.randrange(3))])
        if r < 0.15:
            return Shape.token()
        et = self.rng.choice(_TYPES)
        return Shape.array(et, self.dims())

    def int_(self) -> Any:
        if self.rng.random() < self.weird:
            return self.rng.choice(_WEIRD)
        return self.rng.choice(_INTS) if self.rng.random() < 0.5 + 10 * self.weird else \
            self.rng.choice([0, 1, 1, 2, 2, 3])

    def ints(self) -> Any:
        r = self.rng.random()
        if r < 0.05:
            return self.rng.choice(_WEIRD)
        n = self.rng.choice([0, 1, 1, 2, 2, 3, 4])
        if r < 0.25:
            return [self.int_() for _ in range(n)]
        return [self.rng.choice([0, 0, 1, 1, 2, 2, 3, -1]) for _ in range(n)]

    def op(self) -> Any:
        r = self.rng.random() / max(self.weird * 20, 1e-9) if self.weird < 0.05 else \
            self.rng.random()
        if r < 0.9 and self.pool:
            if self.first is not None and self.rng.random() < 0.7:  # same shape: often valid
                same = [o for o in self.pool if o.shape() == self.first.shape()]
                return self.rng.choice(same)
            op = self.rng.choice(self.pool)
            self.first = self.first or op
            return op
        if r < 0.95 and self.foreign:
            return self.rng.choice(self.foreign)
        return self.rng.choice(_WEIRD)

    def op_list(self) -> Any:
        if self.rng.random() < 0.1:
            return self.op()
        return [self.op() for _ in range(self.rng.choice([0, 1, 1, 2, 2, 3]))]

    def comp(self) -> Any:
        if self.rng.random() < 0.05:
            return self.rng.choice(_WEIRD + [self.op()])
        return self.rng.choice(self.comps)

    def any_(self) -> Any:
        return self.rng.choice([self.int_, self.ints, self.op, self.op_list, self.etype,
                                self.shape, self.comp, lambda: self.rng.choice(_STRS),
                                lambda: self.rng.choice(_WEIRD),
                                lambda: [self.ints() for _ in range(self.rng.randrange(3))]])()

    def value(self, param: inspect.Parameter) -> Any:
        name, ann = param.name, str(param.annotation)
        if self.rng.random() < self.weird:
            return self.rng.choice(_WEIRD)
        if name == "builder" or (ann.startswith("XlaBuilder") and "Sequence" not in ann):
            r = self.rng.random()
            return self.b if r < 0.95 else self.other if r < 0.98 else None
        if name == "builder_or_operands":
            return self.b if self.rng.random() < 0.3 else self.op_list()
        if "type" in name and "fft" not in name and "compare" not in name:
            return self.etype() if name != "shape_or_type" or self.rng.random() < 0.5 \
                else self.shape()
        if "XlaComputation" in ann or name in ("select", "scatter"):
            return self.comp()
        if "Shape" in ann and "Sequence[Shape]" not in ann:
            return self.shape()
        if "Sequence[Shape]" in ann:
            return [self.shape() for _ in range(self.rng.randrange(3))]
        if "XlaOp" in ann and "Sequence" in ann:
            return self.op_list() if "|" not in ann or self.rng.random() < 0.5 else self.op()
        if "XlaOp" in ann:
            return self.op()
        if name in ("padding", "padding_config"):
            return self.rng.choice([
                lambda: self.rng.choice(["SAME", "VALID", ops.Padding.SAME, ops.Padding.VALID]),
                lambda: [[self.rng.choice([0, 1, 2, -1]) for _ in range(self.rng.choice(
                    [2, 2, 3]))] for _ in range(self.rng.randrange(4))],
                self.any_])()
        if "Sequence[int]" in ann or "tuple[int" in ann or name.endswith(
                ("dimensions", "sizes", "dims", "strides", "dilation", "permutation")):
            return self.ints()
        if "Sequence[tuple" in ann or "replica_groups" in name or "pairs" in name:
            return [self.ints() for _ in range(self.rng.randrange(3))]
        if ann.startswith("int") or name in ("dimension", "index", "dimno", "version"):
            return self.int_()
        if ann.startswith("float") or name == "epsilon":
            return self.rng.choice([0.0, 1e-3, -1.0, float("inf"), float("nan"), 1e300, 2])
        if ann.startswith("bool") or "bool" in ann:
            return self.rng.choice([True, False, None])
        if "str" in ann:
            return self.rng.choice(_STRS)
        return self.any_()

    def args(self, name: str, fn: Callable[..., Any]) -> tuple[list[Any], dict[str, Any]]:
        sig = inspect.signature(fn)
        self.first = None
        pos: list[Any] = []
        kw: dict[str, Any] = {}
        for p in sig.parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                pos += self._var_args(name, fn)
            elif p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD):
                continue
            elif p.default is not p.empty and self.rng.random() < 0.5:
                continue
            elif p.default is not p.empty:
                kw[p.name] = self.value(p)
            else:
                pos.append(self.value(p))
        return pos, kw

    def _var_args(self, name: str, fn: Callable[..., Any]) -> list[Any]:
        forms = getattr(fn, "overloads", None)
        if forms is not None and name not in ("Reduce", "Conditional"):
            # An overloaded op (xlapy/builder/overloads.py): one of its forms, by position.
            return [self.value(inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD))
                    for n in self.rng.choice(forms)]
        if name == "Reduce":
            head: list[Any] = [self.b] if self.rng.random() < 0.5 else []
            return head + [self.op_list() if self.rng.random() < 0.5 else self.op(),
                           self.op_list() if self.rng.random() < 0.5 else self.op(),
                           self.comp(), self.ints()]
        if name == "Conditional":
            if self.rng.random() < 0.5:  # (pred, true_operand, true_comp, false_operand, ...)
                return [self.op(), self.op(), self.comp(), self.op(), self.comp()]
            return [self.op(), [self.comp() for _ in range(self.rng.randrange(1, 4))],
                    self.op_list()]
        return [self.any_() for _ in range(self.rng.randrange(5))]


def _scalar_comp(name: str, et: ElementType, body: Callable[[XlaOp, XlaOp], XlaOp],
                 nargs: int = 2) -> XlaComputation:
    b = XlaBuilder(name)
    params = [ops.Parameter(b, i, Shape.array(et, ())) for i in range(nargs)]
    body(*params)
    return b.build()


def _computations() -> list[XlaComputation]:
    f32, s32, pred = ElementType.F32, ElementType.S32, ElementType.PRED
    return [
        _scalar_comp("add_f32", f32, ops.Add),
        _scalar_comp("max_f32", f32, ops.Max),
        _scalar_comp("add_s32", s32, ops.Add),
        _scalar_comp("lt_f32", f32, ops.Lt),
        _scalar_comp("lt_s32", s32, ops.Lt),
        _scalar_comp("or_pred", pred, ops.Or),
        _scalar_comp("neg_f32", f32, lambda x: ops.Neg(x), 1),
        _scalar_comp("small_s32", s32, lambda x: ops.Lt(x, ops.ConstantR0(x.builder, 3)), 1),
        _scalar_comp("inc_s32", s32, lambda x: ops.Add(x, ops.ConstantR0(x.builder, 1)), 1),
        _scalar_comp("one_f32", f32, lambda x: ops.ConstantR0(x.builder, 1.0), 1),
    ]


def _zeros(shape: Shape) -> Any:
    from xlapy.types.literal import TOKEN_VALUE

    if shape.is_tuple:
        return tuple(_zeros(s) for s in shape.tuple_shapes)
    if shape.is_token:
        return TOKEN_VALUE
    return np.zeros(shape.dimensions, shape.dtype)


def one_case(rng: random.Random, max_calls: int = 8) -> tuple[Outcome, list[str]]:
    """Builds, verifies and runs one random call sequence (under the caller's deadline)."""
    b, other = XlaBuilder("fuzz"), XlaBuilder("other")
    case = Case(rng, b, other, comps=_COMPS, weird=rng.choice([0.0, 0.0, 0.01, 0.05]))
    case.foreign.append(ops.Parameter(other, 0, Shape.array(ElementType.F32, (2,))))
    phase = "setup"
    try:
        for i in range(rng.choice([0, 1, 1, 2, 2, 3])):
            shape = case.shape(weird=False) if rng.random() < 0.97 else case.shape()
            number = i if rng.random() < 0.97 else rng.choice(_INTS)
            case.calls.append(f"Parameter(b, {number}, {shape})")
            op = ops.Parameter(b, number, shape)
            if op.ok:
                case.pool.append(op)
        for _ in range(rng.randrange(3)):
            et = rng.choice(_TYPES[:6])
            value = np.ones(case.dims(), dtype=np.float64) * rng.choice([0, 1, 2, -1, 0.5])
            case.calls.append(f"ConstantFromArray(b, ones{list(value.shape)}, {et})")
            op = ops.ConstantFromArray(b, value, et)
            if op.ok:
                case.pool.append(op)
        for _ in range(rng.randrange(1, max_calls + 1)):
            name, fn = rng.choice(_ops())
            pos, kw = case.args(name, fn)
            case.calls.append(f"{name}(*{_show(pos)}, **{_show(kw)})")
            phase = f"call {name}"
            try:
                out = fn(*pos, **kw)
            except XlapyError:
                continue
            if isinstance(out, XlaOp) and out.builder is b and out.ok:
                case.pool.append(out)
        phase = "build"
        root = rng.choice(case.pool) if case.pool and rng.random() < 0.5 else None
        case.calls.append(f"build({'root' if root is not None else ''})")
        try:
            comp = b.build(root)
        except XlapyError as e:
            return Outcome("error(build)", f"{type(e).__name__}: {e}"), case.calls
        phase = "verify"
        from xlapy.verify import verify_module

        verify_module(comp.module)
        if not _runnable(comp.module):
            return Outcome("skipped"), case.calls
        phase = "run"
        from xlapy.interpreter import Interpreter, RuntimeState

        entry = comp.module.entry_computation()
        runtime = RuntimeState()
        runtime.hooks["print"] = lambda text: None
        try:
            with deadline(2):
                Interpreter(runtime).run(entry, [_zeros(p.shape) for p in entry.parameters])
        except Hang:
            return Outcome("run_timeout"), case.calls
        except XlapyError as e:
            return Outcome("error(run)", f"{type(e).__name__}: {str(e)[:200]}"), case.calls
        return Outcome("ok"), case.calls
    except Hang:
        return Outcome(f"fail:Hang({phase})"), case.calls
    except XlapyError as e:
        if phase == "verify":
            return Outcome("fail:VerifyError(verify)", f"{e}"), case.calls
        return Outcome(f"error({phase})", str(e)), case.calls
    except Exception as e:  # noqa: BLE001 - every other exception is what the fuzzer hunts
        return (Outcome(f"fail:{type(e).__name__}({phase})",
                        "".join(traceback.format_exception(e, limit=-5))), case.calls)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) < 300 else text[:300] + "..."


_COMPS: list[XlaComputation] = []


def check_case(seed: int, max_calls: int = 8, timeout_s: float = 10) -> tuple[Outcome, list[str]]:
    if not _COMPS:
        _COMPS.extend(_computations())
    rng = random.Random(seed)
    calls: list[str] = []
    try:
        with deadline(timeout_s):
            return one_case(rng, max_calls)
    except Hang:
        return Outcome("fail:Hang(case)"), calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.builder_fuzz")
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--replay", type=int, default=None, help="print and check one case seed")
    args = ap.parse_args(argv)
    if args.replay is not None:
        o, calls = check_case(args.replay)
        print("\n".join(calls), o.kind, o.detail, sep="\n")
        return 1 if o.failed else 0
    counts: Counter[str] = Counter()
    seen: set[str] = set()
    start = time.time()
    for i in range(args.n):
        seed = args.seed * 1_000_003 + i
        o, calls = check_case(seed)
        counts[o.kind] += 1
        if o.failed:
            sig = o.kind + (o.detail.strip().splitlines() or [""])[-1]
            if sig not in seen:
                seen.add(sig)
                print(f"--- case seed {seed}: {o.kind}\n" + "\n".join(calls) + f"\n{o.detail}",
                      flush=True)
        if (i + 1) % args.every == 0 or i + 1 == args.n:
            print(f"[{i + 1} cases, {time.time() - start:.0f} s] "
                  + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
    return 1 if any(k.startswith("fail:") for k in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
