import numpy as np

from examples.axpy import compute_axpy_constants, compute_axpy_parameters
from xlapy.types import Literal


def test_axpy_parameters() -> None:
    alpha = Literal.from_numpy(np.float32(2.0))
    x = Literal.from_numpy(np.array([1, 2, 3, 4], np.float32))
    y = Literal.from_numpy(np.array([10, 20, 30, 40], np.float32))
    out = compute_axpy_parameters(alpha, x, y).to_numpy()
    assert out.dtype == np.float32 and out.tolist() == [12, 24, 36, 48]


def test_axpy_constants() -> None:
    out = compute_axpy_constants(3.14, [1.0, 2.0], [0.5, 0.25]).to_numpy()
    want = np.float32(3.14) * np.array([1, 2], np.float32) + np.array([0.5, 0.25], np.float32)
    assert np.array_equal(out, want)
