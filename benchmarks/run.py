"""specdec-check benchmarks: speed, cost and statistical efficiency, side by side, in one Markdown report.

    python benchmarks/run.py                  # full run (~15-25 min on 2 cores); also writes benchmarks/results.md
    python benchmarks/run.py --quick          # smoke run (< 1 min), stdout only unless --out is given
    python benchmarks/run.py --out PATH       # write the report to PATH ("-" = stdout only)
    python benchmarks/run.py --section throughput --section oracles   # a subset of the sections

Sections: machine, sampler throughput, checker overhead, exact oracles (time and tracemalloc
peak), time to verdict for every catalogued bug (sequential vs fixed-n), statistical
efficiency against the peers' test methods (benchmarks/peer_methods.py), scaling of the
checker's time with rows, V and gamma (log-log plot next to the report when matplotlib is
present), and the targets with PASS/MISS. On shared machines absolute times drift: every
ratio is measured within the same run, with the compared methods interleaved.
torch is optional: without it the torch columns read "-".
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import (  # noqa: E402
    TimedScenario,
    fmt_bytes,
    fmt_int,
    fmt_rate,
    fmt_s,
    interleaved_best,
    loglog_slope,
    machine_lines,
    table,
    timed_verifier,
    peak_rss_in_child,
    traced_peak,
)
from _naive import inverse_cdf_all_rows, naive_verify  # noqa: E402

from specdec_check import exact  # noqa: E402
from specdec_check.checker import check_generator, check_verifier  # noqa: E402
from specdec_check.checker import Mode  # noqa: E402
from specdec_check.models import HashedMarkovModel, mix  # noqa: E402
from specdec_check.samplers import numpy_generate, numpy_verify  # noqa: E402
from specdec_check.scenarios import markov_pair  # noqa: E402

try:  # torch is optional
    import torch

    from specdec_check.samplers import torch_verify
except Exception:  # pragma: no cover - depends on the machine
    torch = None
    torch_verify = None

SECTIONS = ("throughput", "overhead", "oracles", "verdict", "peers", "scaling", "scaleout")
HEADINGS = {
    "machine": "## Machine",
    "throughput": "## Sampler throughput",
    "overhead": "## Checker overhead",
    "oracles": "## Exact oracles: time and memory",
    "verdict": "## Time to verdict (sequential vs fixed-n)",
    "peers": "## Statistical efficiency against the peers' methods",
    "scaling": "## Scaling of the checker's time",
    "scaleout": "## Scale-out: workers, block-range shards, certifying a small TV",
    "targets": "## Targets",
}

# A few catalogue entries for --quick (one per kind of finding: law, impossible event, inefficiency, decode loop).
QUICK_ENTRIES = ("resample_from_target", "no_bonus_token", "context_keeps_rejected_draft")


class Report:
    """Collects the Markdown lines, echoing each section to stdout as soon as it is complete."""

    def __init__(self):
        self.lines = []
        self.targets = []  # (name, status, measured, detail)

    def section(self, lines):
        self.lines += list(lines) + [""]
        print("\n".join(list(lines) + [""]), flush=True)

    def target(self, name, passed, measured, detail):
        status = "n/a" if passed is None else ("PASS" if passed else "MISS")
        self.targets.append((name, status, measured, detail))


# --------------------------------------------------------------------------------------------------
# Sampler throughput
# --------------------------------------------------------------------------------------------------
def _rows(rng, batch, gamma, vocab):
    """The rows of benchmarks/bench_verify.py: p = normalised rand**2; q = 0.5 p + 0.5 Dirichlet(1)."""
    target = rng.random((batch, gamma + 1, vocab)) ** 2
    target /= target.sum(-1, keepdims=True)
    draft = 0.5 * target[:, :gamma] + 0.5 * rng.dirichlet(np.ones(vocab), size=(batch, gamma))
    ids = (np.cumsum(draft, -1) < rng.random((batch, gamma, 1))).sum(-1).clip(max=vocab - 1)
    return ids.astype(np.int64), draft, target


def section_throughput(rep, args):
    vocabs, gammas = (32, 1000, 32000), (1, 4, 8)
    cells = 3e6 if args.quick else 3e7  # float64 cells of target + draft per configuration
    repeats = 1 if args.quick else 5
    naive_cap = 200 if args.quick else 2000
    configs = [(v, g, int(min(100_000, max(16, cells // ((2 * g + 1) * v))))) for v in vocabs for g in gammas]
    tps = {}
    # Pass 1: the numpy methods, interleaved. Pass 2: torch, after every numpy timing, because torch's
    # intra-op thread pool keeps spinning after a call and slows whatever numpy code runs next.
    for vocab, gamma, batch in configs:
        ids, draft, target = _rows(np.random.default_rng([0, vocab, gamma]), batch, gamma, vocab)
        gen = np.random.default_rng(1)
        nb = min(batch, naive_cap)
        fns = {
            "numpy": lambda: numpy_verify(draft_token_ids=ids, draft_probs=draft, target_probs=target, generator=gen),
            "categorical": lambda: inverse_cdf_all_rows(target, gen),
            "naive": lambda: naive_verify(draft_token_ids=ids[:nb], draft_probs=draft[:nb], target_probs=target[:nb],
                                          generator=gen),
        }
        res = interleaved_best(fns, repeats if batch * (2 * gamma + 1) * vocab > 1e6 else 3 * repeats)
        tps[vocab, gamma] = {
            "numpy": float((res["numpy"][1] >= 0).sum()) / res["numpy"][0],
            "categorical": res["categorical"][1].size / res["categorical"][0],
            "naive": float((res["naive"][1] >= 0).sum()) / res["naive"][0],
            "torch": None,
        }
        del ids, draft, target, fns, res
        gc.collect()
    if torch is not None:
        for vocab, gamma, batch in configs:
            ids, draft, target = _rows(np.random.default_rng([0, vocab, gamma]), batch, gamma, vocab)
            tkw = dict(draft_token_ids=torch.from_numpy(ids), draft_probs=torch.from_numpy(draft).float(),
                       target_probs=torch.from_numpy(target).float())
            tgen = torch.Generator().manual_seed(1)
            res = interleaved_best({"torch": lambda: torch_verify(**tkw, generator=tgen)},
                                   repeats if batch * (2 * gamma + 1) * vocab > 1e6 else 3 * repeats)
            tps[vocab, gamma]["torch"] = float((res["torch"][1] >= 0).sum().item()) / res["torch"][0]
            del ids, draft, target, tkw, res
            gc.collect()
    rows, ratios = [], []
    for vocab, gamma, batch in configs:
        t = tps[vocab, gamma]
        ratio = t["numpy"] / t["categorical"]
        ratios.append((ratio, vocab, gamma))
        rows.append([vocab, gamma, fmt_int(batch), fmt_rate(t["numpy"]), fmt_rate(t["categorical"]), f"**{ratio:.2f}x**",
                     fmt_rate(t["torch"]), "-" if t["torch"] is None else f"{t['torch'] / t['numpy']:.2f}x",
                     fmt_rate(t["naive"]), f"{t['numpy'] / t['naive']:.1f}x"])
    lines = [HEADINGS["throughput"], "",
             f"Emitted tokens per second (accepted drafts + the recovered/bonus token; the categorical baseline emits "
             f"one token per target row, B x (gamma+1)). Best of {repeats} calls after a warm-up "
             f"({3 * repeats} for configurations under 1e6 cells); numpy_verify, categorical and the naive loop "
             "interleaved, torch timed in a second pass (its spinning thread pool slows numpy code that runs right "
             "after it). Rows as in "
             "`bench_verify.py`: p = normalised rand^2, q = 0.5 p + 0.5 Dirichlet(1), float64; torch_verify gets the "
             "same rows as float32 on the CPU; the naive per-row Python loop (`_naive.py`) runs on the first "
             f"{naive_cap} rows. B is chosen to keep about {cells:.0e} float64 cells per configuration.", ""]
    lines += table(["V", "gamma", "B", "numpy_verify tok/s", "categorical tok/s", "numpy / categorical",
                    "torch_verify tok/s", "torch / numpy", "naive loop tok/s", "numpy / naive"], rows)
    if torch is None:
        lines += ["", "torch is not installed: torch columns skipped."]
    worst = min(ratios)
    med = float(np.median([r[0] for r in ratios]))
    lines += ["", f"numpy_verify / plain categorical: worst {worst[0]:.2f}x (V={worst[1]}, gamma={worst[2]}), "
              f"median {med:.2f}x over {len(ratios)} configurations."]
    rep.section(lines)
    passed = worst[0] >= 0.8
    rep.target("numpy_verify >= 0.8x plain categorical sampling (every V, gamma)", passed,
               f"worst {worst[0]:.2f}x (V={worst[1]}, gamma={worst[2]}), median {med:.2f}x",
               "" if passed else f"missed by {(0.8 - worst[0]) / 0.8:.0%} at the worst configuration")


# --------------------------------------------------------------------------------------------------
# Checker overhead
# --------------------------------------------------------------------------------------------------
def _fixed_mode(name, samples, calls, bins=32):
    """A mode whose law tests run exactly ``calls`` calls (design TV tiny, so the sample cap binds)."""
    return Mode(name, design_tv=1e-3, max_samples=int(samples), max_calls=int(calls), pit_bins=bins, max_cells=1e13,
                max_law_calls=int(calls), max_law_cells=1e13)


def _timed_check(scenario, mode, verify=numpy_verify, seed=0):
    timed, clock = timed_verifier(verify)
    report = check_verifier(timed, scenarios=[scenario], mode=mode, seed=seed)
    total = report.elapsed_s
    return {"report": report, "total": total, "verifier": clock["s"], "rows": clock["rows"], "calls": clock["calls"],
            "draw": scenario.draw_s, "checker": total - clock["s"], "overhead": (total - clock["s"]) / clock["s"],
            "tests_overhead": (total - clock["s"] - scenario.draw_s) / clock["s"]}


def section_overhead(rep, args):
    target, draft = markov_pair("low-acceptance", vocab_size=32)
    per_call = 10_000 if args.quick else 100_000
    sizes = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
    rows, results = [], {}
    for n in sizes:
        scenario = TimedScenario("overhead", target, draft, 4, per_call, description="low-acceptance, V=32, order 1")
        r = _timed_check(scenario, _fixed_mode(f"overhead-{n}", n, max(1, n // per_call)))
        results[n] = r
        rows.append([fmt_int(n), fmt_int(r["rows"]), r["calls"], fmt_s(r["total"]), fmt_s(r["verifier"]),
                     fmt_s(r["draw"]), fmt_s(r["checker"] - r["draw"]), f"**{r['overhead']:.2f}x**",
                     f"{r['tests_overhead']:.2f}x", r["report"].verdict])  # inconclusive: the sample cap binds
    lines = [HEADINGS["overhead"], "",
             f"numpy_verify on one scenario (low-acceptance Markov pair, V=32, gamma=4, {per_call:,} rows per call), "
             "every check on. The verifier is wrapped to time its own calls. Overhead = (checker's total elapsed - "
             "time inside the verifier) / time inside the verifier; 'drawing inputs' is the scenario's own time to "
             "build the rows (Markov contexts, drafts), the rest is tests and bookkeeping. Verifier rows include "
             "the determinism, independence and batch-invariance calls.", ""]
    lines += table(["law-test rows", "verifier rows", "calls", "checker total", "in verifier", "drawing inputs",
                    "tests + bookkeeping", "overhead", "overhead without drawing", "verdict"], rows)
    rep.section(lines)
    big = sizes[-1]
    ov = results[big]["overhead"]
    if args.quick:
        rep.target("checker overhead <= 1x at 10^6 rows", None, f"{ov:.2f}x at {big:,} rows (--quick: not 10^6)", "")
    else:
        rep.target("checker overhead <= 1x at 10^6 rows", ov <= 1.0, f"{ov:.2f}x",
                   "" if ov <= 1.0 else f"missed by {ov - 1.0:.2f}x ({ov:.1f} times the sampler's own time; "
                   f"{results[big]['tests_overhead']:.2f}x without drawing the inputs)")


# --------------------------------------------------------------------------------------------------
# Exact oracles
# --------------------------------------------------------------------------------------------------
def _oracle_row(label, params, outcomes, cells, fn, repeats):
    res = interleaved_best({"f": fn}, repeats)
    best = res["f"][0]
    _, _, peak = traced_peak(fn)
    shown = fmt_int(outcomes) if outcomes is None or outcomes < 1e9 else f"1e{len(str(outcomes)) - 1}"
    return [label, params, shown, fmt_int(cells), fmt_s(best), fmt_bytes(peak)]


def section_oracles(rep, args):
    repeats = 1 if args.quick else 3
    small_t, small_d = markov_pair("low-acceptance", vocab_size=10)
    top = 5 if args.quick else 6
    rows = []
    for length in range(2, top + 1):
        rows.append(_oracle_row("exact.joint", f"V=10, length {length}", 10**length, 10**length,
                                lambda L=length: exact.joint(small_t, L), repeats))
    for gamma in range(1, top):
        n = exact.num_step_outcomes(10, gamma)
        rows.append(_oracle_row("exact.step_law", f"V=10, gamma {gamma}", n, n,
                                lambda g=gamma: exact.step_law(small_t, small_d, g), repeats))
    for length in range(2, top + 1):
        rows.append(_oracle_row("exact.marginals", f"V=10, length {length}", 10**length, 10 * length,
                                lambda L=length: exact.marginals(small_t, L), repeats))
    big_t, big_d = markov_pair("low-acceptance", vocab_size=1000)
    rows.append(_oracle_row("exact.joint", "V=1000, length 2", 10**6, 10**6, lambda: exact.joint(big_t, 2), repeats))
    n = exact.num_step_outcomes(1000, 1)
    rows.append(_oracle_row("exact.step_law", "V=1000, gamma 1", n, n, lambda: exact.step_law(big_t, big_d, 1), repeats))
    for length in ((1, 2) if args.quick else (1, 2, 10)):
        rows.append(_oracle_row("exact.marginals", f"V=1000, length {length}", 1000**length, 1000 * length,
                                lambda L=length: exact.marginals(big_t, L), repeats))
    lines = [HEADINGS["oracles"], "",
             f"Order-1 Markov models (low-acceptance pair). 'outcomes' = the joint outcomes the oracle accounts for "
             f"(V^length, or num_step_outcomes(V, gamma)); 'cells' = float64 entries returned. Time: best of "
             f"{repeats}; memory: tracemalloc peak of one more call (numpy arrays included; the model's own table "
             "excluded). marginals runs a forward recursion over the model's reachable contexts, so its cost grows "
             "with length x contexts x V, not with V^length.", ""]
    lines += table(["oracle", "parameters", "outcomes", "cells returned", "time", "peak memory"], rows, "llrrrr")

    # Peak memory of a large-vocabulary check, in a fresh process: the checker maps large input
    # arrays itself (MAP_POPULATE), which tracemalloc does not see, so the peak resident set is read.
    vocab = 128_256
    r = peak_rss_in_child(_LARGE_VOCABULARY_CHECK.format(vocab=vocab))
    lines += ["", f"Large-vocabulary check: V = {vocab:,} (`HashedMarkovModel.random`, 8 prototypes; draft = 0.6 target "
              f"+ 0.4 another), gamma 2, 16 rows per call, quick mode, numpy_verify, in a fresh process: {r['calls']} "
              f"verifier calls, {fmt_int(r['samples'])} law-test rows, verdict {'pass' if r['passed'] else 'FAIL'}, "
              f"**peak resident memory {fmt_bytes(r['peak_bytes'])}, {fmt_bytes(r['peak_bytes'] - r['before_bytes'])} "
              f"above the {fmt_bytes(r['before_bytes'])} resident before the check (interpreter, imports, models)**"
              f"{'' if r['reset'] else ' (the high-water mark could not be reset: it includes the imports)'}, "
              f"{fmt_s(r['elapsed'])} "
              f"(one call's inputs: {fmt_bytes(16 * 5 * vocab * 8)} of float64 rows)."]

    # Peak memory of the whole default-mode check of the reference verifier (the default battery,
    # V = 32,000 included), as `specdec-check verify` runs it: the issue-14 budget is 600 MB.
    r = peak_rss_in_child(_DEFAULT_MODE_CHECK)
    lines += ["", f"Default-mode check of the reference verifier (the default battery, {r['scenarios']} scenarios, "
              f"numpy_verify), in a fresh process: {fmt_int(r['samples'])} law-test rows, verdict "
              f"{'pass' if r['passed'] else 'FAIL'}, **peak resident memory {fmt_bytes(r['peak_bytes'])}** (the whole "
              f"process, the {fmt_bytes(r['before_bytes'])} of the interpreter and imports included; budget 600 MB), "
              f"{fmt_s(r['elapsed'])}."]

    # The same default-mode check on the torch backend (CPU, float32, torch_verify), each in a fresh
    # process: the issue-14 budget is 3x the numpy backend's time.
    numpy_run = peak_rss_in_child(_DEFAULT_MODE_CHECK)
    try:
        torch_run = peak_rss_in_child(_DEFAULT_MODE_TORCH_CHECK)
    except RuntimeError as exc:  # torch not installed
        lines += ["", f"Default mode on the torch backend: not run ({str(exc).splitlines()[-1]})."]
    else:
        lines += ["", f"Default mode, torch backend on the CPU (torch_verify, float32) against the numpy backend "
                  f"(numpy_verify), each in a fresh process: {fmt_s(torch_run['elapsed'])} vs "
                  f"{fmt_s(numpy_run['elapsed'])}, **torch / numpy = {torch_run['elapsed'] / numpy_run['elapsed']:.2f}x** "
                  f"(budget 3x); verdicts {'pass' if torch_run['passed'] else 'FAIL'} / "
                  f"{'pass' if numpy_run['passed'] else 'FAIL'}."]
    rep.section(lines)


#: The default-mode check of the torch reference on the CPU, for the torch / numpy time ratio.
_DEFAULT_MODE_TORCH_CHECK = """
from specdec_check.checker import check_verifier
from specdec_check.samplers import torch_verify
_state.update(before=_status("VmRSS"), reset=False, start=time.perf_counter())
report = check_verifier(torch_verify, backend="torch", mode="default", seed=0)
done(scenarios=len(report.scenarios), samples=report.samples_used, passed=report.passed)
"""


#: The default-mode check run by :func:`peak_rss_in_child`: the peak is read for the whole process.
_DEFAULT_MODE_CHECK = """
from specdec_check.checker import check_verifier
from specdec_check.samplers import numpy_verify
# No mark(): the high-water mark is not reset, it covers the whole process (imports included).
_state.update(before=_status("VmRSS"), reset=False, start=time.perf_counter())
report = check_verifier(numpy_verify, mode="default", seed=0)
done(scenarios=len(report.scenarios), samples=report.samples_used, passed=report.passed)
"""


#: The large-vocabulary check run by :func:`peak_rss_in_child` (``{vocab}`` filled in).
_LARGE_VOCABULARY_CHECK = """
from specdec_check.checker import check_verifier
from specdec_check.models import HashedMarkovModel, mix
from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import VerifierScenario
target = HashedMarkovModel.random({vocab}, num_prototypes=8, seed=1)
draft = mix(target, HashedMarkovModel.random({vocab}, num_prototypes=8, seed=2), 0.6)
scenario = VerifierScenario("large-vocabulary-128k", target, draft, 2, 16, seed=99)
mark()
report = check_verifier(numpy_verify, scenarios=[scenario], mode="quick", seed=0)
done(calls=report.scenarios[0].calls, samples=report.samples_used, passed=report.passed)
"""


# --------------------------------------------------------------------------------------------------
# Time to verdict
# --------------------------------------------------------------------------------------------------
def _entries(args):
    from specdec_check.bugs import catalogue

    bugs = [e for e in catalogue() if e.expected != "pass"]
    if args.quick:
        bugs = [e for e in bugs if e.name in QUICK_ENTRIES]
    return bugs


def _first_verdict(report):
    """Index of the first scenario (battery order) with a failure or inefficiency finding, or None."""
    flagged = {f.scenario for f in report.findings if f.kind in ("failure", "inefficiency")}
    for i, s in enumerate(report.scenarios):
        if s.name in flagged:
            return i
    return None


def section_verdict(rep, args, state):
    mode = "quick" if args.quick else "default"
    controls = {}
    for kind, sampler, check in (("verifier", numpy_verify, check_verifier), ("generator", numpy_generate, check_generator)):
        t = time.perf_counter()
        report = check(sampler, mode=mode, seed=0)
        controls[kind] = (report, time.perf_counter() - t)
    rows, verdicts = [], {}
    for e in _entries(args):
        check = check_verifier if e.kind == "verifier" else check_generator
        t = time.perf_counter()
        rule = {"rule": e.rule} if e.kind == "verifier" else {}  # each entry under the rule it implements
        try:
            report = check(e.sampler, mode=mode, seed=0, **rule)
        except Exception as exc:  # the checker itself raised: count as detected at 0 samples, say so
            verdicts[e.name] = {"detected": True, "samples": 0, "note": f"raised {type(exc).__name__}"}
            rows.append([e.name, e.kind, e.expected, f"raised {type(exc).__name__}", "-", "0", "-", "-", "-", "-", "-", "-"])
            continue
        wall = time.perf_counter() - t
        control = controls[e.kind][0]
        j = _first_verdict(report)
        if j is None:
            verdicts[e.name] = {"detected": False, "samples": None}
            rows.append([e.name, e.kind, e.expected, "**not detected**", "-", "-", "-", "-", "-", "-",
                         fmt_int(report.samples_used), fmt_s(wall)])
            continue
        outcome = "failure" if report.failures else "inefficiency"
        failing = report.scenarios[j]
        # A scenario stopped by a contract failure on its first call counts no samples; count the rows handed over.
        handed = failing.samples if failing.samples else failing.calls * failing.rows_per_call
        seq_n = sum(s.samples for s in report.scenarios[:j]) + handed
        seq_t = sum(s.elapsed_s for s in report.scenarios[: j + 1])
        fix_n = sum(s.samples for s in control.scenarios[: j + 1])
        fix_t = sum(s.elapsed_s for s in control.scenarios[: j + 1])
        early = handed < control.scenarios[j].samples
        verdicts[e.name] = {"detected": True, "samples": seq_n, "time": seq_t}
        rows.append([e.name, e.kind, e.expected, outcome,
                     f"{j + 1}/{len(report.scenarios)} {report.scenarios[j].name}" + (" (stopped early)" if early else ""),
                     fmt_int(seq_n), fmt_s(seq_t), fmt_int(fix_n), fmt_s(fix_t),
                     f"{fix_n / seq_n:.1f}x" if seq_n else "-", fmt_int(report.samples_used), fmt_s(wall)])
    state["verdicts"], state["mode"] = verdicts, mode
    state["budget"] = controls["verifier"][0].samples_used
    ref, ref_wall = controls["verifier"]
    gen, gen_wall = controls["generator"]
    lines = [HEADINGS["verdict"], "",
             f"Every catalogued bug{' (--quick: a subset)' if args.quick else ''} under `check_verifier` / "
             f"`check_generator` in **{mode} mode**, seed 0. The checker runs its battery in order and, within a "
             "scenario, stops as soon as an e-process rejects or an impossible event appears (sequential, the "
             "default). *To verdict* = samples (rows) and scenario time up to the end of the first scenario with a "
             "failure/inefficiency finding; the whole run (all scenarios) is in the last two columns. The checker "
             "has no switch to disable the early stop, so **fixed-n is computed**: the planned samples of the same "
             "scenarios in a passing control's run in the same mode (numpy_verify / numpy_generate, which never "
             "stop early), and that control's scenario time.", ""]
    lines += table(["bug", "kind", "expected", "verdict", "first failing scenario", "samples to verdict",
                    "time to verdict", "fixed-n samples", "fixed-n time", "fixed-n / sequential", "whole-run samples",
                    "whole-run wall"], rows, "llllrrrrrrrr")
    detected = sum(v["detected"] for v in verdicts.values())
    lines += ["", f"Detected {detected}/{len(verdicts)}. Passing controls in {mode} mode: numpy_verify "
              f"{'pass' if ref.passed else 'FAIL'}, {fmt_int(ref.samples_used)} samples, {fmt_s(ref_wall)}; "
              f"numpy_generate {'pass' if gen.passed else 'FAIL'}, {fmt_int(gen.samples_used)} samples, {fmt_s(gen_wall)}."]
    rep.section(lines)
    if args.quick:
        rep.target("default mode on the reference verifier under a minute", None,
                   f"quick mode {fmt_s(ref_wall)} (--quick: default mode not run)", "")
    else:
        rep.target("default mode on the reference verifier under a minute", ref_wall < 60, fmt_s(ref_wall),
                   "" if ref_wall < 60 else f"missed by {ref_wall - 60:.1f} s")
    rep.target(f"every catalogued bug detected ({mode} mode)", detected == len(verdicts),
               f"{detected}/{len(verdicts)}", "" if detected == len(verdicts) else
               "undetected: " + ", ".join(n for n, v in verdicts.items() if not v["detected"]))


# --------------------------------------------------------------------------------------------------
# Statistical efficiency against the peers' methods
# --------------------------------------------------------------------------------------------------
def section_peers(rep, args, state):
    from peer_methods import PEER_METHODS

    if "verdicts" not in state:
        section_verdict(rep, args, state)
    verdicts, mode, budget = state["verdicts"], state["mode"], state["budget"]
    ladder = [2**k for k in range(4, 13 if args.quick else 17)]
    cap = 4096 if args.quick else max(budget, ladder[-1])
    if cap > ladder[-1]:
        ladder.append(int(cap))
    # A detection at budget n counts only where the method passes the exact reference at n (same seed):
    # vLLM's convergence ratio and TRT-LLM's KL tolerance fail numpy_verify itself at small budgets.
    valid = {m: {n: not fn(numpy_verify, seed=0, budget=n) for n in ladder} for m, fn in PEER_METHODS.items()}
    header = ["bug", f"specdec-check ({mode}, to verdict)"] + list(PEER_METHODS) + ["fewest samples"]
    rows, wins, comparable, losses = [], 0, 0, []
    # The peers test conformance to the standard rule (they would "detect" lossless block verification
    # too), so only the standard rule's entries are comparable.
    entries = [e for e in _entries(args) if e.kind == "verifier" and e.rule == "standard"]
    for e in entries:
        ours = verdicts.get(e.name, {"detected": False, "samples": None})
        cells, peer_best = [], None
        for m, fn in PEER_METHODS.items():
            found = None
            for n in ladder:
                if not valid[m][n]:
                    continue
                counted, clock = timed_verifier(e.sampler)
                if fn(counted, seed=0, budget=n):
                    found = clock["rows"]  # rows the peer's test actually handed to the verifier
                    break
            cells.append("never" if found is None else fmt_int(found) + ("" if found == n else f" (budget {fmt_int(n)})"))
            if found is not None:
                peer_best = found if peer_best is None else min(peer_best, found)
        our_n = ours["samples"] if ours["detected"] else None
        if peer_best is None:
            verdict = "specdec-check (no peer detects)" if our_n is not None else "nobody"
            if our_n is not None:
                wins += 1
        else:
            comparable += 1
            if our_n is not None and our_n < peer_best:
                wins += 1
                verdict = f"specdec-check ({peer_best / max(our_n, 1):.1f}x fewer)"
            else:
                verdict = "peer" + ("" if our_n is None else f" (specdec-check needs {our_n / peer_best:.1f}x more)")
                losses.append((e.name, our_n, peer_best))
        rows.append([e.name, fmt_int(our_n) if our_n is not None else "never"] + cells + [verdict])
    ref_cells = [", ".join(fmt_int(n) for n in ladder if not valid[m][n]) or "none" for m in PEER_METHODS]
    lines = [HEADINGS["peers"], "",
             "Samples (verifier rows) each method needs to detect each catalogued verifier bug. Peers: the rows their "
             "test actually handed to the verifier (counted by a wrapper: a test may stop early, and TileOPs adds "
             "2 x 256 rows for its determinism check) at the smallest budget of the doubling ladder "
             f"{fmt_int(ladder[0])}, {fmt_int(ladder[1])}, ..., {fmt_int(cap)} at which "
             "the peer's test (benchmarks/peer_methods.py, seed 0) fails the bug, counting only budgets at which "
             "the same test passes the exact reference numpy_verify; 'never' = not within "
             f"{fmt_int(cap)} samples (the {mode}-mode sample total of the reference, as in peer_table.py). "
             "specdec-check: samples to verdict from the table above (its whole battery in order up to the first "
             "failing scenario; the peers each test one fixed configuration). Decode-loop bugs are outside the "
             "peers' verifier tests.", ""]
    lines += table(header, rows, "l" + "r" * (len(header) - 2) + "l")
    lines += ["", "Budgets at which each peer test fails the exact reference (false alarms, excluded above): "
              + "; ".join(f"{m}: {c}" for m, c in zip(PEER_METHODS, ref_cells)) + "."]
    rep.section(lines)
    ok = not losses
    rep.target("every bug detected with fewer samples than any peer method that detects it", ok,
               f"{len(entries) - len(losses)}/{len(entries)} verifier bugs ({comparable} detected by some peer)",
               "" if ok else "missed on " + "; ".join(
                   f"{n} (ours {fmt_int(o) if o is not None else 'never'} vs peer {fmt_int(p)}"
                   + (f", {o / p:.1f}x more)" if o else ")") for n, o, p in losses))


# --------------------------------------------------------------------------------------------------
# Scaling
# --------------------------------------------------------------------------------------------------
def section_scaling(rep, args):
    pair32 = markov_pair("low-acceptance", vocab_size=32)
    if args.quick:
        row_sizes, vocabs, gammas, base_n = (2_000, 20_000), (32, 3200), (1, 4), 10_000
    else:
        row_sizes, vocabs, gammas, base_n = (10_000, 30_000, 100_000, 300_000), (32, 320, 3200, 32000), (1, 2, 4, 8), 100_000
    runs = []

    def run(axis, x, target, draft, gamma, n, per_call):
        scenario = TimedScenario(f"scaling-{axis}-{x}", target, draft, gamma, per_call)
        r = _timed_check(scenario, _fixed_mode("scaling", n, max(1, n // per_call)))
        runs.append((axis, x, gamma, target.vocab_size, n, r))

    for n in row_sizes:
        run("rows", n, *pair32, 4, n, min(n, 10_000))
    v_n = 400 if args.quick else 2_000
    for vocab in vocabs:
        t = HashedMarkovModel.random(vocab, num_prototypes=8, seed=1)
        d = mix(t, HashedMarkovModel.random(vocab, num_prototypes=8, seed=2), 0.6)
        run("V", vocab, t, d, 4, v_n, 100)
    for gamma in gammas:
        run("gamma", gamma, *pair32, gamma, base_n, 10_000)
    rows = [[axis, fmt_int(x), vocab, gamma, fmt_int(n), fmt_int(r["rows"]), fmt_s(r["total"]), fmt_s(r["verifier"]),
             f"{r['overhead']:.2f}x"] for axis, x, gamma, vocab, n, r in runs]
    slopes = []
    for axis in ("rows", "V", "gamma"):
        xs = [x for a, x, *_ in runs if a == axis]
        ys = [r["total"] for a, *_, r in runs if a == axis]
        slopes.append(f"{axis}: time ~ {axis}^{loglog_slope(xs, ys):.2f}")
    lines = [HEADINGS["scaling"], "",
             "check_verifier(numpy_verify) on one scenario with every check on, the law tests fixed at the given "
             "rows. rows and gamma axes: low-acceptance Markov pair, V=32, 10,000 rows per call (gamma 4 on the "
             f"rows axis, {fmt_int(base_n)} rows on the gamma axis); V axis: hashed Zipf models "
             f"(`HashedMarkovModel.random`, draft = 0.6 target + 0.4 another), gamma 4, {fmt_int(v_n)} rows, 100 per "
             "call (the path-conditional (k, y) test runs only for V <= 1000).", ""]
    lines += table(["axis", "value", "V", "gamma", "law-test rows", "verifier rows", "checker total", "in verifier",
                    "overhead"], rows, "lrrrrrrrr")
    lines += ["", "Log-log slopes (least squares): " + "; ".join(slopes) + "."]
    if args.plot:
        plotted = _plot(runs, args.plot)
        lines += ["", f"![scaling]({args.plot.name})" if plotted else "(matplotlib not installed: no plot.)"]
    rep.section(lines)


# --------------------------------------------------------------------------------------------------
# Scale-out (issue 21): the report of benchmarks/scaleout.py
# --------------------------------------------------------------------------------------------------
def section_scaleout(rep, args):
    import scaleout

    try:
        import distributed  # noqa: F401

        dask = True
    except ImportError:
        dask = False
    body, equal = scaleout.report_lines(quick=args.quick, repeats=1, include_dask=dask)
    rep.section([HEADINGS["scaleout"], "", "(`python benchmarks/scaleout.py` prints this section alone.)", "",
                 *[line.replace("## ", "### ", 1) if line.startswith("## ") else line for line in body]])
    rep.target("scale-out: report JSON equal on every executor (timings aside)", equal,
               "equal" if equal else "DIFFERENT", "in-process, 1 and 2 local processes, all cores, Dask")


def _plot(runs, path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, axis in zip(axes, ("rows", "V", "gamma")):
        pts = [(x, r) for a, x, *_, r in runs if a == axis]
        xs = [x for x, _ in pts]
        ax.loglog(xs, [r["total"] for _, r in pts], "o-", label="checker total")
        ax.loglog(xs, [r["verifier"] for _, r in pts], "s--", label="inside numpy_verify")
        ax.set_xlabel(axis)
        if axis == "gamma":  # a short axis: label the measured values only
            ax.set_xticks(xs)
            ax.set_xticklabels([str(x) for x in xs])
            ax.minorticks_off()
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle("specdec-check: checker time vs rows, V and gamma (log-log)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, quick mode, a few bugs (< 1 min)")
    parser.add_argument("--out", default=None,
                        help="write the report here too (default: benchmarks/results.md for a full run, nothing for "
                             "--quick; '-' = stdout only)")
    parser.add_argument("--section", action="append", choices=SECTIONS, default=None,
                        help="run only these sections (repeatable; default all)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = "-" if args.quick else str(HERE / "results.md")
    out = None if args.out == "-" else Path(args.out)
    args.plot = (out.parent / "scaling.png") if (out is not None and not args.quick) else None
    sections = args.section or list(SECTIONS)

    started = time.perf_counter()
    rep = Report()
    rep.section(["# specdec-check benchmarks" + (" (--quick smoke run: reduced sizes)" if args.quick else ""), "",
                 HEADINGS["machine"], ""] + machine_lines(torch))
    after_machine = len(rep.lines)
    state = {}
    runners = {"throughput": section_throughput, "overhead": section_overhead, "oracles": section_oracles,
               "verdict": lambda r, a: section_verdict(r, a, state), "peers": lambda r, a: section_peers(r, a, state),
               "scaling": section_scaling, "scaleout": section_scaleout}
    for name in SECTIONS:
        if name in sections:
            t = time.perf_counter()
            runners[name](rep, args)
            print(f"<!-- section {name}: {time.perf_counter() - t:.1f} s -->", file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    lines = [HEADINGS["targets"], ""]
    lines += table(["target", "status", "measured", "detail"], [list(t) for t in rep.targets], "llll")
    lines += ["", f"Whole benchmark run: {total:.0f} s. Reproduce every number above with "
              f"`python benchmarks/run.py{' --quick' if args.quick else ''}`."]
    rep.section(lines)
    if out is not None:  # in the file, the targets come right after the machine
        body = rep.lines[:after_machine] + rep.lines[-(len(lines) + 1):] + rep.lines[after_machine:-(len(lines) + 1)]
        out.write_text("\n".join(body).rstrip() + "\n")
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
