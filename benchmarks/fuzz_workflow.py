"""Fuzz the workflow layer with the project's own seeded cases (``tests/_workflow_cases.py``):
pipelines, ``select_n_clusters``, ``CoresetKMeans`` with and without k, and a save/load round
trip of every fitted model kind. Prints the count of every outcome per kind, then every
failure with its reproducer (Python lines; run them with ``tests`` on the path).

    python benchmarks/fuzz_workflow.py                      # 10,000 cases from seed 0
    python benchmarks/fuzz_workflow.py --cases 2000 --seed 50000
    python benchmarks/fuzz_workflow.py --only 1234          # one case, its reproducer first

A case ends well as a fit that passes the checks (finite model inside its bounds, ledger
within the plan, no NumPy warning, the saved file loads and predicts the same labels) or as a
refusal (``ValueError``/``BudgetExceededError`` from privclust itself, a message in the user's
terms). Failures of bugs fixed elsewhere are counted apart as "known".
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _workflow_cases import case, known, outcome, reproducer  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000, help="number of cases (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="first case's seed (default 0)")
    ap.add_argument("--only", type=int, default=None, help="run the case of this seed alone")
    args = ap.parse_args(argv)
    seeds = [args.only] if args.only is not None else range(args.seed, args.seed + args.cases)
    counts: Counter = Counter()
    failures, known_failures = [], Counter()
    start = time.perf_counter()
    for i, seed in enumerate(seeds):
        c = case(seed)
        if args.only is not None:
            print(reproducer(c), end="\n\n")
        label, failure = outcome(c)
        if failure is None:
            counts[(c.kind, label)] += 1
        elif (reason := known(c, failure)) is not None:
            counts[(c.kind, "known: " + reason)] += 1
            known_failures[reason] += 1
        else:
            counts[(c.kind, "FAILED")] += 1
            failures.append((c, label, failure))
        if (i + 1) % 1000 == 0:
            print(f"... {i + 1} cases, {time.perf_counter() - start:.0f} s, "
                  f"{len(failures)} failures", file=sys.stderr, flush=True)
    total = sum(counts.values())
    print(f"{total} cases (seeds {seeds[0]}..{seeds[-1]}) in {time.perf_counter() - start:.0f} s")
    for kind in sorted({k for k, _ in counts}):
        rows = sorted(((n, how) for (k, how), n in counts.items() if k == kind), reverse=True)
        print(f"\n{kind}: {sum(n for n, _ in rows)} cases")
        for n, how in rows:
            print(f"  {n:>6}  {how}")
    print(f"\nfailures: {len(failures)}; known (fixed elsewhere): {sum(known_failures.values())}")
    for c, label, failure in failures:
        print(f"\n--- seed {c.seed} ({c.kind}): {label}\n{failure}\nreproducer:\n{reproducer(c)}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
