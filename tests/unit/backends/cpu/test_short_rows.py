"""Row kernels whose rows are shorter than a vector (softmax over 10 classes) run their row
passes in the narrowest power-of-two vectors that hold a row, masked (masked_emit.py), or
without masked loads and stores the widest that fit in one (then a scalar rest): they ran
every exp scalar, 3-5x XLA's time. Values within float rounding of the interpreter (lanes
reorder the sums) and equal across thread counts."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import target
from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.masked_emit import row_width

from .test_row_kernels_nd import _softmax_program


@pytest.mark.parametrize("c", [3, 4, 5, 8, 10, 15, 16, 17])
def test_short_rows_take_narrow_vectors(c: int) -> None:
    text = _softmax_program((300, c))
    x = np.random.default_rng(c).standard_normal((300, c)).astype(np.float32) * 3
    runs = [xlapy.compile(text, backend="cpu", options={"num_threads": t, "split_cost": 1})
            for t in (1, 2)]
    got = [np.asarray(p(x)) for p in runs]
    np.testing.assert_array_equal(got[0], got[1])
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    np.testing.assert_allclose(got[0], want, rtol=2e-6, atol=1e-7)
    w = vector_width()
    masked = target.current().has("avx2")
    lanes = w if c >= w else 1 << (c - 1).bit_length() if masked else \
        1 << (c.bit_length() - 1) if c >= 4 else 0
    assert lanes == (row_width(c, w, masked) if c >= 3 and (masked or c >= 4) else 0)
    ir_text = runs[0]._exe.kernel_ir
    assert (f"<{lanes} x float>" in ir_text) == bool(lanes)
    assert ("llvm.masked.load" in ir_text) == (masked and c % lanes != 0)
