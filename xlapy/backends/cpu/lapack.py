"""Linear algebra, FFT and sorts as library thunks: jaxlib's `lapack_<t><routine>_ffi` custom
calls, cholesky, triangular_solve, fft and sort with a one-compare comparator call scipy's
LAPACK/BLAS wrappers or numpy directly on the slot arrays; a sort with any other element-wise
comparator runs the JIT merge sort (sort_emit.py).

Everything an instruction's attributes decide (FFI attributes, which routine, batch shape,
result types) is decided once, when the executable is planned; a call runs the routine per
matrix into fresh output arrays (so results never alias arguments or the arena: the slots are
native in the ownership sense), with no OpDef.evaluate on the way.

Results are those of the interpreter's kernels (xlapy/ops/custom_call_targets.py,
xlapy/ops/linalg.py, xlapy/ops/reduction_sort.py): the custom calls run the same scipy
routines with the same arguments (but real getrf, lower potrf, left trsm, geqrf and orgqr on
matrices of at most 16 x 16: small_lu.py's and small_qr.py's JIT, LAPACK's pivots and info,
its values within rounding);
cholesky runs the same numpy potrf; fft (fft_lib.py) the same pocketfft in double
precision, DUCC in single (within the transform's rounding); sort the same stable argsort
keys (or, in sort_emit.py, the unique stable order of the comparator). triangular_solve
runs BLAS ?trsm (what XLA's CPU backend and jaxlib call) instead of the interpreter's
row-by-row substitution: the same solution within the solve's rounding error (and inf/NaN,
never an exception, for a singular matrix), and one BLAS call per matrix instead of n numpy
passes.

custom_call targets: the jaxlib LAPACK ones registered by custom_call_targets.py and
custom_call_factorizations.py (unless a program's registry replaced them) run here. A target
jax's CPU lowering uses for Python callbacks (`xla_python_cpu_callback`, ...) names a Python
function in JAX's own process: no xlapy process can run it, so compiling it is an
Unimplemented error, unless someone registered a target of that name. Any other target stays
on the interpreter's custom_call (explain: interpreter fallback), which finds it in the
registry or the per-call RuntimeState.custom_calls, or fails as the interpreter does.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.linalg import blas as sblas
from scipy.linalg import lapack as slapack

from xlapy.backends.cpu import (
    batch_call,
    fft_lib,
    lapack_batch,
    loop_lapack,
    small_lu,
    small_qr,
    transpose_lib,
)
from xlapy.backends.cpu.loop_bind import read_after
from xlapy.errors import Unimplemented, XlapyError
from xlapy.ir import Instruction
from xlapy.ops.custom_call_targets import empty_matrix_results
from xlapy.ops.lapack_threads import matrix_elements, serial
from xlapy.types import Shape

#: (kind for explain, function(*operands) -> value)
Plan = tuple[str, Callable[..., Any]]
_TARGET = re.compile(r"^lapack_([sdcz])(potrf|getrf|geqrf|orgqr|ungqr|syevd|heevd|gesdd|geev"
                     r"|trsm|gtsv|gees|gehrd|gesvd|geqp3|sytrd|hetrd)_ffi$")
#: The modules whose registered targets run here (a target replaced in the registry does not).
_OURS = frozenset({"xlapy.ops.custom_call_targets", "xlapy.ops.custom_call_factorizations"})
#: Targets of jax's host callbacks: a Python callable inside JAX's own process.
HOST_CALLBACKS = frozenset({"xla_python_cpu_callback", "xla_python_gpu_callback",
                            "xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback",
                            "xla_ffi_partitioned_python_cpu_callback"})
#: Elements from which one matrix (no batch) takes the batch loop rather than the f2py call.
ONE_MATRIX_NATIVE = transpose_lib.SWAP_MIN_ELEMENTS
_PREFIX = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def plan(instr: Instruction, threads: int = 1) -> Plan | None:
    """(kind, run) for an instruction this module runs, else None (it runs elsewhere); a
    sort may split over `threads` threads."""
    op = instr.opcode
    if op == "custom_call":
        return _custom_call(instr, threads)
    if op == "cholesky":
        return "lapack", _cholesky(instr)
    if op == "triangular_solve":
        return "blas", serial(_triangular_solve(instr),
                              matrix_elements(instr.operands[0].shape.dimensions))
    if op == "fft":
        run = fft_lib.fft(instr, threads)
        return ("fft (jit)" if getattr(run, "jit", False) else "fft"), run
    if op == "chlo.ragged_dot":
        from xlapy.backends.cpu.library import ragged_dot_plan

        return "blas (ragged dot)", ragged_dot_plan(instr)
    if op == "chlo.top_k":  # (topk_select.py: only when the selection runs it)
        from xlapy.backends.cpu import topk_emit

        run = topk_emit.plan_top_k(instr, threads)
        return None if run is None else ("jit top-k selection", run)
    if op == "sort":
        from xlapy.backends.cpu import topk_emit

        run = topk_emit.plan(instr, threads)  # only the first k read (top_k): a selection
        if run is not None:
            return "jit top-k selection", run
        run = _sort(instr)
        if run is not None:
            return "numpy sort", run
        from xlapy.backends.cpu import sort_emit

        run = sort_emit.plan(instr, threads)
        return None if run is None else ("jit merge sort", run)
    return None


# ---- helpers ------------------------------------------------------------------------------------
def _leaves(result: Shape) -> list[Shape]:
    return list(result.tuple_shapes) if result.is_tuple else [result]


def _batched(one: Callable[..., Sequence[Any]], leaves: Sequence[Shape], rank0: int
             ) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(*operands): `one(*matrices)` for every batch index of operand 0 (its leading
    dimensions before the last `rank0`), stacked into fresh arrays of `leaves`' shapes."""
    shapes = [(tuple(s.dimensions), s.dtype) for s in leaves]

    def run(*operands: np.ndarray) -> tuple[np.ndarray, ...]:
        if operands[0].ndim == rank0 and operands[0].size:  # one matrix: ~8 us less
            return tuple(np.array(v, dtype=t, order="C").reshape(d)  # (copies: fresh)
                         for v, (d, t) in zip(one(*operands), shapes))
        outs = [np.empty(d, t) for d, t in shapes]
        for idx in np.ndindex(*operands[0].shape[:operands[0].ndim - rank0]):
            if operands[0][idx].size == 0:
                got = empty_matrix_results([o[idx] for o in outs])
            else:
                got = one(*(o[idx] for o in operands))
            for out, value in zip(outs, got):
                out[idx] = np.asarray(value).astype(out.dtype, copy=False).reshape(
                    out[idx].shape)
        return tuple(outs)

    return run


def _with_batch(run: Callable[..., tuple[np.ndarray, ...]], many: Callable[..., Any] | None,
                leaves: Sequence[Shape], rank0: int) -> Callable[..., tuple[np.ndarray, ...]]:
    """`many` for two or more non-empty matrices, else `run` (per matrix); one matrix of
    SWAP_MIN_ELEMENTS or more goes to `many` too: the f2py wrappers `run` calls copy it into
    Fortran order and back with numpy's column-at-a-time copies (a 256 x 256 f32 potrf:
    0.27 -> 0.21 ms), where a small one costs more there than in f2py (a 64 x 64 getrf:
    35 us, f2py 16.5: `many`'s copies, marshalling and info check). The largest operand
    decides: a trsm's small triangle with 4096 x 64 right-hand sides went to f2py, on one
    thread, never reaching `many`'s split over the threads (lapack_batch.trsm_part)."""
    if many is None:
        return run
    shapes = [(tuple(s.dimensions), s.dtype) for s in leaves]
    # (small_lu's functions take one matrix too: the bits of the batch and of a native step)
    every = getattr(getattr(many, "func", many), "every", False)

    def go(*operands: np.ndarray) -> tuple[np.ndarray, ...]:
        a = operands[0]
        lead = math.prod(a.shape[:a.ndim - rank0])
        if any(o.size == 0 for o in operands) or (lead < 2 and not every and max(
                o.size for o in operands) < ONE_MATRIX_NATIVE):
            return run(*operands)
        return tuple(np.ascontiguousarray(v, dtype=dt).reshape(d)
                     for v, (d, dt) in zip(many(*operands), shapes))

    return go


def _failing(error: XlapyError) -> Callable[..., Any]:
    """A run that raises `error`: attribute errors the interpreter reports when it runs."""
    def run(*operands: np.ndarray) -> Any:
        raise error

    return run


# ---- custom calls -------------------------------------------------------------------------------
def _custom_call(instr: Instruction, threads: int = 1) -> Plan | None:
    from xlapy.ops.misc import CUSTOM_CALL_TARGETS

    name = instr.attrs.call_target_name
    registered = CUSTOM_CALL_TARGETS.get(name)
    if name in HOST_CALLBACKS and registered is None:
        raise Unimplemented(
            f"custom_call %{instr.name}: target '{name}' is a JAX host callback (a Python "
            "function inside JAX's process); xlapy cannot call it - register a target of "
            "that name (xlapy.ops.misc.register_custom_call) to run this program")
    m = _TARGET.match(name)
    if m is None or getattr(registered, "__module__", None) not in _OURS:
        return None  # unknown, or replaced in the registry: the interpreter's custom_call
    t, routine = m.groups()
    leaves = _leaves(instr.shape)
    try:
        one, rank0, many = _ROUTINES[routine](t, instr, leaves)
    except XlapyError as e:
        return "lapack", _failing(e)
    if many is not None and threads > 1 and routine in _SPLIT:
        many = functools.partial(many, threads=threads)
    run = serial(_with_batch(_batched(one, leaves, rank0), many, leaves, rank0),
                 matrix_elements(instr.operands[0].shape.dimensions))
    out = run if instr.shape.is_tuple else (lambda *ops: run(*ops)[0])
    if many is not None:  # what a native loop's step runs instead (loop_lapack.py)
        out.loop_native = loop_lapack.native(instr, routine, t, _flags(routine, instr))
    return "lapack", out


#: Work (batch x m x n x min(m, n), ~flops) of a batch call from which a program's entry keeps
#: its thunks rather than run as one native trip (branch_loop.entry_trip), whose LAPACK steps
#: run on one thread: Zen 4, 2 threads, same process against XLA, trip -> thunks split over
#: the threads: jnp.linalg.solve 32 x 64 x 64 1.20 -> 0.93, 64 x 48 x 48 1.17 -> 0.80,
#: cho_solve 32 x 64 x 64 1.48 -> 0.97; smaller ones kept the trip (solve 8 x 32 x 32 0.57,
#: thunks 1.19; 8 x 64 x 64 1.02 against 1.28).
SPLIT_WORK = 4 << 20


def splits(instr: Instruction, threads: int) -> bool:
    """Whether custom call `instr` is a LAPACK batch our thunk splits over `threads`
    (batch_call.ranges, of operand 0's matrices as the thunk counts them) with SPLIT_WORK or
    more."""
    m = _TARGET.match(instr.attrs.call_target_name or "") if instr.opcode == "custom_call" \
        else None
    if m is None or m.group(2) not in _SPLIT or not instr.operands:
        return False
    routine, a = m.group(2), instr.operands[0].shape.dimensions
    dims = instr.operands[-1 if routine == "trsm" else 0].shape.dimensions
    if len(a) < 3 or len(dims) < 3:
        return False
    batch = math.prod(a[:-2])
    return batch_call.ranges(threads, batch, a[-1] * a[-2], lapack_batch.split_from(routine)) > 1 \
        and math.prod(dims) * min(dims[-2:]) >= SPLIT_WORK


def _flags(routine: str, instr: Instruction) -> tuple[Any, ...]:
    """potrf's (lower,), syevd's and heevd's (lower, vectors), trsm's (left, lower, trans:
    0 / 1 / 2 for N / T / C, unit)."""
    if routine == "potrf":
        return (_char(instr, "uplo", "LU", "L") == "L",)
    if routine in ("syevd", "heevd"):
        return (_char(instr, "uplo", "LU", "L") == "L", _char(instr, "mode", "VN", "V") == "V")
    if routine != "trsm":
        return ()
    return (_char(instr, "side", "LR", None) == "L", _char(instr, "uplo", "LU", None) == "L",
            "NTC".index(_char(instr, "trans_x", "NTC", None)),
            _char(instr, "diag", "NU", None) == "U")


def _cfg(instr: Instruction) -> dict[str, Any]:
    from xlapy.ops.custom_call_targets import _config

    return _config(instr.attrs)


def _char(instr: Instruction, key: str, allowed: str, default: str | None) -> str:
    from xlapy.ops.custom_call_targets import _char as char

    return char(_cfg(instr), key, allowed, default, instr.attrs.call_target_name)


def _info(target: str) -> Callable[[int], int]:
    from xlapy.ops.custom_call_targets import _check_info

    return lambda info: _check_info(info, target)


#: Routines whose batches split over the threads (batch_call.parts).
_SPLIT = frozenset({"syevd", "gesdd", "geev", "gtsv", "getrf", "potrf", "geqrf", "orgqr",
                    "ungqr", "trsm"})
#: (run one matrix, its rank, run a whole batch in one native loop (lapack_batch.py) or None)
OneAndRank = tuple[Callable[..., Sequence[Any]], int, Callable[..., Any] | None]


def _potrf(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    from xlapy.ops.custom_call_targets import potrf_one

    (lower,) = _flags("potrf", instr)
    factor, info = potrf_one(t, lower), _info(instr.attrs.call_target_name)

    def one(a: np.ndarray) -> Sequence[Any]:
        c, i = factor(a)
        return c, info(i)
    n = instr.operands[0].shape.dimensions[-1]
    return one, 2, small_lu.potrf(t, lower, n, info) or lapack_batch.potrf(t, lower, info)


def _getrf(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    fn, info = slapack.get_lapack_funcs("getrf", dtype=np.dtype(_PREFIX[t])), _info(
        instr.attrs.call_target_name)

    def one(a: np.ndarray) -> Sequence[Any]:
        lu, piv, i = fn(a, overwrite_a=0)
        return lu, piv + 1, info(i)  # LAPACK's 1-based pivots (scipy's are 0-based)
    m, n = instr.operands[0].shape.dimensions[-2:]
    return one, 2, small_lu.getrf(t, m, n, info) or lapack_batch.getrf(t, info)


def _geqrf(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    fn, info = slapack.get_lapack_funcs("geqrf", dtype=np.dtype(_PREFIX[t])), _info(
        instr.attrs.call_target_name)

    def one(a: np.ndarray) -> Sequence[Any]:
        qr, tau, _, i = fn(a, overwrite_a=0)
        info(i)
        return qr, tau
    m, n = instr.operands[0].shape.dimensions[-2:]
    return one, 2, small_qr.geqrf(t, m, n) or lapack_batch.geqrf(t, info)


def _orgqr(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    name = "orgqr" if t in "sd" else "ungqr"
    fn, info = slapack.get_lapack_funcs(name, dtype=np.dtype(_PREFIX[t])), _info(
        instr.attrs.call_target_name)

    def one(a: np.ndarray, tau: np.ndarray) -> Sequence[Any]:
        q, _, i = fn(a, tau, overwrite_a=0)
        info(i)
        return (q,)
    m, n = instr.operands[0].shape.dimensions[-2:]
    k = instr.operands[1].shape.dimensions[-1]
    return one, 2, small_qr.orgqr(t, m, n, k) or lapack_batch.orgqr(t, info)


def _syevd(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    lower, vectors = _flags("syevd", instr)
    name = "syevd" if t in "sd" else "heevd"
    fn, info = slapack.get_lapack_funcs(name, dtype=np.dtype(_PREFIX[t])), _info(
        instr.attrs.call_target_name)

    def one(a: np.ndarray) -> Sequence[Any]:
        w, v, i = fn(a, compute_v=int(vectors), lower=int(lower))
        return (v if vectors else a), w, info(i)
    if t not in "sd":
        return one, 2, None
    if vectors and instr.operands[0].shape.dimensions[-1] <= lapack_batch.STEQR_MAX and \
            not element_read(instr, 0):  # jnp.linalg.eigvalsh: the same eigenvalues
        return one, 2, lapack_batch.syevals(t, lower, info)
    return one, 2, lapack_batch.syevd(t, lower, vectors, info)


def element_read(instr: Instruction, k: int) -> bool:
    """Whether anything may read element `k` of the tuple `instr` returns (loop_bind's
    read_after, or `instr` the root)."""
    read = read_after(instr)
    return read is None or k in read or instr.parent is None or instr.parent.root is instr


def _gesdd(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    from xlapy.ops.custom_call_targets import gesdd_info, gesdd_one

    m, n = instr.operands[0].shape.dimensions[-2:]
    full = leaves[2].dimensions[-2:] == (m, m) and leaves[3].dimensions[-2:] == (n, n)
    mode = _char(instr, "mode", "ASN", "A" if full else "S")
    target = instr.attrs.call_target_name
    shapes = (leaves[2].dimensions[-2:], leaves[3].dimensions[-2:])
    return gesdd_one(t, mode, *shapes, target), 2, lapack_batch.gesdd(
        t, mode, shapes, lambda i: gesdd_info(i, target))


def _geev(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    from xlapy.ops.custom_call_targets import geev_one

    left, right = (_char(instr, k, "NV", "V") == "V" for k in ("compute_left", "compute_right"))
    k = 2 if t in "sd" else 1
    shapes = (leaves[k].dimensions[-2:], leaves[k + 1].dimensions[-2:])
    target = instr.attrs.call_target_name
    return geev_one(t, left, right, shapes, target), 2, lapack_batch.geev(
        t, left, right, shapes, _info(target))


def _trsm(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    from xlapy.ops.custom_call_targets import trsm_one

    left, lower, trans, unit = _flags("trsm", instr)
    small = small_lu.trsm(t, (left, lower, trans, unit), instr.operands[0].shape.dimensions[-1],
                          tuple(instr.operands[1].shape.dimensions[-2:]))
    return trsm_one(t, left, lower, trans, unit), 2, small or lapack_batch.trsm(
        t, left, lower, trans, unit)


def _gtsv(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
    from xlapy.ops.custom_call_targets import gtsv_one

    target = instr.attrs.call_target_name
    return gtsv_one(t, target), 1, lapack_batch.gtsv(t, _info(target))


def _factorization(name: str) -> Callable[[str, Instruction, list[Shape]], OneAndRank]:
    """gees, gehrd, gesvd, geqp3, sytrd / hetrd: the interpreter's own one-matrix functions
    (ops/custom_call_factorizations.py), per matrix."""
    def build(t: str, instr: Instruction, leaves: list[Shape]) -> OneAndRank:
        from xlapy.ops.custom_call_factorizations import BUILDERS

        one, ranks = BUILDERS[name](t, _cfg(instr), leaves, instr.attrs.call_target_name)
        return one, ranks[0], None
    return build


_ROUTINES: dict[str, Callable[[str, Instruction, list[Shape]], OneAndRank]] = {
    "potrf": _potrf, "getrf": _getrf, "geqrf": _geqrf, "orgqr": _orgqr, "ungqr": _orgqr,
    "syevd": _syevd, "heevd": _syevd, "gesdd": _gesdd, "geev": _geev, "trsm": _trsm,
    "gtsv": _gtsv,
    **{name: _factorization(name) for name in ("gees", "gehrd", "gesvd", "geqp3", "sytrd",
                                               "hetrd")},
}


# ---- ops ----------------------------------------------------------------------------------------
def _compute_dtype(instr: Instruction) -> np.dtype:
    from xlapy.ops.linalg import accumulate_dtype

    return accumulate_dtype(instr.shape.element_type)


def _cholesky(instr: Instruction) -> Callable[..., np.ndarray]:
    """numpy's batched potrf on the Hermitian matrix rebuilt from the chosen triangle; a
    matrix that is not positive definite gets NaN in its triangle (as XLA's CPU backend)."""
    acc, out_dtype = _compute_dtype(instr), instr.shape.dtype
    lower = instr.attrs.lower
    dims = tuple(instr.shape.dimensions)
    n = dims[-1]
    cholesky = serial(np.linalg.cholesky, n * n)  # (numpy's potrf on one thread)

    def run(a: np.ndarray) -> np.ndarray:
        x = a.astype(acc, copy=False)
        if not lower:
            x = np.conj(np.swapaxes(x, -1, -2))
        herm = np.tril(x) + np.conj(np.swapaxes(np.tril(x, -1), -1, -2))
        flat = herm.reshape(-1, n, n)
        out = np.zeros_like(flat)
        if flat.size:
            try:
                out = cholesky(flat)
            except np.linalg.LinAlgError:
                for i in range(flat.shape[0]):  # only on failure: which matrices fail
                    try:
                        out[i] = cholesky(flat[i])
                    except np.linalg.LinAlgError:
                        out[i] = np.tril(np.full((n, n), np.nan, flat.dtype))
        out = out.reshape(dims)
        if not lower:
            out = np.conj(np.swapaxes(out, -1, -2))
        return np.array(out, dtype=out_dtype, order="C")

    return run


def _triangular_solve(instr: Instruction) -> Callable[..., np.ndarray]:
    """?trsm per matrix: op(a) x = b (left side) or x op(a) = b, in the accumulation type
    (bf16/f16 in f32), rounded once."""
    from xlapy.ops.linalg import Transpose

    at = instr.attrs
    acc, out_dtype = _compute_dtype(instr), instr.shape.dtype
    fn = sblas.get_blas_funcs("trsm", dtype=acc)
    trans = {Transpose.NO_TRANSPOSE: 0, Transpose.TRANSPOSE: 1, Transpose.ADJOINT: 2}[
        at.transpose_a]
    if acc.kind != "c" and trans == 2:
        trans = 1  # the adjoint of a real matrix is its transpose
    kw = dict(side=int(not at.left_side), lower=int(at.lower), trans_a=trans,
              diag=int(at.unit_diagonal))
    dims = tuple(instr.shape.dimensions)

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.empty(dims, out_dtype)
        if out.size == 0:
            return out
        a, b = a.astype(acc, copy=False), b.astype(acc, copy=False)
        with np.errstate(all="ignore"):
            for idx in np.ndindex(*dims[:-2]):
                out[idx] = fn(1.0, a[idx], b[idx], **kw)
        return out

    return run


def _sort(instr: Instruction) -> Callable[..., Any] | None:
    """A sort whose comparator is one LT/GT compare of operand 0's pair: numpy's stable
    argsort of an order-preserving integer key (reduction_sort._sort_key), then one gather
    per operand. A float key under a FLOAT compare with NaNs present is no strict weak order:
    that call runs the interpreter's merge sort with the compare as numpy's less/greater."""
    from xlapy.ops.reduction import collate
    from xlapy.ops.reduction_sort import _merge_sort, _sort_key, simple_order

    order = simple_order(instr.called[0])
    if order is None or instr.operands[0].shape.element_type.is_complex:
        return None
    descending, compare_type = order
    rank = instr.operands[0].shape.rank
    axis = instr.attrs.dimension % rank if rank else 0
    less = np.greater if descending else np.less  # FLOAT compare: the comparator itself

    def run(*xs: np.ndarray) -> Any:
        if rank == 0:
            return collate([x.copy() for x in xs])
        if len(xs) == 1 and (bits := _unstable_ok(xs[0], compare_type)) is not None:
            return _sort_bits(xs[0], bits, axis, descending)
        moved = [np.moveaxis(x, axis, -1) for x in xs]
        key = _sort_key(moved[0], compare_type)
        if key is None:
            perm = _merge_sort(lambda a, b: (less(a, b),), moved[:1])
        else:
            perm = np.argsort(~key if descending else key, axis=-1, kind="stable")
        return collate([np.ascontiguousarray(np.moveaxis(
            np.take_along_axis(x, perm, axis=-1), -1, axis)) for x in moved])

    def into(x: np.ndarray, out: np.ndarray) -> None:
        """run(x) into `out` (a loop's callback step, loop_callback.py): integer keys along
        the last axis sorted in place there, as _sort_bits sorts them (2 numpy calls, not 8:
        a fori_loop of 512-element int32 sorts 33 -> ~14 us an iteration)."""
        bits = _unstable_ok(x, compare_type) if rank and axis == rank - 1 else None
        if bits is None or x.dtype.kind not in "biu":
            np.copyto(out, run(x))
            return
        keys = out.view(bits)
        np.copyto(keys, x.view(bits))
        keys.sort(axis=-1, kind="quicksort")
        if descending:
            keys[...] = np.flip(keys, -1).copy()

    run.into = into  # type: ignore[attr-defined]
    return run


def _unstable_ok(x: np.ndarray, compare_type: Any) -> np.dtype | None:
    """The signed integer view whose numeric order is the comparison's when equal keys are
    equal bits (no stability to keep: any sort gives the stable sort's result): integers
    and bools, and floats under TOTALORDER (sign-magnitude bits mapped by `_flip`)."""
    from xlapy.ops.attrs import ComparisonType as CT

    kind, size = x.dtype.kind, x.dtype.itemsize
    if kind == "b":
        return np.dtype(np.bool_)
    if kind in "iu":
        signed = compare_type is CT.SIGNED or (compare_type is not CT.UNSIGNED and kind == "i")
        return np.dtype(f"{'i' if signed else 'u'}{size}")
    if kind == "f" or x.dtype.name in ("bfloat16", "float16"):
        return np.dtype(f"i{size}") if compare_type is CT.TOTALORDER and size in (2, 4, 8) \
            else None
    return None


def _sort_bits(x: np.ndarray, view: np.dtype, axis: int, descending: bool) -> np.ndarray:
    """x sorted along `axis` by numpy's unstable (SIMD) sort of its integer view: int32 keys
    of 256 x 1024 took 8.1 ms as a stable argsort plus a gather, 1.3 ms so."""
    flt = x.dtype.kind not in "biu"
    keys = np.ascontiguousarray(np.moveaxis(x, axis, -1)).view(view)
    keys = _flip(keys) if flt else keys.copy()
    keys.sort(axis=-1, kind="quicksort")
    if descending:
        keys = keys[..., ::-1]
    out = _flip(keys) if flt else keys
    return np.ascontiguousarray(np.moveaxis(out.view(x.dtype), -1, axis))


def _flip(b: np.ndarray) -> np.ndarray:
    """Float bits as signed integers ordered as totalOrder orders the floats (negatives'
    magnitude bits flipped); its own inverse."""
    mag = np.array(np.iinfo(b.dtype).max, b.dtype)
    return np.where(b < 0, b ^ mag, b)


__all__ = ["plan", "HOST_CALLBACKS", "Plan"]
