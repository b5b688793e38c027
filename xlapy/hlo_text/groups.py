"""replica_groups in the three forms XLA prints, expanded to explicit lists of ids.

* `{{0,1},{2,3}}` / `{}`: explicit groups.
* `[G,S]<=[d0,d1,...]` or `[G,S]<=[d0,d1,...]T(p0,p1,...)`: iota groups (XLA's
  IotaReplicaGroupList): `iota(prod(d)).reshape(d).transpose(p).reshape(G, S)`.
* `mesh['a'=2,'b'=4] {'a'}`, with `, device_ids=(<ids>) {'a'}` when the mesh's devices are not
  in iota order (XLA's MeshAxesReplicaGroupList): a group is the devices that share their
  coordinates on the axes not named in `{...}`, in the order of the named axes. An axis
  reference `'a':(p)s` is the sub-axis of size s with p-sized major part before it.
  `device_ids` is an iota form `[d0,...]T(p0,...)` or a list of ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

Groups = tuple[tuple[int, ...], ...]
_MAX_IDS = 1 << 20

_IOTA = re.compile(r"\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=\s*\[([\d\s,]*)\]"
                   r"(?:\s*T\s*\(([\d\s,]*)\))?\s*\Z")
_DEV_IOTA = re.compile(r"\s*\[([\d\s,]*)\](?:\s*T\s*\(([\d\s,]*)\))?\s*\Z")
_MESH = re.compile(r"\s*mesh\s*\[(.*?)\]\s*(\{.*\})?\s*\Z", re.S)
_MESH_AXIS = re.compile(r"\s*'([^']*)'\s*=\s*(\d+)\s*\Z")
_AXIS_REF = re.compile(r"\s*'([^']*)'\s*(?::\s*\(\s*(\d+)\s*\)\s*(\d+))?\s*\Z")
_DEVICE_IDS = re.compile(r"\s*\((.*?)\)\s*(\{.*\})\s*\Z", re.S)


def _nums(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    return tuple(int(p) for p in parts if p)


def iota_ids(dims: tuple[int, ...], perm: tuple[int, ...] | None,
             error: Callable[[str], Exception]) -> np.ndarray:
    """`iota(prod(dims)).reshape(dims).transpose(perm)`, flattened."""
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if n > _MAX_IDS:
        raise error(f"{n} ids is too many")
    if perm is not None and sorted(perm) != list(range(len(dims))):
        raise error(f"T{tuple(perm)} is not a permutation of {len(dims)} dimensions")
    ids = np.arange(n, dtype=np.int64).reshape(dims)
    if perm is not None:
        ids = ids.transpose(perm)
    return ids.reshape(-1)


def iota_groups(num_groups: int, group_size: int, dims: tuple[int, ...],
                perm: tuple[int, ...] | None, error: Callable[[str], Exception]) -> Groups:
    ids = iota_ids(dims, perm, error)
    if num_groups * group_size != ids.size:
        raise error(f"[{num_groups},{group_size}] groups need {num_groups * group_size} ids, "
                    f"the iota has {ids.size}")
    return tuple(tuple(int(v) for v in row) for row in ids.reshape(num_groups, group_size))


def parse_iota(text: str, error: Callable[[str], Exception]) -> Groups | None:
    """The groups of `[G,S]<=[dims]T(perm)`, or None when `text` is not that form."""
    m = _IOTA.match(text)
    if m is None:
        return None
    g, s, dims, perm = m.groups()
    return iota_groups(int(g), int(s), _nums(dims), None if perm is None else _nums(perm),
                       error)


def _device_ids(text: str, n: int, error: Callable[[str], Exception]) -> np.ndarray:
    m = _DEV_IOTA.match(text)
    if m is not None:
        ids = iota_ids(_nums(m.group(1)), None if m.group(2) is None else _nums(m.group(2)),
                       error)
    else:
        try:
            ids = np.array(_nums(text), dtype=np.int64)
        except ValueError:
            raise error(f"bad device_ids ({text})") from None
    if ids.size != n:
        raise error(f"device_ids has {ids.size} ids, the mesh {n}")
    return ids


def mesh_groups(mesh: str, device_ids: str | None, error: Callable[[str], Exception]
                ) -> Groups | None:
    """The groups of `mesh[...] {axes}` (`device_ids` is the text of a separate
    `device_ids=(...) {axes}` attribute, where the axes then are); None when not that form."""
    m = _MESH.match(mesh)
    if m is None:
        return None
    names: list[str] = []
    sizes: list[int] = []
    for part in (p for p in m.group(1).split(",") if p.strip()):
        am = _MESH_AXIS.match(part)
        if am is None:
            raise error(f"bad mesh axis '{part.strip()}' (expected 'name'=size)")
        names.append(am.group(1))
        sizes.append(int(am.group(2)))
    axes_text = m.group(2)
    n = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    if n > _MAX_IDS:
        raise error(f"a mesh of {n} devices is too large")
    if device_ids is not None:
        if axes_text is not None:
            raise error("the axes come after device_ids=(...)")
        dm = _DEVICE_IDS.match(device_ids)
        if dm is None:
            raise error(f"bad device_ids={device_ids} (expected (ids) {{axes}})")
        ids = _device_ids(dm.group(1), n, error)
        axes_text = dm.group(2)
    else:
        ids = np.arange(n, dtype=np.int64)
    if axes_text is None:
        raise error("a mesh replica group names its axes: mesh[...] {'axis'}")
    refs: list[tuple[int, int, int]] = []  # (axis, pre, size)
    for part in (p for p in axes_text.strip()[1:-1].split(",") if p.strip()):
        rm = _AXIS_REF.match(part)
        if rm is None or rm.group(1) not in names:
            raise error(f"bad axis '{part.strip()}' (expected one of the mesh's axes)")
        a = names.index(rm.group(1))
        pre, size = (1, sizes[a]) if rm.group(2) is None else (int(rm.group(2)),
                                                              int(rm.group(3)))
        if pre < 1 or size < 1 or sizes[a] % (pre * size):
            raise error(f"sub-axis {part.strip()} does not divide axis size {sizes[a]}")
        refs.append((a, pre, size))
    # Split each axis at every sub-axis boundary (major to minor), then group over the named
    # pieces (in the order named) and enumerate groups over the others (in mesh order).
    bounds = [sorted({1, s} | {b for a, p, z in refs if a == i for b in (p, p * z)})
              for i, s in enumerate(sizes)]
    for i, bs in enumerate(bounds):
        if any(b2 % b1 for b1, b2 in zip(bs, bs[1:])):
            raise error(f"the sub-axes of '{names[i]}' overlap")
    pieces: list[tuple[int, int, int]] = []  # (axis, lo, hi): cumulative-size interval
    for i, bs in enumerate(bounds):
        pieces += [(i, lo, hi) for lo, hi in zip(bs, bs[1:])]
    grouped: list[int] = []
    for a, p, z in refs:
        for k, (i, lo, hi) in enumerate(pieces):
            if i == a and lo >= p and hi <= p * z:
                if k in grouped:
                    raise error(f"axis '{names[a]}' is named twice")
                grouped.append(k)
    others = [k for k in range(len(pieces)) if k not in grouped]
    shape = tuple(hi // lo for _, lo, hi in pieces)
    arr = ids.reshape(shape).transpose(others + grouped)
    group_size = int(np.prod([shape[k] for k in grouped], dtype=np.int64)) if grouped else 1
    return tuple(tuple(int(v) for v in row) for row in arr.reshape(-1, group_size))
