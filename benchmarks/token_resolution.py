"""The token-sampler kind's resolution and cost, measured in one run.

Part 1: default mode on the numpy reference, one line per scenario of the battery: vocabulary, cells of its law
test, outputs, the TV its law test could detect with power 0.99 (achieved), and its seconds. Part 2: at 10^6
outputs per call, the sampler's own CPU time against the whole check's (the checker's overhead, a ratio)::

    python benchmarks/token_resolution.py [--mode default] [--workers 2] [--part 1|2]
"""

from __future__ import annotations

import argparse
import dataclasses
import time


def _timed(sample):
    def wrapped(**kwargs):
        started = time.process_time()
        try:
            return sample(**kwargs)
        finally:
            wrapped.cpu += time.process_time() - started

    wrapped.cpu = 0.0
    wrapped.processing = sample.processing
    return wrapped


def main(argv=None) -> int:
    from specdec_check import check_token_sampler, samplers
    from specdec_check.checker.token.laws import support_cells
    from specdec_check.scenarios import default_token_battery

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="default")
    parser.add_argument("--workers", type=int, default=None, help="local processes (default: this process)")
    parser.add_argument("--part", type=int, choices=(1, 2), default=None, help="one part only (default: both)")
    args = parser.parse_args(argv)
    battery = default_token_battery(samplers.numpy_sample.processing)
    passed = True
    if args.part != 2:
        passed = _battery(args, battery)
    if args.part != 1:
        passed = _overhead(args, battery) and passed
    return 0 if passed else 1


def _battery(args, battery) -> bool:
    from specdec_check import check_token_sampler, samplers
    from specdec_check.checker.token.laws import support_cells

    started = time.perf_counter()
    report = check_token_sampler(samplers.numpy_sample, mode=args.mode, executor=args.workers)
    wall = time.perf_counter() - started
    print(f"{args.mode} mode, numpy reference, {args.workers or 1} process(es): {report.verdict}, "
          f"{report.samples_used:,} outputs in {wall:.1f} s wall; design TV {report.design_tv:g}, weakest achieved "
          f"{report.achieved_tv:.3g}\n")
    print("| scenario | V | cells | outputs | achieved TV | s |")
    print("|---|---:|---:|---:|---:|---:|")
    for scenario, summary in zip(battery, report.scenarios):
        cells = support_cells(scenario.laws())[1].size
        tv = "-" if summary.achieved_tv is None else f"{summary.achieved_tv:.3g}"
        print(f"| {summary.name} | {summary.vocab_size:,} | {cells:,} | {summary.samples:,} | {tv} | "
              f"{summary.elapsed_s:.1f} |")
    return report.verdict == "passed"


def _overhead(args, battery) -> bool:
    from specdec_check import check_token_sampler, samplers
    from specdec_check.checker import check_token_sampler as _warm  # noqa: F401 - imports outside the timing

    # Part 2 on the scenarios of few cells: their law test's fixed cost (its exact calibration at n ~ 1e8: ~3 s at
    # 59 cells, ~12 s at 876) would otherwise be most of the checker's time.
    big = [dataclasses.replace(s, rows_per_call=1 << 20) for s in battery if s.name in ("heterogeneous-v16",
                                                                                       "shared-logits-own-parameters")]
    sample = _timed(samplers.numpy_sample)
    cpu = time.process_time()
    check = check_token_sampler(sample, scenarios=big, mode=args.mode, checks=["contract", "impossible", "token_law"])
    cpu = time.process_time() - cpu
    print(f"\nAt 2^20 outputs per call ({', '.join(s.name for s in big)}; law checks): {check.samples_used:,} outputs, "
          f"whole check {cpu:.1f} s CPU, sampler {sample.cpu:.1f} s, checker {cpu - sample.cpu:.1f} s: "
          f"{(cpu - sample.cpu) / sample.cpu:.2f}x the sampler's own time")
    return check.verdict == "passed"


if __name__ == "__main__":
    raise SystemExit(main())
