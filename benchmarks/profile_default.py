"""Where the checker's time goes: one default-mode run of a reference in this process, in CPU seconds.

Prints the import's CPU, the run's CPU, the sampler's own CPU (a wrapper times every call), the checker's
overhead as a ratio to the sampler's time, the peak resident memory, one line per scenario (its CPU, the
sampler's share of it, calls and samples) and one line per check (the calls made for it, the sampler's CPU in
them, and the checker's own CPU in the check's start, absorb and finish, the calls excluded; "law loop" is the
rest of the scenario loop: drawing inputs, guarding calls, parsing and locating outputs); ``--profile N`` adds
cProfile's N most expensive functions by own time::

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
    by_check, by_scenario = _instrument(spent)
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
    print("\n| scenario | CPU s | sampler CPU s | checker CPU s | calls | samples |\n|---|---:|---:|---:|---:|---:|")
    for s in report.scenarios:
        cpu, sampler = by_scenario.get(s.name, (0.0, 0.0))
        print(f"| {s.name} | {cpu:.2f} | {sampler:.2f} | {cpu - sampler:.2f} | {s.calls:,} | {s.samples:,} |")
    print("\n| check | calls | sampler CPU s | checker CPU s |\n|---|---:|---:|---:|")
    for name, (calls, sampler, own) in sorted(by_check.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
        print(f"| {name} | {calls:,} | {sampler:.2f} | {own:.2f} |")
    if profiler is not None:
        import pstats

        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
    return 0


def _instrument(spent):
    """Wrap the guarded call, every check's start / absorb / finish and the scenario loop to attribute CPU:
    ``(by_check, by_scenario)``, filled as the run goes. ``spent`` is the sampler wrapper's [CPU, calls]."""
    from collections import defaultdict

    from specdec_check.checker.checks.base import Check
    from specdec_check.checker.core import guard, loop, session

    by_check = defaultdict(lambda: [0, 0.0, 0.0])  # check -> [calls, sampler CPU, checker CPU]
    by_scenario = {}
    inside = []  # CPU spent in nested wrapped calls of the current frame (subtracted from its own time)

    def timed(label, function):
        def wrapped(*args, **kwargs):
            begun, sampler = time.process_time(), spent[0]
            inside.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                total = time.process_time() - begun
                nested = inside.pop()
                by_check[label][2] += total - nested - (spent[0] - sampler)
                if inside:
                    inside[-1] += total
        return wrapped

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for cls in set(subclasses(Check)):
        for method in ("start", "absorb", "finish"):
            if method in cls.__dict__:
                setattr(cls, method, timed(cls.__name__, cls.__dict__[method]))
    call = guard.Guard.call

    def guarded(self, kwargs, seed, **options):
        begun = spent[0]
        try:
            return call(self, kwargs, seed, **options)
        finally:
            entry = by_check[f"calls: {options.get('check', 'contract')}"]
            entry[0] += 1
            entry[1] += spent[0] - begun

    guard.Guard.call = guarded
    run = loop.run_scenario

    def scenario(kind, ctx, sampler):
        begun, sampler_before = time.process_time(), spent[0]
        inside.append(0.0)
        try:
            return run(kind, ctx, sampler)
        finally:
            cpu = time.process_time() - begun
            nested = inside.pop()
            by_check["law loop and the rest"][2] += cpu - nested - (spent[0] - sampler_before)
            old = by_scenario.get(ctx.scenario.name, (0.0, 0.0))
            by_scenario[ctx.scenario.name] = (old[0] + cpu, old[1] + spent[0] - sampler_before)

    loop.run_scenario = session.run_scenario = scenario
    return by_check, by_scenario


if __name__ == "__main__":
    raise SystemExit(main())
