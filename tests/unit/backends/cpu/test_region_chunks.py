"""regions.cuts: a region's row chunks are MIN_ROWS_PER_CHUNK rows (each chunk's GEMM packs
the whole rhs again, so short chunks spend their time packing), halves of at least
MIN_ROWS_PER_HALF (16) rows when that leaves fewer than two, of MIN_ROWS_PER_THREAD when no GEMM
packs; a function of the rows and the members alone (never of the thread count)."""

from __future__ import annotations

from xlapy.backends.cpu import regions


def test_chunks_are_long_enough_to_pay_for_packing() -> None:
    assert regions.cuts(256) == [0, 128, 256]  # the transformer block: two, not eight
    assert regions.cuts(1024) == [0, 128, 256, 384, 512, 640, 768, 896, 1024]
    assert regions.cuts(100) == [0, 50, 100]  # halves: two threads still share
    assert regions.cuts(64) == [0, 32, 64]
    assert regions.cuts(40) == [0, 20, 40]
    assert regions.cuts(24) == [0, 24]
    for rows in range(1, 600, 7):
        c = regions.cuts(rows)
        sizes = [b - a for a, b in zip(c, c[1:])]
        assert c[0] == 0 and c[-1] == rows and min(sizes) > 0
        assert len(sizes) == 1 or min(sizes) >= min(regions.MIN_ROWS_PER_CHUNK, rows // 2)


def test_regions_reading_rhs_in_place_split_in_halves_of_eight_rows_or_more() -> None:
    """With no GEMM packing per chunk (gemm_small's loops) a region splits down to halves of
    MIN_ROWS_PER_THREAD rows: an LSTM step's 32 rows (two GEMMs, gates) ran on one thread."""
    assert regions.cuts(32, packs=False) == [0, 16, 32]
    assert regions.cuts(40, packs=False) == [0, 20, 40]
    assert regions.cuts(256, packs=False) == [0, 128, 256]
    assert regions.cuts(12, packs=False) in ([0, 12], [0, 8, 12])
    assert regions.cuts(24, packs=False) == [0, 12, 24]


def test_packing_regions_split_in_halves_of_sixteen_rows_or_more() -> None:
    """An LSTM step on AVX2 (h @ u's 1 MB rhs goes to BLAS, which packs) was one 32-row chunk
    on one thread: two halves each pack the rhs, but on two threads that is faster."""
    assert regions.cuts(32) == [0, 16, 32]
    assert regions.cuts(31) == [0, 31]

def test_a_region_knows_whether_its_gemms_pack() -> None:
    from xlapy.ir import Instruction
    from xlapy.types import ElementType, Shape

    instr = Instruction("dot_general", [], Shape.array(ElementType.F32, [32, 8]), None, (),
                        "d")
    small = regions.Gemm(0, 1, 2, 24, 8, 8, False, False, small=object())  # type: ignore
    blas = regions.Gemm(0, 1, 2, 24, 8, 8, False, False)
    in_place = regions.Region("r", [regions.Member(instr, 2, 24, set(), 1, gemm=small)])
    packing = regions.Region("r", [regions.Member(instr, 2, 24, set(), 1, gemm=small),
                                   regions.Member(instr, 3, 24, set(), 1, gemm=blas)])
    assert not in_place.packs and in_place.cuts() == [0, 12, 24]
    assert packing.packs and packing.cuts() == [0, 24]
