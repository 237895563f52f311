"""The ragged catalogue in one run: per entry, its verdict, the first finding, and how many request rows the
checker looked at before it (the scenario of the first finding) and in all.

    python benchmarks/ragged_mutants.py [quick|default|thorough] [--seed N]

Prints a Markdown table (numbers measured in this run; timings depend on the machine's load).
"""

from __future__ import annotations

import argparse
import os
import time

from specdec_check.bugs import ragged_catalogue
from specdec_check.checker import check_ragged_verifier


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", nargs="?", default="default")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"ragged catalogue, mode {args.mode}, seed {args.seed}, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print()
    print("| entry | expected | verdict | rows looked at before the finding | rows in all | s | first finding |")
    print("|---|---|---|---:|---:|---:|---|")
    for entry in ragged_catalogue():
        start = time.perf_counter()
        report = check_ragged_verifier(entry.sampler, mode=args.mode, seed=args.seed)
        elapsed = time.perf_counter() - start
        ranked = sorted(report.failures or report.findings,
                        key=lambda f: f.check in ("independence", "determinism"))  # the direct findings first
        first = (ranked or [None])[0]
        rows = "—"
        text = "—"
        if first is not None:
            summary = next(s for s in report.scenarios if s.name == first.scenario)
            rows = f"{first.evidence.get('rows_seen', summary.samples):,}"
            text = f"{first.scenario} / {first.check}: {first.message}".replace("|", "\\|")
            text = text if len(text) <= 300 else text[:297] + "..."
        print(f"| {entry.name} | {entry.expected} | {report.verdict} | {rows} | {report.samples_used:,} | "
              f"{elapsed:.1f} | {text} |")


if __name__ == "__main__":
    main()
