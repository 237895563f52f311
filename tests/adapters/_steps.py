"""Per-step target-call terms of a decode loop, outside the checker (for tests that need only this check)."""

import numpy as np

from specdec_check.checker.generator.caller import CountingModel
from specdec_check.checker.generator.target_calls import _recording, judge_steps


def run_terms(generate, scenario, runs, seed):
    """Sum of the per-step terms over ``runs`` single-row runs: (shortfall, variation, summary totals)."""
    rng = np.random.default_rng(seed)
    shortfall = variation = 0.0
    totals = {}
    for _ in range(runs):
        i = int(rng.integers(scenario.prompts.shape[0]))
        log = []
        out = _recording(generate, log)(target=CountingModel(scenario.target), draft=CountingModel(scenario.draft),
                                        prompts=scenario.prompts[[i]], max_new_tokens=scenario.max_new_tokens,
                                        gamma=scenario.gamma, generator=rng)
        terms, summary = judge_steps(log, scenario.prompts[i], out[0], scenario.target, scenario.draft,
                                     scale_cap=max(1, scenario.gamma))
        assert terms is not None, summary
        shortfall += sum(x for x, _ in terms)
        variation += sum(v for _, v in terms)
        for key, value in summary.items():
            totals[key] = totals.get(key, 0) + value
    return shortfall, variation, totals
