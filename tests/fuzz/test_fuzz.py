"""Mutation fuzz of the StableHLO and HLO text front doors, in the normal suite (fixed seed).

Every mutant ends in a run on the interpreter or in an XlapyError; another exception type,
a RecursionError, a MemoryError or a parse taking more than 10 s fails, printing the mutant.
Longer runs: `python -m tests.fuzz.run --front stablehlo --n 50000` (tests/fuzz/run.py).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.fuzz.harness import ROOT, check, hlo_corpus, stablehlo_corpus
from tests.fuzz.mutate import mutate

N = 2000


@pytest.mark.skipif(not ROOT.is_dir(), reason=f"conformance programs not found at {ROOT}")
@pytest.mark.parametrize("front", ["stablehlo", "hlo_text"])
def test_mutants_run_or_give_xlapy_errors(front: str) -> None:
    corpus = hlo_corpus() if front == "hlo_text" else stablehlo_corpus()
    assert len(corpus) > 300
    rng = random.Random(20240611)
    counts: Counter[str] = Counter()
    failures = []
    for i in range(N):
        text = mutate(rng.choice(corpus), rng)
        outcome = check(front, text, parse_s=10, run_s=2)
        counts[outcome.kind] += 1
        if outcome.failed and len(failures) < 3:
            failures.append(f"--- mutant {i}: {outcome.kind}\n{text}\n{outcome.detail}")
    print(dict(counts))
    assert not failures, "\n".join(failures)
    assert counts["ok"] > N // 20  # the mutants still exercise the interpreter


def test_builder_call_sequences_build_and_run_or_give_xlapy_errors() -> None:
    """Random XlaBuilder call sequences (tests/fuzz/builder_fuzz.py), fixed seeds; longer runs:
    `python -m tests.fuzz.builder_fuzz --n 20000`."""
    from tests.fuzz.builder_fuzz import check_case

    counts: Counter[str] = Counter()
    failures = []
    for seed in range(1500):
        outcome, calls = check_case(seed)
        counts[outcome.kind] += 1
        if outcome.failed and len(failures) < 3:
            failures.append(f"--- case {seed}: {outcome.kind}\n" + "\n".join(calls)
                            + f"\n{outcome.detail}")
    print(dict(counts))
    assert not failures, "\n".join(failures)
    assert counts["ok"] > 150  # the sequences still build and run
