"""The IR's sharding representation: GSPMD text and Shardy shardings import to the same
Sharding, print back, and unsupported forms fail loudly."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.errors import ParseError, Unimplemented
from xlapy.ir.sharding import (
    MANUAL,
    MAXIMAL,
    Sharding,
    iota_devices,
    mesh_sharding,
    parse_gspmd,
    parse_mesh,
    parse_sdy,
    parse_sdy_list,
)

DEVS = list(range(4))


def test_iota_tile_assignment_with_transpose() -> None:
    assert list(iota_devices([2, 2], [1, 0])) == [0, 2, 1, 3]
    s = parse_gspmd("{devices=[2,2]<=[2,2]T(1,0)}")
    assert s.tiles == (2, 2) and s.devices == (0, 2, 1, 3)
    assert s.coords(DEVS) == {0: (0, 0), 2: (0, 1), 1: (1, 0), 3: (1, 1)}


def test_explicit_devices_and_last_tile_dim_replicate() -> None:
    s = parse_gspmd("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}")
    assert s.tiles == (2, 1) and s.replicate == 2
    assert s.coords(DEVS) == {0: (0, 0), 2: (0, 0), 1: (1, 0), 3: (1, 0)}
    assert parse_gspmd(s.to_text()) == s


def test_simple_forms() -> None:
    assert parse_gspmd("{replicated}") == Sharding.replicated()
    assert parse_gspmd("{manual}").kind == MANUAL
    assert parse_gspmd("{maximal device=3}").kind == MAXIMAL
    assert parse_gspmd("{unknown}") is None
    assert parse_gspmd("{devices=[1,1]0}") == Sharding.replicated()  # one tile: replicated
    t = parse_gspmd("{{replicated}, {devices=[2]0,1}}")
    assert isinstance(t, tuple) and t[1].tiles == (2,)


def test_unsupported_forms_are_loud() -> None:
    with pytest.raises(Unimplemented, match="last_tile_dims"):
        parse_gspmd("{devices=[2,2]<=[4] last_tile_dims={manual}}")
    with pytest.raises(ParseError, match="devices"):
        parse_gspmd("{devices=[2,2]0,1}")


def test_shardy_matches_gspmd() -> None:
    meshes = {"mesh": parse_mesh('["x"=2, "y"=2]')}
    assert parse_sdy('@mesh, [{"x"}, {"y"}]', meshes).same_as(
        parse_gspmd("{devices=[2,2]<=[4]}"), 2, DEVS)
    assert parse_sdy('@mesh, [{"y"}, {"x"}]', meshes).same_as(
        parse_gspmd("{devices=[2,2]<=[2,2]T(1,0)}"), 2, DEVS)
    assert parse_sdy('@mesh, [{"x"}, {}]', meshes).same_as(
        parse_gspmd("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"), 2, DEVS)
    # open dims and priorities do not change the sharding
    assert parse_sdy('@mesh, [{"x", ?}p1, {?}]', meshes) == parse_sdy('@mesh, [{"x"}, {}]',
                                                                      meshes)
    both = parse_sdy('@mesh, [{"y", "x"}]', meshes)  # one dim over two axes, major first
    assert both.tiles == (4,) and both.devices == (0, 2, 1, 3)


def test_shardy_device_ids_and_lists() -> None:
    mesh = parse_mesh('["x"=2], device_ids=[1, 0]')
    s = mesh_sharding(mesh, [["x"]])
    assert s.coords([0, 1]) == {1: (0,), 0: (1,)}
    meshes = {"m": parse_mesh('["a"=4]')}
    pair = parse_sdy_list('[<@m, [{"a"}]>, <@m, [{}, {"a"}]>]', meshes)
    assert [p.tiles for p in pair] == [(4,), (1, 4)]


def test_shardy_unsupported_is_loud() -> None:
    meshes = {"mesh": parse_mesh('["x"=4]')}
    with pytest.raises(Unimplemented, match="sub-axis"):
        parse_sdy('@mesh, [{"x":(1)2}]', meshes)
    with pytest.raises(ParseError, match="not defined"):
        parse_sdy('@other, [{"x"}]', meshes)
    with pytest.raises(ParseError, match="no axis"):
        parse_sdy('@mesh, [{"z"}]', meshes)


def test_derived_shardings() -> None:
    s = Sharding.tiled(np.arange(4).reshape(2, 2))
    kept = s.keep_dims([1], 2, DEVS)  # dim 0's tiles become replication
    assert kept.tiles == (2,) and kept.replicate == 2
    moved = s.place_dims({0: 1, 1: 0}, 2, DEVS)  # a transpose
    assert moved.coords(DEVS) == {d: c[::-1] for d, c in s.coords(DEVS).items()}
    with pytest.raises(ValueError, match="not a tiling"):
        Sharding.from_coords([2], {0: (0,), 1: (0,), 2: (1,)})
