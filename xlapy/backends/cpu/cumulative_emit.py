"""Cumulative windows (jnp.cumsum / cumprod / cumlogsumexp, forward or reversed) folded in
XLA CPU's order, so the bits are jax's on CPU.

XLA CPU rewrites a cumulative reduce_window longer than 16 (ReduceWindowRewriter, base
length 16) into scans of blocks of 16 along the axis - each block's element the fold of its
window inside the block, in the window's order - whose totals are scanned the same way,
recursively, and each block's results then combined with the scan of the blocks before it
(after it, reversed): `out = red(inner, excl)`. The blocks start at the axis's first element
either way, the last one padded with the init value. Measured against jax 0.10.2 on CPU: f32,
f64, bf16 and c64 cumsum, cumprod, forward and reversed, along axes 0 and -1, lengths 16 to
70000: every bit equal (a running sum matched 0.6-25 % of the elements; cumlogsumexp's
region 99.75 % against a numpy logaddexp model of the same order). Its roundings also grow
with log16(n) levels rather than n, so it is the more accurate fold.

The emitter walks the axis once per tile of at most TILE_BYTES of inner positions, keeping per level
l (l = 0 the elements, 1 the blocks, ...) the running fold of the current block (A_l) and
the scan value of the neighbouring blocks it combines with (E_l) in stack arrays of the
storage type (every value rounded as a stored one, bf16 included). Forward: element i
folds into A_0, is stored as red(A_0, E_0), and a completed block's total folds into the
next level, whose combined value becomes the next block's E. Reversed: the blocks run last
to first; each element folds its block's remaining elements left to right (at most 16), a
block's total being its first element's fold, and each level keeps its group's totals to
fold the same way. A full block folds as vectors: along the last axis its 16 lanes
(`_lanes`, either way, CHAINS blocks at once; reversed, a group of 16 blocks at once with
their totals folded as one more, `_reversed_group`), reversed across inner positions a
vector of them with the block's 16 folds in registers (`_columns`). The interpreter folds
each window whole, in row-major order (the spec leaves the order to the implementation):
the two agree wherever the reducer is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from xlapy.backends.cpu import bf16_exact, region_emit
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.llvm_util import broadcast, for_range, i64
from xlapy.types import ElementType as ET

if TYPE_CHECKING:
    from xlapy.backends.cpu.window_emit import ReduceWindowEmitter

#: XLA CPU's block length (its ReduceWindowRewriter's base length).
BASE = 16
#: Bytes of inner (trailing) positions one walk along the axis carries: forward, a whole
#: row of up to 1024 f32s (a walk over tiles of rows in strides of pages ran 3x slower than
#: one over whole rows: 2048 x 1024 along axis 0); reversed 256 f32s, its groups taking 16
#: KB a level.
TILE_BYTES = {False: 4096, True: 1024}
#: Reducers whose folds of flushed values are flushed (`_flushed`).
_KEEP_FLUSHED = frozenset({"add", "multiply", "maximum", "minimum"})
#: Blocks a walk along the last axis folds at once (`_lanes`): each is a chain of BASE
#: dependent folds.
CHAINS = 4
#: Reducers whose fold of a block's values is one value in any order (`_suffix_block`):
#: float max / min are llvm.maximum's (NaN wins, -0 < +0). A reversed
#: block's 16 suffixes then take 16 folds right to left instead of 136 left to right (the
#: 136 were 2,600 IR lines for a reversed cummax along axis 0 of f32[40, 33], 0.6 s of LLVM
#: optimization, 1.2 s in bf16). Of several NaNs the one kept may differ.
_ORDER_FREE = frozenset({"maximum", "minimum"})
#: Element types whose full blocks fold as vectors (`_lanes`, `_columns`).
_VECTOR = frozenset({ET.F32, ET.F64, ET.BF16})
#: Reducers that give the same bits in any order on integer and boolean elements (a running
#: or suffix scan is then this order too). On floats none is taken for exact: max / min
#: ties of +0 and -0 keep the operand their order picks.
_EXACT_INT = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})


def levels(n: int) -> int:
    """How many times XLA's rewriter splits a scan of `n`: n_0 = n, n_(l+1) = ceil(n_l / 16)
    while n_l > 16."""
    count = 0
    while n > BASE:
        n = -(-n // BASE)
        count += 1
    return count


def needed(kind: str | None, t: ET, n: int, rev: bool) -> bool:
    """Whether a cumulative window of `n` (a single operand of type `t`, reducer `kind`: a
    region's one binary op, else None) folds in a different order than a running scan
    (forward) or a suffix scan (reversed) would give bits for."""
    exact = kind in _EXACT_INT and not (t.is_float or t.is_complex)
    return not exact and (rev or n > BASE)


def _flushed(e: ReduceWindowEmitter) -> bool:
    """Whether every value the walk keeps is flushed already: results of float add or
    multiply under FTZ, a max / min's flushed operand, or the init flushed once (their
    reloads then skip the flush each fold would give its operands: a cumsum along the last
    axis ran a flush's compare in its add chain, a reversed cummax two a fold)."""
    return region_emit.binary_kind(e.comp) in _KEEP_FLUSHED and e.ets[0].is_float


class _Arrays:
    """`count` stack arrays of `tile` values of storage type `t` (a level each, or a group's
    BASE totals), indexed by a constant or a run-time value; `flushed`: their values hold no
    denormal (`_flushed`)."""

    def __init__(self, e: ReduceWindowEmitter, t: ET, tile: int, count: int, tag: str) -> None:
        b = e.b
        self.b, self.t, self.flushed = b, t, _flushed(e)
        with b.goto_entry_block():
            self.ptr = b.alloca(ir.ArrayType(ir.ArrayType(ew.storage_type(t), tile), count),
                                name=tag)

    def at(self, j: int | ir.Value, k: ir.Value) -> ir.Value:
        return self.b.gep(self.ptr, [i64(0), i64(j) if isinstance(j, int) else j, k],
                          inbounds=True)

    def get(self, j: int | ir.Value, k: ir.Value) -> ir.Value:
        v = ew.from_storage(self.b, self.b.load(self.at(j, k)), self.t)
        return ew.mark_flushed(v) if self.flushed else v

    def put(self, j: int | ir.Value, k: ir.Value, v: ir.Value) -> None:
        self.b.store(ew.to_storage(self.b, v, self.t), self.at(j, k))

    def vector(self, j: int | ir.Value, k: ir.Value, width: int, e: ReduceWindowEmitter
               ) -> ir.Value:
        """`width` values from (j, k) (`get`'s one where width is 1)."""
        v = _vload(e, self.t, self.at(j, k), width)
        return ew.mark_flushed(v) if self.flushed else v


def emit(e: ReduceWindowEmitter, row0: ir.Value, n: int, inner: int, rev: bool) -> None:
    """The cumulative window of the row starting at `row0` (n positions along the axis,
    `inner` contiguous elements each), in XLA CPU's order (module docstring)."""
    b = e.b
    t = e.ets[0]
    nl = levels(n)
    tile = min(inner, TILE_BYTES[rev] // t.dtype.itemsize)
    with for_range(b, i64(0), i64(-(-inner // tile)), name="tile") as kt:
        k0 = b.mul(kt, i64(tile), flags=["nsw"])
        left = b.sub(i64(inner), k0)
        kw = b.select(b.icmp_signed("<", left, i64(tile)), left, i64(tile))
        base = b.add(row0, k0, flags=["nsw"])

        def over_tile(body: Callable[[ir.Value], None]) -> None:
            if tile == 1:  # (a scan along the last axis: no loop of one)
                body(i64(0))
                return
            with for_range(b, i64(0), kw, name="k") as k:
                body(k)

        if rev:
            _reversed(e, t, tile, base, n, inner, nl, over_tile, kw)
        else:
            _forward(e, t, tile, base, n, inner, nl, over_tile)


def _init(e: ReduceWindowEmitter) -> ir.Value:
    """The init value, flushed once where the walk keeps flushed values (`_flushed`): an add
    or multiply flushes its operands anyway, so the bits are the same."""
    return _quieted(e, ew.flush(e.b, e.init[0]) if _flushed(e) else e.init[0])


def _quieted(e: ReduceWindowEmitter, x: ir.Value) -> ir.Value:
    """`x` (loaded) with a bf16 max / min's NaNs quieted once, the rounding each fold would
    give them (elementwise._bf16_round): the folds then pick among quiet bf16s and round
    nothing (5 vector instructions a fold without AVX512-BF16; a forward bf16 cummax along
    rows was 1,480 IR lines, 0.4 s of LLVM on Zen 3)."""
    return ew.round_to(e.b, x, ET.BF16) if _quiets(e) else x


def _quiets(e: ReduceWindowEmitter) -> bool:
    return e.ets[0] is ET.BF16 and region_emit.binary_kind(e.comp) in _ORDER_FREE


def _forward(e: ReduceWindowEmitter, t: ET, tile: int, base: ir.Value, n: int, inner: int, nl: int,
             over_tile: Callable[[Callable[[ir.Value], None]], None]) -> None:
    b = e.b
    init = _init(e)
    acc = _Arrays(e, t, tile, nl + 1, "cum.a")  # A_l: the fold of level l's current block
    comb = _Arrays(e, t, tile, max(nl, 1), "cum.e")  # E_l: what level l's block combines with
    for lv in range(nl):
        over_tile(lambda k, lv=lv: comb.put(lv, k, init))

    def finish(i: ir.Value, lv: int) -> None:
        """Level lv - 1's block just completed (position i): fold its total into level lv."""
        if lv > nl:
            return
        span = BASE ** lv
        done = b.icmp_signed("==", b.and_(i, i64(span - 1)), i64(span - 1))
        with b.if_then(done):
            start = b.icmp_signed("==", b.and_(b.lshr(i, i64(4 * lv)), i64(BASE - 1)),
                                  i64(0))

            def block(k: ir.Value) -> None:
                prev = ew.select(b, start, init, acc.get(lv, k))
                a = e.red([prev], [acc.get(lv - 1, k)])[0]
                acc.put(lv, k, a)
                a = acc.get(lv, k)
                comb.put(lv - 1, k, e.red([a], [comb.get(lv, k)])[0] if lv < nl else a)

            over_tile(block)
            finish(i, lv + 1)

    def blocks(first: ir.Value, count: int) -> None:
        """`count` whole blocks from block `first`, their folds interleaved."""
        s0 = b.mul(first, i64(BASE), flags=["nsw"])
        ss = [b.add(s0, i64(BASE * g), flags=["nsw"]) for g in range(count)]
        ats = [b.add(base, s, flags=["nsw"]) for s in ss]
        for s, at, v in zip(ss, ats, _lanes(e, t, [_block(e, t, at) for at in ats], False)):
            acc.put(0, i64(0), b.extract_element(v, i64(BASE - 1)))  # the block's total
            if nl:
                v = e.red([v], [broadcast(b, comb.get(0, i64(0)), BASE)])[0]
            _vstore(e, t, b.gep(e.op[0], [at], inbounds=True), v)
            finish(b.add(s, i64(BASE - 1), flags=["nsw"]), 1)

    whole = n // BASE if tile == 1 and t in _VECTOR else 0
    if whole:  # along the last axis: a block of BASE elements a vector, CHAINS at once
        with for_range(b, i64(0), i64(whole // CHAINS), name="q") as q:
            blocks(b.mul(q, i64(CHAINS), flags=["nsw"]), CHAINS)
        if whole % CHAINS:
            blocks(i64(whole - whole % CHAINS), whole % CHAINS)
    if whole * BASE == n:
        return
    with for_range(b, i64(whole * BASE), i64(n), name="i") as i:
        first = b.icmp_signed("==", b.and_(i, i64(BASE - 1)), i64(0))
        at_i = b.add(base, b.mul(i, i64(inner), flags=["nsw"]), flags=["nsw"])

        def element(k: ir.Value) -> None:
            at = b.add(at_i, k, flags=["nsw"])
            prev = ew.select(b, first, init, acc.get(0, k))
            a = e.red([prev], e.ld(e.xp, at))[0]
            acc.put(0, k, a)
            e.st_(e.op, at, e.red([acc.get(0, k)], [comb.get(0, k)]) if nl else [a])

        over_tile(element)
        finish(i, 1)


def _reversed(e: ReduceWindowEmitter, t: ET, tile: int, base: ir.Value, n: int, inner: int, nl: int,
              over_tile: Callable[[Callable[[ir.Value], None]], None], kw: ir.Value) -> None:
    b = e.b
    init = _init(e)
    sizes = [n]
    for _ in range(nl):
        sizes.append(-(-sizes[-1] // BASE))
    comb = _Arrays(e, t, tile, max(nl, 1), "cum.e")  # E_l, as forward (the blocks after)
    tots = [_Arrays(e, t, tile, BASE, f"cum.t{lv}") for lv in range(1, nl + 1)]  # level lv's group
    fold = _Arrays(e, t, tile, 1, "cum.f")
    for lv in range(nl):
        over_tile(lambda k, lv=lv: comb.put(lv, k, init))
    blocks = sizes[1] if nl else 1

    def block(q: ir.Value, s: ir.Value) -> None:
        """Block q's elements one at a time, the tile's inner positions innermost."""
        with for_range(b, i64(0), i64(min(n, BASE)), name="j") as j:
            i = b.add(s, j, flags=["nsw"])
            with b.if_then(b.icmp_signed("<", i, i64(n))):
                at_i = b.add(base, b.mul(i, i64(inner), flags=["nsw"]), flags=["nsw"])

                # the fold of the block's elements from i on, left to right (its padding
                # past n included)
                over_tile(lambda k: fold.put(0, k, init))
                with for_range(b, j, i64(min(n, BASE)), name="w") as w:
                    src = b.add(s, w, flags=["nsw"])
                    ok = b.icmp_signed("<", src, i64(n))
                    at_w = b.add(base, b.mul(b.select(ok, src, i64(0)), i64(inner),
                                             flags=["nsw"]), flags=["nsw"])

                    def step(k: ir.Value) -> None:
                        v = ew.select(b, ok, e.ld(e.xp, b.add(at_w, k, flags=["nsw"]))[0],
                                      init)
                        fold.put(0, k, e.red([fold.get(0, k)], [v])[0])

                    over_tile(step)

                def element(k: ir.Value) -> None:
                    a = fold.get(0, k)
                    e.st_(e.op, b.add(at_i, k, flags=["nsw"]),
                          e.red([a], [comb.get(0, k)]) if nl else [a])
                    if nl:  # the block's total (its first element's fold) for level 1
                        with b.if_then(b.icmp_signed("==", j, i64(0))):
                            tots[0].put(b.and_(q, i64(BASE - 1)), k, a)

                over_tile(element)

    def finish(lv: int, pos: ir.Value) -> None:
        """Level lv's position `pos` (a total of level lv - 1) is filed: fold its group
        from there to the group's end, and combine."""
        if lv > nl:
            return
        slot = b.and_(pos, i64(BASE - 1))
        g0 = b.sub(pos, slot)
        group = tots[lv - 1]

        over_tile(lambda k: fold.put(0, k, init))
        with for_range(b, slot, i64(BASE), name="v") as v:
            ok = b.icmp_signed("<", b.add(g0, v), i64(sizes[lv]))

            def step(k: ir.Value) -> None:
                x = ew.select(b, ok, group.get(v, k), init)
                fold.put(0, k, e.red([fold.get(0, k)], [x])[0])

            over_tile(step)
        filed(lv, pos)

    def filed(lv: int, pos: ir.Value) -> None:
        """Combine the fold of level lv's group from position `pos` on (in `fold`): what
        the position before combines with, and at the group's first position its total for
        level lv + 1."""
        slot = b.and_(pos, i64(BASE - 1))

        def position(k: ir.Value) -> None:
            a = fold.get(0, k)
            comb.put(lv - 1, k, e.red([a], [comb.get(lv, k)])[0] if lv < nl else a)
            if lv < nl:
                with b.if_then(b.icmp_signed("==", slot, i64(0))):
                    tots[lv].put(b.and_(b.lshr(pos, i64(4)), i64(BASE - 1)), k, a)

        over_tile(position)
        if lv < nl:
            with b.if_then(b.icmp_signed("==", slot, i64(0))):
                finish(lv + 1, b.lshr(pos, i64(4)))

    if tile == 1 and t in _VECTOR and n >= BASE:  # whole blocks along the last axis: vectors
        whole = n // BASE
        if n % BASE:  # the last block partial
            block(i64(whole), i64(whole * BASE))
            finish(1, i64(whole))
        # the whole blocks of the last group of 16 one at a time, then groups of 16 at once
        with for_range(b, i64(0), i64(whole % BASE), name="qr") as qr:
            q = b.sub(i64(whole - 1), qr)
            at = b.add(base, b.mul(q, i64(BASE), flags=["nsw"]), flags=["nsw"])
            [v] = _lanes(e, t, [_block(e, t, at)], True)
            if nl:  # the block's total (its first lane) for level 1
                tots[0].put(b.and_(q, i64(BASE - 1)), i64(0), b.extract_element(v, i64(0)))
                v = e.red([v], [broadcast(b, comb.get(0, i64(0)), BASE)])[0]
            _vstore(e, t, b.gep(e.op[0], [at], inbounds=True), v)
            finish(1, q)
        if whole < BASE:
            return
        with for_range(b, i64(0), i64(whole // BASE), name="gr") as gr:
            g = b.sub(i64(whole // BASE - 1), gr)
            pos = b.mul(g, i64(BASE), flags=["nsw"])
            fold.put(0, i64(0), _reversed_group(e, t, b.add(base, b.mul(
                pos, i64(BASE), flags=["nsw"]), flags=["nsw"]), comb, tots[0], nl))
            filed(1, pos)
        return
    with for_range(b, i64(0), i64(blocks), name="qr") as qr:
        q = b.sub(i64(blocks - 1), qr)
        s = b.mul(q, i64(BASE), flags=["nsw"])
        if n < BASE or t not in _VECTOR:
            block(q, s)
        elif n % BASE == 0:
            _columns(e, t, base, s, q, inner, tile, kw, *((comb, tots[0]) if nl else (None, None)))
        else:  # only the last block is partial
            with b.if_else(b.icmp_signed("<=", b.add(s, i64(BASE)), i64(n))) as (whole, part):
                with whole:
                    _columns(e, t, base, s, q, inner, tile, kw,
                             *((comb, tots[0]) if nl else (None, None)))
                with part:
                    block(q, s)
        finish(1, q)


def _reversed_group(e: ReduceWindowEmitter, t: ET, at: ir.Value, comb: _Arrays,
                    tots: _Arrays, nl: int) -> ir.Value:
    """A group of BASE whole blocks of a reversed walk along the last axis (first element
    at `at`), all after it walked: their folds (`_lanes`, CHAINS at once) stored, their
    totals T (each block's first lane) folded as one reversed block S, then block j's folds
    combined with red(S[j + 1], E_1), the last block's with E_0, as block-by-block `finish`
    would combine them (its fold of the group's remaining totals, ~8 scalar folds a block,
    took a reversed 1-d cummin 5.4 ms against XLA's 4.9). Returns S[0], the group's
    total."""
    b = e.b

    def first(j: ir.Value) -> ir.Value:
        return b.add(at, b.mul(j, i64(BASE), flags=["nsw"]), flags=["nsw"])

    with for_range(b, i64(0), i64(BASE // CHAINS), name="gc") as c:
        js = [b.add(b.mul(c, i64(CHAINS), flags=["nsw"]), i64(g)) for g in range(CHAINS)]
        ats = [first(j) for j in js]
        for j, a, v in zip(js, ats, _lanes(e, t, [_block(e, t, a) for a in ats], True)):
            tots.put(j, i64(0), b.extract_element(v, i64(0)))
            _vstore(e, t, b.gep(e.op[0], [a], inbounds=True), v)
    [s] = _lanes(e, t, [_vload(e, t, tots.at(0, i64(0)), BASE)], True)
    after = b.shuffle_vector(s, s, ir.Constant(ir.VectorType(ir.IntType(32), BASE),
                                               [(j + 1) % BASE for j in range(BASE)]))
    if nl > 1:
        after = e.red([after], [broadcast(b, comb.get(1, i64(0)), BASE)])[0]
    after = b.insert_element(after, comb.get(0, i64(0)), i64(BASE - 1))
    for j in range(BASE):  # (the group's combines in tots, now read)
        tots.put(j, i64(0), b.extract_element(after, i64(j)))
    with for_range(b, i64(0), i64(BASE), name="gj") as j:
        p = b.gep(e.op[0], [first(j)], inbounds=True)
        v = _vload(e, t, p, BASE)
        out = e.red([ew.mark_flushed(v) if _flushed(e) else v],
                    [broadcast(b, tots.get(j, i64(0)), BASE)])[0]
        _vstore(e, t, p, out)
    return b.extract_element(s, i64(0))


def _block(e: ReduceWindowEmitter, t: ET, at: ir.Value) -> ir.Value:
    """The BASE elements from `at`, flushed (once: a fold flushes its operands, the same
    bits; each fold of flushed values then skips its own, cummax's 2 fpclass-selects)."""
    x = _vload(e, t, e.b.gep(e.xp[0], [at], inbounds=True), BASE)
    return _quieted(e, ew.flush(e.b, x))


def _lanes(e: ReduceWindowEmitter, t: ET, xs: list[ir.Value], rev: bool) -> list[ir.Value]:
    """Full blocks along the last axis (`_block`s), each folded in one vector of BASE lanes
    as the scalar walk folds it: forward, step r folds element r into every lane j >= r
    (lane j: elements 0..j); reversed, lane j folds elements j..BASE - 1 left to right, step
    r the block rotated by r lanes into the lanes it still reaches. The blocks' steps
    interleave, each a chain of BASE folds (the scalar walk's select, fold, store and reload
    per element took cummax along rows of 1024 x 1024 f32 4.9 ms against XLA's 4.6;
    cumsum's gradient along rows 1.2 ms for 256 x 1024 against XLA's 0.64)."""
    b = e.b
    folds = [broadcast(b, ew.flush(b, _init(e)), BASE)] * len(xs)
    for r in range(BASE):
        src = [(j + r) % BASE if rev else r for j in range(BASE)]
        reach = ir.Constant(ir.VectorType(ir.IntType(1), BASE),
                            [int(j + r < BASE if rev else j >= r) for j in range(BASE)])
        for g, x in enumerate(xs):
            moved = b.shuffle_vector(x, x, ir.Constant(ir.VectorType(ir.IntType(32), BASE), src))
            folded = _fold(e, t, folds[g], moved)
            kept = ew.is_flushed(folded)
            folds[g] = folded if r == 0 else b.select(reach, folded, folds[g])
            if kept:
                ew.mark_flushed(folds[g])
            if _quiets(e):  # (picks among quiet bf16s)
                bf16_exact.mark(folds[g])
    return folds


def _fold(e: ReduceWindowEmitter, t: ET, acc: ir.Value, v: ir.Value) -> ir.Value:
    """One fold of a vector walk, rounded as a stored value of `t` would be, marked
    flushed where the walk keeps flushed values (`_flushed`)."""
    out = ew.round_to(e.b, e.red([acc], [v])[0], t)
    return ew.mark_flushed(out) if _flushed(e) else out


def _vload(e: ReduceWindowEmitter, t: ET, elem: ir.Value, w: int) -> ir.Value:
    """`w` consecutive values of type `t` from element pointer `elem` (a scalar when w is 1)."""
    b = e.b
    if w == 1:
        return ew.from_storage(b, b.load(elem), t)
    vt = ir.VectorType(ew.storage_type(t), w)
    return ew.from_storage(b, b.load(b.bitcast(elem, vt.as_pointer()), align=t.dtype.itemsize), t)


def _vstore(e: ReduceWindowEmitter, t: ET, elem: ir.Value, v: ir.Value) -> None:
    b = e.b
    s = ew.to_storage(b, v, t)
    b.store(s, elem if not isinstance(v.type, ir.VectorType) else
            b.bitcast(elem, s.type.as_pointer()), align=t.dtype.itemsize)


def _columns(e: ReduceWindowEmitter, t: ET, base: ir.Value, s: ir.Value, q: ir.Value,
             inner: int, tile: int, kw: ir.Value, comb: _Arrays | None,
             tot: _Arrays | None) -> None:
    """A full block of a reversed walk across a tile of `kw` inner positions, a vector of
    them at a time with the block's 16 folds in registers: element w's values are loaded
    once and folded into every fold still open (elements 0..w, element w's starting from
    the init), the same order as the scalar block's. The scalar block reloads and stores
    each fold per step (a reversed cumsum along axis 0 of 2048 x 1024 ran 10x its forward
    walk)."""
    b = e.b
    width = max(1, min(vector_width() // (2 if t is ET.F64 else 1), tile))
    count = b.udiv(kw, i64(width))
    block = _suffix_block if region_emit.binary_kind(e.comp) in _ORDER_FREE else _column_block
    with for_range(b, i64(0), count, name="kc") as c:
        block(e, t, base, s, q, inner, b.mul(c, i64(width), flags=["nsw"]), width, comb, tot)
    if tile % width or inner % tile:  # the tile's last few positions, one at a time
        with for_range(b, b.mul(count, i64(width), flags=["nsw"]), kw, name="kr") as k:
            block(e, t, base, s, q, inner, k, 1, comb, tot)


def _init_vector(e: ReduceWindowEmitter, width: int) -> ir.Value:
    """The init (`_init`) in `width` lanes (a scalar where width is 1)."""
    return _init(e) if width == 1 else broadcast(e.b, _init(e), width)


def _element(e: ReduceWindowEmitter, t: ET, at: ir.Value, width: int) -> ir.Value:
    """`width` inner positions of the element at `at`, as the walk keeps them: flushed
    where `_flushed`, quieted where `_quiets`."""
    x = _vload(e, t, e.b.gep(e.xp[0], [at], inbounds=True), width)
    return _quieted(e, ew.flush(e.b, x) if _flushed(e) else x)


def _column_block(e: ReduceWindowEmitter, t: ET, base: ir.Value, s: ir.Value, q: ir.Value,
                  inner: int, k: ir.Value, width: int, comb: _Arrays | None,
                  tot: _Arrays | None) -> None:
    b = e.b

    def at(w: int) -> ir.Value:
        row = b.mul(b.add(s, i64(w), flags=["nsw"]), i64(inner), flags=["nsw"])
        return b.add(b.add(base, row, flags=["nsw"]), k, flags=["nsw"])

    init = _init_vector(e, width)
    folds: list[ir.Value] = []
    for w in range(BASE):
        x = _element(e, t, at(w), width)
        folds = [_fold(e, t, a, x) for a in folds] + [_fold(e, t, init, x)]
    if comb is not None and tot is not None:
        _vstore(e, t, tot.at(b.and_(q, i64(BASE - 1)), k), folds[0])
        after = comb.vector(0, k, width, e)
        folds = [e.red([a], [after])[0] for a in folds]
    for w, v in enumerate(folds):
        _vstore(e, t, b.gep(e.op[0], [at(w)], inbounds=True), v)


def _suffix_block(e: ReduceWindowEmitter, t: ET, base: ir.Value, s: ir.Value, q: ir.Value,
                  inner: int, k: ir.Value, width: int, comb: _Arrays | None,
                  tot: _Arrays | None) -> None:
    """`_column_block` for an order-free reducer (`_ORDER_FREE`): a loop from the block's
    last element to its first, element w's fold red(x[w], fold[w + 1]) (the init after the
    last), combined with what follows the block as it is stored."""
    b = e.b
    init = _init_vector(e, width)
    with b.goto_entry_block():
        accp = b.alloca(init.type, name="cum.s")
    b.store(init, accp)
    after = None if comb is None else comb.vector(0, k, width, e)
    with for_range(b, i64(0), i64(BASE), name="sw") as r:
        row = b.mul(b.sub(b.add(s, i64(BASE - 1), flags=["nsw"]), r), i64(inner),
                    flags=["nsw"])
        at = b.add(b.add(base, row, flags=["nsw"]), k, flags=["nsw"])
        acc = b.load(accp)  # (a fold of the kept values: flushed, quiet bf16s where they are)
        if _flushed(e):
            ew.mark_flushed(acc)
        if _quiets(e):
            bf16_exact.mark(acc)
        acc = _fold(e, t, _element(e, t, at, width), acc)
        b.store(acc, accp)
        _vstore(e, t, b.gep(e.op[0], [at], inbounds=True),
                acc if after is None else e.red([acc], [after])[0])
    if tot is not None:
        _vstore(e, t, tot.at(b.and_(q, i64(BASE - 1)), k), b.load(accp))


__all__ = ["BASE", "TILE_BYTES", "emit", "levels", "needed"]
