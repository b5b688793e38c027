"""Gather and scatter against XLA (through jax) on the same inputs.

Two kinds of check:
* jax front-end programs (`x[idx]`, `x.at[idx].add(v)`, `take_along_axis`, `segment_sum`...)
  are traced to a jaxpr and evaluated with every gather/scatter run by our interpreter (with
  jax's own dimension numbers) and every other primitive by jax; the result is compared with
  `jax.jit` of the whole program.
* randomized dimension numbers (batching dims, index_vector_dim anywhere, out-of-bounds
  indices) call `jax.lax.gather` / `jax.lax.scatter_*` directly.

Tolerances: gathers and integer scatters are exact; float scatters are exact too (XLA's CPU
backend applies updates in index order, as we do), except where stated.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.differential.compare import assert_same, jax_x64

jax = jax_x64()
jnp = jax.numpy
lax = jax.lax

import xlapy  # noqa: E402
from xlapy import ElementType, Shape, XlaBuilder  # noqa: E402
from xlapy.builder import ops  # noqa: E402
from xlapy.types import from_dtype  # noqa: E402

GSM = lax.GatherScatterMode
CLIENT = xlapy.Client()

# ---- running our ops ---------------------------------------------------------------------------


def _param(b: XlaBuilder, n: int, x: np.ndarray) -> Any:
    return ops.Parameter(b, n, Shape.array(from_dtype(x.dtype), x.shape))


def _run(comp: Any, args: list[np.ndarray]) -> Any:
    return CLIENT.execute_and_transfer(comp, args).to_value()


def combiner(kind: str, ets: list[ElementType]) -> Any:
    """An update computation over N inputs applying `kind` component-wise."""
    n = len(ets)
    b = XlaBuilder(f"upd_{kind}")
    ps = [ops.Parameter(b, i, Shape.scalar(ets[i % n])) for i in range(2 * n)]
    outs = []
    for k in range(n):
        cur, upd = ps[k], ps[n + k]
        if kind == "replace":
            outs.append(upd)
        else:
            outs.append(b.add_op(kind, [cur, upd], api_name=kind))
    if n > 1:
        ops.Tuple(b, outs)
    return b.build(outs[0] if n == 1 else None)


def move_index_vector(idx: np.ndarray, batching: tuple[int, ...], rng: np.random.Generator
                      ) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """jax keeps the index vector last; put it at a random `index_vector_dim` (or drop it)."""
    last = idx.ndim - 1
    if idx.shape[-1] == 1 and rng.random() < 0.3:
        return idx[..., 0], last, batching
    ivd = int(rng.integers(0, idx.ndim))
    moved = np.moveaxis(idx, -1, ivd)
    return moved, ivd, tuple(d if d < ivd else d + 1 for d in batching)


def our_gather(operand: np.ndarray, idx: np.ndarray, dn: Any, slice_sizes: Any,
               rng: np.random.Generator, sorted_: bool = False) -> np.ndarray:
    idx2, ivd, sibd = move_index_vector(np.asarray(idx), tuple(dn.start_indices_batching_dims),
                                        rng)
    b = XlaBuilder("gather")
    dnums = ops.GatherDimensionNumbers(tuple(dn.offset_dims), tuple(dn.collapsed_slice_dims),
                                       tuple(dn.start_index_map), ivd,
                                       tuple(dn.operand_batching_dims), sibd)
    ops.Gather(_param(b, 0, operand), _param(b, 1, idx2), dnums, slice_sizes, sorted_)
    return _run(b.build(), [operand, idx2])


def our_scatter(kind: str, inputs: list[np.ndarray], idx: np.ndarray, updates: list[np.ndarray],
                dn: Any, rng: np.random.Generator, unique: bool = False) -> Any:
    idx2, ivd, sibd = move_index_vector(np.asarray(idx),
                                        tuple(dn.scatter_indices_batching_dims), rng)
    n = len(inputs)
    b = XlaBuilder("scatter")
    xs = [_param(b, i, x) for i, x in enumerate(inputs)]
    ip = _param(b, n, idx2)
    us = [_param(b, n + 1 + i, u) for i, u in enumerate(updates)]
    dnums = ops.ScatterDimensionNumbers(tuple(dn.update_window_dims),
                                        tuple(dn.inserted_window_dims),
                                        tuple(dn.scatter_dims_to_operand_dims), ivd,
                                        tuple(dn.operand_batching_dims), sibd)
    upd = combiner(kind, [from_dtype(x.dtype) for x in inputs])
    ops.Scatter(xs if n > 1 else xs[0], ip, us if n > 1 else us[0], upd, dnums,
                unique_indices=unique)
    return _run(b.build(), [*inputs, idx2, *updates])


# ---- evaluating jaxprs with our gather/scatter -------------------------------------------------
_SCATTER_KINDS = {"scatter-add": "add", "scatter-mul": "multiply", "scatter-min": "minimum",
                  "scatter-max": "maximum", "scatter": "replace", "scatter-sub": "subtract"}


def _fill_mask(idx: np.ndarray, operand_shape: tuple[int, ...], dn: Any, sizes: Any,
               result_ndim: int) -> np.ndarray:
    """jax's FILL_OR_DROP gather: which result positions read an in-bounds window."""
    ok = np.ones(idx.shape[:-1], dtype=bool)
    for k, d in enumerate(dn.start_index_map):
        ok &= (idx[..., k] >= 0) & (idx[..., k] <= operand_shape[d] - sizes[d])
    shape, it = [], iter(ok.shape)
    for r in range(result_ndim):
        shape.append(1 if r in dn.offset_dims else next(it))
    return ok.reshape(shape)


def _default_fill(dtype: np.dtype) -> Any:
    if dtype == np.bool_:
        return True
    if dtype.kind in "fc":
        return np.nan
    return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max


def _eval_jaxpr(jaxpr: Any, consts: list[Any], args: list[Any], seen: list[str],
                rng: np.random.Generator) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if type(v).__name__ == "Literal" else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        name, p = eqn.primitive.name, eqn.params
        if name == "gather":
            operand, idx = (np.asarray(x) for x in ins)
            out = our_gather(operand, idx, p["dimension_numbers"], p["slice_sizes"], rng,
                             p["indices_are_sorted"])
            if p["mode"] == GSM.FILL_OR_DROP:
                fill = p["fill_value"]
                fill = _default_fill(out.dtype) if fill is None else fill
                mask = _fill_mask(idx, operand.shape, p["dimension_numbers"], p["slice_sizes"],
                                  out.ndim)
                out = np.where(mask, out, np.asarray(fill, dtype=out.dtype))
            else:
                assert p["mode"] in (GSM.PROMISE_IN_BOUNDS, GSM.CLIP), p["mode"]
            outs = [out]
            seen.append(name)
        elif name in _SCATTER_KINDS:
            assert p["mode"] in (GSM.FILL_OR_DROP, GSM.PROMISE_IN_BOUNDS), p["mode"]
            operand, idx, upd = (np.asarray(x) for x in ins)
            outs = [our_scatter(_SCATTER_KINDS[name], [operand], idx, [upd],
                                p["dimension_numbers"], rng, p["unique_indices"])]
            seen.append(name)
        elif name in ("pjit", "jit", "closed_call", "core_call"):
            sub = p.get("jaxpr", p.get("call_jaxpr"))
            outs = _eval_jaxpr(sub.jaxpr, sub.consts, ins, seen, rng)
        else:
            res = eqn.primitive.bind(*ins, **p)
            outs = list(res) if eqn.primitive.multiple_results else [res]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def check_program(fn: Any, *args: Any, expect: str, seed: int = 0) -> None:
    """fn(*args) with our gather/scatter == jax.jit(fn)(*args), exactly."""
    rng = np.random.default_rng(seed)
    closed = jax.make_jaxpr(fn)(*args)
    seen: list[str] = []
    ours = _eval_jaxpr(closed.jaxpr, closed.consts, [jnp.asarray(a) for a in args], seen, rng)
    assert any(s.startswith(expect) for s in seen), f"the program did not use {expect}: {seen}"
    theirs = jax.jit(fn)(*args)
    theirs = theirs if isinstance(theirs, (tuple, list)) else [theirs]
    for o, t in zip(ours, theirs):
        assert_same(np.asarray(o), np.asarray(t), what=expect)


# ---- numpy-style programs ------------------------------------------------------------------------
R = np.random.default_rng(1234)
X = R.standard_normal((7, 5, 3)).astype(np.float32)
I3 = np.array([1, -2, 6, 1])
J3 = np.array([0, 4, -1, 4])

GATHER_PROGRAMS = [
    ("x[i]", lambda x, i, j: x[i]),
    ("x[:, j]", lambda x, i, j: x[:, j]),
    ("x[i, j]", lambda x, i, j: x[i, j]),
    ("x[:, j, 1:]", lambda x, i, j: x[:, j, 1:]),
    ("x[i[:, None], j[None, :]]", lambda x, i, j: x[i[:, None], j[None, :]]),
    ("x[i, :, i % 3]", lambda x, i, j: x[i, :, i % 3]),
    ("x[..., 2][i]", lambda x, i, j: x[..., 2][i]),
    ("take axis 1", lambda x, i, j: jnp.take(x, j, axis=1)),
    ("take clip", lambda x, i, j: jnp.take(x, i * 3, axis=0, mode="clip")),
    ("take fill", lambda x, i, j: jnp.take(x, i * 3, axis=0, mode="fill", fill_value=-1.0)),
    ("x.at[i].get(mode=promise)", lambda x, i, j: x.at[i].get(mode="promise_in_bounds")),
]


@pytest.mark.parametrize("name,fn", GATHER_PROGRAMS, ids=[g[0] for g in GATHER_PROGRAMS])
def test_numpy_style_gather(name: str, fn: Any) -> None:
    check_program(fn, X, I3, J3, expect="gather")


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint16, np.float64, np.complex64,
                                   np.bool_, jnp.bfloat16, np.float16])
def test_gather_dtypes(dtype: Any) -> None:
    x = (R.standard_normal((6, 4)) * 10).astype(dtype)
    check_program(lambda x, i: x[i, 1:3], x, np.array([[0, 5], [-1, 2]], np.int32),
                  expect="gather")


def test_take_along_axis_uses_batching_dims() -> None:
    idx = R.integers(-5, 5, size=(7, 2, 3))
    check_program(lambda x, i: jnp.take_along_axis(x, i, axis=1), X, idx, expect="gather")
    idx_oob = R.integers(-8, 8, size=(7, 4, 3))  # beyond -5..4 is filled (jax's mode)
    check_program(lambda x, i: jnp.take_along_axis(x, i, axis=1, mode="fill"), X, idx_oob,
                  expect="gather")


SCATTER_PROGRAMS = [
    ("x.at[i].add", lambda x, i, v: x.at[i].add(v[: len(i)])),
    ("x.at[i].set", lambda x, i, v: x.at[i].set(v[: len(i)] * 2)),
    ("x.at[i].min", lambda x, i, v: x.at[i].min(v[: len(i)])),
    ("x.at[i].max", lambda x, i, v: x.at[i].max(v[: len(i)])),
    ("x.at[i].mul", lambda x, i, v: x.at[i].mul(v[: len(i)])),
    ("x.at[:, i].add", lambda x, i, v: x.at[:, i % 5].add(jnp.ones((7, len(i), 3), x.dtype))),
    ("x.at[i, i % 5].add", lambda x, i, v: x.at[i, i % 5].add(v[: len(i), 0])),
    ("x.at[i, 1:3].set", lambda x, i, v: x.at[i, 1:3].set(v[: len(i), :2])),
    ("x.at[i].add oob dropped", lambda x, i, v: x.at[i * 3].add(v[: len(i)], mode="drop")),
    ("segment_sum", lambda x, i, v: jax.ops.segment_sum(v, jnp.abs(i) % 3, 4)),
    ("segment_max", lambda x, i, v: jax.ops.segment_max(v, jnp.abs(i) % 3, 4)),
]


@pytest.mark.parametrize("name,fn", SCATTER_PROGRAMS, ids=[s[0] for s in SCATTER_PROGRAMS])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_numpy_style_scatter(name: str, fn: Any, dtype: Any) -> None:
    x = (X * 10).astype(dtype)
    v = (R.standard_normal((4, 5, 3)) * 10).astype(dtype)
    # Unique indices for set/mul on floats: with duplicates the order would matter.
    i = np.array([1, -2, 6, 0]) if "set" in name else I3
    check_program(fn, x, i, v, expect="scatter")


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.float64, np.complex128, jnp.bfloat16,
                                   np.float16])
def test_scatter_add_dtypes(dtype: Any) -> None:
    x = (R.standard_normal((6, 4)) * 4).astype(dtype)
    v = (R.standard_normal((5, 4)) * 4).astype(dtype)
    check_program(lambda x, i, v: x.at[i].add(v), x, np.array([0, 5, 0, -1, 2]), v,
                  expect="scatter-add")


# ---- randomized dimension numbers ----------------------------------------------------------
def _random_batch(rng: np.random.Generator, batching_sizes: list[int]
                  ) -> tuple[list[int], tuple[int, ...]]:
    """A batch shape containing the batching sizes at random positions."""
    extra = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))]
    n = len(extra) + len(batching_sizes)
    pos = sorted(rng.choice(n, len(batching_sizes), replace=False).tolist()) if n else []
    order = rng.permutation(len(batching_sizes)).tolist()
    shape, ex = [], iter(extra)
    where = dict(zip(pos, order))
    for p in range(n):
        shape.append(batching_sizes[where[p]] if p in where else next(ex))
    sibd = tuple(p for p, _ in sorted(where.items(), key=lambda kv: kv[1]))
    return shape, sibd


def _random_layout(rng: np.random.Generator) -> dict[str, Any]:
    r = int(rng.integers(1, 5))
    dims = [int(rng.integers(1, 6)) for _ in range(r)]
    perm = rng.permutation(r).tolist()
    nbat = int(rng.integers(0, min(2, r - 1) + 1))
    obd = tuple(sorted(perm[:nbat]))
    rest = perm[nbat:]
    k = int(rng.integers(1, len(rest) + 1))
    sim = tuple(rest[:k])
    collapsed = tuple(sorted(d for d in rest if rng.random() < 0.5))
    batch, sibd = _random_batch(rng, [dims[d] for d in obd])
    return dict(r=r, dims=dims, obd=obd, sim=sim, collapsed=collapsed, batch=batch, sibd=sibd)


def _random_indices(rng: np.random.Generator, batch: list[int], sim: tuple[int, ...],
                    hi: list[int], oob: bool) -> np.ndarray:
    idx = np.empty(batch + [len(sim)], dtype=np.int64)
    for k, d in enumerate(sim):
        lo, top = (-2, hi[d] + 2) if oob else (0, hi[d])
        idx[..., k] = rng.integers(lo, top + 1, size=batch)
    return idx


@pytest.mark.parametrize("seed", range(24))
def test_random_gather(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lay = _random_layout(rng)
    dims, obd, collapsed = lay["dims"], lay["obd"], lay["collapsed"]
    sizes = tuple(1 if d in obd or d in collapsed else int(rng.integers(1, dims[d] + 1))
                  for d in range(lay["r"]))
    noff = lay["r"] - len(collapsed) - len(obd)
    res_rank = len(lay["batch"]) + noff
    offset = tuple(sorted(rng.choice(res_rank, noff, replace=False).tolist()))
    dn = lax.GatherDimensionNumbers(offset, collapsed, lay["sim"], obd, lay["sibd"])
    idx_dtype = [np.int32, np.int64, np.int8, np.uint8][seed % 4]
    idx = _random_indices(rng, lay["batch"], lay["sim"],
                          [n - s for n, s in zip(dims, sizes)], oob=idx_dtype != np.uint8)
    idx = idx.astype(idx_dtype) if idx_dtype != np.uint8 else np.abs(idx).astype(np.uint8)
    operand = rng.integers(-100, 100, size=dims).astype([np.int32, np.float32][seed % 2])
    theirs = jax.jit(lambda o, i: lax.gather(o, i, dn, sizes, mode=GSM.PROMISE_IN_BOUNDS))(
        operand, idx)
    ours = our_gather(operand, idx, dn, sizes, rng)
    assert_same(ours, theirs, what=f"gather {dn} {sizes}")


_LAX_SCATTER = {"add": lax.scatter_add, "multiply": lax.scatter_mul, "minimum": lax.scatter_min,
                "maximum": lax.scatter_max, "replace": lax.scatter}


@pytest.mark.parametrize("seed", range(30))
def test_random_scatter(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    lay = _random_layout(rng)
    dims, obd, inserted = lay["dims"], lay["obd"], lay["collapsed"]
    window_dims = [d for d in range(lay["r"]) if d not in obd and d not in inserted]
    wsizes = [int(rng.integers(1, dims[d] + 1)) for d in window_dims]
    urank = len(lay["batch"]) + len(window_dims)
    uwd = tuple(sorted(rng.choice(urank, len(window_dims), replace=False).tolist()))
    ushape, b_it, w_it = [], iter(lay["batch"]), iter(wsizes)
    for p in range(urank):
        ushape.append(next(w_it) if p in uwd else next(b_it))
    dn = lax.ScatterDimensionNumbers(uwd, inserted, lay["sim"], obd, lay["sibd"])
    hi = list(dims)
    for d, w in zip(window_dims, wsizes):
        hi[d] = dims[d] - w
    kind = list(_LAX_SCATTER)[seed % 5]
    dtype = [np.int32, np.float32, np.int64, np.float64, np.uint8][seed % 5 if kind != "multiply"
                                                                  else 0]
    idx = _random_indices(rng, lay["batch"], lay["sim"], hi, oob=seed % 3 != 0)
    operand = rng.integers(0, 50, size=dims).astype(dtype)
    upd = rng.integers(0, 50, size=ushape).astype(dtype)
    if kind == "replace" and seed % 2:
        upd = upd * 0 + 7  # duplicates write the same value: order does not matter
    fn = _LAX_SCATTER[kind]
    theirs = jax.jit(lambda o, i, u: fn(o, i, u, dn, mode=GSM.FILL_OR_DROP))(operand, idx, upd)
    ours = our_scatter(kind, [operand], idx, [upd], dn, rng)
    assert_same(ours, theirs, what=f"scatter {kind} {dn}")


def test_scatter_window_partly_out_of_bounds_is_dropped_whole() -> None:
    rng = np.random.default_rng(7)
    x = np.zeros((5, 4), np.int32)
    idx = np.array([[3], [4], [-1], [0]])
    upd = np.ones((4, 2, 4), np.int32)
    dn = lax.ScatterDimensionNumbers((1, 2), (), (0,))
    theirs = jax.jit(lambda o, i, u: lax.scatter_add(o, i, u, dn,
                                                     mode=GSM.PROMISE_IN_BOUNDS))(x, idx, upd)
    ours = our_scatter("add", [x], idx, [upd], dn, rng)
    assert_same(ours, theirs)
    assert ours.sum() == 16  # rows 3-4 and 0-1 only


def test_gather_out_of_bounds_clamps() -> None:
    rng = np.random.default_rng(8)
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    idx = np.array([[-7, 9], [4, 1], [2, -1]])
    dn = lax.GatherDimensionNumbers((1, 2), (), (0, 1))
    theirs = jax.jit(lambda o, i: lax.gather(o, i, dn, (3, 2),
                                             mode=GSM.PROMISE_IN_BOUNDS))(x, idx)
    assert_same(our_gather(x, idx, dn, (3, 2), rng), theirs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_float_scatter_add_duplicates_in_order(dtype: Any) -> None:
    """Many float updates to few positions: XLA's CPU order equals ours (exact)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(3).astype(dtype) if dtype != np.int16 else np.zeros(3, dtype)
    upd = (rng.standard_normal(200) * 1000).astype(dtype)
    idx = rng.integers(0, 3, size=(200, 1))
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    theirs = jax.jit(lambda o, i, u: lax.scatter_add(o, i, u, dn))(x, idx, upd)
    assert_same(our_scatter("add", [x], idx, [upd], dn, rng), theirs)


def test_variadic_scatter_matches_per_input_scatters() -> None:
    """No variadic scatter in jax: each result must equal the single-input scatter."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 9, size=(6, 3)).astype(np.int32)
    c = rng.standard_normal((6, 3)).astype(np.float64)
    idx = np.array([[1], [4], [1], [7]])
    ua = rng.integers(0, 9, size=(4, 3)).astype(np.int32)
    uc = rng.standard_normal((4, 3)).astype(np.float64)
    dn = lax.ScatterDimensionNumbers((1,), (0,), (0,))
    ours = our_scatter("add", [a, c], idx, [ua, uc], dn, rng)
    assert isinstance(ours, tuple) and len(ours) == 2
    assert_same(ours[0], jax.jit(lambda o, i, u: lax.scatter_add(o, i, u, dn))(a, idx, ua))
    assert_same(ours[1], jax.jit(lambda o, i, u: lax.scatter_add(o, i, u, dn))(c, idx, uc))


# jax has no complex scatter max/min, so those pairs are not generated.
@pytest.mark.parametrize(("kind", "dtype"), [
    (k, d) for k in ("add", "maximum", "minimum", "multiply")
    for d in (np.float32, np.float64, np.complex64)
    if not (d == np.complex64 and k in ("maximum", "minimum"))])
def test_scatter_float_edge_values(kind: str, dtype: Any) -> None:
    """NaNs, signed zeros, infinities and denormals through duplicate float updates."""
    rng = np.random.default_rng(12)
    tiny = np.finfo(np.float32).tiny
    pool = np.array([np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -2.5, tiny / 4, -tiny / 8, tiny],
                    np.float64)
    x = rng.choice(pool, size=6).astype(dtype)
    upd = rng.choice(pool, size=40).astype(dtype)
    idx = rng.integers(0, 6, size=(40, 1))
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    fn = _LAX_SCATTER[kind]
    theirs = jax.jit(lambda o, i, u: fn(o, i, u, dn))(x, idx, upd)
    ours = our_scatter(kind, [x], idx, [upd], dn, rng)
    assert_same(ours, theirs, what=kind)
    t = np.asarray(theirs)
    if t.dtype.kind == "f":
        zero = (ours == 0) & (t == 0)
        assert (np.signbit(ours[zero]) == np.signbit(t[zero])).all(), "signed zeros differ"


@pytest.mark.parametrize("kind", ["add", "multiply", "maximum"])
def test_long_update_chains_on_few_positions(kind: str) -> None:
    """10000 updates into 2 positions (beyond the round-by-round limit for add/multiply)."""
    rng = np.random.default_rng(13)
    x = np.array([0.5, -1.0], np.float32)
    upd = (1 + rng.standard_normal(10000) * 1e-3).astype(np.float32) if kind == "multiply" \
        else rng.standard_normal(10000).astype(np.float32)
    idx = rng.integers(0, 2, size=(10000, 1))
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    fn = _LAX_SCATTER[kind]
    theirs = jax.jit(lambda o, i, u: fn(o, i, u, dn))(x, idx, upd)
    assert_same(our_scatter(kind, [x], idx, [upd], dn, rng), theirs, what=kind)
