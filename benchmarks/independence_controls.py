"""Two-sided independence in default mode: the coupled-rows verifiers fail, the exact controls pass.

Runs the catalogue's coupled-rows entries (antithetic, stratified, systematic uniforms across a call's
rows) and ``rows_share_uniforms`` once each, and every exact verifier control over ``--seeds`` seeds, in
default mode, and prints a markdown table: the verdict, and the first finding's check::

    python benchmarks/independence_controls.py --seeds 20

Exits 1 when a coupled verifier passes or a control fails.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    from specdec_check import check_verifier
    from specdec_check.bugs import CONTROLS, entry

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per exact control (default 20)")
    args = parser.parse_args(argv)
    bad = 0
    print("| verifier | seed | verdict | first finding | s |")
    print("|---|---|---|---|---|")
    for name in ("antithetic_row_pairs", "stratified_rows", "systematic_rows", "rows_share_uniforms"):
        started = time.perf_counter()
        report = check_verifier(entry(name).sampler, seed=0)
        first = report.findings[0] if report.findings else None
        bad += report.verdict != "failed"
        print(f"| {name} | 0 | {report.verdict} | {first.scenario + ' / ' + first.check if first else '-'} | "
              f"{time.perf_counter() - started:.1f} |", flush=True)
    controls = [c for c in CONTROLS if c.kind == "verifier"]
    passed = 0
    for control in controls:
        for seed in range(args.seeds):
            started = time.perf_counter()
            report = check_verifier(control.sampler, seed=seed)
            ok = report.verdict == "passed"
            passed += ok
            bad += not ok
            if not ok or seed == 0:
                first = report.findings[0] if report.findings else None
                print(f"| {control.name} | {seed} | {report.verdict} | "
                      f"{first.scenario + ' / ' + first.check if first else '-'} | "
                      f"{time.perf_counter() - started:.1f} |", flush=True)
    print(f"\nexact controls: {passed} of {len(controls) * args.seeds} runs passed "
          f"({len(controls)} controls x {args.seeds} seeds)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
