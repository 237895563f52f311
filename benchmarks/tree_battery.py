"""Default-mode time of the tree battery per drafting scheme, and the tree catalogue's rows to verdict.

    python benchmarks/tree_battery.py              # the three references, default mode (about 1-2 min on 2 cores)
    python benchmarks/tree_battery.py --mutants    # also every tree catalogue entry (several minutes)
    python benchmarks/tree_battery.py --mode quick

Prints the machine's load before and after (times on a shared machine drift with it), each
scheme's verdict, rows and seconds with the slowest scenarios, and with ``--mutants`` the rows
each bug needed before its first failure and the check that named it.
"""

from __future__ import annotations

import argparse
import os
import time

from specdec_check import samplers
from specdec_check.checker import check_tree_verifier

REFERENCES = {"iid": samplers.numpy_verify_tree_iid,
              "without_replacement": samplers.numpy_verify_tree_without_replacement,
              "topk": samplers.numpy_verify_tree_topk}


def _load() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:  # pragma: no cover - not on Unix
        return "load average unavailable"


def _rows_to_verdict(report):
    """``(rows until the first failing scenario ended, rows of the whole run, "scenario: checks")``: the run
    goes on through every scenario after a failure, so the first count is the cost of the verdict."""
    if report is None:
        return 0, 0, "-"
    failed = {f.scenario for f in report.failures}
    rows = 0
    for s in report.scenarios:
        rows += s.samples
        if s.name in failed:
            checks = sorted({f.check for f in report.failures if f.scenario == s.name})
            return rows, report.samples_used, f"{s.name}: {', '.join(checks)}"
    return report.samples_used, report.samples_used, "-"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mutants", action="store_true")
    args = parser.parse_args(argv)
    print(f"# Tree battery, {args.mode} mode, seed {args.seed} ({os.cpu_count()} CPUs; {_load()})\n")
    print("| scheme | verdict | scenarios | rows | seconds | slowest scenarios |")
    print("|---|---|---:|---:|---:|---|")
    for drafting, verify in REFERENCES.items():
        started = time.perf_counter()
        report = check_tree_verifier(verify, drafting=drafting, mode=args.mode, seed=args.seed)
        elapsed = time.perf_counter() - started
        slow = sorted(report.scenarios, key=lambda s: -s.elapsed_s)[:3]
        print(f"| {drafting} | {report.verdict} | {len(report.scenarios)} | {report.samples_used:,} | {elapsed:.1f} | "
              + ", ".join(f"{s.name} {s.elapsed_s:.1f}s" for s in slow) + " |")
    if args.mutants:
        from specdec_check.bugs import tree_mutation_score

        score = tree_mutation_score(args.mode, seed=args.seed)
        print(f"\n## Tree catalogue: {score.detected}/{len(score.bugs)} bugs detected, "
              f"{sum(r.ok for r in score.controls)}/{len(score.controls)} controls passed, {score.elapsed_s:.0f} s\n")
        print("| entry | scheme | expected | verdict | rows to verdict | rows in all | seconds "
              "| first failing scenario: checks |")
        print("|---|---|---|---|---:|---:|---:|---|")
        for row in score.rows:
            report = score.reports.get(row.name)
            to_verdict, total, first = _rows_to_verdict(report)
            print(f"| {row.name} | {row.kind[6:-1]} | {row.expected} | {row.outcome} | {to_verdict:,} | {total:,} | "
                  f"{row.elapsed_s:.1f} | {first} |")
    print(f"\n({_load()} at the end)")


if __name__ == "__main__":
    main()
