"""The token-sampler catalogue's exact controls over many seeds: each must pass every run.

Runs every control of ``specdec_check.bugs.TOKEN_CONTROLS`` (and the numpy reference) over ``--seeds`` seeds in
``--mode`` (default quick: design TV 1e-2 on the whole battery) and prints a markdown table of the runs that did
not pass, then the totals::

    python benchmarks/token_controls.py --seeds 50

Exits 1 when a control fails or is inconclusive in any run.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    from specdec_check import samplers
    from specdec_check.bugs import TOKEN_CONTROLS, TokenEntry

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="seeds per control (default 50)")
    parser.add_argument("--mode", default="quick", help="mode of every run (default quick)")
    args = parser.parse_args(argv)
    entries = (TokenEntry("numpy_sample", samplers.numpy_sample, "the reference", "-", "pass"),) + TOKEN_CONTROLS
    print("| control | seed | verdict | first finding | s |")
    print("|---|---|---|---|---|")
    totals = {}
    started_all = time.perf_counter()
    for entry in entries:
        for seed in range(args.seeds):
            started = time.perf_counter()
            report = entry.report(args.mode, seed)
            ok = report.verdict == "passed"
            totals.setdefault(entry.name, [0, 0])
            totals[entry.name][0] += ok
            totals[entry.name][1] += 1
            if not ok:
                first = report.findings[0] if report.findings else None
                print(f"| {entry.name} | {seed} | {report.verdict} | "
                      f"{first.scenario + ' / ' + first.check + ': ' + first.message[:120] if first else '-'} | "
                      f"{time.perf_counter() - started:.1f} |", flush=True)
    print()
    for name, (passed, runs) in totals.items():
        print(f"{name}: {passed} of {runs} runs passed")
    print(f"\n{sum(p for p, _ in totals.values())} of {sum(r for _, r in totals.values())} runs passed in "
          f"{time.perf_counter() - started_all:.0f} s ({args.mode} mode)")
    return 0 if all(p == r for p, r in totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
