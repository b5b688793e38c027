"""A stack along a short last dimension (minor_stack.py): lanes along the rows, the C
values of each row interleaved into one store. The bits are the interpreter's for 2..4
columns, ranks 2 and 3, rows that leave a scalar rest, float (with a remainder, whose rare
lanes branch to fmod: the case the loop vectorizer left scalar), bf16, integer and pred
results, special values, on 1 and 2 threads; the kernel is explicit vector code with the
interleaving shuffle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.unit.backends.cpu.test_lanes import _const
from tests.unit.backends.cpu.util import module, op, run_both, values
from xlapy.backends.cpu import minor_stack
from xlapy.backends.cpu.lanes import vector_width
from xlapy.ir import Computation, Instruction
from xlapy.ops.attrs import ComparisonDirection
from xlapy.ops.elementwise_compare import CompareAttrs
from xlapy.ops.shape import BroadcastInDimAttrs, ConcatenateAttrs, ReshapeAttrs, SliceAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

W = vector_width()


def _stack(dims: tuple[int, ...], t: ET, out: ET) -> tuple[object, int]:
    """out[..., j] = f_j(x[..., j], x[..., j + 1]) for the C = dims[-1] columns of x, as
    jnp.stack builds it: each f_j computed in the rows' shape, reshaped to [..., 1]."""
    rank, cols, rows = len(dims), dims[-1], dims[:-1]

    def col(c: Computation, x: Instruction, j: int) -> Instruction:
        starts = (0,) * (rank - 1) + (j % cols,)
        limits = rows + (j % cols + 1,)
        sliced = op(c, "slice", [x], SliceAttrs(starts, limits, (1,) * rank))
        return op(c, "reshape", [sliced], ReshapeAttrs(rows))

    def body(c: Computation, p: list[Instruction]) -> Instruction:
        x = p[0]
        six = op(c, "broadcast_in_dim", [_const(c, t, 6)], BroadcastInDimAttrs(rows, ()))
        vals = []
        for j in range(cols):
            a, b = col(c, x, j), col(c, x, j + 1)
            if out is ET.PRED:
                v = op(c, "compare", [a, b], CompareAttrs(ComparisonDirection.LT))
            elif t.is_float and j % 2 == 0:
                v = op(c, "remainder", [op(c, "multiply", [a, b]), six])
            else:
                v = op(c, "add", [op(c, "multiply", [a, six]), b])
            vals.append(op(c, "reshape", [v], ReshapeAttrs(rows + (1,))))
        return op(c, "concatenate", vals, ConcatenateAttrs(rank - 1))

    return module([Shape.array(t, dims)], body), cols


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("dims", "t", "out"), [
    ((4 * W + 3, 3), ET.F32, ET.F32), ((5, 2 * W + 1, 3), ET.F32, ET.F32),
    ((3 * W, 2), ET.F64, ET.F64), ((2, 2 * W, 4), ET.F32, ET.F32),
    ((2 * W + 5, 3), ET.BF16, ET.BF16), ((2 * W + 5, 4), ET.S32, ET.S32),
    ((3 * W + 1, 3), ET.U8, ET.U8), ((2 * W, 3), ET.F32, ET.PRED)])
def test_stacks_match_the_interpreter(dims: tuple[int, ...], t: ET, out: ET,
                                      threads: int) -> None:
    mod, cols = _stack(dims, t, out)
    x = values(t, int(np.prod(dims)), np.random.default_rng(len(dims) + cols)).reshape(dims)
    ref, got, exe = run_both(mod, [x], {"num_threads": threads, "split_cost": 1})
    assert got.dtype == ref.dtype and got.shape == ref.shape
    wide = t.is_float and out is not ET.PRED  # (NaN for NaN: a remainder's sign may differ)
    np.testing.assert_array_equal(got.astype(np.float64) if wide else got,
                                  ref.astype(np.float64) if wide else ref)
    real = ~np.isnan(ref.astype(np.float64)) if wide else np.ones(ref.shape, bool)
    np.testing.assert_array_equal(got[real].view(np.uint8), ref[real].view(np.uint8))
    spec = exe.kernel_specs[0]
    assert spec.explicit and spec.root.opcode == "concatenate"
    assert f"<{cols * W} x" in exe.kernel_ir  # one interleaved store a vector of rows


def test_interleave_puts_lane_l_of_vector_c_at_l_times_c_plus_c() -> None:
    from llvmlite import ir

    from xlapy.backends.cpu.llvm_util import F32
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    vt = ir.VectorType(F32, 4)
    vals = [ir.Constant(vt, [float(10 * c + lane) for lane in range(4)]) for c in range(3)]
    v = minor_stack.interleave(b, vals)
    assert v.type.count == 12
    mask = [int(x.constant) for x in v.operands[2].constant]  # type: ignore
    whole = [10 * c + lane for c in range(4) for lane in range(4)]  # (padded to 4 vectors)
    assert [whole[m] for m in mask] == [10 * c + lane for lane in range(4) for c in range(3)]


def test_only_stacks_of_one_element_columns_along_the_last_dimension() -> None:
    mod, _ = _stack((2 * W, 3), ET.F32, ET.F32)
    root = mod.entry.root
    assert minor_stack.width(root, {}, (), (), lambda r: None) == 3
    wide = op(mod.entry, "concatenate", [root, root], ConcatenateAttrs(1))  # 3 wide each
    assert minor_stack.width(wide, {}, (), (), lambda r: None) == 6
    wider = op(mod.entry, "concatenate", [wide, root], ConcatenateAttrs(1))  # 9 > MAX_STACK
    assert minor_stack.width(wider, {}, (), (), lambda r: None) == 0
    short, _ = _stack((W - 1, 3), ET.F32, ET.F32)  # fewer rows than a vector
    assert minor_stack.width(short.entry.root, {}, (), (), lambda r: None) == 0


def _quat_rot(q: Any, v: Any) -> Any:
    import jax.numpy as jnp
    u = jnp.stack([q[..., 1], q[..., 2], q[..., 3]], -1)
    t = 2 * jnp.cross(u, v)
    return v + q[..., :1] * t + jnp.cross(u, t)


def _jax_cases() -> dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]]:
    import jax.numpy as jnp
    return {  # (each was scalar code or two kernels: 13x, 9x, 2x the time)
        "quaternion": (_quat_rot, [(8 * W + 5, 4), (8 * W + 5, 3)]),
        "stack_scaled": (lambda x: jnp.stack([x[:, 0] - x[:, 2], jnp.maximum(x[:, 1], x[:, 0]),
                                              x[:, 2]], -1) * 0.5, [(4 * W + 1, 3)]),
        "rolled_columns": (lambda v: v / jnp.linalg.norm(v, axis=-1, keepdims=True)
                           + jnp.concatenate([v[:, 1:], v[:, :1]], 1), [(4 * W + 3, 3)]),
    }


@pytest.mark.parametrize("name", ["quaternion", "stack_scaled", "rolled_columns"])
def test_elementwise_roots_of_stacked_columns_run_as_one_stack(name: str) -> None:
    """A root computed from stacked columns (quaternion rotation's v + w t + u x t, a stack
    times a scalar), not only a stack itself, runs with the lanes along the rows, its C
    columns interleaved: one kernel (t = 2 u x v is read whole and by columns: generated
    once per column, not buffered), the interpreter's bits."""
    jax = pytest.importorskip("jax")
    import xlapy
    fn, shapes = _jax_cases()[name]
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    text = jax.jit(fn).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu")
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_array_equal(np.asarray(prog(*args)), ref)
    specs = prog._exe.kernel_specs
    assert len(specs) == 1 and specs[0].explicit
    cols = shapes[-1][-1]
    assert f"<{cols * W} x" in prog._exe.kernel_ir
    assert not list(prog._exe.fallbacks())
