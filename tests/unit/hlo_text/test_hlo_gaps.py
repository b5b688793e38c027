"""HLO text gaps: iota and mesh replica_groups, topk / TopK custom call, send/recv pairs."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.errors import ParseError
from xlapy.hlo_text import parse_hlo_module, print_hlo_module

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""


BODIES = {
    "all-reduce": "ROOT r = f32[4] all-reduce(x), @G@E, to_apply=add",
    "all-gather": "ROOT r = f32[4,@K] all-gather(x2), @G@E, dimensions={1}",
    "reduce-scatter": "ROOT r = f32[4] reduce-scatter(x3), @G@E, dimensions={0}, to_apply=add",
    "all-to-all": "ROOT r = f32[4,@K] all-to-all(x4), @G@E, dimensions={1}",
    "collective-broadcast": "ROOT r = f32[4] collective-broadcast(x), @G@E",
}


def _program(groups: str, op: str = "all-reduce", extra: str = "", n: int = 8, k: int = 1
             ) -> str:
    """`op` with `replica_groups=<groups><extra>`; k sizes the gather/scatter shapes."""
    text = f"""HloModule m, replica_count={n}

{ADD}
ENTRY e {{
  x = f32[4] parameter(0)
  x2 = f32[4,1] parameter(1)
  x3 = f32[@K4] parameter(2)
  x4 = f32[4,@K] parameter(3)
  {BODIES[op]}
}}
"""
    return text.replace("@G", "replica_groups=" + groups).replace("@E", extra).replace(
        "@K4", str(4 * k)).replace("@K", str(k))


def _parse_groups(groups: str, op: str = "all-reduce", extra: str = "", n: int = 8) -> tuple:
    """The replica groups the IR gets for `op` with `replica_groups=<groups>`."""
    for k in range(1, n + 1):  # find the group size that makes the declared shapes agree
        try:
            mod = parse_hlo_module(_program(groups, op, extra, n, k))
        except ParseError:
            if op in ("all-reduce", "collective-broadcast") or k == n:
                raise
            continue
        return mod.entry.root.attrs.replica_groups
    raise AssertionError


@pytest.mark.parametrize("text,expected", [
    ("[1,4]<=[4]", ((0, 1, 2, 3),)),
    ("[4,1]<=[4]", ((0,), (1,), (2,), (3,))),
    ("[2,4]<=[8]", ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("[2,2]<=[2,2]T(1,0)", ((0, 2), (1, 3))),
    ("[4,2]<=[2,4]T(1,0)", ((0, 4), (1, 5), (2, 6), (3, 7))),
    ("[2,4]<=[4,2]T(1,0)", ((0, 2, 4, 6), (1, 3, 5, 7))),
    ("[2,4]<=[2,2,2]T(2,1,0)", ((0, 4, 2, 6), (1, 5, 3, 7))),
    ("[4,2]<=[2,2,2]T(0,2,1)", ((0, 2), (1, 3), (4, 6), (5, 7))),
    ("[1,8]<=[2,2,2]T(1,0,2)", ((0, 1, 4, 5, 2, 3, 6, 7),)),
])
def test_iota_replica_groups(text: str, expected: tuple) -> None:
    assert _parse_groups(text) == expected
    # The same expansion by hand: iota, reshape, transpose, reshape.
    head, _, tail = text.partition("<=")
    g, s = (int(v) for v in head.strip("[]").split(","))
    dims_text, _, perm_text = tail.partition("T")
    dims = [int(v) for v in dims_text.strip("[]").split(",")]
    arr = np.arange(int(np.prod(dims))).reshape(dims)
    if perm_text:
        arr = arr.transpose([int(v) for v in perm_text.strip("()").split(",")])
    assert tuple(map(tuple, arr.reshape(g, s).tolist())) == expected


@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                "collective-broadcast"])
def test_iota_groups_on_each_collective(op: str) -> None:
    assert _parse_groups("[4,2]<=[2,4]T(1,0)", op) == ((0, 4), (1, 5), (2, 6), (3, 7))


@pytest.mark.parametrize("text", ["{}", "{{}}"])
def test_empty_groups(text: str) -> None:
    assert _parse_groups(text) == ()


def test_explicit_groups_still_work() -> None:
    assert _parse_groups("{{0,1},{2,3},{4,5},{6,7}}") == ((0, 1), (2, 3), (4, 5), (6, 7))


@pytest.mark.parametrize("text,extra,expected", [
    # As XLA 0.10.2 prints them after SPMD partitioning (x sharded over a 2x4 mesh).
    ("mesh['axis_0'=2,'axis_1'=4] {'axis_0'}", "", ((0, 4), (1, 5), (2, 6), (3, 7))),
    ("mesh['axis_0'=2,'axis_1'=4] {'axis_1'}", "", ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("mesh['axis_0'=2,'axis_1'=4,'axis_2'=1] {'axis_0'}", "", ((0, 4), (1, 5), (2, 6), (3, 7))),
    ("mesh['axis_0'=4,'axis_1'=2]", ", device_ids=([2,4]T(1,0)) {'axis_0'}",
     ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("mesh['axis_0'=1,'axis_1'=4,'axis_2'=2]", ", device_ids=([2,4]T(1,0)) {'axis_2'}",
     ((0, 4), (1, 5), (2, 6), (3, 7))),
    ("mesh['a'=2,'b'=4] {'b','a'}", "", ((0, 4, 1, 5, 2, 6, 3, 7),)),
    ("mesh['a'=2,'b'=4] {'a','b'}", "", ((0, 1, 2, 3, 4, 5, 6, 7),)),
    ("mesh['a'=2,'b'=4] {}", "", tuple((i,) for i in range(8))),
    ("mesh['a'=2,'b'=2]", ", device_ids=(3,2,1,0) {'a'}", ((3, 1), (2, 0))),
    # Sub-axis 'b':(2)2: the minor half of b (b = 2 x 2, major part of size 2 before it).
    ("mesh['a'=2,'b'=4] {'b':(2)2}", "", ((0, 1), (2, 3), (4, 5), (6, 7))),
    ("mesh['a'=2,'b'=4] {'b':(1)2}", "", ((0, 2), (1, 3), (4, 6), (5, 7))),
])
def test_mesh_replica_groups(text: str, extra: str, expected: tuple) -> None:
    assert _parse_groups(text, extra=extra) == expected


@pytest.mark.parametrize("text,extra,msg", [
    ("[2,3]<=[8]", "", "need 6 ids"),
    ("[2,4]<=[2,4]T(0,0)", "", "not a permutation"),
    ("mesh['a'=2] {'c'}", "", "mesh's axes"),
    ("mesh['a'=2,'b'=2]", ", device_ids=(0,1,2) {'a'}", "device_ids has 3"),
    ("[2,4]", "", "expected"),
])
def test_bad_groups(text: str, extra: str, msg: str) -> None:
    with pytest.raises(ParseError, match=msg):
        _parse_groups(text, extra=extra)


def test_iota_groups_round_trip() -> None:
    mod = parse_hlo_module(_program("[2,2]<=[2,2]T(1,0)", n=4))
    printed = print_hlo_module(mod)
    assert "replica_groups={{0,2},{1,3}}" in printed
    assert parse_hlo_module(printed).entry.root.attrs.replica_groups == ((0, 2), (1, 3))


def test_iota_all_reduce_on_the_threaded_grid() -> None:
    from xlapy.distributed import execute_replicated

    text = f"""HloModule m, replica_count=4

{ADD}
ENTRY e {{
  x = f32[3] parameter(0)
  ROOT r = f32[3] all-reduce(x), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=add
}}
"""
    args = [[np.arange(3, dtype=np.float32) * 10 ** i] for i in range(4)]
    out = execute_replicated(parse_hlo_module(text), args, num_replicas=4)
    for r, res in enumerate(out):
        group = (0, 2) if r in (0, 2) else (1, 3)
        np.testing.assert_array_equal(res[0], sum(args[i][0] for i in group))
