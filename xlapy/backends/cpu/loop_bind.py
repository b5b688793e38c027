"""A native while loop's per-call binding of its state buffers into its prepared tables
(native_loop.py), as numpy index writes fixed per prepared loop.

NativeWhile._bind wrote every table entry, swap cell and copy record through ctypes item and
slice assignments: ~10 us a call for jax.random's threefry loop (9 state elements, 4 of them
swapped, 5 moved), three such loops in a randint of 50 values. Where each address goes
depends on the loop and its static shapes alone, so it is worked out on the first call
(`Binder`); a call then takes the buffers' addresses and writes them with a few fancy-index
assignments into numpy views of the tables. The same words land in the same places.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu.thunks import ptr
from xlapy.ops.base import OPS

if TYPE_CHECKING:
    from xlapy.backends.cpu.native_loop import NativeWhile, _Prepared
    from xlapy.ir import Instruction


def _ix(xs: list[int]) -> np.ndarray:
    return np.array(xs, np.intp)


class Binder:
    """The binding of one prepared loop `p` of `nw`, for state buffers of `nbytes` bytes."""

    def __init__(self, nw: NativeWhile, p: _Prepared, nbytes: list[int]) -> None:
        self.tabs = [np.frombuffer(t, np.int64) for t in p.tables]
        self.state = [(_ix([s for s, _ in ss]), _ix([k for _, k in ss]))
                      for ss in nw.state_slots]
        self.swap_k = [k for k, _ in nw.swapped]
        self.swap_r, self.swap_kx = _ix([r for _, r in nw.swapped]), _ix(self.swap_k)
        self.cells = np.frombuffer(p.cells, np.int64)[:len(nw.swapped)]
        #: The elements bound in place (native_loop's `unread`: the caller's arrays) and
        #: {element: (a weak reference to the last call's array, its address)}: the same
        #: array object again keeps its address (0.5 us a pointer on Zen 3: 160 of an Adam
        #: step's 0.4 ms), and nothing here keeps it alive.
        self.keep = frozenset(nw.unread)
        self.last: dict[int, tuple[weakref.ref[np.ndarray], int]] = {}
        # copy records (dst, src, bytes): old values of moved elements out, the copied
        # results in, the moved values in; a word is a constant, a state buffer's address
        # ("p", k) or a body table entry ("b", r), read after the state is bound
        recs: list[tuple[tuple[str, int], tuple[str, int], int]] = []
        recs += [(("c", tmp), ("p", j), nbytes[j]) for _, j, tmp in p.moved]
        recs += [(("p", k), ("b", r), nbytes[k]) for k, r in p.copied]
        recs += [(("p", k), ("c", tmp), nbytes[k]) for k, _, tmp in p.moved]
        recs = [r for r in recs if r[2]]
        self.copies = np.frombuffer(p.copies, np.int64)
        self.statep = np.frombuffer(p.statep, np.int64)[:len(nbytes)]
        at: dict[str, tuple[list[int], list[int]]] = {"p": ([], []), "b": ([], [])}
        for n, (dst, src, size) in enumerate(recs):
            for w, (kind, x) in enumerate((dst, src)):
                if kind == "c":
                    self.copies[3 * n + w] = x
                else:
                    at[kind][0].append(3 * n + w)
                    at[kind][1].append(x)
            self.copies[3 * n + 2] = size
        self.from_state = (_ix(at["p"][0]), _ix(at["p"][1]))
        self.from_body = (_ix(at["b"][0]), _ix(at["b"][1]))
        p.desc[5] = len(recs)

    def bind(self, bufs: list[np.ndarray], others: dict[int, np.ndarray]) -> np.ndarray:
        """Point the tables at `bufs` (the swapped elements' second buffers: `others`);
        returns the buffers' addresses."""
        last, keep = self.last, self.keep
        words = []
        for k, b in enumerate(bufs):
            got = last.get(k)
            if got is not None and got[0]() is b:
                words.append(got[1])
                continue
            words.append(ptr(b))
            if k in keep:
                last[k] = (weakref.ref(b), words[-1])
        ptrs = np.array(words, np.int64)
        self.statep[:] = ptrs
        for tab, (slots, ks) in zip(self.tabs, self.state):
            tab[slots] = ptrs[ks]
        if self.swap_k:
            self.tabs[1][self.swap_r] = [ptr(others[k]) for k in self.swap_k]
            self.cells[:] = ptrs[self.swap_kx]
        pos, ks = self.from_state
        self.copies[pos] = ptrs[ks]
        pos, rs = self.from_body
        self.copies[pos] = self.tabs[1][rs]
        return ptrs


#: Bytes of state up to which a top-level loop keeps state buffers of its own (`Kept`).
KEPT_BYTES = 1 << 16


class Kept:
    """A small loop's own state buffers (and swapped elements' second buffers), bound into
    p's tables once: a call copies the state into the buffers the tables point at (where
    the last call's swaps left them) and copies the final state out.
    Binding fresh buffers cost ~8 us of the ~18 us a call of a threefry loop (jax.random)
    spent in Python; the copies of a few hundred bytes cost less than taking their
    addresses. Bigger states keep `bind` (a copy out would double their traffic)."""

    def __init__(self, nw: NativeWhile, p: _Prepared, state: tuple[Any, ...]) -> None:
        self.bufs = [np.empty(np.shape(v), np.asarray(v).dtype) for v in state]
        self.others = {k: np.empty_like(self.bufs[k]) for k, _ in nw.swapped}
        bind(nw, p, self.bufs, self.others)
        b: Binder = p.binder
        self.cells = b.cells
        self.cells0 = self.cells.copy()
        #: (table, indices, their words as bound): the entries a swap exchanges (the state
        #: slots of swapped elements in both tables, their result slots in the body's)
        self.restore: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        swapped = set(b.swap_k)
        for j, (tab, (slots, ks)) in enumerate(zip(b.tabs, b.state)):
            ix = [int(s) for s, k in zip(slots, ks) if int(k) in swapped]
            ix += [int(r) for r in b.swap_r] if j == 1 else []
            if ix:
                self.restore.append((tab, _ix(ix), tab[_ix(ix)].copy()))
        #: (state index, swap cell index, the second buffer's address) of swapped elements
        self.swaps = [(k, j, ptr(self.others[k])) for j, (k, _) in enumerate(nw.swapped)]
        #: Per element: whether anyone reads it after the loop (its users all take other
        #: elements: a fori_loop's counter, a branch trip's operands); those no one reads
        #: come back as the loop's own buffers, not copies.
        read = read_after(nw.instruction)
        self.read = [read is None or k in read for k in range(len(state))]

        #: Per element, the buffer the tables point at now: a swapped element's is the
        #: one its cell names when the last call ended (the driver leaves the cells, state
        #: and result entries consistent), so a call copies in there instead of restoring
        #: the words (two fancy-index writes: ~1.5 us of a small loop's ~10 us call).
        self.cur = list(self.bufs)

    def run(self, state: tuple[Any, ...], drive: Any) -> tuple[Any, Any]:
        """drive() over `state` copied in; (the final state as fresh arrays, its result)."""
        cur = self.cur
        for buf, v in zip(cur, state):
            buf[...] = v  # (np.copyto: ~0.4-0.8 us an element more)
        try:
            got = drive()
        except BaseException:
            self._reset()
            raise
        for k, j, other in self.swaps:  # a swapped element ends where its cell points
            cur[k] = self.others[k] if self.cells[j] == other else self.bufs[k]
        if got is not None:  # (the rest of the loop runs through Python, from all of them)
            return tuple(b.copy() for b in cur), got
        return tuple(b.copy() if r else b for b, r in zip(cur, self.read)), got

    def _reset(self) -> None:
        """The bound words back (a call that raised may have stopped anywhere)."""
        for tab, ix, words in self.restore:
            tab[ix] = words
        self.cells[:] = self.cells0
        self.cur = list(self.bufs)


#: Bytes up to which a loop's initial state element of one repeated constant is a buffer.
STATIC_INIT_BYTES = 4096


def static_value(instr: Instruction, owned: set[int]) -> np.ndarray | None:
    """The value of `instr` as a compile-time buffer, or None (it is computed per call): a
    constant's, and a small broadcast of a constant that only a loop's initial state reads
    (`owned`: native_loop.owned_init; a fori_loop's zeros carry), which the loop copies in
    (Kept) or never writes (a passed-through element): a kernel call per program call less
    (~3.5 us of a 40 us jnp.linalg.qr fori_loop) and a kernel fewer to compile. The
    broadcast is the op's own evaluation (ops/shape.py)."""
    if instr.opcode == "constant":
        return np.array(instr.attrs.literal.to_numpy(), order="C")
    c = instr.operands[0] if instr.opcode == "broadcast_in_dim" else None
    if c is None or c.opcode != "constant" or id(instr) not in owned or \
            instr.shape.num_elements * instr.shape.dtype.itemsize > STATIC_INIT_BYTES:
        return None
    value = OPS["broadcast_in_dim"].evaluate([c.attrs.literal.to_numpy()], instr.attrs,
                                             instr.shape, None)
    return np.array(value, dtype=instr.shape.dtype, order="C")


def read_after(w: Instruction | None) -> set[int] | None:
    """The tuple elements the users of `w` read (a loop's state, a custom call's results),
    when every user is a get_tuple_element; else None (any may be read: the whole tuple is
    a value)."""
    if w is None or not w.shape.is_tuple or not w.users or any(
            u.opcode != "get_tuple_element" for u in w.users):
        return None
    return {u.attrs.index for u in w.users}


def unread_after(instr: Instruction | None, results: list[int | None]) -> set[int]:
    """The state elements a loop passes through (results[k] None) that no user of the
    while reads (read_after)."""
    read = read_after(instr)
    return set() if read is None else {k for k, r in enumerate(results)
                                       if r is None and k not in read}


def kept(nw: NativeWhile, p: _Prepared, state: tuple[Any, ...]) -> Kept | None:
    """p's Kept buffers for a small state (made on its first call), else None."""
    if p.kept is None:
        small = sum(np.asarray(v).nbytes for v in state) <= KEPT_BYTES
        p.kept = Kept(nw, p, state) if small else False
    return p.kept or None


def bind(nw: NativeWhile, p: _Prepared, bufs: list[np.ndarray],
         others: dict[int, np.ndarray]) -> None:
    """NativeWhile._bind: the binder made on p's first call (its buffers' sizes are the
    loop's static shapes: the same every call)."""
    b: Any = p.binder
    if b is None:
        b = p.binder = Binder(nw, p, [x.nbytes for x in bufs])
    p.bound = b.bind(bufs, others)


__all__ = ["Binder", "Kept", "KEPT_BYTES", "STATIC_INIT_BYTES", "bind", "kept", "read_after",
           "static_value", "unread_after"]
