"""rng_bit_generator as plain integer HLO (XLA RngBitGeneratorExpander + prng.cc).

The cpu backend compiles iota, u32/u64 adds, multiplies, xors, shifts, converts and
reshapes/concatenates/slices natively, so expanding the op keeps JAX's random programs
(`random.rbg.*`, `lax.rng_bit_generator`) off the interpreter. The expansion computes the
same bits as `xlapy.ops.rng_bits` (whose docstring describes the state layout, Threefry's
dimension halving and Philox's 128-bit counter) and the same new state:

* all shape decisions (which dimension Threefry halves, block counts, the slice of the odd
  tail) are static; only the key and counter words come from the runtime state;
* the counter of block `i` is `counter + iota` in u64 (wrapping); Philox carries into the
  high word with `compare(c_low, low, LT)` converted to u64;
* Philox's 32x32->64 multiplies are u64 multiplies of zero-extended words;
* outputs narrower than 32 bits are the low bits of the 32-bit words (convert to u16, u8,
  u4 or u2 wraps), then bitcast to the result type. The cpu backend keeps the op for the
  IEEE-like f8 types (`CPU_KEPT_TYPES`): the interpreter fallback, which `explain()` lists;
* an empty output needs no blocks: the state is returned unchanged.
"""

from __future__ import annotations

import numpy as np

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.rng import DEFAULT_ALGORITHM, RngAlgorithm
from xlapy.ops.rng_bits import (
    _PHILOX_M4X32A,
    _PHILOX_M4X32B,
    _PHILOX_W32A,
    _PHILOX_W32B,
    _THREEFRY_PARITY,
    _THREEFRY_ROTATIONS,
)
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import ElementType, Shape

_U8, _U16 = ElementType.U8, ElementType.U16
_U32, _U64 = ElementType.U32, ElementType.U64
#: The unsigned type whose convert from u32 keeps the low bits of each width below 32.
_NARROW = {2: ElementType.U2, 4: ElementType.U4, 8: _U8, 16: _U16}


class _Gen(Emitter):
    """Emitter with the integer helpers the generators need."""

    def u32(self, x: Instruction) -> Instruction:
        return self.convert(x, new_element_type=_U32)

    def u64(self, x: Instruction) -> Instruction:
        return self.convert(x, new_element_type=_U64)

    def hi32(self, x: Instruction) -> Instruction:
        return self.u32(self.shift_right_logical(x, self.splat(32, x)))

    def rotl(self, x: Instruction, r: int) -> Instruction:
        return self.op("or", self.shift_left(x, self.splat(r, x)),
                       self.shift_right_logical(x, self.splat(32 - r, x)))

    def word(self, state: Instruction, i: int) -> Instruction:
        """state[i] as a u64 scalar."""
        s = self.slice(state, start_indices=(i,), limit_indices=(i + 1,), strides=(1,))
        return self.reshape(s, shape=())

    def vec(self, scalar: Instruction, n: int) -> Instruction:
        return self.bcast(scalar, (n,), ())

    def interleave(self, words: list[Instruction], axis: int, dims: tuple[int, ...]
                   ) -> Instruction:
        """Words of shape `dims` placed next to each other along a new axis after `axis`."""
        one = dims[:axis + 1] + (1,) + dims[axis + 1:]
        parts = [self.reshape(w, shape=one) for w in words]
        both = self.concatenate(*parts, dimension=axis + 1)
        return self.reshape(both, shape=dims[:axis] + (len(words) * dims[axis],)
                            + dims[axis + 1:])


def _like64(x: Instruction) -> Shape:
    """u64 of `x`'s dimensions (the 64-bit products of 32-bit words)."""
    return Shape.array(_U64, x.shape.dimensions)


def _join64(e: _Gen, lo: Instruction, hi: Instruction) -> Instruction:
    wide_hi = e.u64(hi)
    return e.op("or", e.u64(lo), e.shift_left(wide_hi, e.splat(32, wide_hi)))


def threefry2x32(e: _Gen, x0: Instruction, x1: Instruction, k0: Instruction,
                 k1: Instruction) -> tuple[Instruction, Instruction]:
    """Threefry-2x32, 20 rounds; `k0`, `k1` are u32 scalars (the rng_bits schedule)."""
    n = x0.shape.dimensions[0]
    k2 = e.xor(e.xor(k0, k1), e.const(_THREEFRY_PARITY, _U32))
    ks = [e.vec(k, n) for k in (k0, k1, k2)]
    a, b = e.add(x0, ks[0]), e.add(x1, ks[1])
    for block in range(5):
        rots = _THREEFRY_ROTATIONS[0:4] if block % 2 == 0 else _THREEFRY_ROTATIONS[4:8]
        for r in rots:
            a = e.add(a, b)
            b = e.xor(e.rotl(b, r), a)
        a = e.add(a, ks[(block + 1) % 3])
        b = e.add(e.add(b, ks[(block + 2) % 3]), e.splat(block + 1, b))
    return a, b


def philox4x32(e: _Gen, words: list[Instruction], k0: Instruction, k1: Instruction
               ) -> list[Instruction]:
    """Philox-4x32, 10 rounds; `k0`, `k1` are u32 scalars, bumped by the Weyl constants."""
    n = words[0].shape.dimensions[0]
    x0, x1, x2, x3 = words
    for r in range(10):
        key0 = e.vec(k0 if r == 0 else e.add(k0, e.const(_PHILOX_W32A * r & 0xFFFFFFFF, _U32)),
                     n)
        key1 = e.vec(k1 if r == 0 else e.add(k1, e.const(_PHILOX_W32B * r & 0xFFFFFFFF, _U32)),
                     n)
        p0 = e.multiply(e.u64(x0), e.splat(_PHILOX_M4X32A, _like64(x0)))
        p1 = e.multiply(e.u64(x2), e.splat(_PHILOX_M4X32B, _like64(x2)))
        x0, x1, x2, x3 = (e.xor(e.xor(e.hi32(p1), x1), key0), e.u32(p1),
                          e.xor(e.xor(e.hi32(p0), x3), key1), e.u32(p0))
    return [x0, x1, x2, x3]


def _key(e: _Gen, state: Instruction) -> tuple[Instruction, Instruction]:
    key = e.word(state, 0)
    return e.u32(key), e.hi32(key)


def _counters(e: _Gen, base: Instruction, n: int) -> Instruction:
    return e.add(e.vec(base, n), e.iota(shape=Shape.array(_U64, [n]), iota_dimension=0))


def _threefry32(e: _Gen, state: Instruction, dims: tuple[int, ...]
                ) -> tuple[Instruction, int]:
    """u32 output of `dims` (rng_bits._threefry32's layout) and the counter step."""
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    candidates = [i for i, d in enumerate(dims) if d > 1]
    split = min(candidates, key=lambda i: n // dims[i] * -(-dims[i] // 2), default=None)
    k0, k1 = _key(e, state)
    if split is None:  # n == 1: the first word of one block
        c = _counters(e, e.word(state, 1), 1)
        a, _ = threefry2x32(e, e.u32(c), e.hi32(c), k0, k1)
        return e.reshape(a, shape=dims), 1
    d = dims[split]
    half = dims[:split] + (-(-d // 2),) + dims[split + 1:]
    count = int(np.prod(half, dtype=np.int64))
    c = _counters(e, e.word(state, 1), count)
    a, b = threefry2x32(e, e.u32(c), e.hi32(c), k0, k1)
    full = e.interleave([e.reshape(a, shape=half), e.reshape(b, shape=half)], split, half)
    if 2 * half[split] != d:
        full = e.slice(full, start_indices=(0,) * len(dims), limit_indices=dims,
                       strides=(1,) * len(dims))
    return full, count


def _philox(e: _Gen, state: Instruction, count: int) -> tuple[list[Instruction], Instruction]:
    """Philox blocks for `count` 128-bit counters and the new state."""
    size = state.shape.dimensions[0]
    k0, k1 = _key(e, state)
    low = e.word(state, 1)
    high = e.word(state, 2 if size > 2 else 0)
    c_low = _counters(e, low, count)
    carry = e.u64(e.cmp(c_low, e.vec(low, count), "LT"))
    c_high = e.add(e.vec(high, count), carry)
    blocks = philox4x32(e, [e.u32(c_low), e.hi32(c_low), e.u32(c_high), e.hi32(c_high)],
                        k0, k1)
    new_low = e.add(low, e.const(count, _U64))
    parts = [e.slice(state, start_indices=(0,), limit_indices=(1,), strides=(1,)),
             e.reshape(new_low, shape=(1,))]
    if size > 2:
        new_high = e.add(high, e.u64(e.cmp(new_low, low, "LT")))
        parts.append(e.reshape(new_high, shape=(1,)))
    return blocks, e.concatenate(*parts, dimension=0)


def _flat(e: _Gen, words: list[Instruction], n: int, dims: tuple[int, ...]) -> Instruction:
    """Words of `count` blocks, consecutive per block, cut to `n` and shaped `dims`."""
    count = words[0].shape.dimensions[0]
    seq = e.interleave(words, 0, (count,))
    if seq.shape.dimensions[0] != n:
        seq = e.slice(seq, start_indices=(0,), limit_indices=(n,), strides=(1,))
    return e.reshape(seq, shape=dims)


def _to_type(e: _Gen, words: Instruction, et: ElementType) -> Instruction:
    """Keep the low `et.bits` bits of u32/u64 words and bitcast them to `et`."""
    if et.bits < 32:
        words = e.convert(words, new_element_type=_NARROW[et.bits])
    if words.shape.element_type is et:
        return words
    return e.bitcast_convert(words, new_element_type=et)


def expand(comp: Computation, i: Instruction) -> Instruction | None:
    """The tuple (new state, output) computed in HLO (None for an unknown algorithm)."""
    (state,) = i.operands
    out = i.shape.tuple_shapes[1]
    et, dims = out.element_type, tuple(out.dimensions)
    alg = i.attrs.rng_algorithm
    if alg is RngAlgorithm.DEFAULT:
        alg = DEFAULT_ALGORITHM
    e = _Gen(comp)
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if n == 0:
        return e.tuple(state, e.const(0, et, dims))
    wide = et.bits == 64
    if alg is RngAlgorithm.THREE_FRY:
        if wide:
            k0, k1 = _key(e, state)
            c = _counters(e, e.word(state, 1), n)
            a, b = threefry2x32(e, e.u32(c), e.hi32(c), k0, k1)
            words, step = e.reshape(_join64(e, a, b), shape=dims), n
        else:
            words, step = _threefry32(e, state, dims)
        new_counter = e.add(e.word(state, 1), e.const(step, _U64))
        new_state = e.concatenate(
            e.slice(state, start_indices=(0,), limit_indices=(1,), strides=(1,)),
            e.reshape(new_counter, shape=(1,)), dimension=0)
    elif alg is RngAlgorithm.PHILOX:
        if wide:
            blocks, new_state = _philox(e, state, -(-n // 2))
            w0, w1, w2, w3 = blocks
            words = _flat(e, [_join64(e, w0, w1), _join64(e, w2, w3)], n, dims)
        else:
            blocks, new_state = _philox(e, state, -(-n // 4))
            words = _flat(e, blocks, n, dims)
    else:
        return None
    return e.tuple(new_state, _to_type(e, words, et))


#: Output types the cpu backend keeps unexpanded: its kernels store the IEEE-like f8 types
#: with canonical NaNs (backends/cpu/elementwise_bits.py), which would lose the NaN payload
#: bits of a bitcast; the op's interpreter fallback returns them exactly.
CPU_KEPT_TYPES = frozenset({ElementType.F8E5M2, ElementType.F8E4M3, ElementType.F8E3M4})


class RngBitGeneratorExpander(Pass):
    """Replaces every rng_bit_generator by its Threefry/Philox arithmetic (bit-exact), except
    those whose output type is in `keep`."""

    name = "rng-bit-generator-expander"

    def __init__(self, keep: frozenset[ElementType] = frozenset()) -> None:
        self.keep = keep

    @classmethod
    def for_cpu(cls) -> RngBitGeneratorExpander:
        return cls(CPU_KEPT_TYPES)

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.computations):
            hit = False
            for i in [i for i in comp.instructions if i.opcode == "rng_bit_generator"
                      and i.shape.tuple_shapes[1].element_type not in self.keep]:
                new = expand(comp, i)
                if new is None:
                    continue
                i.replace_all_uses_with(new)
                if comp.root is i:
                    comp.root = new
                if not i.users:
                    comp.remove(i)
                hit = True
            if hit:
                sort_instructions(comp)
                changed = True
        return changed

