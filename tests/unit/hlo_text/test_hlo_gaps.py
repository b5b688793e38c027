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


# ---- topk ----------------------------------------------------------------------------------------
def _run(text: str, *args: np.ndarray, backend: str = "interpreter") -> object:
    import xlapy

    return xlapy.compile(parse_hlo_module(text), backend=backend)(*args)


def _expected_top_k(x: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, ties by lower index: a stable argsort of the negated (or plain) values."""
    order = np.argsort(-x if largest else x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)


TOPK = """HloModule jit_f

ENTRY main.1 {
  x.1 = f32[2,8]{1,0} parameter(0)
  top_k.3 = (f32[2,3]{1,0}, s32[2,3]{1,0}) topk(x.1), k=3, largest=@L
  top_k.4 = f32[2,3]{1,0} get-tuple-element(top_k.3), index=0
  top_k.5 = s32[2,3]{1,0} get-tuple-element(top_k.3), index=1
  ROOT tuple.1 = (f32[2,3]{1,0}, s32[2,3]{1,0}) tuple(top_k.4, top_k.5)
}
"""

TIES = np.array([[3, 1, 3, 7, 7, 0, 1, 7], [2, 2, 2, 2, 5, 5, -1, -1]], np.float32)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_opcode(largest: bool, backend: str) -> None:
    text = TOPK.replace("@L", "true" if largest else "false")
    rng = np.random.default_rng(0)
    for x in (rng.standard_normal((2, 8)).astype(np.float32), TIES):
        vals, idx = _run(text, x, backend=backend)
        want_v, want_i = _expected_top_k(x, 3, largest)
        np.testing.assert_array_equal(vals, want_v)
        np.testing.assert_array_equal(idx, want_i)
    printed = print_hlo_module(parse_hlo_module(text))
    assert f"topk(%x.1), k=3, largest={'true' if largest else 'false'}" in printed
    np.testing.assert_array_equal(_run(printed, TIES)[1], _expected_top_k(TIES, 3, largest)[1])


def test_topk_largest_defaults_to_true() -> None:
    text = TOPK.replace(", largest=@L", "")
    np.testing.assert_array_equal(_run(text, TIES)[1], _expected_top_k(TIES, 3, True)[1])


# As XLA 0.10.2 compiles jax.lax.top_k(x, 3) for CPU (a total-order comparator).
TOPK_CUSTOM_CALL = """HloModule jit_f, is_scheduled=true

%compare-greater-than.1.clone (p.0.lhs.0: f32[], p.0.rhs.0: f32[], p.1.lhs.0: s32[], p.1.rhs.0: s32[]) -> pred[] {
  %p.0.lhs.0 = f32[] parameter(0)
  %p.0.rhs.0 = f32[] parameter(1)
  %p.1.lhs.0 = s32[] parameter(2)
  %p.1.rhs.0 = s32[] parameter(3)
  %constant.3 = s32[] constant(0)
  %constant.4 = s32[] constant(2147483647)
  %bitcast.2 = s32[] bitcast(%p.0.lhs.0)
  %bitcast.3 = s32[] bitcast(%p.0.rhs.0)
  %xor.2 = s32[] xor(%constant.4, %bitcast.2)
  %compare.4 = pred[] compare(%bitcast.2, %constant.3), direction=LT
  %xor.3 = s32[] xor(%constant.4, %bitcast.3)
  %compare.5 = pred[] compare(%bitcast.3, %constant.3), direction=LT
  %select.2 = s32[] select(%compare.4, %xor.2, %bitcast.2)
  %select.3 = s32[] select(%compare.5, %xor.3, %bitcast.3)
  ROOT %compare.6 = pred[] compare(%select.2, %select.3), direction=GT
}

ENTRY %main.1 (x.1: f32[2,8]) -> (f32[2,3], s32[2,3]) {
  %x.1 = f32[2,8]{1,0} parameter(0), metadata={op_name="x"}
  ROOT %custom-call = (f32[2,3]{1,0}, s32[2,3]{1,0}) custom-call(%x.1), custom_call_target="TopK", called_computations={%compare-greater-than.1.clone}, metadata={op_name="jit(f)/top_k" stack_frame_id=2}
}
"""  # noqa: E501


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_topk_custom_call(backend: str) -> None:
    rng = np.random.default_rng(1)
    for x in (rng.standard_normal((2, 8)).astype(np.float32), TIES):
        vals, idx = _run(TOPK_CUSTOM_CALL, x, backend=backend)
        want_v, want_i = _expected_top_k(x, 3, True)
        np.testing.assert_array_equal(vals, want_v)
        np.testing.assert_array_equal(idx, want_i)
    mod = parse_hlo_module(TOPK_CUSTOM_CALL)
    assert mod.entry.root.name == "custom-call"
    assert parse_hlo_module(print_hlo_module(mod)) is not None


def test_topk_bad_k() -> None:
    with pytest.raises(ParseError, match="k = 9"):
        parse_hlo_module(TOPK.replace("k=3", "k=9").replace("@L", "true"))


# ---- send / recv ---------------------------------------------------------------------------------
HOST_SEND_RECV = """HloModule host

ENTRY e {
  x = f32[2,3] parameter(0)
  tok = token[] after-all()
  recv = (f32[2,3], u32[], token[]) recv(tok), channel_id=3, is_host_transfer=true, frontend_attributes={_xla_host_transfer_handler_name="tf_rendezvous",_xla_host_transfer_rendezvous="r"}
  recv-done = (f32[2,3], token[]) recv-done(recv), channel_id=3, is_host_transfer=true
  data = f32[2,3] get-tuple-element(recv-done), index=0
  tok2 = token[] get-tuple-element(recv-done), index=1
  m = f32[2,3] multiply(data, x)
  send = (f32[2,3], u32[], token[]) send(m, tok2), channel_id=2, is_host_transfer=true, frontend_attributes={_xla_host_transfer_handler_name="tf_rendezvous"}
  send-done = token[] send-done(send), channel_id=2, is_host_transfer=true
  ROOT out = (f32[2,3], token[]) tuple(data, send-done)
}
"""  # noqa: E501


def _run_host(mod: object, x: np.ndarray, y: np.ndarray) -> tuple[object, dict]:
    from xlapy.interpreter import Interpreter, RuntimeState

    rt = RuntimeState(host_recvs={3: [y]})
    out = Interpreter(rt).run_module(mod, [x])
    return out, rt.host_sends


def test_host_send_recv_program() -> None:
    from xlapy.ops.attrs import ChannelType

    mod = parse_hlo_module(HOST_SEND_RECV)
    ops = {i.opcode: i for i in mod.entry.post_order()}
    assert ops["recv"].attrs.channel_handle.handle == 3
    assert ops["recv"].attrs.channel_handle.type is ChannelType.HOST_TO_DEVICE
    assert ops["send"].attrs.channel_handle.type is ChannelType.DEVICE_TO_HOST
    assert ops["send"].attrs.is_host_transfer and ops["recv"].attrs.is_host_transfer
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 3, np.float32)
    out, sends = _run_host(mod, x, y)
    np.testing.assert_array_equal(out[0], y)
    np.testing.assert_array_equal(sends[2][0], x * y)
    # Printed back as start/done pairs with the channel, host flag and frontend attributes.
    printed = print_hlo_module(mod)
    assert "recv-done(%recv" in printed and "send-done(%send" in printed
    assert printed.count("is_host_transfer=true") == 4
    assert '_xla_host_transfer_rendezvous="r"' in printed
    again = parse_hlo_module(printed)
    out2, sends2 = _run_host(again, x, y)
    np.testing.assert_array_equal(sends2[2][0], x * y)
    assert print_hlo_module(again) == printed


def test_device_send_recv_channels() -> None:
    from xlapy.ops.attrs import ChannelType

    text = """HloModule d

ENTRY e {
  x = s32[4] parameter(0)
  tok = token[] after-all()
  send = (s32[4], u32[], token[]) send(x, tok), channel_id=7
  send-done = token[] send-done(send), channel_id=7
  recv = (s32[4], u32[], token[]) recv(send-done), channel_id=8
  ROOT recv-done = (s32[4], token[]) recv-done(recv), channel_id=8
}
"""
    mod = parse_hlo_module(text)
    ops = {i.opcode: i for i in mod.entry.post_order()}
    assert ops["send"].attrs.channel_handle.type is ChannelType.DEVICE_TO_DEVICE
    assert ops["recv"].attrs.channel_handle.handle == 8
    printed = print_hlo_module(mod)
    assert "ROOT %recv-done = (s32[4], token[]) recv-done(" in printed
    assert print_hlo_module(parse_hlo_module(printed)) == printed


@pytest.mark.parametrize("old,new,msg", [
    ("send-done(send)", "send-done(x)", "must be a send"),
    ("(s32[4], u32[], token[]) recv(", "(s32[4], token[]) recv(", "u32"),
    ("ROOT recv-done = (s32[4], token[])", "ROOT recv-done = (s32[5], token[])", "declared"),
])
def test_bad_send_recv(old: str, new: str, msg: str) -> None:
    text = """HloModule d

ENTRY e {
  x = s32[4] parameter(0)
  tok = token[] after-all()
  send = (s32[4], u32[], token[]) send(x, tok), channel_id=7
  send-done = token[] send-done(send), channel_id=7
  recv = (s32[4], u32[], token[]) recv(send-done), channel_id=8
  ROOT recv-done = (s32[4], token[]) recv-done(recv), channel_id=8
}
"""
    with pytest.raises(ParseError, match=msg):
        parse_hlo_module(text.replace(old, new))
