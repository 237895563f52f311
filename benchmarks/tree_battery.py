"""Default-mode time of the tree battery per drafting scheme, and the tree catalogue's rows to verdict.

    python benchmarks/tree_battery.py              # the three references, default mode (about 1-2 min on 2 cores)
    python benchmarks/tree_battery.py --mutants    # also every tree catalogue entry (several minutes)
    python benchmarks/tree_battery.py --rule any   # the same under rule="any" (the rule-agnostic tests)
    python benchmarks/tree_battery.py --mode quick

Prints the machine's load before and after (times on a shared machine drift with it), each
scheme's verdict, rows and seconds with the slowest scenarios and the TV each scenario's law
tests reached, and with ``--mutants`` the rows each bug needed before its first failure and the
check that named it. Under ``--rule any`` every catalogue entry is judged under "any" (the bugs
are lossy, so they must still fail; the controls are lossless).
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


def _catalogue(mode, seed, rule):
    """Every tree entry under ``rule`` (None: each entry's own), with its report: ``[(entry, report, s)]``."""
    from specdec_check.bugs import tree_catalogue

    rows = []
    for e in tree_catalogue():
        started = time.perf_counter()
        report = check_tree_verifier(e.sampler, drafting=e.drafting, mode=mode, seed=seed, rule=rule or e.check_rule)
        rows.append((e, report, time.perf_counter() - started))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rule", choices=("standard", "any"), default="standard")
    parser.add_argument("--mutants", action="store_true")
    args = parser.parse_args(argv)
    print(f"# Tree battery, {args.mode} mode, rule={args.rule}, seed {args.seed} ({os.cpu_count()} CPUs; "
          f"{_load()})\n")
    print("| scheme | verdict | scenarios | rows | seconds | slowest scenarios | worst achieved TV |")
    print("|---|---|---:|---:|---:|---|---|")
    tvs = {}
    for drafting, verify in REFERENCES.items():
        started = time.perf_counter()
        report = check_tree_verifier(verify, drafting=drafting, mode=args.mode, seed=args.seed, rule=args.rule)
        elapsed = time.perf_counter() - started
        slow = sorted(report.scenarios, key=lambda s: -s.elapsed_s)[:3]
        worst = max(report.scenarios, key=lambda s: s.achieved_tv or 0.0)
        tvs[drafting] = {s.name: s.achieved_tv for s in report.scenarios}
        print(f"| {drafting} | {report.verdict} | {len(report.scenarios)} | {report.samples_used:,} | {elapsed:.1f} | "
              + ", ".join(f"{s.name} {s.elapsed_s:.1f}s" for s in slow)
              + f" | {worst.achieved_tv:.4f} ({worst.name}) |")
    names = list(dict.fromkeys(name for per in tvs.values() for name in per))
    print("\nAchieved TV per scenario (the best min_detectable_tv of its law tests; the design TV is the floor):\n")
    print("| scenario | " + " | ".join(tvs) + " |")
    print("|---|" + "---:|" * len(tvs))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{tvs[d][name]:.4f}" if tvs[d].get(name) is not None else "-"
                                         for d in tvs) + " |")
    if args.mutants:
        rule = None if args.rule == "standard" else args.rule
        started = time.perf_counter()
        rows = _catalogue(args.mode, args.seed, rule)
        judged = args.rule if rule else "each entry's own"
        print(f"\n## Tree catalogue under rule={judged}, {time.perf_counter() - started:.0f} s\n")
        print("| entry | scheme | rule | expected | verdict | rows to verdict | rows in all | seconds "
              "| first failing scenario: checks |")
        print("|---|---|---|---|---|---:|---:|---:|---|")
        for e, report, seconds in rows:
            to_verdict, total, first = _rows_to_verdict(report)
            print(f"| {e.name} | {e.drafting} | {rule or e.check_rule} | {e.expected} | {report.verdict} | "
                  f"{to_verdict:,} | {total:,} | {seconds:.1f} | {first} |")
    print(f"\n({_load()} at the end)")


if __name__ == "__main__":
    main()
