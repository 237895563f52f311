"""A decode loop with a stop token, on a model given as a ``tokens -> logits`` callable (no torch): rows end at the
stop token, and the law tests stay exact for a loop that stops there (issue 26, stop tokens)."""

from __future__ import annotations

import numpy as np

from specdec_check import check_generator
from specdec_check.models import ModelLaw

#: One law at every position: the stop token 0 holds half the mass, so half the rows stop at each step.
LAW = np.array([0.5, 0.2, 0.2, 0.1])
STOP = 0
PROMPTS = [(1, 2), (3, 1)]


def logits_of(tokens):
    tokens = np.asarray(tokens)
    return np.broadcast_to(np.log(LAW), tokens.shape + (LAW.size,)).copy()


def iid_loop(*, stop_at=True):
    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        target(np.asarray(prompts))  # one forward pass per call (counted by the checker's wrapper)
        out = generator.choice(LAW.size, size=(len(prompts), max_new_tokens), p=LAW)
        if stop_at:
            for row in out:
                hit = np.flatnonzero(row == STOP)
                if hit.size:
                    row[hit[0] + 1:] = -1
        return out

    return generate


def _check(generate, seed=0):
    oracle = ModelLaw(logits_of, LAW.size, name="fixed law")
    return check_generator(generate, target=logits_of, draft=logits_of, oracle=oracle, prompts=PROMPTS,
                           max_new_tokens=4, rows_per_call=256, mode="quick", seed=seed, eos_token_id=STOP,
                           checks=["contract", "positions", "pairs", "first_token"])


def test_an_exact_loop_that_stops_at_its_stop_token_passes_its_pair_test_included():
    # A pair (u_t, u_t+1) exists only when token t was not the stop token: without the stopped rows' pairs (completed
    # by an independent uniform) u_t would never fall in the stop token's half of (0, 1), and this exact loop fails.
    report = _check(iid_loop())
    assert report.verdict == "passed", report.summary()
    tested = {r.details["test"]: r for r in report.results if "test" in r.details}
    assert tested["position[3]"].n < tested["position[1]"].n < tested["position[0]"].n
    assert tested["pairs"].n > 0 and tested["pairs"].passed


def test_a_loop_that_emits_past_its_stop_token_fails_on_the_contract():
    report = _check(iid_loop(stop_at=False))
    assert report.verdict == "failed", report.summary()
    finding = next(f for f in report.findings if "after the stop token 0" in f.message)
    # the repro names what a rerun needs besides the loop and the scenario: the models and the oracle
    assert finding.repro.startswith("check_generator(") and "target=<your target model>" in finding.repro
    assert "draft=<your draft model>" in finding.repro and "oracle=<fixed law's uncached forward pass" in finding.repro


def test_several_stop_tokens_each_end_a_row():
    # transformers allows a list of stop tokens: a row ends at the first of any of them
    oracle = ModelLaw(logits_of, LAW.size, name="fixed law")

    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        out = generator.choice(LAW.size, size=(len(prompts), max_new_tokens), p=LAW)
        for row in out:
            hit = np.flatnonzero(np.isin(row, (0, 3)))
            if hit.size:
                row[hit[0] + 1:] = -1
        return out

    options = dict(target=logits_of, draft=logits_of, oracle=oracle, prompts=PROMPTS, max_new_tokens=4,
                   rows_per_call=256, mode="quick", seed=0)
    assert check_generator(generate, eos_token_id=[0, 3], **options).verdict == "passed"
    # the same loop judged with token 0 alone as the stop token: a row that ends at token 3 breaks the contract
    only_zero = check_generator(generate, eos_token_id=0, **options)
    assert only_zero.verdict == "failed" and "is not in [0, 4)" in only_zero.findings[0].message
