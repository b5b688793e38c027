"""Eigenvectors and singular vector pairs are unique only up to a unit factor each (a sign
for real matrices, a phase for complex ones). The JAX suite compares them as they come,
which holds for the JIT because it calls the same LAPACK as JAX; an object computes them
by Jacobi rotations (xlapy/aot/lapack_eig.py), whose factors are as valid but others. So
before the usual comparison each of our vectors is multiplied by the unit factor that
brings it closest to JAX's (phi = v^H v_ref / |v^H v_ref|); a vector that is not JAX's up
to such a factor still fails, under the program's own tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: JAX program id -> where its vectors are: ("columns", i): result i's columns are
#: eigenvectors; ("svd", i, j): result i is u (columns), result j is vh (rows), u[:, k] and
#: vh[k] sharing one factor (A = sum s_k u_k vh_k).
VECTORS: dict[str, tuple[Any, ...]] = {
    "linalg.eigh[f32]": ("columns", 1),
    "linalg.eigh_upper[f32]": ("columns", 0),
    "linalg.eigh_upper[c64]": ("columns", 0),
    "linalg.svd[f32]": ("svd", 0, 2),
    "linalg.svd_reduced[f64]": ("svd", 0, 2),
}


def _unit(z: np.ndarray) -> np.ndarray:
    """z / |z|, 1 where z is 0."""
    mag = np.abs(z)
    return np.where(mag > 0, z / np.where(mag > 0, mag, 1), 1)


def align(spec: tuple[Any, ...] | None, ours: list[np.ndarray], ref: list[np.ndarray]
          ) -> list[np.ndarray]:
    """`ours` with each vector's unit factor chosen closest to `ref`'s (see the module)."""
    if spec is None:
        return list(ours)
    out = [np.array(x) for x in ours]
    if spec[0] == "columns":
        i = spec[1]
        v, r = out[i], np.asarray(ref[i])
        phi = _unit(np.sum(np.conj(v) * r, axis=-2, keepdims=True))
        out[i] = (v * phi).astype(v.dtype)
        return out
    _, i, j = spec
    u, vh = out[i], out[j]
    ur, vhr = np.asarray(ref[i]), np.asarray(ref[j])
    k = min(u.shape[-1], vh.shape[-2])
    dots = np.sum(np.conj(u[..., :k]) * ur[..., :k], axis=-2) + \
        np.sum(vh[..., :k, :] * np.conj(vhr[..., :k, :]), axis=-1)
    phi = _unit(dots)
    u[..., :k] = u[..., :k] * phi[..., None, :]
    vh[..., :k, :] = vh[..., :k, :] * np.conj(phi)[..., :, None]
    return out


__all__ = ["VECTORS", "align"]
