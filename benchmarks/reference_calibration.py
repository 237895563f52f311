"""Whole-checker false alarms: the exact references over many seeded quick runs (not a test).

Run:  python benchmarks/reference_calibration.py [--runs 200] [--other-runs 50] [--out FILE]

Each reference is exact, so every run should pass: a failure here is a false alarm of the whole
checker (its budget is alpha = 1e-6 per run, so 0 are expected in a few hundred runs; one would
be a calibration bug), an inconclusive run is a planning bug (quick mode promises its design TV
on the built-in battery). Prints one markdown table: per reference, runs, passed, failed,
inconclusive, other verdicts, the seeds of any run that did not pass, the largest achieved TV and
the mean time per run, all measured in this run.
"""
from __future__ import annotations

import argparse
import sys
import time


def _references(runs: int, other_runs: int):
    from specdec_check import check_generator, check_ragged_verifier, check_tree_verifier, check_verifier
    from specdec_check import samplers

    return [
        ("numpy_verify (rule standard)", runs, lambda seed: check_verifier(samplers.numpy_verify, mode="quick", seed=seed)),
        ("numpy_generate", runs, lambda seed: check_generator(samplers.numpy_generate, mode="quick", seed=seed)),
        ("block_verify (rule any)", other_runs,
         lambda seed: check_verifier(samplers.block_verify, mode="quick", seed=seed, rule="any")),
        ("numpy_verify_tree_iid", other_runs,
         lambda seed: check_tree_verifier(samplers.numpy_verify_tree_iid, drafting="iid", mode="quick", seed=seed)),
        ("numpy_verify_tree_without_replacement", other_runs,
         lambda seed: check_tree_verifier(samplers.numpy_verify_tree_without_replacement,
                                          drafting="without_replacement", mode="quick", seed=seed)),
        ("numpy_verify_tree_topk", other_runs,
         lambda seed: check_tree_verifier(samplers.numpy_verify_tree_topk, drafting="topk", mode="quick", seed=seed)),
        ("numpy_ragged_verify", other_runs,
         lambda seed: check_ragged_verifier(samplers.numpy_ragged_verify, mode="quick", seed=seed)),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="seeds for numpy_verify and numpy_generate")
    parser.add_argument("--other-runs", type=int, default=50, help="seeds for block, tree and ragged references")
    parser.add_argument("--first-seed", type=int, default=1000, help="first seed (the suite uses 0 to a few)")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    lines = ["| reference | runs | passed | failed | inconclusive | other | seeds not passed | worst achieved TV "
             "| s per run |", "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    total_runs = total_bad = 0
    for name, runs, check in _references(args.runs, args.other_runs):
        verdicts, bad, worst, started = {}, [], 0.0, time.perf_counter()
        for seed in range(args.first_seed, args.first_seed + runs):
            report = check(seed)
            verdicts[report.verdict] = verdicts.get(report.verdict, 0) + 1
            if report.verdict != "passed":
                bad.append(f"{seed} ({report.verdict})")
            worst = max(worst, report.achieved_tv or 0.0)
        took = (time.perf_counter() - started) / max(runs, 1)
        other = runs - sum(verdicts.get(v, 0) for v in ("passed", "failed", "inconclusive"))
        lines.append(f"| {name} | {runs} | {verdicts.get('passed', 0)} | {verdicts.get('failed', 0)} | "
                     f"{verdicts.get('inconclusive', 0)} | {other} | {', '.join(bad) or '-'} | {worst:.3f} | {took:.1f} |")
        total_runs, total_bad = total_runs + runs, total_bad + len(bad)
        print(lines[-1], file=sys.stderr, flush=True)
    lines.append("")
    lines.append(f"{total_runs} runs, {total_bad} not passed (seeds {args.first_seed} on, quick mode, alpha 1e-6 per run).")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
