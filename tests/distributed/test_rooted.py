"""collective_broadcast (has_dynamic_root, variadic), collective_reduce, ragged all_reduce
groups (-1 padding) and all_gather / reduce_scatter sized by their declared result type, on
1x4, 2x2 and 4x2 threaded grids, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.distributed.test_grid import group_of, make_groups, spec_groups
from xlapy.distributed import ProcessGrid
from xlapy.errors import XlapyError
from xlapy.stablehlo import parse_module

GRIDS = [(1, 4), (2, 2), (4, 2)]
Pid = tuple[int, int]


def run(text: str, nr: int, np_: int, args: list[list[np.ndarray]]) -> list:
    module = parse_module(text, "test.mlir")
    return ProcessGrid(nr, np_, timeout=10).run_computation(module, args)


def dense(groups: list[list[int]]) -> str:
    width = max(len(g) for g in groups)
    rows = [g + [-1] * (width - len(g)) for g in groups]
    return f"dense<{rows}> : tensor<{len(rows)}x{width}xi64>"


def channel(kind: int) -> str:
    return f", channel_handle = #stablehlo.channel_handle<handle = {kind}, type = 0>" \
        if kind else ""


def data(nr: int, np_: int, shape: tuple[int, ...] = (2, 3)) -> dict[Pid, np.ndarray]:
    rng = np.random.default_rng(nr * 10 + np_)
    return {(r, p): rng.integers(-9, 9, shape) for r in range(nr) for p in range(np_)}


@pytest.mark.parametrize("nr,np_", GRIDS)
@pytest.mark.parametrize("handle", [0, 1])
def test_collective_broadcast_dynamic_root_variadic(nr: int, np_: int, handle: int) -> None:
    size = np_ if handle else nr
    groups = make_groups(size)
    roots = np.array([len(groups[0]) - 1, 0], np.int32)
    text = f"""
func.func @main(%a: tensor<2x3xi64>, %b: tensor<2x3xi64>, %root: tensor<2xi32>)
    -> (tensor<2x3xi64>, tensor<2x3xi64>) {{
  %r:2 = "stablehlo.collective_broadcast"(%a, %b, %root) {{
    replica_groups = {dense(groups)}{channel(handle)}, has_dynamic_root
  }} : (tensor<2x3xi64>, tensor<2x3xi64>, tensor<2xi32>) -> (tensor<2x3xi64>, tensor<2x3xi64>)
  return %r#0, %r#1 : tensor<2x3xi64>, tensor<2x3xi64>
}}"""
    a, b = data(nr, np_), {k: v * 100 for k, v in data(nr, np_).items()}
    pids = [(r, p) for r in range(nr) for p in range(np_)]
    got = run(text, nr, np_, [[a[pid], b[pid], roots] for pid in pids])
    # handle 0: groups of replica ids within each partition; handle > 0: of partition ids
    strategy = "cross_partition" if handle else "cross_replica"
    pgroups = spec_groups(strategy, groups, nr, np_)
    for pid, (ra, rb) in zip(pids, got):
        g = group_of(pid, pgroups)
        np.testing.assert_array_equal(ra, a[g[roots[0]]])
        np.testing.assert_array_equal(rb, b[g[roots[1]]])


@pytest.mark.parametrize("nr,np_", GRIDS)
def test_collective_reduce_root_gets_the_sum(nr: int, np_: int) -> None:
    groups = make_groups(nr)
    text = f"""
func.func @main(%x: tensor<2x3xi64>) -> tensor<2x3xi64> {{
  %r = "stablehlo.collective_reduce"(%x) ({{
    ^bb0(%p: tensor<i64>, %q: tensor<i64>):
      %m = stablehlo.multiply %p, %q : tensor<i64>
      %s = stablehlo.add %m, %p : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }}) {{replica_groups = {dense(groups)}}} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  return %r : tensor<2x3xi64>
}}"""
    x = data(nr, np_)
    pids = [(r, p) for r in range(nr) for p in range(np_)]
    got = run(text, nr, np_, [[x[pid]] for pid in pids])
    pgroups = spec_groups("cross_replica", groups, nr, np_)
    for pid, value in zip(pids, got):
        g = group_of(pid, pgroups)
        want = x[g[0]]
        for q in g[1:]:  # reduce_without_init in group order, with a non-commutative reducer
            want = want * x[q] + want
        np.testing.assert_array_equal(value, want if pid == g[0] else np.zeros_like(want))


@pytest.mark.parametrize("nr,np_", GRIDS)
def test_all_reduce_ragged_groups(nr: int, np_: int) -> None:
    groups = [[0]] if nr == 1 else [list(range(nr - 1, 0, -1)), [0]]
    text = f"""
func.func @main(%x: tensor<2x3xi64>) -> tensor<2x3xi64> {{
  %r = "stablehlo.all_reduce"(%x) ({{
    ^bb0(%p: tensor<i64>, %q: tensor<i64>):
      %s = stablehlo.add %p, %q : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }}) {{replica_groups = {dense(groups)}}} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  return %r : tensor<2x3xi64>
}}"""
    x = data(nr, np_)
    pids = [(r, p) for r in range(nr) for p in range(np_)]
    got = run(text, nr, np_, [[x[pid]] for pid in pids])
    pgroups = spec_groups("cross_replica", groups, nr, np_)
    for pid, value in zip(pids, got):
        np.testing.assert_array_equal(value, sum(x[q] for q in group_of(pid, pgroups)))


def test_ragged_groups_only_where_allowed() -> None:
    text = """
func.func @main(%x: tensor<4xi64>) -> tensor<8xi64> {
  %r = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64,
    replica_groups = dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>} : (tensor<4xi64>) -> tensor<8xi64>
  return %r : tensor<8xi64>
}"""
    with pytest.raises(XlapyError, match="all_gather_c4"):
        parse_module(text, "t.mlir")


@pytest.mark.parametrize("nr,np_", [(2, 2), (4, 2), (2, 4)])
def test_all_gather_and_reduce_scatter_sized_by_declared_type(nr: int, np_: int) -> None:
    """cross_replica_and_partition: a group of replica ids spans every partition, so the
    group size is len(group) * num_partitions, which only the declared type tells."""
    groups = make_groups(nr)
    n = len(groups[0]) * np_
    text = f"""
func.func @main(%x: tensor<2x3xi64>) -> (tensor<2x{3 * n}xi64>, tensor<{2 * n}x3xi64>) {{
  %g = "stablehlo.all_gather"(%x) {{all_gather_dim = 1 : i64,
    replica_groups = {dense(groups)}{channel(1)}}} : (tensor<2x3xi64>) -> tensor<2x{3 * n}xi64>
  %big = stablehlo.concatenate {", ".join(["%x"] * n * n)}, dim = 0 :
    ({", ".join(["tensor<2x3xi64>"] * n * n)}) -> tensor<{2 * n * n}x3xi64>
  %s = "stablehlo.reduce_scatter"(%big) ({{
    ^bb0(%p: tensor<i64>, %q: tensor<i64>):
      %t = stablehlo.add %p, %q : tensor<i64>
      stablehlo.return %t : tensor<i64>
  }}) {{scatter_dimension = 0 : i64, replica_groups = {dense(groups)}{channel(1)}}}
    : (tensor<{2 * n * n}x3xi64>) -> tensor<{2 * n}x3xi64>
  return %g, %s : tensor<2x{3 * n}xi64>, tensor<{2 * n}x3xi64>
}}"""
    x = data(nr, np_)
    pids = [(r, p) for r in range(nr) for p in range(np_)]
    got = run(text, nr, np_, [[x[pid]] for pid in pids])
    pgroups = spec_groups("cross_replica_and_partition", groups, nr, np_)
    for pid, (gathered, scattered) in zip(pids, got):
        g = group_of(pid, pgroups)
        np.testing.assert_array_equal(gathered, np.concatenate([x[q] for q in g], axis=1))
        total = sum(np.concatenate([x[q]] * n * n, axis=0) for q in g)
        np.testing.assert_array_equal(scattered, np.split(total, n, axis=0)[g.index(pid)])
