"""More expanders: select_and_scatter, rng, batch_norm_training / batch_norm_grad as plain HLO.

* select_and_scatter (XLA SelectAndScatterExpander): a variadic reduce_window over
  (operand, flat index iota) whose reducer applies the `select` region (inlined) and keeps the
  earlier element unless the later one wins, padding carrying index -1 and never chosen; then
  a scatter of `source` at the chosen flat indices into init_value with the `scatter` region.
  The choice is the interpreter's (windows are folded in lexicographic order), so results are
  bit-exact when the scatter region is associative and commutative on the values (add on
  integers, max, ...); float add may differ in the order sources land on one element.
* rng (XLA RngExpander): rng -> rng_bit_generator(THREE_FRY) on a constant key (a per-pass
  seed and a per-instruction counter) and a bits-to-value conversion: floats take the top
  mantissa bits as u in [1, 2) - 1, then a + u * (b - a) (kept below b); integers a + bits mod
  (b - a); NORMAL is Box-Muller from two uniforms. The values therefore differ from the
  interpreter's `rng` (a numpy generator keyed by the runtime's seed and counter): tests check
  the distribution (range, moments), shapes and types, never values. The expanded program is
  deterministic: each execution draws the same numbers (XLA's expanded rng is also keyed by
  the compile-time seed). f16/bf16 draw in f32 and convert; pred, 8/16-bit integers are
  left unexpanded.
* batch_norm_training and batch_norm_grad (XLA BatchNormExpander): the same formulas, step by
  step, as the interpreter's direct evaluation (E[x^2] - E[x]^2 for the variance); not
  bit-exact because reduce sums in another order (tolerance 1e-5 relative in tests).
"""

from __future__ import annotations

import math

import numpy as np

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.indexing_scatter import ScatterAttrs, ScatterDimensionNumbers
from xlapy.ops.rng import RngAlgorithm, RngBitGeneratorAttrs, RngDistribution
from xlapy.passes.hlo_builder import Emitter, scalar_reducer
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import ElementType, Shape


def _replace(comp: Computation, old: Instruction, new: Instruction) -> None:
    old.replace_all_uses_with(new)
    if old is not comp.root and not old.users:
        comp.remove(old)


class _ModulePass(Pass):
    """Runs `expand(module, comp, instr)` on every instruction with opcode `opcode`."""

    opcode = ""

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.post_order()):
            for i in [i for i in comp.instructions if i.opcode == self.opcode]:
                new = self.expand(module, comp, i)
                if new is not None:
                    _replace(comp, i, new)
                    changed = True
            if changed:
                sort_instructions(comp)
        return changed

    def expand(self, module: Module, comp: Computation, i: Instruction) -> Instruction | None:
        raise NotImplementedError


# ---- select_and_scatter -------------------------------------------------------------------
def _inline(e: Emitter, callee: Computation, args: list[Instruction]) -> Instruction:
    """Copy `callee`'s instructions into `e.comp` with its parameters bound to `args`."""
    mapping: dict[int, Instruction] = {id(p): a for p, a in zip(callee.parameters, args)}
    for instr in callee.post_order():
        if id(instr) in mapping:
            continue
        mapping[id(instr)] = e.comp.add(Instruction(
            instr.opcode, [mapping[id(o)] for o in instr.operands], instr.shape, instr.attrs,
            instr.called, instr.name))
    assert callee.root is not None
    return mapping[id(callee.root)]


class SelectAndScatterExpander(_ModulePass):
    name = "select-and-scatter-expander"
    opcode = "select_and_scatter"

    def expand(self, module: Module, comp: Computation, i: Instruction) -> Instruction | None:
        operand, source, init = i.operands
        select, scatter = i.called
        et = operand.shape.element_type
        size = operand.shape.num_elements
        it = ElementType.S32 if size < 2**31 - 1 else ElementType.S64
        # reducer (av, ai, bv, bi) -> the kept (value, index)
        r = Emitter(Computation(f"{select.name}.pick"))
        av, ai = r.param(Shape.scalar(et)), r.param(Shape.scalar(it))
        bv, bi = r.param(Shape.scalar(et)), r.param(Shape.scalar(it))
        sel = _inline(r, select, [av, bv])
        neg = r.const(-1, it)
        keep_a = r.op("or", r.cmp(bi, neg, "EQ"), r.op("and", r.cmp(ai, neg, "NE"), sel))
        r.comp.root = r.tuple(r.select(keep_a, av, bv), r.select(keep_a, ai, bi))
        r.comp.multi_result = True
        module.add_computation(r.comp)
        e = Emitter(comp)
        flat = e.iota(shape=Shape.array(it, [size]), iota_dimension=0)
        idx = e.reshape(flat, shape=operand.shape.dimensions)
        a = i.attrs
        rw = e.op("reduce_window", operand, idx, e.const(0, et), e.const(-1, it),
                  called=[r.comp], window_dimensions=tuple(a.window_dimensions),
                  window_strides=a.window_strides, padding=a.padding)
        chosen = e.get_tuple_element(rw, index=1)
        n = source.shape.num_elements
        dnums = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
        out = e.op("scatter", e.bcast(init, (size,), ()), e.reshape(chosen, shape=(n, 1)),
                   e.reshape(source, shape=(n,)), called=[scatter],
                   scatter_dimension_numbers=dnums)
        assert isinstance(out.attrs, ScatterAttrs)
        return e.reshape(out, shape=operand.shape.dimensions)


# ---- rng ----------------------------------------------------------------------------------
_UNSIGNED = {32: ElementType.U32, 64: ElementType.U64}
_FLOAT_LAYOUT = {32: (23, 0x3F800000), 64: (52, 0x3FF0000000000000)}


class RngExpander(_ModulePass):
    name = "rng-expander"
    opcode = "rng"
    reassociating = True

    def __init__(self, seed: int = 42) -> None:
        self.seed = seed
        self.counter = 0

    def _bits(self, e: Emitter, dims: tuple[int, ...], width: int) -> Instruction:
        key = np.array([self.seed, self.counter], dtype=np.uint64)
        self.counter += 1
        state = e.const(key, ElementType.U64)
        out = Shape.array(_UNSIGNED[width], dims)
        g = e.op("rng_bit_generator", state, rng_algorithm=RngAlgorithm.THREE_FRY,
                 result_shapes=(state.shape, out))
        assert isinstance(g.attrs, RngBitGeneratorAttrs)
        return e.get_tuple_element(g, index=1)

    def _unit(self, e: Emitter, dims: tuple[int, ...], ft: ElementType) -> Instruction:
        """u in [0, 1) of float type `ft` (f32 or f64) from the top mantissa bits."""
        width = ft.bits
        mant, one = _FLOAT_LAYOUT[width]
        ut = _UNSIGNED[width]
        bits = self._bits(e, dims, width)
        shifted = e.shift_right_logical(bits, e.splat(width - mant, bits))
        ored = e.op("or", shifted, e.splat(one, bits))
        u = e.bitcast_convert(ored, new_element_type=ft)
        assert ut is bits.shape.element_type
        return e.subtract(u, e.splat(1.0, u))

    def expand(self, module: Module, comp: Computation, i: Instruction) -> Instruction | None:
        a, b, _ = i.operands
        shape = i.attrs.shape
        et, dims = shape.element_type, tuple(shape.dimensions)
        e = Emitter(comp)
        if et.is_float and et.bits in (16, 32, 64):
            ft = ElementType.F64 if et.bits == 64 else ElementType.F32
            fa = a if et is ft else e.convert(a, new_element_type=ft)
            fb = b if et is ft else e.convert(b, new_element_type=ft)
            ba, bb = e.bcast(fa, dims, ()), e.bcast(fb, dims, ())
            if i.attrs.rng_distribution is RngDistribution.NORMAL:
                u1 = e.subtract(e.splat(1.0, ba), self._unit(e, dims, ft))  # (0, 1]
                u2 = self._unit(e, dims, ft)
                radius = e.sqrt(e.multiply(e.splat(-2.0, u1), e.log(u1)))
                z = e.multiply(radius, e.cosine(e.multiply(e.splat(2 * math.pi, u2), u2)))
                val = e.add(e.multiply(z, bb), ba)
                return val if et is ft else e.convert(val, new_element_type=et)
            u = self._unit(e, dims, ft)
            val = e.add(e.multiply(u, e.subtract(bb, ba)), ba)
            if et is not ft:
                val = e.convert(val, new_element_type=et)
                ba, bb = e.bcast(a, dims, ()), e.bcast(b, dims, ())
            return e.select(e.cmp(val, bb, "LT"), val, ba)
        if et.is_integer and et.bits in (32, 64) and i.attrs.rng_distribution is \
                RngDistribution.UNIFORM:
            ut = _UNSIGNED[et.bits]
            bits = self._bits(e, dims, et.bits)
            span = e.bitcast_convert(e.subtract(b, a), new_element_type=ut) if et.is_signed \
                else e.subtract(b, a)
            off = e.remainder(bits, e.bcast(span, dims, ()))
            if et.is_signed:
                off = e.bitcast_convert(off, new_element_type=et)
            return e.add(e.bcast(a, dims, ()), off)
        return None


# ---- batch norm ---------------------------------------------------------------------------
def _feature_sum(e: Emitter, module: Module, x: Instruction, f: int) -> Instruction:
    et = x.shape.element_type
    add = _adder(module, et)
    dims = tuple(d for d in range(x.shape.rank) if d != f)
    return e.reduce(x, e.const(0, et), dims, add)


def _adder(module: Module, et: ElementType) -> Computation:
    return scalar_reducer(module, "add", et, f"bn_add_{et.hlo_name}")


def expand_batch_norm_training(module: Module, comp: Computation,
                               i: Instruction) -> Instruction:
    x, scale, offset = i.operands
    e = Emitter(comp)
    f, dims = i.attrs.feature_index, x.shape.dimensions
    fshape = scale.shape
    count = x.shape.num_elements // dims[f] if dims[f] else 0
    n = e.splat(count, fshape)
    mean = e.divide(_feature_sum(e, module, x, f), n)
    square_mean = e.divide(_feature_sum(e, module, e.multiply(x, x), f), n)
    var = e.subtract(square_mean, e.multiply(mean, mean))
    rsqrt = e.rsqrt(e.add(var, e.splat(i.attrs.epsilon, fshape)))
    normalized = e.multiply(e.subtract(x, e.bcast(mean, dims, (f,))), e.bcast(rsqrt, dims, (f,)))
    out = e.add(e.multiply(normalized, e.bcast(scale, dims, (f,))), e.bcast(offset, dims, (f,)))
    return e.tuple(out, mean, var)


def expand_batch_norm_grad(module: Module, comp: Computation, i: Instruction) -> Instruction:
    x, scale, mean, var, dy = i.operands
    e = Emitter(comp)
    f, dims = i.attrs.feature_index, x.shape.dimensions
    count = x.shape.num_elements // dims[f] if dims[f] else 0
    var_eps = e.bcast(e.add(var, e.splat(i.attrs.epsilon, var.shape)), dims, (f,))
    stddev = e.sqrt(var_eps)
    centered = e.subtract(x, e.bcast(mean, dims, (f,)))
    normalized = e.divide(centered, stddev)
    i1 = e.multiply(dy, e.splat(count, dy))
    grad_offset = _feature_sum(e, module, dy, f)
    i2 = e.bcast(grad_offset, dims, (f,))
    i3 = e.bcast(_feature_sum(e, module, e.multiply(dy, centered), f), dims, (f,))
    i5 = e.divide(e.multiply(i3, centered), var_eps)
    factor = e.divide(e.divide(e.bcast(scale, dims, (f,)), stddev), e.splat(count, dy))
    grad_operand = e.multiply(factor, e.subtract(e.subtract(i1, i2), i5))
    grad_scale = _feature_sum(e, module, e.multiply(dy, normalized), f)
    return e.tuple(grad_operand, grad_scale, grad_offset)


class BatchNormTrainingGradExpander(_ModulePass):
    """batch_norm_training and batch_norm_grad (BatchNormExpander's other two ops)."""

    name = "batchnorm-training-grad-expander"
    reassociating = True

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.post_order()):
            for i in [i for i in comp.instructions
                      if i.opcode in ("batch_norm_training", "batch_norm_grad")]:
                fn = expand_batch_norm_training if i.opcode == "batch_norm_training" \
                    else expand_batch_norm_grad
                _replace(comp, i, fn(module, comp, i))
                changed = True
            if changed:
                sort_instructions(comp)
        return changed
