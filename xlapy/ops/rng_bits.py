"""Bit generators of rng_bit_generator, bit-exact with XLA's CPU backend.

XLA expands rng_bit_generator (xla/service/rng_bit_generator_expander.cc) into the
Threefry-2x32 / Philox-4x32 generators of xla/client/lib/prng.cc. This module redoes that
expansion with whole-array numpy uint32/uint64 arithmetic (no per-element Python loops):

* The state is `u64[k]`: `state[0]` is the 64-bit key (split into two 32-bit words, low
  word first); the rest is the counter (Threefry: one u64; Philox: a 128-bit counter whose
  low half is `state[1]` and high half `state[2]`; a `u64[2]` state uses the key as the high
  half, and its output state keeps only the low half).
* Threefry, 32-bit outputs (and narrower: 2/4/8/16-bit outputs are the low bits of the 32-bit
  output of the same shape): one dimension is halved (see `_threefry32`); the two words of a
  block are neighbours along that dimension. The counter advances by the number of blocks.
* Threefry, 64-bit outputs: `n` counters `c + i`, each block's two words form one u64 (first
  word low). The counter advances by `n`.
* Philox, 32-bit outputs: `ceil(n / 4)` 128-bit counters; the four words of each block are
  consecutive outputs. 64-bit outputs: `ceil(n / 2)` blocks, words (0, 1) and (2, 3) form two
  u64 (first word low). The counter advances by the number of blocks.
* Outputs are filled in row-major order and bitcast to the result type (floats included).
"""

from __future__ import annotations

import numpy as np

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)

#: Threefry-2x32 rotation distances (Salmon et al., Random123).
_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
#: Threefry key-schedule parity constant.
_THREEFRY_PARITY = 0x1BD11BDA
#: Philox-4x32 Weyl key increments and round multipliers.
_PHILOX_W32A = 0x9E3779B9
_PHILOX_W32B = 0xBB67AE85
_PHILOX_M4X32A = 0xD2511F53
_PHILOX_M4X32B = 0xCD9E8D57


def _split64(x: np.ndarray | np.uint64) -> tuple[np.ndarray, np.ndarray]:
    """(low word, high word) of u64 values, as uint32."""
    x = np.asarray(x, _U64)
    return (x & _MASK32).astype(_U32), (x >> _U64(32)).astype(_U32)


def _join64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """u64 values from (low word, high word)."""
    return lo.astype(_U64) | (hi.astype(_U64) << _U64(32))


def _rotl32(v: np.ndarray, r: int) -> np.ndarray:
    return (v << _U32(r)) | (v >> _U32(32 - r))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: np.uint32,
                 k1: np.uint32) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds and XLA's key schedule (prng.cc `ThreeFry2x32`)."""
    ks = (_U32(k0), _U32(k1), _U32(_THREEFRY_PARITY ^ int(k0) ^ int(k1)))
    with np.errstate(over="ignore"):
        a = x0.astype(_U32) + ks[0]
        b = x1.astype(_U32) + ks[1]
        for block in range(5):
            rots = _THREEFRY_ROTATIONS[0:4] if block % 2 == 0 else _THREEFRY_ROTATIONS[4:8]
            for r in rots:
                a = a + b
                b = _rotl32(b, r) ^ a
            a = a + ks[(block + 1) % 3]
            b = b + ks[(block + 2) % 3] + _U32(block + 1)
    return a, b


def philox4x32(c: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], k0: np.uint32,
               k1: np.uint32) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox-4x32 with 10 rounds (prng.cc `Philox4x32`)."""
    x0, x1, x2, x3 = (w.astype(_U32) for w in c)
    key0, key1 = int(k0), int(k1)
    for _ in range(10):
        p0 = x0.astype(_U64) * _U64(_PHILOX_M4X32A)
        p1 = x2.astype(_U64) * _U64(_PHILOX_M4X32B)
        hi0, lo0 = (p0 >> _U64(32)).astype(_U32), (p0 & _MASK32).astype(_U32)
        hi1, lo1 = (p1 >> _U64(32)).astype(_U32), (p1 & _MASK32).astype(_U32)
        x0, x1, x2, x3 = hi1 ^ x1 ^ _U32(key0), lo1, hi0 ^ x3 ^ _U32(key1), lo0
        key0 = (key0 + _PHILOX_W32A) & 0xFFFFFFFF
        key1 = (key1 + _PHILOX_W32B) & 0xFFFFFFFF
    return x0, x1, x2, x3


def _threefry_words(state: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Threefry output words for counters state[1] + 0..count-1, and the counter step."""
    k0, k1 = _split64(state[0])
    with np.errstate(over="ignore"):
        counters = _U64(state[1]) + np.arange(count, dtype=_U64)
    lo, hi = _split64(counters)
    a, b = threefry2x32(lo, hi, k0, k1)
    return a, b, count


def _threefry32(state: np.ndarray, dims: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """32-bit Threefry output of shape `dims` (prng.cc `ThreeFryRngBit32`), counter step.

    XLA halves the dimension `s` of size > 1 that needs the fewest blocks (an even one if any,
    else the largest odd one; the first on ties): counters run row-major over
    `dims[:s] + (ceil(d_s / 2),) + dims[s+1:]`, and the two words of a block are adjacent along
    dimension `s` (the odd tail is sliced off). With no such dimension (0 or 1 elements) the
    single block's first word is the output.
    """
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    candidates = [i for i, d in enumerate(dims) if d > 1]
    split = min(candidates, key=lambda i: n // dims[i] * -(-dims[i] // 2), default=None)
    if split is None:
        a, b, step = _threefry_words(state, -(-n // 2))
        return np.stack([a, b], axis=1).reshape(-1)[:n].reshape(dims), step
    d = dims[split]
    half_dims = dims[:split] + (-(-d // 2),) + dims[split + 1:]
    count = int(np.prod(half_dims, dtype=np.int64))
    a, b, step = _threefry_words(state, count)
    a = a.reshape(half_dims)
    b = b.reshape(half_dims)
    both = np.stack([a, b], axis=split + 1)
    padded = dims[:split] + (2 * half_dims[split],) + dims[split + 1:]
    full = both.reshape(padded)
    return full[(slice(None),) * split + (slice(0, d),)], step


def _philox_blocks(state: np.ndarray, count: int
                   ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Philox output blocks for `count` 128-bit counters, and the advanced state."""
    k0, k1 = _split64(state[0])
    low = int(state[1])
    high = int(state[2]) if state.shape[0] > 2 else int(state[0])
    base = (high << 64) | low
    idx = np.arange(count, dtype=_U64)
    with np.errstate(over="ignore"):
        c_low = _U64(low) + idx
    carry = (c_low < _U64(low)).astype(_U64)
    with np.errstate(over="ignore"):
        c_high = _U64(high) + carry
    w0, w1 = _split64(c_low)
    w2, w3 = _split64(c_high)
    blocks = philox4x32((w0, w1, w2, w3), k0, k1)
    nxt = (base + count) % (1 << 128)
    new_state = state.copy()
    new_state[1] = _U64(nxt & ((1 << 64) - 1))
    if state.shape[0] > 2:
        new_state[2] = _U64(nxt >> 64)
    return blocks, new_state


def generate_bits(algorithm: str, state: np.ndarray, dims: tuple[int, ...],
                  bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(new state, uint array of `dims`) for `algorithm` THREE_FRY or PHILOX.

    `bits` is the output width: 64 gives uint64, anything else uint32 words whose low `bits`
    bits the caller keeps (XLA truncates the 32-bit output for narrower types).
    """
    state = np.asarray(state, _U64)
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    wide = bits == 64
    out: np.ndarray | None = None
    if algorithm == "THREE_FRY":
        if wide:
            a, b, step = _threefry_words(state, n)
            flat = _join64(a, b)
        else:
            out, step = _threefry32(state, dims)
        new_state = state.copy()
        with np.errstate(over="ignore"):
            new_state[1] = _U64(state[1]) + _U64(step)
    elif algorithm == "PHILOX":
        if wide:
            nblocks = -(-n // 2)
            (w0, w1, w2, w3), new_state = _philox_blocks(state, nblocks)
            flat = np.stack([_join64(w0, w1), _join64(w2, w3)], axis=1).reshape(-1)[:n]
        else:
            nblocks = -(-n // 4)
            words, new_state = _philox_blocks(state, nblocks)
            flat = np.stack(words, axis=1).reshape(-1)[:n]
    else:
        raise ValueError(f"unknown rng algorithm {algorithm!r}")
    return new_state, out if out is not None else flat.reshape(dims)
