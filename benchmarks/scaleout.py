"""Scale-out benchmark (issue 21): thorough-mode rows per second against workers, and what certifying
TV <= 1e-3 costs on two cores, extrapolated to 10^9 rows on 64 cores.

    python benchmarks/scaleout.py                 # ~3-5 min on 2 loaded cores; prints a Markdown report
    python benchmarks/scaleout.py --repeats 2     # the best of two interleaved rounds per executor
    python benchmarks/scaleout.py --quick         # smoke run (quick mode, two scenarios, seconds)
    python benchmarks/scaleout.py --out benchmarks/scaleout_results.md

The reference verifier (``numpy_verify``) runs thorough mode on a subset of the default battery
(scenarios of similar cost, so scenario shards balance over two workers) in this process, on 1 and
2 local processes, on all cores (``executor="processes"``) and on a Dask ``LocalCluster`` of two
worker processes when ``distributed`` is installed. Rows per second are the report's
``samples_used`` over the wall time of the whole call (pool start-up included). Every report's JSON
(timings aside) is compared with the in-process one: a scaling number from a run that computed
something else would be meaningless.

The certification rows come from the checker's own planning (``planned_samples``, i.e.
``stats.samples_for`` at the run's per-check alpha share, the mode's PIT bins): rows per scenario for
the PIT tests to detect TV 1e-3 with power 0.99, times the scenarios. This is a benchmark, not a
test: it prints numbers measured in one run on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import fmt_int, fmt_s, machine_lines, table  # noqa: E402

from specdec_check import check_verifier  # noqa: E402
from specdec_check._settings import get_mode  # noqa: E402
from specdec_check.checker._session import planned_samples  # noqa: E402
from specdec_check.checker._shards import available_cores  # noqa: E402
from specdec_check.samplers import numpy_verify  # noqa: E402
from specdec_check.scenarios import default_verifier_battery  # noqa: E402

#: Six default-battery scenarios of similar thorough-mode cost (5-8 s each in one process on the
#: 2-core machine, ~100k rows each), so two scenario shards per worker balance; draft-zeros (23 s) and
#: opposite-ranking (15 s) would dominate the makespan, and draft-over-proposes crashes in thorough
#: mode at this commit (a -5.6e-19 expected cell in worst_cells; reported, not fixed here).
SCENARIOS = ("corpus-bigram", "high-acceptance", "disjoint-supports", "target-equals-draft", "one-hot-draft",
             "many-rows")
QUICK_SCENARIOS = ("corpus-bigram", "many-rows")
#: The resolution to certify and the row count to extrapolate to (issue 21: a bf16 kernel change
#: needs TV <= 1e-4, about 10^9 rows and more).
TARGET_TV = 1e-3
EXTRAPOLATED_ROWS = 1e9
EXTRAPOLATED_CORES = 64


def _json(report) -> str:
    def drop(value):
        if isinstance(value, dict):
            return {k: drop(v) for k, v in value.items() if k != "elapsed_s"}
        if isinstance(value, list):
            return [drop(v) for v in value]
        return value

    return json.dumps(drop(report.to_dict()), sort_keys=True)


def _executors(include_dask: bool):
    """``(label, workers, make)`` per row; ``make()`` returns ``(executor, close)``."""
    cores = available_cores()
    rows = [("in-process (executor=None)", 1, lambda: (None, None)),
            ("1 local process (executor=1)", 1, lambda: (1, None)),
            ("2 local processes (executor=2)", 2, lambda: (2, None))]
    if cores != 2:
        rows.append((f"all cores (executor='processes', {cores})", cores, lambda: ("processes", None)))
    if include_dask:
        def dask():
            import distributed

            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                               dashboard_address=":0")
            client = distributed.Client(cluster)

            def close():
                client.close()
                cluster.close()

            return client.get_executor(), close

        rows.append(("Dask LocalCluster (2 worker processes)", 2, dask))
    return rows


def measure(scenarios, mode, repeats, include_dask):
    """Best wall time per executor over ``repeats`` interleaved rounds; each report checked against in-process."""
    executors = _executors(include_dask)
    check_verifier(numpy_verify, scenarios=scenarios, mode="quick", seed=0)  # untimed warm-up: imports, caches
    best = {label: float("inf") for label, _, _ in executors}
    reference, reports, busy = None, {}, {}
    for _ in range(repeats):
        for label, _, make in executors:
            executor, close = make()  # a Dask cluster's start-up is not timed; a local pool's is (the run owns it)
            try:
                start = time.perf_counter()
                report = check_verifier(numpy_verify, scenarios=scenarios, mode=mode, seed=0, executor=executor)
                elapsed = time.perf_counter() - start
            finally:
                if close is not None:
                    close()
            if elapsed < best[label]:
                best[label] = elapsed
                busy[label] = sum(s.elapsed_s for s in report.scenarios)
            reference = reference or _json(report)
            reports[label] = (report, _json(report) == reference)
            print(f"  {label}: {elapsed:.1f} s, {report.samples_used:,} rows, {report.verdict}", file=sys.stderr,
                  flush=True)
    return executors, best, reports, busy


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: quick mode, two scenarios")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds; the best time is kept (default 1)")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask LocalCluster row")
    parser.add_argument("--out", default=None, help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    try:
        import distributed  # noqa: F401

        include_dask = not args.no_dask
    except ImportError:
        include_dask = False
    mode = get_mode("quick" if args.quick else "thorough")
    names = QUICK_SCENARIOS if args.quick else SCENARIOS
    scenarios = [s for s in default_verifier_battery() if s.name in names]

    lines = ["# Scale-out benchmark (issue 21)", "", "## Machine", "", *machine_lines(None), ""]
    executors, best, reports, busy = measure(scenarios, mode.name, args.repeats, include_dask)
    report0 = reports[executors[0][0]][0]
    rows = report0.samples_used
    rate = {label: rows / best[label] for label, _, _ in executors}
    rate_one = rate["1 local process (executor=1)"]
    rate_two = rate["2 local processes (executor=2)"]
    lines += [f"## Rows per second against workers ({mode.name} mode, reference verifier)", "",
              f"Scenarios: {', '.join(names)} (the screen runs in front); {rows:,} rows per run; best of "
              f"{args.repeats} interleaved round(s). Speedup is against 1 local process.", ""]
    lines += table(["executor", "workers", "wall", "rows/s", "speedup", "scenarios in parallel",
                    "report JSON = in-process"],
                   [[label, workers, fmt_s(best[label]), fmt_int(rate[label]), f"{rate[label] / rate_one:.2f}x",
                     f"{busy[label] / best[label]:.2f}", "yes" if reports[label][1] else "NO"]
                    for label, workers, _ in executors])
    lines += ["", "Scenarios in parallel: the scenarios' own wall times summed over the wall time of the call "
              "(the run the table's wall time comes from), i.e. how many shards were running at once on average; "
              "near the worker count when the driver does not serialise them, whatever CPU they got."]
    if available_cores() == 2:
        lines += ["", "All cores: this machine has 2 usable cores, so executor='processes' is the 2-process row."]
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    lines += ["", f"Load average at the end: {load} (1 / 5 / 15 min). Two workers can only beat one where a "
              "second core is idle: with other jobs holding the cores, the speedup measures their spare capacity, "
              "not the sharding."]
    efficiency = rate_two / (2 * rate_one)

    per_check = report0.alpha_per_check
    per_scenario = planned_samples(TARGET_TV, mode.pit_bins, per_check / 2)
    measured_plan = planned_samples(mode.design_tv, mode.pit_bins, per_check / 2)
    certify_rows = per_scenario * len(scenarios)
    certify_two = certify_rows / rate_two
    extrapolated = EXTRAPOLATED_ROWS / (EXTRAPOLATED_CORES * rate_one * efficiency)
    ideal = EXTRAPOLATED_ROWS / (EXTRAPOLATED_CORES * rate_one)
    lines += ["", f"## Certifying TV <= {TARGET_TV:g} on two cores", "",
              f"Rows per scenario from the checker's planning: planned_samples(TV, {mode.pit_bins} PIT bins, "
              f"alpha_per_check / 2 = {per_check / 2:.3g}) = stats.samples_for(TV, support_size={mode.pit_bins}, "
              f"alpha={per_check / 2:.3g}, power 0.99); at the mode's design TV {mode.design_tv:g} it plans "
              f"{measured_plan:,} rows per scenario (the run above used {rows:,} over {len(scenarios)} scenarios "
              "and the screen). Wall time at the 2-process rate measured above; the mode's cap "
              f"(max_samples {mode.max_samples:,} per test) would have to be lifted.", ""]
    lines += table(["quantity", "value"], [
        [f"rows per scenario for TV {TARGET_TV:g}", fmt_int(per_scenario)],
        [f"rows for the {len(scenarios)} scenarios", fmt_int(certify_rows)],
        ["rate on 2 processes (measured)", f"{fmt_int(rate_two)} rows/s"],
        ["wall time on two cores", f"{fmt_s(certify_two)} ({certify_two / 3600:.2f} h)"],
        ["2-core parallel efficiency e2 = r2 / (2 r1)", f"{efficiency:.2f}"],
        [f"extrapolated: {EXTRAPOLATED_ROWS:.0e} rows on {EXTRAPOLATED_CORES} cores at e2",
         f"{fmt_s(extrapolated)} ({extrapolated / 3600:.2f} h)"],
        [f"extrapolated: {EXTRAPOLATED_ROWS:.0e} rows on {EXTRAPOLATED_CORES} idle cores (e = 1)",
         f"{fmt_s(ideal)} ({ideal / 3600:.2f} h)"],
    ])
    lines += ["", f"Extrapolation: T = N / (C * r1 * e2) with N = {EXTRAPOLATED_ROWS:.0e} rows, C = "
              f"{EXTRAPOLATED_CORES} cores, r1 = {fmt_int(rate_one)} rows/s (1 local process, measured) and "
              f"e2 = {efficiency:.2f} (the 2-core efficiency, assumed to hold at C cores: shards share nothing "
              "but the driver's merge, which is per scenario); e = 1 is the bound for idle cores. It assumes "
              "cores like this machine's and at least C shards of equal cost: scenario shards give at most one "
              f"worker per scenario ({len(scenarios)} here, 14 with the screen in the default battery), so 64 "
              "busy cores need block-range shards "
              "(not implemented), or 64 scenarios/configurations checked at once."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if all(ok for _, ok in reports.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
