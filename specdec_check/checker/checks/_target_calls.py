"""Target calls of a decode loop against the exact expectation of speculative decoding."""

from __future__ import annotations

import numpy as np

from ...exact import expected_target_calls
from .._kinds import PlannedTest
from .._report import TestRecord
from ._base import Check

__all__ = ["TargetCalls"]

#: Single-row runs of the target-call test: at least 50 (the Bernstein margin shrinks as 1/sqrt(m)),
#: at most 400 (a decode loop run per row is the slowest call the checker makes).
MIN_RUNS, MAX_RUNS = 50, 400


class TargetCalls(Check):
    """Single-row runs: target calls to emit max_new_tokens, against the exact expectation.

    Each run needs between 1 and T = max_new_tokens calls, with exact mean and variance from
    :func:`exact.expected_target_calls`. Bernstein's inequality bounds the excess of the mean
    of m runs: P(mean - E >= t) <= exp(-m t^2 / (2 sigma^2 + 2 T t / 3)). Chained speculative
    steps are exact (Leviathan et al. 2023), so a loop that calls the target once per token is
    exact but pointless: an inefficiency, not a failure.
    """

    power = "one-sided Bernstein bound over 50 to 400 single-row runs"

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        return [PlannedTest("target_calls", "target_calls")] if "target_calls" in selection else []

    def __init__(self, run, caller):
        self.run, self.caller = run, caller
        self.calls_per_token = None

    def finish(self) -> None:
        run, s = self.run, self.run.scenario
        if "target_calls" not in run.planned or run.stopped:
            return
        alpha = run.spend("target_calls")
        target, draft = run.backend.law_model(s.target), run.backend.law_model(s.draft)
        moments = [expected_target_calls(target, draft, s.gamma, s.max_new_tokens, p[p >= 0], with_variance=True)
                   for p in s.prompts]
        runs = max(MIN_RUNS, min(MAX_RUNS, run.mode.max_calls))
        counts, which = [], []
        for _ in range(runs):
            i = int(run.rng.integers(0, s.prompts.shape[0]))
            out, counted = self.caller.run_once(np.array([i]), "target_calls")
            if out is None:
                return
            counts.append(counted.calls)
            which.append(i)
        counts = np.array(counts, dtype=float)
        which = np.array(which)
        means = np.array([m for m, _ in moments])[which]
        variances = np.array([v for _, v in moments])[which]
        mean, exact_mean, sigma2 = counts.mean(), means.mean(), variances.mean()
        log_term = np.log(1.0 / alpha)
        span = float(s.max_new_tokens)
        # Solve m t^2 = log_term (2 sigma^2 + 2 span t / 3) for t.
        a, b = runs, -2.0 * span * log_term / 3.0
        margin = (-b + np.sqrt(b * b + 4 * a * 2 * sigma2 * log_term)) / (2 * a)
        passed = mean <= exact_mean + margin
        self.calls_per_token = float(mean / s.max_new_tokens)
        run.record(TestRecord(
            s.name, "target_calls", "Bernstein bound on target calls per run (exact mean and variance)", bool(passed),
            alpha, runs, statistic=float(mean),
            details={"expected_calls": float(exact_mean), "variance": float(sigma2), "margin": float(margin),
                     "tokens_per_run": s.max_new_tokens, "calls_per_token": float(mean / s.max_new_tokens),
                     "expected_calls_per_token": float(exact_mean / s.max_new_tokens)},
        ))
        if not passed:
            run.fail("target_calls", f"calls the target {mean:.2f} times per {s.max_new_tokens} tokens where speculative "
                     f"decoding needs {exact_mean:.2f} in expectation (bound {exact_mean + margin:.2f}): the output may "
                     "be exact, but the loop gives up part of the speedup",
                     {"calls_per_run": float(mean), "expected": float(exact_mean)}, kind="inefficiency")
