"""The token-sampler kind end to end: the references pass, each catalogued bug fails where its mechanism shows,
the exact controls pass, the drafter's sampler is held to the q it returns, and the command line agrees.

Runs use fixed seeds and quick mode (design TV 1e-2) on the scenarios named, so each test is a few seconds; the
whole quick battery of every entry is the slow tier's (tests/conftest.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from specdec_check import check_draft_consistency, check_token_sampler, samplers
from specdec_check.bugs import TOKEN_BUGS, TOKEN_CONTROLS, token_catalogue
from specdec_check.exact import TokenProcessing
from specdec_check.scenarios import default_draft_battery, default_token_battery

REFERENCE = samplers.numpy_sample.processing


def _scenarios(processing, *names):
    found = [s for s in default_token_battery(processing) if s.name in names]
    assert len(found) == len(names), [s.name for s in default_token_battery(processing)]
    return found


#: Where each bug's mechanism shows first (a scenario of the quick battery), and the check that says so.
WHERE = {
    "top_k_keeps_boundary_ties": ("top-k-ties", "impossible"),
    "parameters_from_the_reused_row": ("shared-logits-own-parameters", "impossible"),
    "min_p_after_in_place_renormalisation": ("heterogeneous-v16", "impossible"),
    "top_p_on_unsorted_probabilities": ("heterogeneous-v16", "impossible"),
    "top_k_after_top_p": ("heterogeneous-v16", "impossible"),
    "temperature_after_softmax": ("binary", "impossible"),
    "min_p_before_temperature": ("heterogeneous-v16", "impossible"),
    "top_p_float16_cumulative_sum": ("heterogeneous-v16", "impossible"),
    "top_p_drops_the_crossing_token": ("top-p-boundary", "token_law"),
    "top_k_keeps_one_more": ("heterogeneous-v16", "impossible"),
    "greedy_takes_the_last_maximum": ("greedy-ties", "impossible"),
    "one_uniform_for_the_batch": ("binary", "independence"),
}


def test_every_token_bug_has_a_place_where_it_shows():
    assert sorted(WHERE) == sorted(e.name for e in TOKEN_BUGS)
    assert len(TOKEN_BUGS) >= 10 and all(e.source for e in token_catalogue())


@pytest.mark.parametrize("entry", TOKEN_BUGS, ids=lambda e: e.name)
def test_each_bug_fails_where_its_mechanism_shows(entry):
    scenario, check = WHERE[entry.name]
    report = check_token_sampler(entry.sampler, scenarios=_scenarios(entry.sampler.processing, scenario),
                                 mode="quick", seed=0)
    assert report.verdict == "failed", report.summary()
    assert check in {f.check for f in report.findings if f.kind == "failure"}, report.summary()


@pytest.mark.parametrize("entry", [e for e in TOKEN_CONTROLS if e.kind == "token_sampler"], ids=lambda e: e.name)
def test_each_control_passes_on_ties_boundaries_and_greedy_rows(entry):
    names = ("top-k-ties", "top-p-boundary", "min-p-boundary", "greedy-ties", "binary")
    report = check_token_sampler(entry.sampler, scenarios=_scenarios(entry.sampler.processing, *names),
                                 mode="quick", seed=1)
    assert report.verdict == "passed", report.summary()


def test_the_numpy_reference_passes_the_small_scenarios_and_reports_its_resolution():
    small = [s for s in default_token_battery(REFERENCE) if s.vocab_size <= 64]
    report = check_token_sampler(samplers.numpy_sample, scenarios=small, mode="quick", seed=0)
    assert report.verdict == "passed", report.summary()
    assert report.design_tv == 1e-2 and report.achieved_tv <= 1e-2
    assert report.kind == "token_sampler" and report.samples_used > 10 * len(small) * 65_536 // 10


def test_the_torch_reference_passes_ties_and_greedy_rows():
    pytest.importorskip("torch")
    report = check_token_sampler(samplers.torch_sample, scenarios=_scenarios(REFERENCE, "top-k-ties", "greedy-ties"),
                                 mode="quick", seed=0, backend="torch")
    assert report.verdict == "passed", report.summary()


def test_a_sampler_without_indices_gets_a_row_per_output():
    def sample(*, logits, temperature, top_k, top_p, generator):
        # the distinct rows of the call, then the reference with indices into them
        keys = np.column_stack([np.asarray(logits), temperature, top_k, top_p])
        distinct, rows = np.unique(keys, axis=0, return_inverse=True)
        vocab = np.asarray(logits).shape[1]
        return samplers.numpy_sample(logits=distinct[:, :vocab], temperature=temperature, top_k=top_k, top_p=top_p,
                                     min_p=np.zeros(rows.size), indices=rows.reshape(-1), generator=generator)

    processing = TokenProcessing()  # logits -> temperature -> top_k -> top_p, no indices
    smaller = [dataclasses.replace(s, rows_per_call=4096) for s in _scenarios(processing, "heterogeneous-v16",
                                                                             "top-k-ties")]
    report = check_token_sampler(sample, processing=processing, mode="quick", seed=0, scenarios=smaller)
    assert report.verdict == "passed", report.summary()


def test_the_declared_processing_must_match_the_scenarios_and_the_signature():
    other = TokenProcessing(order=("temperature",))
    with pytest.raises(ValueError, match="the scenarios were built for"):
        check_token_sampler(samplers.numpy_sample, processing=REFERENCE, scenarios=default_token_battery(other)[:1])
    def no_min_p(*, logits, temperature, top_k, top_p, indices, generator):
        raise AssertionError("never called: the signature does not take the declared min_p")

    with pytest.raises(TypeError, match="min_p"):  # the declared keywords, checked against the signature
        check_token_sampler(no_min_p, processing=REFERENCE, mode="quick")


# --------------------------------------------------------------------------- the drafter's own sampler

def test_a_drafter_that_samples_bf16_logits_but_returns_float32_q_fails_and_the_fixed_one_passes():
    from specdec_check.bugs import control_draft_consistent, draft_sampled_from_bf16_logits

    battery = {s.name: s for s in default_draft_battery(TokenProcessing(order=("temperature",)))}
    bad = check_draft_consistency(draft_sampled_from_bf16_logits, scenarios=[battery["served-logits-t0.3"]],
                                  mode="quick", seed=0)
    good = check_draft_consistency(control_draft_consistent, scenarios=[battery["generic-v32"]], mode="quick", seed=0)
    assert bad.verdict == "failed" and bad.findings[0].check == "draft_law", bad.summary()
    assert good.verdict == "passed", good.summary()
    assert bad.findings[0].repro.startswith("check_draft_consistency(")


def test_a_drafter_scenario_longer_than_a_shard_runs_whole():
    """The drafter's law check does not merge across shards: a scenario planning more outputs than the mode's
    shard_rows runs in one piece (before, default mode raised "ran in 19 shard(s) where its plan made 1")."""
    import dataclasses

    from specdec_check._settings import TOKEN_MODES
    from specdec_check.bugs import control_draft_consistent

    generic = [s for s in default_draft_battery(TokenProcessing(order=("temperature",))) if s.name == "generic-v32"]
    mode = dataclasses.replace(TOKEN_MODES["quick"], shard_rows=2 * generic[0].outputs_per_call())
    report = check_draft_consistency(control_draft_consistent, scenarios=generic, mode=mode, seed=0)
    assert report.verdict == "passed", report.summary()
    assert report.scenarios[0].samples > 4 * mode.shard_rows


def test_a_drafter_with_a_separate_law_function_is_held_to_it():
    def tokens_only(*, logits, temperature, generator):
        z = np.asarray(logits) / np.asarray(temperature)[:, None]
        q = np.exp(z - z.max(axis=1, keepdims=True))
        cdf = np.cumsum(q / q.sum(axis=1, keepdims=True), axis=1)
        return (cdf < generator.random(z.shape[0])[:, None]).sum(axis=1)

    def law(*, logits, temperature):
        z = np.asarray(logits) / np.asarray(temperature)[:, None]
        q = np.exp(z - z.max(axis=1, keepdims=True))
        return q / q.sum(axis=1, keepdims=True)

    generic = [s for s in default_draft_battery(TokenProcessing(order=("temperature",))) if s.name == "generic-v32"]
    report = check_draft_consistency(tokens_only, law, scenarios=generic, mode="quick", seed=0)
    assert report.verdict == "passed", report.summary()


# --------------------------------------------------------------------------- the command line

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "specdec_check", *args], capture_output=True, text=True, timeout=300)


def test_the_sample_command_passes_the_reference_and_fails_a_bug_with_a_repro():
    ok = _cli("sample", "--mode", "quick", "--scenario", "binary", "--no-report", "-q")
    assert ok.returncode == 0 and ok.stdout.strip() == "specdec_check.samplers:numpy_sample: PASSED", ok.stderr
    bad = _cli("sample", "specdec_check.bugs:greedy_takes_the_last_maximum", "--mode", "quick", "--scenario",
               "greedy-ties", "--no-report")
    assert bad.returncode == 1, bad.stderr
    assert "[failure] greedy-ties / impossible:" in bad.stdout
    assert ("repro: specdec-check sample specdec_check.bugs:greedy_takes_the_last_maximum --mode quick --seed 0 "
            "--scenario greedy-ties") in bad.stdout


def test_a_processing_the_sampler_cannot_take_is_a_usage_error():
    proc = _cli("sample", "--inputs", "probs", "--order", "temperature", "--no-report")
    assert proc.returncode == 2 and "applies no temperature" in proc.stderr, proc.stderr


def test_a_scenario_split_in_shards_gives_the_same_report_in_one_process_and_on_two():
    # Shards of two calls: the law loop runs as block ranges whose tallies merge in order (counts add, the
    # e-process looks at each boundary), the same report wherever they run.
    from specdec_check._settings import TOKEN_MODES
    from specdec_check.checker.core.parts import shard_calls  # noqa: F401  (the split the plan makes)

    mode = dataclasses.replace(TOKEN_MODES["quick"], shard_rows=2 * 65_536)
    scenarios = _scenarios(REFERENCE, "heterogeneous-v16", "binary")
    here = check_token_sampler(samplers.numpy_sample, scenarios=scenarios, mode=mode, seed=0)
    spread = check_token_sampler(samplers.numpy_sample, scenarios=scenarios, mode=mode, seed=0, executor=2)

    def comparable(report):
        data = report.to_dict()
        data.pop("elapsed_s")
        for s in data["scenarios"]:
            s.pop("elapsed_s")
        return data

    assert here.verdict == "passed" and comparable(here) == comparable(spread)
    assert here.scenarios[0].calls > 2  # it was split
