"""One sharding representation for the IR (XLA's HloSharding), imported from GSPMD text
(`{devices=[4,1]<=[4]}`) and Shardy (`#sdy.sharding<@mesh, [{"x"}, {}]>`, stablehlo/sdy.py).

A tiled sharding is a tile assignment: an array of device (partition) ids of shape
`tiles + (replicate,)`; device `tile_array()[i0, ..., ik, r]` holds tile `(i0, ..., ik)`.
The partitioner reasons about shardings as maps device -> tile coordinates (`coords`), so two
assignments that only order the replicas of a tile differently are the same sharding
(`same_as`). Instruction.meta["sharding"] holds one Sharding, or a tuple of them for a
tuple-shaped value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from xlapy.errors import ParseError, Unimplemented

REPLICATED, TILED, MANUAL, MAXIMAL = "replicated", "tiled", "manual", "maximal"


@dataclass(frozen=True)
class Sharding:
    kind: str
    tiles: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    replicate: int = 1
    device: int = 0

    # ---- constructors -----------------------------------------------------------------------
    @staticmethod
    def replicated() -> Sharding:
        return Sharding(REPLICATED)

    @staticmethod
    def manual() -> Sharding:
        return Sharding(MANUAL)

    @staticmethod
    def tiled(array: np.ndarray, replicate_last: bool = False) -> Sharding:
        """From a tile assignment array (its last dim the replication when `replicate_last`)."""
        a = np.asarray(array, dtype=np.int64)
        if not replicate_last:
            a = a.reshape(a.shape + (1,))
        tiles, rep = tuple(int(t) for t in a.shape[:-1]), int(a.shape[-1])
        if prod(tiles) == 1:
            return Sharding.replicated()
        return Sharding(TILED, tiles, tuple(int(d) for d in a.reshape(-1)), rep)

    @staticmethod
    def from_coords(tiles: Sequence[int], coords: Mapping[int, Sequence[int]]) -> Sharding:
        """The sharding whose device `d` holds tile `coords[d]` (each tile equally often)."""
        tiles = tuple(int(t) for t in tiles)
        if prod(tiles) == 1:
            return Sharding.replicated()
        groups: dict[tuple[int, ...], list[int]] = {}
        for d in sorted(coords):
            groups.setdefault(tuple(coords[d]), []).append(d)
        counts = {len(v) for v in groups.values()}
        if len(groups) != prod(tiles) or len(counts) != 1:
            raise ValueError("not a tiling: tiles held unequally")
        rep = counts.pop()
        arr = np.zeros(tiles + (rep,), np.int64)
        for c, ds in groups.items():
            arr[c] = ds
        return Sharding(TILED, tiles, tuple(int(d) for d in arr.reshape(-1)), rep)

    # ---- queries ----------------------------------------------------------------------------
    @property
    def is_tiled(self) -> bool:
        return self.kind == TILED

    def tile_array(self) -> np.ndarray:
        return np.asarray(self.devices, np.int64).reshape(self.tiles + (self.replicate,))

    def num_tiles(self, rank: int) -> tuple[int, ...]:
        return self.tiles if self.is_tiled else (1,) * rank

    def coords(self, devices: Sequence[int]) -> dict[int, tuple[int, ...]]:
        """Tile coordinates of each of `devices` (all zeros when not tiled)."""
        if not self.is_tiled:
            return {d: () for d in devices}
        out: dict[int, tuple[int, ...]] = {}
        for idx, d in np.ndenumerate(self.tile_array()):
            out[int(d)] = tuple(int(i) for i in idx[:-1])
        missing = [d for d in devices if d not in out]
        if missing:
            raise Unimplemented(f"sharding {self.to_text()} names no tile for device(s) "
                                f"{missing}")
        return {d: out[d] for d in devices}

    def same_as(self, other: Sharding, rank: int, devices: Sequence[int]) -> bool:
        if self.kind in (MANUAL, MAXIMAL) or other.kind in (MANUAL, MAXIMAL):
            return self == other
        if self.num_tiles(rank) != other.num_tiles(rank):
            return False
        if not self.is_tiled:
            return True
        return self.coords(devices) == other.coords(devices)

    # ---- derived shardings -------------------------------------------------------------------
    def keep_dims(self, dims: Sequence[int], rank: int, devices: Sequence[int]) -> Sharding:
        """The sharding of a value whose dims are this value's `dims` (in that order): the
        other dims' tiling becomes replication."""
        if not self.is_tiled:
            return self
        c = self.coords(devices)
        return Sharding.from_coords([self.tiles[d] for d in dims],
                                    {dev: tuple(xy[d] for d in dims) for dev, xy in c.items()})

    def place_dims(self, mapping: Mapping[int, int], rank: int, devices: Sequence[int]
                   ) -> Sharding:
        """A value of rank `rank` whose dim `mapping[d]` is this value's dim `d` (unmapped
        dims unsharded)."""
        if not self.is_tiled:
            return self
        tiles = [1] * rank
        for d, e in mapping.items():
            tiles[e] = self.tiles[d]
        c = self.coords(devices)
        coords = {}
        for dev, xy in c.items():
            out = [0] * rank
            for d, e in mapping.items():
                out[e] = xy[d]
            coords[dev] = tuple(out)
        return Sharding.from_coords(tiles, coords)

    # ---- text --------------------------------------------------------------------------------
    def to_text(self) -> str:
        if self.kind == REPLICATED:
            return "{replicated}"
        if self.kind == MANUAL:
            return "{manual}"
        if self.kind == MAXIMAL:
            return f"{{maximal device={self.device}}}"
        dims = list(self.tiles) + ([self.replicate] if self.replicate > 1 else [])
        devs = ",".join(map(str, self.devices))
        if list(self.devices) == list(range(len(self.devices))):
            devs = f"<=[{len(self.devices)}]"
        text = f"{{devices=[{','.join(map(str, dims))}]{devs}"
        return text + (" last_tile_dim_replicate}" if self.replicate > 1 else "}")

    def __str__(self) -> str:
        return self.to_text()


AnySharding = Sharding | tuple  # a tuple of AnySharding for a tuple-shaped value


def to_text(s: AnySharding) -> str:
    if isinstance(s, tuple):
        return "{" + ", ".join(to_text(x) for x in s) + "}"
    return s.to_text()


# ---- GSPMD text --------------------------------------------------------------------------------
_IOTA = re.compile(r"<=\[([0-9,\s]*)\](?:T\(([0-9,\s]*)\))?")


def iota_devices(dims: Sequence[int], perm: Sequence[int] | None) -> np.ndarray:
    """XLA's iota tile assignment `<=[dims]T(perm)`: arange reshaped, transposed, flattened."""
    a = np.arange(prod(dims), dtype=np.int64).reshape(tuple(dims))
    return (a.transpose(tuple(perm)) if perm else a).reshape(-1)


def parse_gspmd(text: str) -> AnySharding | None:
    """`{replicated}`, `{devices=[2,1,2]<=[4] last_tile_dim_replicate}`, a tuple `{{..}, {..}}`
    ... -> Sharding; `{unknown}` (no sharding decided yet) -> None."""
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise ParseError(None, f"bad sharding {text!r}: expected {{...}}")
    inner = t[1:-1].strip()
    if inner.startswith("{") or inner == "":
        parts = _split_top(inner)
        return tuple(parse_gspmd(p) for p in parts)
    if inner in ("replicated", "") or inner.startswith("replicated"):
        return Sharding.replicated()
    if inner.startswith("manual"):
        return Sharding.manual()
    if inner.startswith("unknown"):
        return None
    if inner.startswith("maximal"):
        m = re.search(r"device=(\d+)", inner)
        return Sharding(MAXIMAL, device=int(m.group(1)) if m else 0)
    m = re.match(r"devices=\[([0-9,\s]*)\]\s*(.*)$", inner, re.S)
    if m is None:
        raise ParseError(None, f"bad sharding {text!r}")
    dims = [int(x) for x in m.group(1).split(",") if x.strip()]
    rest = m.group(2)
    if "last_tile_dims" in rest:
        raise Unimplemented(f"sharding {text!r}: last_tile_dims (partially manual / "
                            "subgroup shardings) is not supported")
    iota = _IOTA.match(rest)
    if iota:
        idims = [int(x) for x in iota.group(1).split(",") if x.strip()]
        perm = [int(x) for x in iota.group(2).split(",")] if iota.group(2) else None
        devs = iota_devices(idims, perm)
        rest = rest[iota.end():]
    else:
        dm = re.match(r"([0-9,\s]+)", rest)
        if dm is None:
            raise ParseError(None, f"bad sharding {text!r}: no device list")
        devs = np.array([int(x) for x in dm.group(1).split(",") if x.strip()], np.int64)
        rest = rest[dm.end():]
    if devs.size != prod(dims):
        raise ParseError(None, f"bad sharding {text!r}: {devs.size} devices for tiles {dims}")
    return Sharding.tiled(devs.reshape(dims), replicate_last="last_tile_dim_replicate" in rest)


def _split_top(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        out.append(text[start:])
    return [p.strip() for p in out]


# ---- Shardy --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mesh:
    """`sdy.mesh @name = <["x"=2, "y"=4], device_ids=[...]>`."""

    axes: tuple[tuple[str, int], ...]
    device_ids: tuple[int, ...] | None = None

    def array(self) -> np.ndarray:
        sizes = tuple(s for _, s in self.axes)
        ids = (np.asarray(self.device_ids, np.int64) if self.device_ids is not None
               else np.arange(prod(sizes), dtype=np.int64))
        return ids.reshape(sizes)

    def axis(self, name: str) -> int:
        for i, (n, _) in enumerate(self.axes):
            if n == name:
                return i
        raise ParseError(None, f"mesh has no axis {name!r} (axes: "
                               f"{', '.join(n for n, _ in self.axes)})")


def parse_mesh(body: str) -> Mesh:
    """The text between `<` and `>` of a mesh: `["x"=2, "y"=2]` (, `device_ids=[...]`)."""
    m = re.match(r"\s*\[(.*?)\]\s*(?:,\s*device_ids\s*=\s*\[([0-9,\s]*)\])?\s*$", body, re.S)
    if m is None:
        raise ParseError(None, f"bad sdy mesh <{body}>")
    axes = tuple((a, int(s)) for a, s in re.findall(r'"([^"]+)"\s*=\s*(\d+)', m.group(1)))
    ids = (tuple(int(x) for x in m.group(2).split(",") if x.strip())
           if m.group(2) is not None else None)
    return Mesh(axes, ids)


_DIM = re.compile(r"\{([^{}]*)\}(p\d+)?")


def parse_sdy(body: str, meshes: Mapping[str, Mesh]) -> Sharding:
    """The text of one tensor sharding `@mesh, [{"x"}, {"y", ?}p1], replicated={"z"}`."""
    m = re.match(r"\s*@([\w.$-]+)\s*,\s*\[(.*?)\]\s*(,.*)?$", body, re.S)
    if m is None:
        if re.match(r"\s*mesh\s*<", body):
            raise Unimplemented(f"sdy sharding <{body}>: inline meshes are not supported")
        raise ParseError(None, f"bad sdy sharding <{body}>")
    name = m.group(1)
    if name not in meshes:
        raise ParseError(None, f"sdy sharding names mesh @{name}, which is not defined")
    mesh = meshes[name]
    if m.group(3) and "unreduced" in m.group(3):
        raise Unimplemented(f"sdy sharding <{body}>: unreduced axes are not supported")
    dims: list[list[str]] = []
    for axes_text, _priority in _DIM.findall(m.group(2)):
        axes = []
        for a in axes_text.split(","):
            a = a.strip()
            if not a or a == "?":
                continue
            if ":" in a:
                raise Unimplemented(f"sdy sharding <{body}>: sub-axis {a} is not supported")
            axes.append(a.strip('"'))
        dims.append(axes)
    if not mesh.axes:
        ids = mesh.device_ids or (0,)
        return Sharding(MAXIMAL, device=int(ids[0]))
    return mesh_sharding(mesh, dims)


def mesh_sharding(mesh: Mesh, dims: Sequence[Sequence[str]]) -> Sharding:
    """Tensor dim `i` split over the mesh axes `dims[i]` (major to minor)."""
    arr = mesh.array()
    order = [mesh.axis(a) for axes in dims for a in axes]
    rest = [i for i in range(len(mesh.axes)) if i not in order]
    tiles = [prod(mesh.axes[mesh.axis(a)][1] for a in axes) for axes in dims]
    rep = prod(mesh.axes[i][1] for i in rest)
    return Sharding.tiled(arr.transpose(order + rest).reshape(tiles + [rep]), True)


def parse_sdy_list(text: str, meshes: Mapping[str, Mesh]) -> list[Sharding]:
    """`[<@mesh, [...]>, <@mesh, [...]>]` (a per-value list) -> one Sharding each."""
    t = text.strip()
    if t.startswith("["):
        t = t[1:t.rindex("]")]
    out, depth, start = [], 0, None
    for i, c in enumerate(t):
        if c == "<":
            if depth == 0:
                start = i + 1
            depth += 1
        elif c == ">" and (i == 0 or t[i - 1] != "-"):
            depth -= 1
            if depth == 0 and start is not None:
                out.append(parse_sdy(t[start:i], meshes))
    return out
