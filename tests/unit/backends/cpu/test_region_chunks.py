"""regions.cuts: a region's row chunks are MIN_ROWS_PER_CHUNK rows (each chunk's GEMM packs
the whole rhs again, so short chunks spend their time packing), halves of at least
MIN_ROWS_PER_HALF rows when that leaves fewer than two; a function of the rows alone."""

from __future__ import annotations

from xlapy.backends.cpu import regions


def test_chunks_are_long_enough_to_pay_for_packing() -> None:
    assert regions.cuts(256) == [0, 128, 256]  # the transformer block: two, not eight
    assert regions.cuts(1024) == [0, 128, 256, 384, 512, 640, 768, 896, 1024]
    assert regions.cuts(100) == [0, 50, 100]  # halves: two threads still share
    assert regions.cuts(64) == [0, 32, 64]
    assert regions.cuts(40) == [0, 40]
    for rows in range(1, 600, 7):
        c = regions.cuts(rows)
        sizes = [b - a for a, b in zip(c, c[1:])]
        assert c[0] == 0 and c[-1] == rows and min(sizes) > 0
        assert len(sizes) == 1 or min(sizes) >= min(regions.MIN_ROWS_PER_CHUNK, rows // 2)
