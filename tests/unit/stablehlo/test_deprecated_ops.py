"""Deprecated StableHLO ops (dot, broadcast, einsum, unary_einsum, torch_index_select,
cross-replica-sum) import as the spec ops StableHLO legalizes them into: the same computation as
the spec-op program, the right values on the interpreter, and located errors on bad input."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.errors import ParseError, Unimplemented, XlapyError
from xlapy.stablehlo import parse_module
from xlapy.stablehlo.equality import modules_equal


def run(text: str, *args: np.ndarray) -> np.ndarray:
    return np.asarray(xlapy.compile(text, backend="interpreter")(*args))


def program(args: str, result: str, body: str) -> str:
    return f"func.func @main({args}) -> {result} {{\n{body}\n  func.return %0 : {result}\n}}"


def same(text: str, spec: str) -> None:
    m = parse_module(text)
    assert modules_equal(m, parse_module(spec))
    deprecated = {"dot", "broadcast", "einsum", "unary_einsum", "torch_index_select",
                  "cross-replica-sum"}
    assert not any(i.opcode in deprecated for c in m.computations for i in c.instructions)


def rejects(text: str, match: str, error: type[XlapyError] = ParseError) -> None:
    with pytest.raises(error, match=match):
        parse_module(text)


A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


# ---- dot -----------------------------------------------------------------------------------------
DOT_SPEC = ("  %0 = stablehlo.dot_general %a, %b, contracting_dims = [{lc}] x [0]{prec} : "
            "({lt}, {rt}) -> {res}")


@pytest.mark.parametrize("lt,rt,res,lc,x,y", [
    ("tensor<2x3xf32>", "tensor<3x4xf32>", "tensor<2x4xf32>", 1, A, B),
    ("tensor<3xf32>", "tensor<3x4xf32>", "tensor<4xf32>", 0, A[1], B),
    ("tensor<2x3xf32>", "tensor<3xf32>", "tensor<2xf32>", 1, A, B[:, 1]),
    ("tensor<3xf32>", "tensor<3xf32>", "tensor<f32>", 0, A[1], B[:, 2]),
])
@pytest.mark.parametrize("generic", [False, True])
def test_dot_is_dot_general(lt: str, rt: str, res: str, lc: int, x: np.ndarray, y: np.ndarray,
                            generic: bool) -> None:
    args = f"%a: {lt}, %b: {rt}"
    if generic:
        op = (f'  %0 = "stablehlo.dot"(%a, %b) {{precision_config = [#stablehlo<precision '
              f'DEFAULT>, #stablehlo<precision HIGHEST>]}} : ({lt}, {rt}) -> {res}')
    else:
        op = f"  %0 = stablehlo.dot %a, %b, precision = [DEFAULT, HIGHEST] : ({lt}, {rt}) -> {res}"
    text = program(args, res, op)
    spec = program(args, res, DOT_SPEC.format(lc=lc, lt=lt, rt=rt, res=res,
                                              prec=", precision = [DEFAULT, HIGHEST]"))
    same(text, spec)
    np.testing.assert_allclose(run(text, x, y), np.dot(x, y))
    plain = program(args, res, f"  %0 = stablehlo.dot %a, %b : ({lt}, {rt}) -> {res}")
    same(plain, program(args, res, DOT_SPEC.format(lc=lc, lt=lt, rt=rt, res=res, prec="")))


def test_dot_mixed_result_type() -> None:
    text = program("%a: tensor<2x3xi8>, %b: tensor<3xi8>", "tensor<2xi32>",
                   "  %0 = stablehlo.dot %a, %b : (tensor<2x3xi8>, tensor<3xi8>) -> tensor<2xi32>")
    x = np.full((2, 3), 100, np.int8)
    np.testing.assert_array_equal(run(text, x, np.full(3, 100, np.int8)), [30000, 30000])


def test_dot_bad_rank_and_shape() -> None:
    rank3 = program("%a: tensor<2x3x3xf32>, %b: tensor<3xf32>", "tensor<2x3xf32>",
                    "  %0 = stablehlo.dot %a, %b : (tensor<2x3x3xf32>, tensor<3xf32>) -> "
                    "tensor<2x3xf32>")
    rejects(rank3, r"2:22: stablehlo.dot: lhs must have rank 1 or 2, got tensor<2x3x3xf32>")
    mismatch = program("%a: tensor<2x3xf32>, %b: tensor<4xf32>", "tensor<2xf32>",
                       '  %0 = "stablehlo.dot"(%a, %b) : (tensor<2x3xf32>, tensor<4xf32>) -> '
                       "tensor<2xf32>")
    rejects(mismatch, r"2:8: stablehlo.dot: .*dot_general")


# ---- broadcast -------------------------------------------------------------------------------
@pytest.mark.parametrize("form", [
    "stablehlo.broadcast %a, sizes = [4, 2] : (tensor<2x3xf32>) -> tensor<4x2x2x3xf32>",
    '"stablehlo.broadcast"(%a) {broadcast_sizes = array<i64: 4, 2>} : (tensor<2x3xf32>) -> '
    "tensor<4x2x2x3xf32>",
])
def test_broadcast_is_broadcast_in_dim(form: str) -> None:
    text = program("%a: tensor<2x3xf32>", "tensor<4x2x2x3xf32>", f"  %0 = {form}")
    spec = program("%a: tensor<2x3xf32>", "tensor<4x2x2x3xf32>",
                   "  %0 = stablehlo.broadcast_in_dim %a, dims = [2, 3] : (tensor<2x3xf32>) -> "
                   "tensor<4x2x2x3xf32>")
    same(text, spec)
    np.testing.assert_array_equal(run(text, A), np.broadcast_to(A, (4, 2, 2, 3)))


def test_broadcast_of_a_scalar_and_bad_result() -> None:
    text = program("%a: tensor<i32>", "tensor<3xi32>",
                   "  %0 = stablehlo.broadcast %a, sizes = [3] : (tensor<i32>) -> tensor<3xi32>")
    np.testing.assert_array_equal(run(text, np.int32(7)), [7, 7, 7])
    rejects(text.replace("-> tensor<3xi32>\n", "-> tensor<2x3xi32>\n")
            .replace("-> tensor<3xi32> {", "-> tensor<2x3xi32> {"),
            r"2:8: stablehlo.broadcast: result 0 has type tensor<3xi32> but is declared as "
            r"tensor<2x3xi32>")
    rejects(text.replace("sizes = [3]", "sizes = [-3]"), r"2:8: .*must be non-negative")


# ---- einsum ----------------------------------------------------------------------------------
def test_einsum_matmul_is_dot_general() -> None:
    args = "%a: tensor<2x3xf32>, %b: tensor<3x4xf32>"
    forms = ['stablehlo.einsum %a, %b, config = "ab,bc->ac"',
             '"stablehlo.einsum"(%a, %b) {einsum_config = "ab,bc->ac"}']
    for form in forms:
        text = program(args, "tensor<2x4xf32>",
                       f"  %0 = {form} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>")
        same(text, program(args, "tensor<2x4xf32>", DOT_SPEC.format(
            lc=1, lt="tensor<2x3xf32>", rt="tensor<3x4xf32>", res="tensor<2x4xf32>", prec="")))
        np.testing.assert_allclose(run(text, A, B), A @ B)


def test_einsum_transposed_result_is_dot_general_and_transpose() -> None:
    args = "%a: tensor<2x3xf32>, %b: tensor<3x4xf32>"
    text = program(args, "tensor<4x2xf32>",
                   '  %0 = stablehlo.einsum %a, %b, config = "ab,bc->ca" : '
                   "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<4x2xf32>")
    spec = program(args, "tensor<4x2xf32>", DOT_SPEC.format(
        lc=1, lt="tensor<2x3xf32>", rt="tensor<3x4xf32>", res="tensor<2x4xf32>", prec="")
        .replace("%0", "%1") + "\n  %0 = stablehlo.transpose %1, dims = [1, 0] : "
        "(tensor<2x4xf32>) -> tensor<4x2xf32>")
    same(text, spec)
    np.testing.assert_allclose(run(text, A, B), (A @ B).T)


@pytest.mark.parametrize("eq,lt,rt,res", [
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5), (2, 3, 5)),
    ("bij,bjk->kbi", (2, 3, 4), (2, 4, 5), (5, 2, 3)),
    ("ij,kl->ijkl", (2, 3), (4, 1), (2, 3, 4, 1)),
    ("ij,ij->", (2, 3), (2, 3), ()),
    ("ij,ij->j", (2, 3), (2, 3), (3,)),
    ("abc,cd->da", (2, 3, 4), (4, 5), (5, 2)),  # b summed alone before the dot
    ("ab,cd->ad", (2, 3), (4, 5), (2, 5)),
])
def test_einsum_values(eq: str, lt: tuple[int, ...], rt: tuple[int, ...],
                       res: tuple[int, ...]) -> None:
    def ty(dims: tuple[int, ...]) -> str:
        return f"tensor<{''.join(f'{d}x' for d in dims)}f32>"

    text = program(f"%a: {ty(lt)}, %b: {ty(rt)}", ty(res),
                   f'  %0 = stablehlo.einsum %a, %b, config = "{eq}" : '
                   f"({ty(lt)}, {ty(rt)}) -> {ty(res)}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(lt).astype(np.float32)
    y = rng.standard_normal(rt).astype(np.float32)
    np.testing.assert_allclose(run(text, x, y), np.einsum(eq, x, y), rtol=1e-5, atol=1e-5)


def test_unary_einsum_is_reduce_and_transpose() -> None:
    text = program("%a: tensor<2x3xf32>", "tensor<2xf32>",
                   '  %0 = stablehlo.unary_einsum %a, config = "ab->a" : (tensor<2x3xf32>) -> '
                   "tensor<2xf32>")
    spec = program("%a: tensor<2x3xf32>", "tensor<2xf32>", """\
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] :
      (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>""")
    same(text, spec)
    generic = text.replace('stablehlo.unary_einsum %a, config = "ab->a"',
                           '"stablehlo.unary_einsum"(%a) {einsum_config = "ab->a"}')
    same(generic, spec)
    np.testing.assert_allclose(run(text, A), A.sum(1))
    for eq, want in (("ab->ba", A.T), ("ab->", A.sum()), ("ab->ab", A)):
        dims = "x".join(map(str, want.shape))
        res = f"tensor<{dims}xf32>" if dims else "tensor<f32>"
        t = text.replace('"ab->a"', f'"{eq}"').replace("tensor<2xf32>", res)
        np.testing.assert_allclose(run(t, A), want)


def test_einsum_unimplemented_and_invalid() -> None:
    diag = program("%a: tensor<3x3xf32>", "tensor<3xf32>",
                   '  %0 = stablehlo.unary_einsum %a, config = "aa->a" : (tensor<3x3xf32>) -> '
                   "tensor<3xf32>")
    for error in (Unimplemented, ParseError):
        rejects(diag, r"2:8: stablehlo.unary_einsum: equation 'aa->a' is not implemented",
                error)
    ellipsis = diag.replace('"aa->a"', '"...a->..."')
    rejects(ellipsis, r"stablehlo.unary_einsum: equation '...a->...' is not implemented",
            Unimplemented)
    args = "%a: tensor<2x3xf32>, %b: tensor<4x4xf32>"
    bad = program(args, "tensor<2x4xf32>", '  %0 = stablehlo.einsum %a, %b, config = "ab,bc->ac"'
                  " : (tensor<2x3xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>")
    rejects(bad, r"2:8: stablehlo.einsum: index 'b' of 'ab,bc->ac' has sizes 3 and 4")
    rejects(bad.replace('"ab,bc->ac"', '"abc,bc->ac"'),
            r"2:8: stablehlo.einsum: term 'abc' of 'abc,bc->ac' has 3 index\(es\)")
    rejects(bad.replace('"ab,bc->ac"', '"ab,bc"'), r"2:8: stablehlo.einsum: .* needs one '->'")
    rejects(bad.replace('"ab,bc->ac"', '"ab,cd->az"'), r"2:8: .*output 'az'")


# ---- torch_index_select ----------------------------------------------------------------------
def test_torch_index_select_is_gather() -> None:
    text = program("%a: tensor<2x3xf32>, %i: tensor<4xi32>", "tensor<2x4xf32>",
                   '  %0 = "stablehlo.torch_index_select"(%a, %i) {batch_dims = 0 : i64, '
                   "dim = 1 : i64} : (tensor<2x3xf32>, tensor<4xi32>) -> tensor<2x4xf32>")
    spec = program("%a: tensor<2x3xf32>, %i: tensor<4xi32>", "tensor<2x4xf32>",
                   '  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<'
                   "offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1], "
                   "index_vector_dim = 1>, slice_sizes = array<i64: 2, 1>} : "
                   "(tensor<2x3xf32>, tensor<4xi32>) -> tensor<2x4xf32>")
    same(text, spec)
    idx = np.array([2, 0, 1, 2], np.int32)
    np.testing.assert_array_equal(run(text, A, idx), A[:, idx])


def test_torch_index_select_batch_dims_values() -> None:
    x = np.arange(2 * 3 * 5 * 2, dtype=np.float32).reshape(2, 3, 5, 2)
    idx = np.array([[[4, 0], [1, 1], [3, 2], [0, 0]], [[2, 2], [4, 1], [0, 3], [1, 4]]],
                   np.int32)  # 2x4x2
    text = program("%a: tensor<2x3x5x2xf32>, %i: tensor<2x4x2xi32>", "tensor<2x3x4x2x2xf32>",
                   '  %0 = "stablehlo.torch_index_select"(%a, %i) {batch_dims = 1 : i64, '
                   "dim = 2 : i64} : (tensor<2x3x5x2xf32>, tensor<2x4x2xi32>) -> "
                   "tensor<2x3x4x2x2xf32>")
    want = np.stack([np.take(x[b], idx[b], axis=1) for b in range(2)])
    np.testing.assert_array_equal(run(text, x, idx), want)
    rejects(text.replace("batch_dims = 1", "batch_dims = 3"), r"2:8: .*batch_dims 3 must be")
    rejects(text.replace("dim = 2 : i64", "dim = 4 : i64"), r"2:8: .*dim 4 is out of range")
    rejects(text.replace("%i: tensor<2x4x2xi32>", "%i: tensor<3x4x2xi32>")
            .replace("tensor<2x4x2xi32>)", "tensor<3x4x2xi32>)"),
            r"2:8: stablehlo.torch_index_select: the first 1 dimension")


# ---- cross-replica-sum -----------------------------------------------------------------------
def test_cross_replica_sum_is_all_reduce() -> None:
    text = program("%a: tensor<2x3xf32>", "tensor<2x3xf32>",
                   '  %0 = "stablehlo.cross-replica-sum"(%a) {replica_groups = dense<[[0]]> : '
                   "tensor<1x1xi64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>")
    spec = program("%a: tensor<2x3xf32>", "tensor<2x3xf32>", """\
  %0 = "stablehlo.all_reduce"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>""")
    same(text, spec)
    np.testing.assert_array_equal(run(text, A), A)
    rejects(text.replace("-> tensor<2x3xf32>\n", "-> tensor<3x2xf32>\n")
            .replace("-> tensor<2x3xf32> {", "-> tensor<3x2xf32> {"),
            r"2:8: stablehlo.cross-replica-sum: result 0 has type tensor<2x3xf32>")
    two = text.replace("%a: tensor<2x3xf32>", "%a: tensor<2x3xf32>, %b: tensor<2x3xf32>") \
        .replace("(%a)", "(%a, %b)").replace("(tensor<2x3xf32>) ->",
                                             "(tensor<2x3xf32>, tensor<2x3xf32>) ->")
    rejects(two, r"2:8: stablehlo.cross-replica-sum takes 1 operand\(s\), got 2")
