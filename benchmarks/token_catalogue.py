"""The token-sampler catalogue's table: each bug's verdict, the samples the checker needed, where it failed first
and the exact TV of its law there (the mean over rows of each row's TV from the exact processed law)::

    python benchmarks/token_catalogue.py [--mode default]

Exits 1 when a bug is not failed.
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> int:
    from specdec_check.bugs import TOKEN_BUGS, token_entry_tv
    from specdec_check.bugs._token_samplers import DRAFT_BUGS
    from specdec_check.checker.token.draft import DRAFT_PROCESSING
    from specdec_check.scenarios import default_draft_battery, default_token_battery

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="default")
    args = parser.parse_args(argv)
    print("| bug | source | verdict | samples to verdict | first failing scenario / check | exact TV there | s |")
    print("|---|---|---|---:|---|---:|---:|")
    missed = 0
    for entry in TOKEN_BUGS + DRAFT_BUGS:
        started = time.perf_counter()
        report = entry.report(args.mode, 0)
        first = next((f for f in report.findings if f.kind == "failure"), None)
        missed += report.verdict != "failed"
        battery = (default_draft_battery if entry.kind == "draft_sampler" else default_token_battery)(
            getattr(entry.sampler, "processing", None) or DRAFT_PROCESSING)
        scenario = next((s for s in battery if first is not None and s.name == first.scenario), None)
        tv = token_entry_tv(entry, scenario) if scenario is not None and entry.kind == "token_sampler" else None
        summary = next((s for s in report.scenarios if first is not None and s.name == first.scenario), None)
        print(f"| {entry.name} | {entry.source} | {report.verdict} | {summary.samples if summary else 0:,} | "
              f"{first.scenario + ' / ' + first.check if first else '-'} | {'-' if tv is None else f'{tv:.3g}'} | "
              f"{time.perf_counter() - started:.1f} |", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
