"""Element-wise math the gpu kernels compute through libdevice (`__nv_*`, CUDA's math
library as LLVM bitcode, linked in by nvptx.py) instead of the cpu backend's polynomials
(math_poly.py) and libm calls (elementwise_libm.py, which have no GPU counterpart).

bf16/f16/f8 compute in f32 and round once, as on cpu. Inputs and results are flushed where
the cpu emitters flush them (elementwise.flush: the ftz denormal mode), so both backends
agree on denormals; remainder flushes its divisor only (XLA's fmod)."""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F32, F64, splat
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: opcode -> libdevice function for (f32, f64) compute.
FUNCTIONS: dict[str, tuple[str, str]] = {
    "exponential": ("__nv_expf", "__nv_exp"),
    "log": ("__nv_logf", "__nv_log"),
    "log_plus_one": ("__nv_log1pf", "__nv_log1p"),
    "exponential_minus_one": ("__nv_expm1f", "__nv_expm1"),
    "tanh": ("__nv_tanhf", "__nv_tanh"),
    "sine": ("__nv_sinf", "__nv_sin"),
    "cosine": ("__nv_cosf", "__nv_cos"),
    "tan": ("__nv_tanf", "__nv_tan"),
    "erf": ("__nv_erff", "__nv_erf"),
    "power": ("__nv_powf", "__nv_pow"),
    "atan2": ("__nv_atan2f", "__nv_atan2"),
    "cbrt": ("__nv_cbrtf", "__nv_cbrt"),
    "remainder": ("__nv_fmodf", "__nv_fmod"),
    "logistic": ("__nv_expf", "__nv_exp"),  # 1 / (1 + exp(-x))
}


def handles(instr: Instruction) -> bool:
    """Whether the op is computed here: a float op of FUNCTIONS."""
    if instr.opcode not in FUNCTIONS or not instr.operands:
        return False
    t = instr.operands[0].shape.element_type
    return instr.operands[0].shape.is_array and t.is_float and t in ew.FLOATS


def call(b: ir.IRBuilder, name: str, args: Sequence[ir.Value]) -> ir.Value:
    mod = b.module
    fn = mod.globals.get(name)
    if fn is None:
        t = args[0].type
        fn = ir.Function(mod, ir.FunctionType(t, [t] * len(args)), name=name)
    return b.call(fn, list(args))


def emit(b: ir.IRBuilder, opcode: str, args: Sequence[ir.Value], t: ET, out: ET) -> ir.Value:
    """`opcode` on compute values of float type `t`, rounded to `out`."""
    name = FUNCTIONS[opcode][1 if args[0].type == F64 else 0]
    assert args[0].type in (F32, F64), args[0].type
    if opcode == "remainder":
        x, y = args
        return ew.round_to(b, call(b, name, [x, ew.flush(b, y)]), out)
    xs = [ew.flush(b, a) for a in args]
    if opcode == "logistic":
        one = splat(xs[0].type, 1.0)
        e = call(b, name, [b.fneg(xs[0])])
        r = b.fdiv(one, b.fadd(one, e))
    else:
        r = call(b, name, xs)
    return ew.round_to(b, ew.flush(b, r), out)
