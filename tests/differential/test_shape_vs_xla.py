"""Shape family vs XLA (jax.lax on the CPU backend): every op, several element types,
randomized attributes from a seeded RNG. All of these ops move or fill values without
arithmetic, so every comparison is exact (tolerance 0; NaN equals NaN)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from tests.differential.compare import assert_same, jax_x64

jax = jax_x64()
lax = jax.lax

import xlapy  # noqa: E402
from xlapy.builder import XlaBuilder, XlaOp, ops  # noqa: E402
from xlapy.types import ElementType, Shape, from_dtype  # noqa: E402
from xlapy.types.element_type import iinfo  # noqa: E402

ET = ElementType
TYPES = [ET.PRED, ET.S4, ET.S8, ET.U32, ET.S64, ET.BF16, ET.F16, ET.F32, ET.F64, ET.C64]
INDEX_TYPES = [ET.S8, ET.S32, ET.S64, ET.U8, ET.U32, ET.U64]
CLIENT = xlapy.Client()


def values(rng: np.random.Generator, et: ElementType, shape: Sequence[int]) -> np.ndarray:
    """Random values of `et`, with NaN, infinities and -0.0 sprinkled into float types."""
    shape = tuple(shape)
    if et is ET.PRED:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if et.is_integer:
        info = iinfo(et)
        return rng.integers(int(info.min), int(info.max), shape, endpoint=True,
                            dtype=np.int64 if et.is_signed else np.uint64).astype(et.dtype)
    x = rng.standard_normal(shape) * 100
    if x.size:
        flat = x.reshape(-1)
        for special in (np.nan, np.inf, -np.inf, -0.0):
            flat[rng.integers(0, flat.size)] = special
    if et.is_complex:
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(et.dtype)


def random_shape(rng: np.random.Generator, min_rank: int = 0, max_rank: int = 4,
                 max_dim: int = 5) -> tuple[int, ...]:
    rank = int(rng.integers(min_rank, max_rank + 1))
    return tuple(int(d) for d in rng.integers(0 if rng.random() < 0.1 else 1, max_dim + 1,
                                              rank))


def ours(build: Callable[..., XlaOp], *args: np.ndarray) -> np.ndarray:
    """Run `build(builder, *parameters)` on `args` with the xlapy interpreter."""
    b = XlaBuilder("diff")
    params = [ops.Parameter(b, i, Shape.array(from_dtype(a.dtype), a.shape))
              for i, a in enumerate(args)]
    comp = b.build(build(b, *params))
    return CLIENT.execute_and_transfer(comp, list(args)).to_numpy()


def theirs(fn: Callable[..., Any], *args: np.ndarray) -> np.ndarray:
    return np.asarray(jax.jit(fn)(*args))


def compare(build: Callable[..., XlaOp], fn: Callable[..., Any], *args: np.ndarray,
            what: str) -> None:
    assert_same(ours(build, *args), theirs(fn, *args), what=what)


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded by the test's name and type (deterministic across runs)."""
    return np.random.default_rng([ord(c) for c in "/".join(map(str, key))])


# ---- tests ------------------------------------------------------------------------------------
def _reshape_case(rng: np.random.Generator, et: ElementType) -> None:
    shape = random_shape(rng)
    x = values(rng, et, shape)
    sizes = list(shape)
    rng.shuffle(sizes)
    new = tuple(sizes) + (1,) * int(rng.integers(0, 2))
    compare(lambda b, p: ops.Reshape(p, new), lambda a: lax.reshape(a, new), x,
            what=f"reshape {shape} -> {new}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_reshape(et: ElementType) -> None:
    rng = rng_for("reshape", et)
    for _ in range(2):
        _reshape_case(rng, et)


def _transpose_case(rng: np.random.Generator, et: ElementType) -> None:
    shape = random_shape(rng)
    perm = tuple(int(p) for p in rng.permutation(len(shape)))
    x = values(rng, et, shape)
    compare(lambda b, p: ops.Transpose(p, perm), lambda a: lax.transpose(a, perm), x,
            what=f"transpose {shape} by {perm}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_transpose(et: ElementType) -> None:
    rng = rng_for("transpose", et)
    for _ in range(2):
        _transpose_case(rng, et)


def _slice_case(rng: np.random.Generator, et: ElementType) -> None:
    shape = random_shape(rng, min_rank=1, max_dim=7)
    start = [int(rng.integers(0, d + 1)) for d in shape]
    limit = [int(rng.integers(s, d + 1)) for s, d in zip(start, shape)]
    strides = [int(rng.integers(1, 4)) for _ in shape]
    x = values(rng, et, shape)
    compare(lambda b, p: ops.Slice(p, start, limit, strides),
            lambda a: lax.slice(a, start, limit, strides), x,
            what=f"slice {shape} [{start}, {limit}) by {strides}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_slice(et: ElementType) -> None:
    rng = rng_for("slice", et)
    for _ in range(2):
        _slice_case(rng, et)


def _dynamic_slice_clamps_case(rng: np.random.Generator, et: ElementType, trial: int) -> None:
    shape = random_shape(rng, min_rank=1, max_dim=6)
    sizes = [int(rng.integers(0, d + 1)) for d in shape]
    it = INDEX_TYPES[(TYPES.index(et) + trial) % len(INDEX_TYPES)]
    info = iinfo(it)
    # In range, below 0 (signed types) and past the end; clamping must match XLA.
    starts = [np.array(int(rng.integers(max(int(info.min), -8), min(int(info.max), 12))),
                       it.dtype) for _ in shape]
    x = values(rng, et, shape)

    def build(b: XlaBuilder, p: XlaOp, *idx: XlaOp) -> XlaOp:
        return ops.DynamicSlice(p, list(idx), sizes)

    def fn(a: Any, *idx: Any) -> Any:
        return lax.dynamic_slice(a, idx, sizes, allow_negative_indices=False)

    compare(build, fn, x, *starts,
            what=f"dynamic_slice {shape} at {[int(s) for s in starts]} ({it}) size {sizes}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_dynamic_slice_clamps(et: ElementType) -> None:
    rng = rng_for("dynamic_slice", et)
    for trial in range(2):
        _dynamic_slice_clamps_case(rng, et, trial)


def _dynamic_update_slice_clamps_case(rng: np.random.Generator, et: ElementType,
                                      trial: int) -> None:
    shape = random_shape(rng, min_rank=1, max_dim=6)
    ushape = [int(rng.integers(0, d + 1)) for d in shape]
    it = INDEX_TYPES[(TYPES.index(et) + 3 + trial) % len(INDEX_TYPES)]
    info = iinfo(it)
    starts = [np.array(int(rng.integers(max(int(info.min), -8), min(int(info.max), 12))),
                       it.dtype) for _ in shape]
    x, u = values(rng, et, shape), values(rng, et, ushape)

    def build(b: XlaBuilder, p: XlaOp, q: XlaOp, *idx: XlaOp) -> XlaOp:
        return ops.DynamicUpdateSlice(p, q, list(idx))

    def fn(a: Any, c: Any, *idx: Any) -> Any:
        return lax.dynamic_update_slice(a, c, idx, allow_negative_indices=False)

    compare(build, fn, x, u, *starts,
            what=f"dynamic_update_slice {shape} <- {ushape} at {[int(s) for s in starts]}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_dynamic_update_slice_clamps(et: ElementType) -> None:
    rng = rng_for("dynamic_update_slice", et)
    for trial in range(2):
        _dynamic_update_slice_clamps_case(rng, et, trial)


def test_dynamic_slice_extreme_unsigned_and_signed_indices() -> None:
    rng = rng_for("dynamic_slice_extremes")
    x = values(rng, ET.F32, (300, 3))
    for it, v in [(ET.U8, 255), (ET.U8, 200), (ET.U64, 2**64 - 1), (ET.S64, -2**63),
                  (ET.U32, 2**31), (ET.S8, -128)]:
        idx = [np.array(v, it.dtype), np.array(1, it.dtype)]
        compare(lambda b, p, i, j: ops.DynamicSlice(p, [i, j], [2, 2]),
                lambda a, i, j: lax.dynamic_slice(a, (i, j), (2, 2),
                                                  allow_negative_indices=False),
                x, *idx, what=f"dynamic_slice at {v} ({it})")


def _concatenate_case(rng: np.random.Generator, et: ElementType) -> None:
    shape = random_shape(rng, min_rank=1)
    dim = int(rng.integers(0, len(shape)))
    args = []
    for _ in range(int(rng.integers(1, 4))):
        s = list(shape)
        s[dim] = int(rng.integers(0, 4))
        args.append(values(rng, et, s))
    compare(lambda b, *ps: ops.ConcatInDim(b, list(ps), dim),
            lambda *a: lax.concatenate(a, dim), *args,
            what=f"concatenate {[a.shape for a in args]} in {dim}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_concatenate(et: ElementType) -> None:
    rng = rng_for("concatenate", et)
    for _ in range(2):
        _concatenate_case(rng, et)


def _pad_negative_and_interior_case(rng: np.random.Generator, et: ElementType) -> None:
    shape = random_shape(rng, max_dim=5)
    config = []
    for d in shape:
        interior = int(rng.integers(0, 3))
        full = d + max(d - 1, 0) * interior
        lo = int(rng.integers(-full, 4))
        hi = int(rng.integers(max(-full - lo, -3), 4))
        config.append((lo, hi, interior))
    x = values(rng, et, shape)
    v = values(rng, et, ())
    compare(lambda b, p, q: ops.Pad(p, q, config), lambda a, c: lax.pad(a, c, config),
            x, v, what=f"pad {shape} with {config}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_pad_negative_and_interior(et: ElementType) -> None:
    rng = rng_for("pad", et)
    for _ in range(3):
        _pad_negative_and_interior_case(rng, et)


def _rev_case(rng: np.random.Generator, et: ElementType) -> None:
    shape = random_shape(rng)
    dims = tuple(int(d) for d in rng.permutation(len(shape))[:int(rng.integers(0,
                                                                          len(shape) + 1))])
    x = values(rng, et, shape)
    compare(lambda b, p: ops.Rev(p, dims), lambda a: lax.rev(a, dims), x,
            what=f"rev {shape} in {dims}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_rev(et: ElementType) -> None:
    rng = rng_for("rev", et)
    for _ in range(2):
        _rev_case(rng, et)


@pytest.mark.parametrize("et", [*TYPES[1:], ET.U8, ET.F8E4M3FN, ET.F8E5M2, ET.C128], ids=str)
def test_iota(et: ElementType) -> None:
    rng = rng_for("iota", et)
    long = (600,)  # long enough to round in bf16/f16/f8 and wrap in s4/u8
    for shape, dim in [(long, 0), (random_shape(rng, min_rank=2, max_rank=3), 1)]:
        _iota_case(et, shape, dim)


def _iota_case(et: ElementType, shape: tuple[int, ...], dim: int) -> None:
    theirs_value = np.asarray(jax.jit(lambda: lax.broadcasted_iota(et.dtype, shape, dim))())
    b = XlaBuilder("iota")
    comp = b.build(ops.Iota(b, Shape.array(et, shape), dim))
    assert_same(CLIENT.execute_and_transfer(comp, []).to_numpy(), theirs_value,
                what=f"iota {et}{list(shape)} dim {dim}")


def _broadcast_in_dim_case(rng: np.random.Generator, et: ElementType) -> None:
    out = random_shape(rng, min_rank=1)
    dims = tuple(sorted(int(d) for d in rng.permutation(len(out))[:int(rng.integers(
        0, len(out) + 1))]))
    if rng.random() < 0.5:  # XLA's BroadcastInDim also takes unsorted dimensions
        dims = tuple(int(d) for d in rng.permutation(dims)) if dims else dims
    shape = [out[d] if rng.random() < 0.7 else 1 for d in dims]
    x = values(rng, et, shape)
    compare(lambda b, p: ops.BroadcastInDim(p, out, dims),
            lambda a: lax.broadcast_in_dim(a, out, dims), x,
            what=f"broadcast_in_dim {shape} -> {out} via {dims}")


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_broadcast_in_dim(et: ElementType) -> None:
    rng = rng_for("broadcast_in_dim", et)
    for _ in range(2):
        _broadcast_in_dim_case(rng, et)


@pytest.mark.parametrize("et", [ET.S8, ET.F32], ids=str)
def test_broadcast_prepends(et: ElementType) -> None:
    rng = rng_for("broadcast", et)
    x = values(rng, et, (2, 3))
    compare(lambda b, p: ops.Broadcast(p, [4, 1]), lambda a: lax.broadcast(a, (4, 1)), x,
            what="broadcast")


@pytest.mark.parametrize("name", ["bfloat16", "float8_e5m2", "float8_e4m3fn"])
def test_narrow_float_moves_keep_every_bit(name: str) -> None:
    """A bf16 or f8 gather, slice, reverse, concatenate, pad or where stores the bits it
    moved, as XLA's do: a signaling NaN's payload too (the cpu backend had widened them to
    f32 and rounded back, quieting it; stored_bits.py). Where XLA fuses the move
    (concatenate, pad, select of slices) it stores a canonical NaN instead: ours keep the
    bits there too (numpy's)."""
    import jax.numpy as jnp

    dt = np.dtype(getattr(jnp, name))
    ut = np.uint16 if dt.itemsize == 2 else np.uint8
    rng = rng_for("narrow moves", ET.BF16)
    bits = rng.integers(0, 1 << (8 * dt.itemsize), (64, 48)).astype(ut)
    if dt.itemsize == 2:
        bits[::5, ::3] = 0x7F81  # signaling NaNs
        bits[1::7, ::2] = 0xFF83
    elif name == "float8_e5m2":
        bits[::5, ::3] = 0x7D
    x = bits.view(dt)
    pad = int(np.array(1.5, dt).view(ut))
    idx = rng.integers(0, 64, 40).astype(np.int32)
    fns = {"gather": (lambda a, i: a[i], [x, idx]),
           "slice": (lambda a: a[3:60, 16:], [x]),
           "reverse": (lambda a: a[::-1], [x]),
           "concatenate": (lambda a: jnp.concatenate([a, a[:, :16]], 1), [x],
                           np.concatenate([bits, bits[:, :16]], 1)),
           "pad": (lambda a: jnp.pad(a, ((1, 2), (0, 16)), constant_values=1.5), [x],
                   np.pad(bits, ((1, 2), (0, 16)), constant_values=pad)),
           "where": (lambda a, i: jnp.where((i[:, None] & 1) == 1, a[:40], a[1:41]),
                     [x, idx], np.where((idx[:, None] & 1) == 1, bits[:40], bits[1:41]))}
    for op, (fn, args, *want) in fns.items():
        jf = jax.jit(fn)
        ours = np.asarray(xlapy.compile(jf.lower(*args).as_text(), backend="cpu")(*args))
        theirs = want[0] if want else np.asarray(jf(*args)).view(ut)
        assert (ours.view(ut) == theirs).all(), op
