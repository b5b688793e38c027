"""lapack.py: jaxlib's LAPACK custom calls, cholesky, triangular_solve, fft and sort as library
thunks on the cpu backend - the interpreter's results (bit for bit where both run the same
routine), batch dimensions and empty batches, never on the interpreter fallback; host
callbacks refused when compiling."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.errors import InterpreterError, Unimplemented
from xlapy.interpreter import RuntimeState

_TY = {"s": "f32", "d": "f64", "c": "complex<f32>", "z": "complex<f64>"}
_NP = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _tensor(dims: tuple[int, ...], ty: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in dims)}{ty}>"


def _module(target: str, config: str, operands: list[str], results: list[str]) -> str:
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(operands))
    args = ", ".join(f"%arg{i}" for i in range(len(operands)))
    n = len(results)
    outs = ", ".join(f"%0#{i}" for i in range(n)) if n > 1 else "%0"
    lhs = f"%0:{n}" if n > 1 else "%0"
    res = f"({', '.join(results)})" if n > 1 else results[0]
    cfg = f" {{mhlo.backend_config = {{{config}}}}}" if config else ""
    return (f"module @m {{\n  func.func public @main({params}) -> ({', '.join(results)}) {{\n"
            f"    {lhs} = stablehlo.custom_call @{target}({args}){cfg} : "
            f"({', '.join(operands)}) -> {res}\n"
            f"    return {outs} : {', '.join(results)}\n  }}\n}}\n")


def _matrix(t: str, dims: tuple[int, ...], rng: np.random.Generator, spd: bool = False
            ) -> np.ndarray:
    x = rng.uniform(-1, 1, dims)
    if t in "cz":
        x = x + 1j * rng.uniform(-1, 1, dims)
    if spd and len(dims) >= 2:
        x = x @ np.conj(np.swapaxes(x, -1, -2)) + dims[-1] * np.eye(dims[-1])
    return x.astype(_NP[t])


def _cases() -> list[tuple[str, str, str, list[tuple[int, ...]], list[tuple[str, tuple]]]]:
    """(routine, config, t, operand dims, result (type, dims)) for batch () / (2,) / (0,)."""
    out = []
    for t, batch in itertools.product("sdcz", [(), (2,), (0,)]):
        b = batch
        ty, real = _TY[t], _TY["s" if t in "sc" else "d"]
        i32 = "i32"
        out += [
            ("potrf", "uplo = 76 : ui8", t, [b + (4, 4)], [(ty, b + (4, 4)), (i32, b)]),
            ("potrf", "uplo = 85 : ui8", t, [b + (3, 3)], [(ty, b + (3, 3)), (i32, b)]),
            ("getrf", "", t, [b + (4, 3)], [(ty, b + (4, 3)), (i32, b + (3,)), (i32, b)]),
            ("geqrf", "", t, [b + (4, 3)], [(ty, b + (4, 3)), (ty, b + (3,))]),
            ("gesdd", "mode = 83 : ui8", t, [b + (4, 3)],
             [(ty, b + (4, 3)), (real, b + (3,)), (ty, b + (4, 3)), (ty, b + (3, 3)),
              (i32, b)]),
            ("gesdd", "mode = 65 : ui8", t, [b + (3, 4)],
             [(ty, b + (3, 4)), (real, b + (3,)), (ty, b + (3, 3)), (ty, b + (4, 4)),
              (i32, b)]),
            ("syevd" if t in "sd" else "heevd", "mode = 86 : ui8, uplo = 76 : ui8", t,
             [b + (4, 4)], [(ty, b + (4, 4)), (real, b + (4,)), (i32, b)]),
            ("trsm", "diag = 78 : ui8, side = 76 : ui8, trans_x = 84 : ui8, uplo = 85 : ui8",
             t, [b + (3, 3), b + (3, 2)], [(ty, b + (3, 2))]),
        ]
        if t in "sd":  # eigenvalues only: the matrix result is the operand as given
            out.append(("syevd", "mode = 78 : ui8, uplo = 76 : ui8", t, [b + (4, 4)],
                        [(ty, b + (4, 4)), (real, b + (4,)), (i32, b)]))
        if t in "sd":
            cty = _TY["c" if t == "s" else "z"]
            out.append(("geev", "", t, [b + (3, 3)],
                        [(ty, b + (3,)), (ty, b + (3,)), (cty, b + (3, 3)), (cty, b + (3, 3)),
                         (i32, b)]))
        else:
            out.append(("geev", "", t, [b + (3, 3)],
                        [(ty, b + (3,)), (ty, b + (3, 3)), (ty, b + (3, 3)), (i32, b)]))
        out += _factorization_cases(t, b)
    return out


def _factorization_cases(t: str, b: tuple[int, ...]) -> list[tuple]:
    """gees, gehrd, gesvd, geqp3, sytrd / hetrd (ops/custom_call_factorizations.py)."""
    ty, real, i32 = _TY[t], _TY["s" if t in "sc" else "d"], "i32"
    eig = [(ty, b + (4,)), (ty, b + (4,))] if t in "sd" else [(ty, b + (4,))]
    trd = "sytrd" if t in "sd" else "hetrd"
    return [
        *(("gees", f"mode = {mode} : ui8, sort = 78 : ui8", t, [b + (4, 4)],
           [(ty, b + (4, 4)), (ty, b + (4, 4)), *eig, (i32, b), (i32, b)])
          for mode in (86, 78)),
        ("gehrd", "high = 4 : i32, low = 1 : i32", t, [b + (4, 4)],
         [(ty, b + (4, 4)), (ty, b + (3,)), (i32, b)]),
        ("gehrd", "high = 4 : i32, low = 2 : i32", t, [b + (5, 5)],
         [(ty, b + (5, 5)), (ty, b + (4,)), (i32, b)]),
        *(("gesvd", f"mode = {mode} : ui8", t, [b + dims],
           [(ty, b + dims), (real, b + (3,)), (ty, b + u), (ty, b + vt), (i32, b)])
          for mode, dims, u, vt in ((83, (4, 3), (4, 3), (3, 3)), (65, (3, 4), (3, 3), (4, 4)),
                                    (78, (4, 3), (4, 3), (3, 3)))),
        ("geqp3", "", t, [b + (4, 3), b + (3,)],
         [(ty, b + (4, 3)), (i32, b + (3,)), (ty, b + (3,))]),
        ("geqp3", "", t, [b + (2, 3), b + (3,)],
         [(ty, b + (2, 3)), (i32, b + (3,)), (ty, b + (2,))]),
        *((trd, f"uplo = {uplo} : ui8", t, [b + (4, 4)],
           [(ty, b + (4, 4)), (real, b + (4,)), (real, b + (3,)), (ty, b + (3,)), (i32, b)])
          for uplo in (76, 85)),
    ]


#: routine -> its i32 operands (geqp3's jpvt: a nonzero entry fixes that column in front).
_I32_OPERANDS = {"geqp3": (1,)}


def _ids(c: tuple) -> str:
    return f"{c[2]}{c[0]}-{c[1][:8]}-{'x'.join(map(str, c[3][0]))}"


def _explain(cpu: object) -> tuple[str, list]:
    exe = cpu._exe  # type: ignore[attr-defined]
    return exe.explain(), exe.fallbacks()


@pytest.mark.parametrize("case", _cases(), ids=[_ids(c) for c in _cases()])
def test_custom_call_matches_interpreter(case: tuple) -> None:
    routine, config, t, operands, results = case
    ty = _TY[t]
    ints = _I32_OPERANDS.get(routine, ())
    text = _module(f"lapack_{t}{routine}_ffi", config,
                   [_tensor(d, "i32" if k in ints else ty) for k, d in enumerate(operands)],
                   [_tensor(d, rt) for rt, d in results])
    cpu = xlapy.compile(text, backend="cpu")
    how, fb = _explain(cpu)
    assert not fb and "library lapack" in how, how
    rng = np.random.default_rng(5)
    args = [(np.arange(np.prod(d)) % 3 == 1).astype(np.int32).reshape(d) if k in ints
            else _matrix(t, d, rng, spd=routine == "potrf") for k, d in enumerate(operands)]
    if routine == "trsm":
        args[0] = args[0] + 4 * np.eye(3, dtype=args[0].dtype)
    got = cpu(*args)
    want = xlapy.compile(text, backend="interpreter")(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    # the same scipy routine on the same matrices; small real getrf / potrf / trsm / geqrf /
    # orgqr calls (complex getrf / trsm / geqrf / ungqr) run small_lu.py's and small_qr.py's
    # JIT: LAPACK's arithmetic within rounding, the same pivots and info
    exact = not (t in "sd" and routine in ("getrf", "trsm", "potrf", "geqrf", "orgqr")
                 or routine in ("getrf", "trsm", "geqrf", "orgqr", "ungqr"))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact or g.dtype.kind == "i":
            np.testing.assert_array_equal(g, w)
        else:
            tol = 1e-5 if g.dtype in (np.float32, np.complex64) else 1e-13
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    for g, a in itertools.product(got, args):
        assert not np.shares_memory(g, a)


def _trsm_text(config: str) -> str:
    ty = _tensor((3, 3), "f64")
    return _module("lapack_dtrsm_ffi", config, [ty, _tensor((3, 2), "f64")],
                   [_tensor((3, 2), "f64")])


def test_missing_attribute_is_the_interpreters_error() -> None:
    """The error the interpreter raises when it runs, at the same time (not when compiling)."""
    cpu = xlapy.compile(_trsm_text("diag = 78 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8"),
                        backend="cpu")
    with pytest.raises(InterpreterError, match="needs the FFI attribute 'side'"):
        cpu(np.eye(3), np.ones((3, 2)))


def test_info_and_not_positive_definite() -> None:
    text = _module("lapack_dpotrf_ffi", "uplo = 76 : ui8", ["tensor<2x2xf64>"],
                   ["tensor<2x2xf64>", "tensor<i32>"])
    _, info = xlapy.compile(text, backend="cpu")(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert int(info) == 2


def test_host_callback_is_refused_when_compiling() -> None:
    text = _module("xla_python_cpu_callback", "", ["tensor<3xf32>"], ["tensor<3xf32>"])
    with pytest.raises(Unimplemented, match="xla_python_cpu_callback"):
        xlapy.compile(text, backend="cpu")


def test_unknown_target_stays_on_the_interpreter_custom_call() -> None:
    text = _module("my_target", "", ["tensor<3xf32>"], ["tensor<3xf32>"])
    cpu = xlapy.compile(text, backend="cpu")
    _, fb = _explain(cpu)
    assert [op for _, op in fb] == ["custom_call"]
    x = np.arange(3, dtype=np.float32)
    rt = RuntimeState(custom_calls={"my_target": lambda ops, shape, attrs: ops[0] * 2})
    np.testing.assert_array_equal(cpu._exe.run([x], rt), 2 * x)  # type: ignore[attr-defined]
    with pytest.raises(InterpreterError, match="no target named 'my_target'"):
        cpu(x)


def test_runtime_state_replaces_a_lapack_target() -> None:
    """RuntimeState.custom_calls takes precedence, as on the interpreter; the result is a copy
    (a replacement returning its operand must not hand back the argument)."""
    text = _trsm_text("diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8")
    cpu = xlapy.compile(text, backend="cpu")
    b = np.ones((3, 2))
    rt = RuntimeState(custom_calls={"lapack_dtrsm_ffi": lambda ops, shape, attrs: ops[1]})
    got = cpu._exe.run([np.eye(3) * 2, b], rt)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got, b)
    assert not np.shares_memory(got, b)


# ---- ops ----------------------------------------------------------------------------------------
def _op_module(sig: str, body: str, ret: str) -> str:
    return f"func.func @main({sig}) -> {ret} {{\n  {body}\n  return %r : {ret}\n}}\n"


def _both(text: str, *args: np.ndarray) -> tuple[object, object, str]:
    cpu = xlapy.compile(text, backend="cpu")
    how, fb = _explain(cpu)
    assert not fb, how
    return cpu(*args), xlapy.compile(text, backend="interpreter")(*args), how


@pytest.mark.parametrize(("ty", "dt"), [("f32", np.float32), ("f64", np.float64),
                                        ("complex<f64>", np.complex128),
                                        ("bf16", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("lower", ["true", "false"])
@pytest.mark.parametrize("batch", [(), (3,), (0,)])
def test_cholesky(ty: str, dt: type, lower: str, batch: tuple[int, ...]) -> None:
    t = _tensor(batch + (4, 4), ty)
    text = _op_module(f"%a: {t}", f'%r = "stablehlo.cholesky"(%a) {{lower = {lower}}} : '
                      f"({t}) -> {t}", t)
    rng = np.random.default_rng(6)
    a = _matrix("z" if "complex" in ty else "d", batch + (4, 4), rng, spd=True)
    if batch == (3,):
        a[1, 0, 0] = -5.0  # not positive definite: NaN in that matrix's triangle
    a = a.astype(dt)
    got, want, how = _both(text, a)
    assert "cholesky" in how and "library lapack" in how
    assert got.dtype == want.dtype  # type: ignore[union-attr]
    wide = np.complex128 if "complex" in ty else np.float64  # bf16 NaN == NaN for numpy
    np.testing.assert_array_equal(np.asarray(got, wide), np.asarray(want, wide))


@pytest.mark.parametrize(("ty", "dt"), [("f32", np.float32), ("f64", np.float64),
                                        ("complex<f32>", np.complex64),
                                        ("f16", np.float16)])
@pytest.mark.parametrize(("left", "lower", "unit", "trans"), [
    ("true", "true", "false", "NO_TRANSPOSE"), ("true", "false", "true", "TRANSPOSE"),
    ("false", "true", "false", "ADJOINT"), ("false", "false", "false", "NO_TRANSPOSE")])
@pytest.mark.parametrize("batch", [(), (2,), (0,)])
def test_triangular_solve(ty: str, dt: type, left: str, lower: str, unit: str, trans: str,
                          batch: tuple[int, ...]) -> None:
    ta, tb = _tensor(batch + (5, 5), ty), _tensor(batch + ((5, 3) if left == "true" else
                                                           (3, 5)), ty)
    text = _op_module(
        f"%a: {ta}, %b: {tb}",
        f'%r = "stablehlo.triangular_solve"(%a, %b) {{left_side = {left}, lower = {lower}, '
        f"unit_diagonal = {unit}, transpose_a = #stablehlo<transpose {trans}>}} : "
        f"({ta}, {tb}) -> {tb}", tb)
    rng = np.random.default_rng(8)
    t = "z" if "complex" in ty else "d"
    a = (_matrix(t, batch + (5, 5), rng) + 3 * np.eye(5)).astype(dt)
    b = _matrix(t, batch + ((5, 3) if left == "true" else (3, 5)), rng).astype(dt)
    got, want, how = _both(text, a, b)
    assert "library blas" in how
    assert got.dtype == want.dtype and got.shape == want.shape  # type: ignore[union-attr]
    # A diagonally dominant triangle (|diag| >= 2, off-diagonal <= sqrt 2): the two solves'
    # rounding stays within a few hundred units of the computation type.
    eps = np.finfo(np.float32 if dt in (np.float16, np.float32, np.complex64)
                   else np.float64).eps
    out_eps = np.finfo(dt).eps if dt == np.float16 else 0.0
    np.testing.assert_allclose(np.asarray(got, np.complex128), np.asarray(want, np.complex128),
                               rtol=256 * eps + 2 * out_eps, atol=256 * eps + 2 * out_eps)


@pytest.mark.parametrize(("kind", "ity", "oty", "idims", "odims", "length"), [
    ("FFT", "complex<f32>", "complex<f32>", (3, 8), (3, 8), [8]),
    ("IFFT", "complex<f64>", "complex<f64>", (2, 4, 6), (2, 4, 6), [4, 6]),
    ("RFFT", "f32", "complex<f32>", (5, 16), (5, 9), [16]),
    ("IRFFT", "complex<f64>", "f64", (3, 4, 5), (3, 4, 8), [4, 8]),
    ("FFT", "complex<f32>", "complex<f32>", (0, 8), (0, 8), [8]),
    # one axis over many rows: on the threads from PARALLEL_FFT elements
    ("RFFT", "f32", "complex<f32>", (256, 1000), (256, 501), [1000]),
    ("RFFT", "f32", "complex<f32>", (256, 4096), (256, 2049), [4096]),
    ("IRFFT", "complex<f64>", "f64", (1024, 1025), (1024, 2048), [2048]),
    ("IFFT", "complex<f64>", "complex<f64>", (3, 70, 97), (3, 70, 97), [97]),
    ("IRFFT", "complex<f32>", "f32", (128, 65), (128, 128), [128]),
    ("FFT", "complex<f32>", "complex<f32>", (2, 4, 6), (2, 4, 6), [4, 6]),
    ("IRFFT", "complex<f32>", "f32", (3, 16, 9), (3, 16, 16), [16, 16]),
    ("RFFT", "f32", "complex<f32>", (4, 8, 1000), (4, 8, 501), [8, 1000]),
    # double precision over several axes (ducc0), from PARALLEL_FFT_WORK on two threads
    ("FFT", "complex<f64>", "complex<f64>", (4, 6, 10), (4, 6, 10), [4, 6, 10]),
    ("FFT", "complex<f64>", "complex<f64>", (16, 128, 96), (16, 128, 96), [128, 96]),
    ("IFFT", "complex<f64>", "complex<f64>", (8, 32, 32, 32), (8, 32, 32, 32), [32, 32, 32]),
    ("RFFT", "f64", "complex<f64>", (3, 5, 6, 16), (3, 5, 6, 9), [5, 6, 16]),
    ("RFFT", "f64", "complex<f64>", (8, 32, 64, 64), (8, 32, 64, 33), [32, 64, 64]),
    ("RFFT", "f64", "complex<f64>", (16, 128, 96), (16, 128, 49), [128, 96]),
    ("IRFFT", "complex<f64>", "f64", (8, 32, 64, 33), (8, 32, 64, 64), [32, 64, 64]),
])
def test_fft(kind: str, ity: str, oty: str, idims: tuple, odims: tuple, length: list) -> None:
    """Each precision computes in itself as XLA's runtime does (the interpreter in double
    through numpy, rounded once): each transform's error within log2(n) eps / 2 of its
    norm (pocketfft's measured errors sit 3-5x under it; an error of the algorithm is of
    the norm's order), in the result type."""
    ti, to = _tensor(idims, ity), _tensor(odims, oty)
    text = _op_module(
        f"%x: {ti}", f'%r = "stablehlo.fft"(%x) {{fft_type = #stablehlo<fft_type {kind}>, '
        f"fft_length = array<i64: {', '.join(map(str, length))}>}} : ({ti}) -> {to}", to)
    rng = np.random.default_rng(9)
    x = _matrix("z" if "complex" in ity else "d", idims, rng).astype(
        {"f32": np.float32, "f64": np.float64, "complex<f32>": np.complex64,
         "complex<f64>": np.complex128}[ity])
    got, want, how = _both(text, x)
    assert "library fft" in how
    assert got.dtype == want.dtype and got.shape == want.shape
    axes = tuple(range(len(odims) - len(length), len(odims)))
    err = np.sqrt(np.sum(np.abs(got.astype(np.complex128) - want) ** 2, axis=axes))
    norm = np.sqrt(np.sum(np.abs(want.astype(np.complex128)) ** 2, axis=axes))
    eps = np.finfo(np.float64 if "f64" in ity else np.float32).eps
    bound = np.log2(np.prod(length)) / 2 * eps * norm
    assert np.all(err <= bound), np.max(err / np.maximum(bound, 1e-300))


def _sort_text(ty: str, dims: tuple[int, ...], dim: int, cmp: str, swap: bool,
               compare_type: str, extra: bool) -> str:
    t = _tensor(dims, ty)
    ti = _tensor(dims, "i32")
    a, b = ("%y", "%x") if swap else ("%x", "%y")
    ops = "(%v, %w)" if extra else "(%v)"
    params = f"%x: tensor<{ty}>, %y: tensor<{ty}>" + (
        ", %p: tensor<i32>, %q: tensor<i32>" if extra else "")
    res = f"({t}, {ti})" if extra else t
    body = (f'%r{":2" if extra else ""} = "stablehlo.sort"{ops} ({{\n'
            f"  ^bb0({params}):\n"
            f"    %c = stablehlo.compare {cmp}, {a}, {b}, {compare_type} : "
            f"(tensor<{ty}>, tensor<{ty}>) -> tensor<i1>\n"
            f"    stablehlo.return %c : tensor<i1>\n"
            f"  }}) {{dimension = {dim} : i64, is_stable = true}} : "
            f"({t}{', ' + ti if extra else ''}) -> {res}")
    sig = f"%v: {t}" + (f", %w: {ti}" if extra else "")
    ret = f"({t}, {ti})" if extra else t
    text = f"func.func @main({sig}) -> {ret} {{\n  {body}\n"
    text += (f"  return %r#0, %r#1 : {t}, {ti}\n}}\n" if extra else f"  return %r : {t}\n}}\n")
    return text


@pytest.mark.parametrize(("ty", "dt", "compare_type"), [
    ("i32", np.int32, "SIGNED"), ("ui8", np.uint8, "UNSIGNED"), ("f32", np.float32, "FLOAT"),
    ("f64", np.float64, "TOTALORDER"), ("bf16", ml_dtypes.bfloat16, "FLOAT"),
    ("i1", np.bool_, "UNSIGNED")])
@pytest.mark.parametrize(("cmp", "swap"), [("LT", False), ("GT", False), ("LT", True)])
@pytest.mark.parametrize(("dims", "dim"), [((7, 5), 1), ((7, 5), 0), ((0, 4), 1)])
@pytest.mark.parametrize("extra", [False, True])
def test_sort(ty: str, dt: type, compare_type: str, cmp: str, swap: bool,
              dims: tuple[int, ...], dim: int, extra: bool) -> None:
    text = _sort_text(ty, dims, dim, cmp, swap, compare_type, extra)
    rng = np.random.default_rng(10)
    x = rng.integers(-4, 5, dims)
    x = (x > 0) if dt is np.bool_ else x.astype(np.float64).astype(dt) if ty[0] in "fb" \
        else x.astype(dt)
    if ty == "f32" and x.size:
        x.flat[3] = np.nan  # FLOAT compare with a NaN: the comparator's merge sort
        x.flat[5] = -0.0
    args = [x, rng.integers(0, 100, dims).astype(np.int32)] if extra else [x]
    got, want, how = _both(text, *args)
    assert "library numpy sort" in how
    got, want = (got, want) if extra else ((got,), (want,))
    for g, w in zip(got, want):  # type: ignore[arg-type]
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.astype(np.float64), w.astype(np.float64))


#: jax's float comparator (jnp.sort): -0.0 -> 0.0, NaN -> one NaN, then a total order.
_JAX_LT = """
    %z = stablehlo.constant dense<0.0> : tensor<{t}>
    %e0 = stablehlo.compare EQ, %x, %z, FLOAT : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %a0 = stablehlo.select %e0, %z, %x : tensor<i1>, tensor<{t}>
    %n0 = stablehlo.compare NE, %x, %x, FLOAT : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %nan = stablehlo.constant dense<0x{nan}> : tensor<{t}>
    %a = stablehlo.select %n0, %nan, %a0 : tensor<i1>, tensor<{t}>
    %e1 = stablehlo.compare EQ, %y, %z, FLOAT : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %b0 = stablehlo.select %e1, %z, %y : tensor<i1>, tensor<{t}>
    %n1 = stablehlo.compare NE, %y, %y, FLOAT : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %b = stablehlo.select %n1, %nan, %b0 : tensor<i1>, tensor<{t}>
    %c = stablehlo.compare {dir}, %a, %b, TOTALORDER : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
"""
#: Two keys, lexicographic: (q, p) with q the second operand.
_TWO_KEYS = """
    %l1 = stablehlo.compare LT, %p, %q, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %l0 = stablehlo.compare {dir}, %x, %y, {ct} : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %e0 = stablehlo.compare EQ, %x, %y, {ct} : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %a = stablehlo.and %e0, %l1 : tensor<i1>
    %c = stablehlo.or %l0, %a : tensor<i1>
"""
_NAN = {"f32": "7FC00000", "f64": "7FF8000000000000", "bf16": "7FC0", "f16": "7E00"}
_FT = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16,
       "i32": np.int32, "ui16": np.uint16, "i8": np.int8}


def _general_sort(body: str, t: str, dims: tuple[int, ...], dim: int) -> str:
    tt, ti = _tensor(dims, t), _tensor(dims, "i32")
    return (f"func.func @main(%v: {tt}, %w: {ti}) -> ({tt}, {ti}) {{\n"
            f'  %r:2 = "stablehlo.sort"(%v, %w) ({{\n'
            f"  ^bb0(%x: tensor<{t}>, %y: tensor<{t}>, %p: tensor<i32>, %q: tensor<i32>):"
            f"{body}    stablehlo.return %c : tensor<i1>\n"
            f"  }}) {{dimension = {dim} : i64, is_stable = true}} : ({tt}, {ti}) -> ({tt}, {ti})\n"
            f"  return %r#0, %r#1 : {tt}, {ti}\n}}\n")


@pytest.mark.parametrize(("dims", "dim"), [((5, 37), 1), ((16,), 0), ((3, 17, 2), 1),
                                           ((2, 1000), 1), ((0, 5), 1), ((4, 1), 1),
                                           ((200, 300), 0)])
@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "f16"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_jit_merge_sort_jax_comparator(dims: tuple[int, ...], dim: int, t: str,
                                       direction: str) -> None:
    """jax's float comparator (NaN, -0.0, ties: stability shows in the second operand)."""
    text = _general_sort(_JAX_LT.format(t=t, nan=_NAN[t], dir=direction), t, dims, dim)
    rng = np.random.default_rng(11)
    x = rng.integers(-6, 7, dims).astype(np.float64)
    if x.size > 6:
        x.flat[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan]
    x = rng.permutation(x.ravel()).reshape(dims).astype(_FT[t])
    w = np.arange(x.size, dtype=np.int32).reshape(dims)
    got, want, how = _both(text, x, w)
    assert "library jit merge sort" in how
    for g, v in zip(got, want):  # type: ignore[arg-type]
        assert g.dtype == v.dtype
        np.testing.assert_array_equal(g.astype(np.float64), v.astype(np.float64))


@pytest.mark.parametrize("t,ct", [("i32", "SIGNED"), ("ui16", "UNSIGNED"), ("i8", "SIGNED"),
                                  ("f32", "FLOAT")])
@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_jit_merge_sort_two_keys(t: str, ct: str, direction: str) -> None:
    dims = (6, 45)
    text = _general_sort(_TWO_KEYS.format(t=t, ct=ct, dir=direction), t, dims, 1)
    rng = np.random.default_rng(12)
    x = rng.integers(0, 4, dims).astype(_FT[t])
    w = rng.integers(-3, 3, dims).astype(np.int32)
    got, want, how = _both(text, x, w)
    assert "library jit merge sort" in how
    for g, v in zip(got, want):  # type: ignore[arg-type]
        np.testing.assert_array_equal(g, v)


def test_jit_merge_sort_on_threads() -> None:
    """Rows split over threads: the same result as one thread."""
    dims = (64, 700)
    text = _general_sort(_JAX_LT.format(t="f32", nan=_NAN["f32"], dir="LT"), "f32", dims, 1)
    x = np.random.default_rng(13).standard_normal(dims).astype(np.float32)
    w = np.arange(x.size, dtype=np.int32).reshape(dims)
    one = xlapy.compile(text, backend="cpu", options={"num_threads": 1})(x, w)
    two = xlapy.compile(text, backend="cpu", options={"num_threads": 2})(x, w)
    np.testing.assert_array_equal(one[0], np.sort(x, axis=1))
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_sort_the_jit_cannot_take_is_a_listed_fallback() -> None:
    """A complex operand beside a multi-op comparator: neither numpy's argsort nor the JIT
    sort takes it, so it runs the interpreter's sort - listed as such, not as a library."""
    dims = (3, 9)
    t, tc = _tensor(dims, "f32"), _tensor(dims, "complex<f32>")
    body = _JAX_LT.format(t="f32", nan=_NAN["f32"], dir="LT")
    text = (f"func.func @main(%v: {t}, %w: {tc}) -> ({t}, {tc}) {{\n"
            f'  %r:2 = "stablehlo.sort"(%v, %w) ({{\n'
            f"  ^bb0(%x: tensor<f32>, %y: tensor<f32>, %p: tensor<complex<f32>>, "
            f"%q: tensor<complex<f32>>):{body}    stablehlo.return %c : tensor<i1>\n"
            f"  }}) {{dimension = 1 : i64, is_stable = true}} : ({t}, {tc}) -> ({t}, {tc})\n"
            f"  return %r#0, %r#1 : {t}, {tc}\n}}\n")
    cpu = xlapy.compile(text, backend="cpu")
    _, fb = _explain(cpu)
    assert [op for _, op in fb] == ["sort"]
    rng = np.random.default_rng(15)
    x = rng.integers(-3, 3, dims).astype(np.float32)
    w = (rng.standard_normal(dims) + 1j).astype(np.complex64)
    for g, v in zip(cpu(x, w), xlapy.compile(text, backend="interpreter")(x, w)):
        np.testing.assert_array_equal(g, v)


@pytest.mark.parametrize(("ty", "dt", "compare_type"), [
    ("i32", np.int32, "SIGNED"), ("ui32", np.uint32, "UNSIGNED"), ("i16", np.int16, "SIGNED"),
    ("ui64", np.uint64, "UNSIGNED"), ("i8", np.int8, "SIGNED"), ("i1", np.bool_, "UNSIGNED"),
    ("f32", np.float32, "TOTALORDER"), ("f64", np.float64, "TOTALORDER"),
    ("f16", np.float16, "TOTALORDER"), ("bf16", ml_dtypes.bfloat16, "TOTALORDER")])
@pytest.mark.parametrize(("cmp", "dim"), [("LT", 1), ("GT", 1), ("LT", 0)])
def test_single_key_sort_runs_unstable(ty: str, dt: type, compare_type: str, cmp: str,
                                       dim: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """One operand whose equal keys are equal bits (integers, bools, floats under
    TOTALORDER): numpy's SIMD quicksort of the integer view gives the stable sort's result
    (jnp.sort of int32 rows: 1.6x XLA's time as a stable argsort and a gather, 0.26 now);
    the interpreter's bits, NaNs of both signs and -0 / +0 kept apart."""
    dims = (37, 300)
    text = _sort_text(ty, dims, dim, cmp, False, compare_type, False)
    rng = np.random.default_rng(11)
    if ty[0] in "fb":
        x = (rng.standard_normal(dims) * 3).round(1).astype(dt)
        x.flat[:8] = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, -0.0, 0.0], dt)
    elif dt is np.bool_:
        x = rng.random(dims) > 0.5
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, dims, dtype=dt, endpoint=True)
    want = xlapy.compile(text, backend="interpreter")(x)
    monkeypatch.setattr(np, "argsort", None)  # (the stable path's argsort is not taken)
    got = xlapy.compile(text, backend="cpu")(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
