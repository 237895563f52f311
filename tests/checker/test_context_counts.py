"""Token-level counts of the first token per prompt context (issue 19, item 5): deviations that the
randomized PIT folds into a 32-bin histogram are seen token by token."""

from __future__ import annotations

import dataclasses

import numpy as np

from specdec_check import check_verifier
from specdec_check.checker.chain.laws import first_token_law
from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import default_verifier_battery

#: A fixed random sign per token: the tilt p (1 + EPS s) moves mass between neighbouring tokens, which
#: the PIT's bins average out (TV 0.153 of the output law on this scenario's contexts).
SIGNS = np.random.default_rng(12345).choice([-1.0, 1.0], size=1000)
EPS = 0.3


def tilted_first_token(*, draft_token_ids, draft_probs, target_probs, generator):
    """BUG: the first token is drawn from the target row tilted by random signs (gamma = 0 scenarios)."""
    target = np.asarray(target_probs)[:, 0]
    tilted = target * (1 + EPS * SIGNS[: target.shape[1]])
    cdf = np.cumsum(tilted / tilted.sum(axis=1, keepdims=True), axis=1)
    out = np.full((target.shape[0], draft_token_ids.shape[1] + 1), -1, dtype=np.int64)
    out[:, 0] = np.minimum((cdf < generator.random(target.shape[0])[:, None]).sum(axis=1), target.shape[1] - 1)
    return out


def _scenario():
    base = next(s for s in default_verifier_battery() if s.name == "peaked-vs-tail-heavy")  # V = 1000
    return dataclasses.replace(base, name="peaked-gamma0", gamma=0)


def test_the_first_token_law_per_context_is_the_targets_row():
    scenario = _scenario()
    law = first_token_law(scenario.target, scenario.prompts())
    for prompt, row in zip(scenario.prompts(), law):
        tokens = prompt[prompt >= 0]
        expected = scenario.target.last_probs(tokens[None])[0] if tokens.size else scenario.target.start_probs()
        np.testing.assert_array_equal(row, expected)


def test_token_counts_catch_a_random_sign_tilt_the_pit_misses():
    report = check_verifier(tilted_first_token, mode="default", seed=0, scenarios=[_scenario()],
                            checks=["first_token"])
    records = {r.method.split(":")[0]: r for r in report.results if r.check == "first_token"}
    pit, counts = records["randomized PIT"], records["first token counts per prompt context (token-level, no PIT)"]
    assert pit.passed and not counts.passed, (pit.pvalue, counts.pvalue)
    assert counts.n == pit.n > 5000
    (finding,) = [f for f in report.failures if f.check == "first_token"]
    assert "after prompt context" in finding.message  # the evidence names a token and its context


def test_the_reference_passes_the_token_counts():
    report = check_verifier(numpy_verify, mode="default", seed=0, scenarios=[_scenario()], checks=["first_token"])
    counts = [r for r in report.results if r.method.startswith("first token counts per prompt context")]
    assert report.passed and counts and counts[0].passed and counts[0].n > 5000
