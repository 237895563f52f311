"""Every catalogued verifier under ``rule="standard"`` and ``rule="any"``: verdict and rows to verdict;
and the TV bounds the checker reports for the lossy rules beside their exact values.

    python benchmarks/rule_table.py                    # quick mode, every verifier entry (~10 min on 2 cores)
    python benchmarks/rule_table.py --mode default     # the modes users run (~40 min on 2 cores)
    python benchmarks/rule_table.py --entries sampled_match,control_block_verification --out table.md

Not a test: it prints what one run measured. *Rows to verdict* = the rows handed to the verifier
up to the end of the first scenario (battery order) with a failure or inefficiency finding (the
run stops a scenario early once an e-process rejects or an impossible event appears); for a
passing entry, the rows of the whole run. Under ``"any"`` only the rule-agnostic completed-law
tests, the contract and the randomness checks decide; standard-rule violations are
``nonstandard`` findings (information).

The lossy-rule table: for each lossy rule of the catalogue and each scenario where it failed under
``"any"``, the certified bounds of the completed law's TV from the target (``tv_lower`` from the
plug-in TV minus its deviation radius; ``tv_upper`` from the enumerated law; each at confidence
1 - alpha share) and the exact TV by enumeration (:func:`specdec_check.bugs.rule_scenario_tv`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from specdec_check.bugs import catalogue, rule_scenario_tv
from specdec_check.checker import check_verifier
from specdec_check.scenarios import default_verifier_battery

#: Lossy rules whose exact completed-law TV the catalogue can enumerate (rule_scenario_tv).
LOSSY_RULES = ("medusa_typical_rule", "medusa_typical_sampled_rule", "sglang_threshold_single", "sglang_threshold_acc")


def _load() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:  # pragma: no cover - not on Unix
        return "load average unavailable"


def rows_to_verdict(report) -> tuple:
    """``(rows, first flagged scenario or "-")``: rows handed over up to the end of the first scenario with a
    failure or inefficiency finding; all rows when there is none."""
    flagged = {f.scenario for f in report.findings if f.kind in ("failure", "inefficiency")}
    rows = 0
    for s in report.scenarios:
        rows += s.samples if s.samples else s.calls * s.rows_per_call
        if s.name in flagged:
            return rows, s.name
    return rows, "-"


def _cell(report, wall) -> list:
    rows, where = rows_to_verdict(report)
    return [report.verdict, f"{rows:,}", where, f"{wall:.1f} s"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="quick", choices=("quick", "default", "thorough"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--entries", help="comma-separated catalogue names (default: every verifier entry)")
    parser.add_argument("--out", help="also write the Markdown here")
    args = parser.parse_args(argv)
    entries = [e for e in catalogue() if e.kind == "verifier"]
    if args.entries:
        wanted = set(args.entries.split(","))
        unknown = wanted - {e.name for e in entries}
        if unknown:
            parser.error(f"unknown verifier entries {sorted(unknown)}")
        entries = [e for e in entries if e.name in wanted]
    lines = [f"# Rows to verdict under rule='standard' and rule='any' ({args.mode} mode, seed {args.seed})", "",
             f"Machine: {os.cpu_count()} cores, {_load()} at the start. Rows to verdict: rows handed over up to the "
             "end of the first scenario with a failure or inefficiency finding (all rows for a pass).", "",
             "| entry | expected | rule | standard: verdict | rows | first flagged | wall "
             "| any: verdict | rows | first flagged | wall |",
             "|---|---|---|---|---:|---|---:|---|---:|---|---:|"]
    lossy_reports = {}
    for e in entries:
        cells = []
        for rule in ("standard", "any"):
            start = time.perf_counter()
            report = check_verifier(e.sampler, mode=args.mode, seed=args.seed, rule=rule)
            cells += _cell(report, time.perf_counter() - start)
            if rule == "any" and e.name in LOSSY_RULES:
                lossy_reports[e.name] = report
        lines.append(f"| {e.name} | {e.expected} | {e.rule} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    if lossy_reports:
        battery = {s.name: s for s in default_verifier_battery()}
        lines += ["", "## Lossy rules: reported TV bounds against the exact TV", "",
                  "| rule | scenario | reported TV lower | reported TV upper | exact TV | inside |",
                  "|---|---|---:|---:|---:|---|"]
        for name, report in lossy_reports.items():
            for record in report.results:
                if record.check != "completed" or record.passed:
                    continue
                lower, upper = record.details.get("tv_lower"), record.details.get("tv_upper")
                scenario = battery.get(record.scenario)
                try:
                    exact = rule_scenario_tv(name, scenario) if scenario is not None else None
                except ValueError:  # too large to enumerate
                    exact = None
                inside = "-" if exact is None or lower is None else (
                    "yes" if lower <= exact + 1e-12 and (upper is None or exact <= upper + 1e-12) else "**NO**")
                lines.append(f"| {name} | {record.scenario} ({record.details.get('law', record.method)}) | "
                             f"{'-' if lower is None else f'{lower:.4f}'} | {'-' if upper is None else f'{upper:.4f}'} | "
                             f"{'-' if exact is None else f'{exact:.4f}'} | {inside} |")
                print(lines[-1], flush=True)
    lines += ["", f"Finished at {_load()}."]
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    sys.stdout.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
