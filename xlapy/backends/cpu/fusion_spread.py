"""When the cpu fusion gives a value a buffer rather than recomputing it in the kernels that
read it (fusion_plan.py's chooser asks): a transcendental value a kernel would compute many
times per element (through a broadcast along an outer dimension, a gather, short rows), and
the ops too costly to recompute in several kernels at all."""

from __future__ import annotations

from xlapy.backends.cpu.interleave_emit import LONG_F32
from xlapy.backends.cpu.short_reduce import SHORT_HEAVY, holds_fold
from xlapy.ir import Instruction

#: A value over transcendental (or divide, sqrt) ops that a kernel reads through broadcasts
#: at least this many times per element, along a dimension outside one it varies in (so the
#: emitter's hoisting cannot compute it once per row), or through a gather (a table lookup),
#: gets a buffer: rotary embeddings fused the cos/sin of a [512, 32] angle table into the
#: [8, 512, 16, 32] product, a cosine per element of it (16 x 8 times the work), and
#: jnp.interp computed the sine of its 100 knots at each of 1M lookups.
SPREAD = 16
#: ... when the broadcast copies have at least this many elements (a small kernel's extra
#: launch would cost more than the recomputation saves).
SPREAD_ELEMENTS = 1 << 14
#: ... or along rows of at most this many (a kernel over [n, n, 3] pairwise differences runs
#: scalar loops of 3), when it has at least SHORT_ROW_VALUES elements: an n-body step's
#: r2 ** 1.5 was a scalar pow per pair, 2.4 ms for 256 bodies (XLA 0.6); of SHORT_HEAVY
#: when it holds a fold (log_softmax's log of its sum: the row kernel ran it a row at a time).
SHORT_ROW = 8
SHORT_ROW_VALUES = 1 << 10
#: Float ops evaluated in f64 or by a runtime call per lane (libm_f32.py,
#: elementwise_libm.py: ~2.5 ns an f32 element, 10 ns an f64 one, where a buffer's write and
#: read cost ~0.3): a value over one that COSTLY_ELEMENTS or more elements of several
#: kernels need gets a buffer. jnp.polyfit's vander(x) ** 2 summed and vander(x) / scale
#: computed its powers twice (1.3x XLA's time).
COSTLY = LONG_F32  # (interleave_emit's long f64-evaluated ops: the same four)
COSTLY_ELEMENTS = 1 << 10


def spread(instr: Instruction) -> str | None:
    """Why a kernel reading `instr` through its broadcasts would recompute it SPREAD or more
    times per element, along a dimension outer to one it varies in (None: it would not)."""
    n = max(1, instr.shape.num_elements)
    for u in instr.users:
        if u.opcode == "gather" and u.operands[0] is instr and \
                u.shape.num_elements >= max(SPREAD * n, SPREAD_ELEMENTS):
            return (f"{instr.opcode} read {u.shape.num_elements // n} times per element "
                    f"through gather %{u.name}: a buffer, not a recomputation")
        if u.opcode == "gather" and u.operands[1] is instr and \
                u.shape.num_elements >= max(SPREAD * n, SPREAD_ELEMENTS):
            off = tuple(u.attrs.dimension_numbers.offset_dims)
            batch = [d for d in range(u.shape.rank) if d not in off]
            if off and batch and min(off) < max(batch):
                return (f"{instr.opcode} indices read {u.shape.num_elements // n} times each "
                        f"through gather %{u.name} (a window dimension outside theirs): a "
                        f"buffer, not a recomputation")
        dims = list(range(instr.shape.rank))  # instr's dimension k is dims[k] of u
        while u.opcode == "broadcast_in_dim":
            bd = tuple(u.attrs.broadcast_dimensions)
            dims = [bd[d] for d in dims]
            out = u.shape.dimensions
            varying = [d for k, d in enumerate(dims) if instr.shape.dimensions[k] > 1]
            # (a size-1 dimension broadcast out is added too: jnp's keepdims scales)
            added = [d for d in range(len(out)) if d not in varying and out[d] > 1]
            if (u.shape.num_elements >= max(SPREAD * n, SPREAD_ELEMENTS) and varying
                    and added and min(added) < max(varying)):
                return (f"{instr.opcode} read {u.shape.num_elements // n} times per element "
                        f"through broadcast %{u.name}: a buffer, not a recomputation")
            if varying and max(varying) < len(out) - 1 and n >= SHORT_ROW_VALUES and (
                    1 < out[-1] <= SHORT_ROW or (out[-1] <= SHORT_HEAVY and holds_fold(instr))):
                return (f"{instr.opcode} constant along the {out[-1]}-element rows of "
                        f"broadcast %{u.name}: a buffer computed in lanes, not once per row "
                        f"of a scalar kernel")
            if len(u.users) != 1:
                break
            u = u.users[0]
    return None


def reduced_elsewhere(instr: Instruction, readers: list[Instruction]) -> str | None:
    """Why a transcendental value that several kernels read, one of them a reduction of its
    own (not a row reduction inside a kernel), gets a buffer: each kernel would compute it
    again, and the reduction's (a column sum) does not vectorize it as well. softmax(x,
    axis=0) computed exp(x - max) in the sum's kernel and the divide's: one thread 1.24 ms,
    0.85-0.94 with it written once (XLA 0.66 on two)."""
    red = next((r for r in readers if r.opcode == "reduce"), None)
    if red is None or len(readers) < 2 or instr.shape.num_elements < SPREAD_ELEMENTS:
        return None
    return (f"{instr.opcode} read by {len(readers)} kernels, reduce %{red.name} among them: "
            f"a buffer written once, not a transcendental computed in each")


__all__ = ["COSTLY", "COSTLY_ELEMENTS", "SHORT_ROW", "SHORT_ROW_VALUES", "SPREAD",
           "SPREAD_ELEMENTS", "reduced_elsewhere", "spread"]
