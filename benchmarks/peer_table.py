"""Peer baselines vs our checker on the whole bug catalogue: one Markdown table, bug x method.

Reproduce with one command (from the repository root)::

    python benchmarks/peer_table.py

It first runs our mutation score in default mode (``specdec_check.bugs.mutation_score``),
reads the per-sampler default-mode budget from it (the largest ``samples_used`` of an
exact control, i.e. a full default-mode run that never stops early), then runs each
peer's test (``benchmarks/peer_methods.py``) on every catalogued verifier at that budget.
Decode-loop bugs are outside the peers' verifier tests (``n/a``). ``--budget N`` skips the
mutation score and uses N samples per peer test (our column then shows ``-``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_methods import PEER_METHODS  # noqa: E402

from specdec_check.bugs import catalogue  # noqa: E402


def peer_table(*, seed: int = 0, budget: int | None = None, score=None) -> str:
    """The Markdown table; ``score`` is a MutationScore (computed in default mode when needed)."""
    if budget is None:
        if score is None:
            from specdec_check.bugs import mutation_score

            score = mutation_score("default", seed=seed)
        controls = [r.samples_used for r in score.rows if r.expected == "pass"]
        budget = max(controls) if controls else max(r.samples_used for r in score.rows)
    ours = {r.name: r for r in score.rows} if score is not None else {}
    methods = list(PEER_METHODS)
    lines = [
        f"Peer baselines at {budget:,} samples per test (seed {seed}); 'yes' = the test fails the sampler "
        "(for a control, 'yes' is a false alarm).",
        "",
        "| entry | expected | " + " | ".join(methods) + " | specdec-check |",
        "|---|---|" + "---|" * len(methods) + "---|",
    ]
    totals = {m: 0 for m in methods + ["specdec-check"]}
    for e in catalogue():
        cells = []
        for m in methods:
            if e.kind != "verifier":
                cells.append("n/a")
                continue
            hit = PEER_METHODS[m](e.sampler, seed=seed, budget=budget)
            totals[m] += hit if e.expected != "pass" else 0
            cells.append("yes" if hit else "no")
        row = ours.get(e.name)
        if row is None:
            cells.append("-")
        else:
            cells.append("yes" if row.detected else "no")
            totals["specdec-check"] += row.detected if e.expected != "pass" else 0
        lines.append(f"| {e.name} | {e.expected} | " + " | ".join(cells) + " |")
    n_bugs = sum(e.expected != "pass" for e in catalogue())
    lines.append("| **bugs detected** | | " + " | ".join(f"{totals[m]}/{n_bugs}" for m in methods)
                 + f" | {totals['specdec-check']}/{n_bugs} |" if score is not None else
                 "| **bugs detected** | | " + " | ".join(f"{totals[m]}/{n_bugs}" for m in methods) + " | - |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=None, help="samples per peer test (skips our mutation score)")
    args = parser.parse_args(argv)
    print(peer_table(seed=args.seed, budget=args.budget))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
