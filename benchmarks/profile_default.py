"""Where the checker's time goes: one default-mode run of a reference in this process, in CPU seconds.

Prints the import's CPU, the run's CPU, the sampler's own CPU (a wrapper times every call), the checker's
overhead as a ratio to the sampler's time, the peak resident memory, and one line per scenario (its wall time,
calls and samples); ``--profile N`` adds cProfile's N most expensive functions by own time::

    python benchmarks/profile_default.py [--kind verifier|token_sampler] [--backend numpy|torch] [--profile 25]

Run it on two checkouts (``PYTHONPATH=<checkout>``) to compare: CPU time is what is compared, not wall time.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="verifier", choices=("verifier", "token_sampler"))
    parser.add_argument("--backend", default="numpy", choices=("numpy", "torch"))
    parser.add_argument("--mode", default="default")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    started = time.process_time()
    import specdec_check
    from specdec_check import samplers

    check = getattr(specdec_check, "check_token_sampler" if args.kind == "token_sampler" else "check_verifier")
    name = {("verifier", "numpy"): "numpy_verify", ("verifier", "torch"): "torch_verify",
            ("token_sampler", "numpy"): "numpy_sample", ("token_sampler", "torch"): "torch_sample"}[
        (args.kind, args.backend)]
    reference = getattr(samplers, name)
    imported = time.process_time() - started
    spent = [0.0, 0]

    def timed(**kwargs):
        begun = time.process_time()
        try:
            return reference(**kwargs)
        finally:
            spent[0] += time.process_time() - begun
            spent[1] += 1

    timed.processing = getattr(reference, "processing", None)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    begun = time.process_time()
    report = check(timed, mode=args.mode, seed=0, backend=args.backend, name=f"specdec_check.samplers:{name}")
    run = time.process_time() - begun
    if profiler is not None:
        profiler.disable()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.kind} {args.backend} {args.mode}: {report.verdict}, {report.samples_used:,} samples, "
          f"{spent[1]:,} sampler calls")
    print(f"import {imported:.2f} s CPU; run {run:.2f} s CPU; sampler {spent[0]:.2f} s; checker {run - spent[0]:.2f} s "
          f"= {(run - spent[0]) / spent[0]:.2f}x the sampler's; total {run / spent[0]:.2f}x; peak RSS {peak:.0f} MB")
    print("\n| scenario | calls | samples | wall s |\n|---|---:|---:|---:|")
    for s in report.scenarios:
        print(f"| {s.name} | {s.calls:,} | {s.samples:,} | {s.elapsed_s:.2f} |")
    if profiler is not None:
        import pstats

        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
