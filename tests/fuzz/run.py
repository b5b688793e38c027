"""Longer fuzz runs than the test suite's: `python -m tests.fuzz.run --front stablehlo --n 50000`.

Mutants of the conformance programs (StableHLO) or of xlapy's HLO printing of them (HLO text)
go through parse, verify and the interpreter (`tests/fuzz/harness.py`). Prints the counts per
outcome every `--every` inputs and at the end; failing mutants go to `--out DIR` (one file
each, with the traceback as a comment) so each can be replayed with `--replay FILE`.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

from tests.fuzz.harness import check, hlo_corpus, stablehlo_corpus
from tests.fuzz.mutate import mutate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run")
    ap.add_argument("--front", choices=("stablehlo", "hlo_text"), default="stablehlo")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--parse-timeout", type=float, default=10)
    ap.add_argument("--run-timeout", type=float, default=2)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=None, help="directory for failing mutants")
    ap.add_argument("--replay", type=Path, default=None, help="check one saved mutant")
    args = ap.parse_args(argv)
    if args.replay is not None:
        o = check(args.front, args.replay.read_text(), args.parse_timeout, args.run_timeout)
        print(o.kind, o.detail, sep="\n")
        return 1 if o.failed else 0
    corpus = hlo_corpus() if args.front == "hlo_text" else stablehlo_corpus()
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    seen: set[str] = set()
    start = time.time()
    for i in range(args.n):
        text = mutate(rng.choice(corpus), rng)
        o = check(args.front, text, args.parse_timeout, args.run_timeout)
        counts[o.kind] += 1
        if o.failed:
            sig = o.kind + (o.detail.strip().splitlines() or [""])[-1]
            if sig not in seen:
                seen.add(sig)
                print(f"--- {i}: {o.kind}\n{o.detail}", flush=True)
                if args.out is not None:
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / f"{args.front}-{args.seed}-{i}.txt").write_text(text)
        if (i + 1) % args.every == 0 or i + 1 == args.n:
            print(f"[{i + 1} inputs, {time.time() - start:.0f} s] "
                  + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
    return 1 if any(k.startswith("fail:") for k in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
