"""Complex (c64/c128) values in cpu kernels (elementwise_complex.py) against the interpreter:
bit for bit (any NaN matches any NaN, signed zeros must match) on special values (inf, NaN,
+-0, denormal parts, huge and tiny magnitudes), and never through the interpreter fallback."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import xlapy

TYPES = {"c64": (np.complex64, "f32"), "c128": (np.complex128, "f64")}


def _parts(dt: type) -> list[float]:
    """Real parts with the edge cases: signed zeros, infinities, NaN, a denormal (flushed),
    huge (|z|^2 overflows) and tiny (|z|^2 underflows) magnitudes."""
    f = np.finfo(np.float32 if dt is np.complex64 else np.float64)
    return [0.0, -0.0, 1.0, -1.5, 3.25, np.inf, -np.inf, np.nan, float(f.smallest_subnormal) * 8,
            float(f.max) / 3, -float(f.max) / 7, float(f.tiny) * 5, 1e-3]


def _grid(dt: type) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of complex values built from `_parts` (x varies slowest)."""
    p = _parts(dt)
    z = np.array([complex(r, i) for r, i in itertools.product(p, p)], dt)
    x, y = np.meshgrid(z, z, indexing="ij")
    return x.reshape(-1), y.reshape(-1)


def _tensor(shape: tuple[int, ...], et: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{et}>"


def _ctype(name: str) -> str:
    return f"complex<{TYPES[name][1]}>"


def _run(text: str, args: list[np.ndarray], ops: list[str]) -> tuple[list, list]:
    """(cpu results, interpreter results); asserts none of `ops` falls back."""
    cpu = xlapy.compile(text, backend="cpu")
    fb = {o for _, o in cpu._exe.fallbacks()}
    assert not fb & set(ops), f"fell back: {fb}"
    got = cpu(*args)
    ref = xlapy.compile(text)(*args)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    return [np.asarray(g) for g in got], [np.asarray(r) for r in ref]


def _same(got: np.ndarray, ref: np.ndarray, what: str, *inputs: np.ndarray) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    if ref.dtype.kind == "c":
        g = np.stack([got.real, got.imag], -1).astype(np.float64)
        r = np.stack([ref.real, ref.imag], -1).astype(np.float64)
        bad = ~((np.isnan(g) & np.isnan(r)) | ((g == r) & (np.signbit(g) == np.signbit(r))))
        bad = bad.any(-1)
    elif ref.dtype.kind == "f":
        g, r = got.astype(np.float64), ref.astype(np.float64)
        bad = ~((np.isnan(g) & np.isnan(r)) | ((g == r) & (np.signbit(g) == np.signbit(r))))
    else:
        bad = got != ref
    if np.any(bad):
        i = np.unravel_index(int(np.argmax(bad)), bad.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} differ; first at {i}: inputs "
                             f"{[x[i] for x in inputs]} ours={got[i]!r} "
                             f"interpreter={ref[i]!r}")


BINARY = ["add", "subtract", "multiply", "divide"]


def _flush(v: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(v) < np.finfo(v.dtype).tiny, v * 0, v)


def _denormal_steps(opcode: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Where an intermediate of the interpreter's formula is denormal: numpy keeps it, a
    kernel (FTZ set, as on XLA CPU) flushes it, so the results may differ there (XLA CPU
    agrees with the kernel). Empty for add/subtract (no intermediates)."""
    a, b = _flush(x.real), _flush(x.imag)
    c, d = _flush(y.real), _flush(y.imag)
    with np.errstate(all="ignore"):
        if opcode == "multiply":
            steps = [a * c, b * d, a * d, b * c]
        elif opcode == "divide":
            r1, r2 = d / c, c / d
            steps = [r1, r2, d * r1, c * r2, b * r1, a * r2, a * r1, b * r2,
                     c + d * r1, c * r2 + d, a + b * r1, a * r2 + b, b - a * r1, b * r2 - a]
        else:
            return np.zeros(x.shape, bool)
    tiny = np.finfo(a.dtype).tiny
    return np.any([(s != 0) & (np.abs(s) < tiny) for s in steps], axis=0)


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("opcode", BINARY)
def test_binary_special_values(name: str, opcode: str) -> None:
    dt = TYPES[name][0]
    x, y = _grid(dt)
    t = _tensor(x.shape, _ctype(name))
    text = (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %r = stablehlo.{opcode} %a, %b : {t}\n  return %r : {t}\n}}")
    (got,), (ref,) = _run(text, [x, y], [opcode])
    keep = ~_denormal_steps(opcode, x, y)
    assert keep.mean() > 0.9
    _same(got[keep], ref[keep], f"{opcode} {name}", x[keep], y[keep])


@pytest.mark.parametrize("name", list(TYPES))
def test_binary_random_2d(name: str) -> None:
    dt = TYPES[name][0]
    rng = np.random.default_rng(3)
    shape = (37, 29)
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    y = (rng.standard_normal(shape) * 1e3 + 1j * rng.standard_normal(shape) * 1e-3).astype(dt)
    t = _tensor(shape, _ctype(name))
    body = "".join(f"  %{o} = stablehlo.{o} %a, %b : {t}\n" for o in BINARY)
    text = (f"func.func @main(%a: {t}, %b: {t}) -> ({', '.join([t] * 4)}) {{\n{body}"
            f"  return {', '.join('%' + o for o in BINARY)} : {', '.join([t] * 4)}\n}}")
    got, ref = _run(text, [x, y], BINARY)
    for o, g, r in zip(BINARY, got, ref):
        _same(g, r, f"{o} {name}", x, y)


@pytest.mark.parametrize("name", list(TYPES))
def test_unary_and_parts(name: str) -> None:
    """negate (bit-level), abs (no overflow for huge parts), sign, real, imag, complex."""
    dt, pt = TYPES[name]
    x, _ = _grid(dt)
    x = x[::len(_parts(dt)) ** 2].copy()  # each value once
    n = x.shape[0]
    t, f = _tensor((n,), _ctype(name)), _tensor((n,), pt)
    text = (f"func.func @main(%a: {t}) -> ({t}, {f}, {f}, {f}, {t}, {t}) {{\n"
            f"  %n = stablehlo.negate %a : {t}\n"
            f"  %m = stablehlo.abs %a : ({t}) -> {f}\n"
            f"  %re = stablehlo.real %a : ({t}) -> {f}\n"
            f"  %im = stablehlo.imag %a : ({t}) -> {f}\n"
            f"  %c = stablehlo.complex %im, %re : {t}\n"
            f"  %s = stablehlo.sign %a : {t}\n"
            f"  return %n, %m, %re, %im, %c, %s : {t}, {f}, {f}, {f}, {t}, {t}\n}}")
    names = ["negate", "abs", "real", "imag", "complex", "sign"]
    got, ref = _run(text, [x], names)
    # sign scales by 1 / |z|, denormal for huge |z|: kept by numpy, flushed in a kernel.
    with np.errstate(over="ignore", divide="ignore"):
        keep = 1 / np.abs(x) >= np.finfo(np.abs(x).dtype).tiny
    assert keep.mean() > 0.4  # (inf and NaN parts are dropped too)
    for o, g, r in zip(names, got, ref):
        k = keep if o == "sign" else slice(None)
        _same(g[k], r[k], f"{o} {name}", x[k])
    finite = np.isfinite(x.real) & np.isfinite(x.imag)
    assert np.isfinite(got[1][finite]).all()  # no overflow of re^2 + im^2 for huge parts


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_compare_select(name: str, direction: str) -> None:
    dt = TYPES[name][0]
    x, y = _grid(dt)
    t = _tensor(x.shape, _ctype(name))
    pt = _tensor(x.shape, "i1")
    ct = "" if direction in ("EQ", "NE") else ", FLOAT"
    text = (f"func.func @main(%a: {t}, %b: {t}) -> ({pt}, {t}) {{\n"
            f"  %p = stablehlo.compare {direction}, %a, %b{ct} : ({t}, {t}) -> {pt}\n"
            f"  %s = stablehlo.select %p, %a, %b : {pt}, {t}\n"
            f"  return %p, %s : {pt}, {t}\n}}")
    got, ref = _run(text, [x, y], ["compare", "select"])
    _same(got[0], ref[0], f"compare {direction} {name}", x, y)
    _same(got[1], ref[1], f"select {name}", x, y)


@pytest.mark.parametrize("name", list(TYPES))
def test_convert(name: str) -> None:
    """real -> complex, complex -> complex (flushed), complex -> its part type (no flush)
    and complex -> other types (the real part converted)."""
    dt, pt = TYPES[name]
    other = "c128" if name == "c64" else "c64"
    x, _ = _grid(dt)
    x = x[::len(_parts(dt)) ** 2].copy()
    n = x.shape[0]
    t, f, o = _tensor((n,), _ctype(name)), _tensor((n,), pt), _tensor((n,), _ctype(other))
    i32, f16, i1 = _tensor((n,), "i32"), _tensor((n,), "f16"), _tensor((n,), "i1")
    text = (f"func.func @main(%a: {t}, %r: {f}, %k: {i32}) -> "
            f"({o}, {f}, {i32}, {f16}, {i1}, {t}, {t}) {{\n"
            f"  %c1 = stablehlo.convert %a : ({t}) -> {o}\n"
            f"  %c2 = stablehlo.convert %a : ({t}) -> {f}\n"
            f"  %c3 = stablehlo.convert %a : ({t}) -> {i32}\n"
            f"  %c4 = stablehlo.convert %a : ({t}) -> {f16}\n"
            f"  %c5 = stablehlo.convert %a : ({t}) -> {i1}\n"
            f"  %c6 = stablehlo.convert %r : ({f}) -> {t}\n"
            f"  %c7 = stablehlo.convert %k : ({i32}) -> {t}\n"
            f"  return %c1, %c2, %c3, %c4, %c5, %c6, %c7 : "
            f"{o}, {f}, {i32}, {f16}, {i1}, {t}, {t}\n}}")
    r = x.real.copy()
    k = np.arange(n, dtype=np.int32) * 1000003 - 50
    got, ref = _run(text, [x, r, k], ["convert"])
    for i, (g, rf) in enumerate(zip(got, ref)):
        _same(g, rf, f"convert #{i + 1} {name}", x)


@pytest.mark.parametrize("name", list(TYPES))
def test_data_movement(name: str) -> None:
    """broadcast, transpose, reshape, slice, reverse, concatenate, pad, dynamic_slice,
    dynamic_update_slice, gather and a scalar complex constant, fused in one kernel."""
    dt = TYPES[name][0]
    c = _ctype(name)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 6)) + 1j * rng.standard_normal((4, 6))).astype(dt)
    u = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(dt)
    v = (rng.standard_normal((6,)) + 1j * rng.standard_normal((6,))).astype(dt)
    idx = np.array([[2], [0], [3]], np.int32)
    text = f"""
func.func @main(%x: tensor<4x6x{c}>, %u: tensor<2x3x{c}>, %v: tensor<6x{c}>,
                %i: tensor<3x1xi32>, %s: tensor<i32>) -> (tensor<6x4x{c}>, tensor<8x6x{c}>,
                tensor<6x10x{c}>, tensor<2x3x{c}>, tensor<4x6x{c}>, tensor<3x6x{c}>,
                tensor<3x8x{c}>) {{
  %b = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<6x{c}>) -> tensor<4x6x{c}>
  %k = stablehlo.constant dense<(1.5, -2.0)> : tensor<{c}>
  %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<{c}>) -> tensor<4x6x{c}>
  %sum = stablehlo.add %x, %b : tensor<4x6x{c}>
  %sk = stablehlo.multiply %sum, %kb : tensor<4x6x{c}>
  %t = stablehlo.transpose %sk, dims = [1, 0] : (tensor<4x6x{c}>) -> tensor<6x4x{c}>
  %rv = stablehlo.reverse %x, dims = [0] : tensor<4x6x{c}>
  %cat = stablehlo.concatenate %x, %rv, dim = 0 :
    (tensor<4x6x{c}>, tensor<4x6x{c}>) -> tensor<8x6x{c}>
  %rs = stablehlo.reshape %x : (tensor<4x6x{c}>) -> tensor<6x4x{c}>
  %sl = stablehlo.slice %rs [0:6, 1:4] : (tensor<6x4x{c}>) -> tensor<6x3x{c}>
  %p = stablehlo.pad %sl, %k, low = [0, 2], high = [0, 3], interior = [0, 1] :
    (tensor<6x3x{c}>, tensor<{c}>) -> tensor<6x10x{c}>
  %ds = stablehlo.dynamic_slice %x, %s, %s, sizes = [2, 3] :
    (tensor<4x6x{c}>, tensor<i32>, tensor<i32>) -> tensor<2x3x{c}>
  %du = stablehlo.dynamic_update_slice %x, %u, %s, %s :
    (tensor<4x6x{c}>, tensor<2x3x{c}>, tensor<i32>, tensor<i32>) -> tensor<4x6x{c}>
  %g = "stablehlo.gather"(%x, %i) {{dimension_numbers = #stablehlo.gather<
      offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
    slice_sizes = array<i64: 1, 6>}} :
    (tensor<4x6x{c}>, tensor<3x1xi32>) -> tensor<3x6x{c}>
  %pc = stablehlo.pad %g, %k, low = [0, 1], high = [0, 1], interior = [0, 0] :
    (tensor<3x6x{c}>, tensor<{c}>) -> tensor<3x8x{c}>
  return %t, %cat, %p, %ds, %du, %g, %pc : tensor<6x4x{c}>, tensor<8x6x{c}>, tensor<6x10x{c}>,
      tensor<2x3x{c}>, tensor<4x6x{c}>, tensor<3x6x{c}>, tensor<3x8x{c}>
}}"""
    ops = ["broadcast_in_dim", "transpose", "reverse", "concatenate", "reshape", "slice",
           "pad", "dynamic_slice", "dynamic_update_slice", "gather", "add", "multiply",
           "constant"]
    got, ref = _run(text, [x, u, v, idx, np.array(1, np.int32)], ops)
    for i, (g, r) in enumerate(zip(got, ref)):
        _same(g, r, f"result #{i} {name}")


def test_complex_kernels_are_scalar() -> None:
    """LaneCheck rejects complex values (leaves and ops): no explicit-SIMD kernel over
    {re, im} structs; a real kernel beside them keeps its lanes."""
    from tests.unit.backends.cpu.util import module, op
    from xlapy.backends.cpu.lanes import LaneCheck
    from xlapy.backends.cpu.reduce_emit import reducer_op
    from xlapy.types import ElementType as ET
    from xlapy.types import Shape

    for t in (ET.C64, ET.C128):
        mod = module([Shape.array(t, (64,))] * 2, lambda c, p: op(c, "add", p))
        root = mod.entry.root
        assert not LaneCheck({}, [], reducer_op).kernel(root, [])
        leaves = {id(p): i for i, p in enumerate(root.operands)}
        assert not LaneCheck(leaves, [], reducer_op).kernel(root, [])
    real = module([Shape.array(ET.F32, (64,))] * 2, lambda c, p: op(c, "add", p))
    assert LaneCheck({}, [], reducer_op).kernel(real.entry.root, [])


TRANSCENDENTAL = ["exponential", "log", "sqrt", "tanh", "rsqrt", "exponential_minus_one",
                  "log_plus_one", "sine", "cosine", "tan", "logistic"]


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("opcode", TRANSCENDENTAL)
def test_transcendental(name: str, opcode: str) -> None:
    """exp/log/sqrt/tanh/sin/cos/tan (libm's C99 functions, what numpy calls), rsqrt and
    logistic (numpy's division of 1 by csqrt, by 1 + cexp(-z)), expm1/log1p (numpy's
    formulas): bit for bit, special values included."""
    dt = TYPES[name][0]
    x, _ = _grid(dt)
    rng = np.random.default_rng(7)
    r = (rng.standard_normal(500) * 4 + 1j * rng.standard_normal(500) * 4).astype(dt)
    x = np.concatenate([x[::len(_parts(dt)) ** 2], r])
    t = _tensor(x.shape, _ctype(name))
    text = (f"func.func @main(%a: {t}) -> {t} {{\n"
            f"  %r = stablehlo.{opcode} %a : {t}\n  return %r : {t}\n}}")
    (got,), (ref,) = _run(text, [x], [opcode])
    keep = slice(None)
    if opcode in ("rsqrt", "logistic"):  # the ratio of the division denormal: numpy keeps
        with np.errstate(all="ignore"):  # it, FTZ does not
            s = np.sqrt(x) if opcode == "rsqrt" else 1 + np.exp(-x)
            rat = np.where(np.abs(s.real) >= np.abs(s.imag), s.imag / s.real, s.real / s.imag)
        keep = ~((rat != 0) & (np.abs(rat) < np.finfo(rat.dtype).tiny))
    _same(got[keep], ref[keep], f"{opcode} {name}", x[keep])


@pytest.mark.parametrize("name", list(TYPES))
def test_power(name: str) -> None:
    """numpy's nc_pow: zero exponents and bases, integral real exponents |n| < 100 by
    products (1, 2, 3 unrolled, negative ones through numpy's division), else cpow."""
    dt = TYPES[name][0]
    x, y = _grid(dt)
    rng = np.random.default_rng(9)
    n = 2000
    base = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    ints = rng.integers(-120, 121, n).astype(np.float64)
    ints[:8] = [0, 1, 2, 3, -1, -2, -3, 99]
    exps = np.where(rng.random(n) < 0.7, ints, ints + rng.standard_normal(n)) + \
        1j * np.where(rng.random(n) < 0.8, 0.0, rng.standard_normal(n))
    x = np.concatenate([x, base])
    y = np.concatenate([y, exps.astype(dt)])
    t = _tensor(x.shape, _ctype(name))
    text = (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %r = stablehlo.power %a, %b : {t}\n  return %r : {t}\n}}")
    (got,), (ref,) = _run(text, [x, y], ["power"])
    # Where an intermediate is denormal (numpy keeps it; FTZ flushes it in the kernel's
    # products and inside libm's cpow) the results may differ: require nearly all to agree,
    # and all whose result is a normal number well inside the range.
    g = np.stack([got.real, got.imag], -1).astype(np.float64)
    r = np.stack([ref.real, ref.imag], -1).astype(np.float64)
    same = ((np.isnan(g) & np.isnan(r)) | ((g == r) & (np.signbit(g) == np.signbit(r)))).all(-1)
    bad = np.nonzero(~same)[0][:4]
    assert same.mean() > 0.99, \
        f"power {name}: {(~same).sum()} differ: {x[bad]} ** {y[bad]}: {got[bad]} {ref[bad]}"
    tiny = np.finfo(np.abs(x).dtype).tiny
    normal = ((np.abs(r) > tiny * 1e6) & (np.abs(r) < 1e30)).all(-1)
    _same(got[normal], ref[normal], f"power {name}", x[normal], y[normal])


@pytest.mark.parametrize("name", list(TYPES))
def test_max_min_iota_and_parts_of_reals(name: str) -> None:
    """maximum/minimum (lexicographic on flushed values, the unflushed operand selected),
    complex iota, and real/imag of a real operand (itself, +0)."""
    dt, pt = TYPES[name]
    x, y = _grid(dt)
    n = x.shape[0]
    t, f = _tensor((n,), _ctype(name)), _tensor((n,), pt)
    it = _tensor((3, 5), _ctype(name))
    text = (f"func.func @main(%a: {t}, %b: {t}, %r: {f}) -> ({t}, {t}, {it}, {f}, {f}) {{\n"
            f"  %mx = stablehlo.maximum %a, %b : {t}\n"
            f"  %mn = stablehlo.minimum %a, %b : {t}\n"
            f"  %io = stablehlo.iota dim = 1 : {it}\n"
            f"  %re = stablehlo.real %r : ({f}) -> {f}\n"
            f"  %im = stablehlo.imag %r : ({f}) -> {f}\n"
            f"  return %mx, %mn, %io, %re, %im : {t}, {t}, {it}, {f}, {f}\n}}")
    r = x.real.copy()
    got, ref = _run(text, [x, y, r], ["maximum", "minimum", "iota", "real", "imag"])
    for i, (g, rf) in enumerate(zip(got, ref)):
        _same(g.reshape(-1), rf.reshape(-1), f"result #{i} {name}")


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("opcode", ["add", "multiply"])
def test_reduce(name: str, opcode: str) -> None:
    """Reduce kernels with a complex add/multiply reducer, over the outer, the inner and
    both dimensions: exact where the order is the interpreter's (dimension 0), otherwise
    within the rounding of a reordered sum/product."""
    dt = TYPES[name][0]
    c = _ctype(name)
    rng = np.random.default_rng(4)
    shape = (7, 300)
    if opcode == "add":
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    else:  # unit magnitudes: the product neither overflows nor underflows
        x = np.exp(1j * rng.standard_normal(shape)).astype(dt)
    init = "(0.0, 0.0)" if opcode == "add" else "(1.0, 0.0)"
    red = ("  %r{k} = stablehlo.reduce(%a init: %z) applies stablehlo.{op} across dimensions ="
           " [{dims}] : (tensor<7x300x{c}>, tensor<{c}>) -> {out}\n")
    outs = [f"tensor<300x{c}>", f"tensor<7x{c}>", f"tensor<{c}>"]
    body = "".join(red.format(k=k, op=opcode, dims=d, c=c, out=o)
                   for k, (d, o) in enumerate(zip(["0", "1", "0, 1"], outs)))
    text = (f"func.func @main(%a: tensor<7x300x{c}>) -> ({', '.join(outs)}) {{\n"
            f"  %z = stablehlo.constant dense<{init}> : tensor<{c}>\n{body}"
            f"  return %r0, %r1, %r2 : {', '.join(outs)}\n}}")
    got, ref = _run(text, [x], ["reduce"])
    _same(got[0], ref[0], f"reduce {opcode} {name} over dimension 0")
    eps = np.finfo(np.abs(x).dtype).eps
    for g, r, n in zip(got[1:], ref[1:], [300, 2100]):
        bound = 4 * n * eps * (np.abs(x).sum() if opcode == "add" else 1.0)
        assert np.all(np.abs(g - r) <= bound), f"reduce {opcode} {name}: {np.abs(g - r).max()}"


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("opcode", ["exponential", "tanh", "log", "sine"])
def test_libm_parts_through_intrinsics_vectorize_with_the_same_bits(name: str,
                                                                    opcode: str) -> None:
    """libm's sin, cos, log, pow and atan2 of the parts are emitted as LLVM intrinsics (the
    same libm call per lane) so the loop vectorizer widens the rest of the element's
    arithmetic: a c64 exp of 17k elements 343 -> 105 us (XLA 147), tanh 336 -> 118, log
    879 -> 436. LLVM joins sin(x) and cos(x) into glibc's sincos, which the runtime binds
    (its bits are sin's and cos's). Long arrays (the vector loop and its remainder), bit for
    bit the interpreter."""
    from xlapy.backends.cpu import rtlib

    assert {"sincos", "sincosf"} <= rtlib.SYMBOLS and "sincosf" in rtlib.bound_addresses()
    dt = TYPES[name][0]
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(1037) * 3 + 1j * rng.standard_normal(1037) * 3).astype(dt)
    x[::97] = _grid(dt)[0][:11]
    t = _tensor(x.shape, _ctype(name))
    text = (f"func.func @main(%a: {t}) -> {t} {{\n"
            f"  %r = stablehlo.{opcode} %a : {t}\n  return %r : {t}\n}}")
    (got,), (ref,) = _run(text, [x], [opcode])
    _same(got, ref, f"{opcode} {name}", x)
