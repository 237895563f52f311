"""Tests of specdec_check.checker: check_verifier / check_generator and the CheckReport.

Every call uses an explicit seed, so every test is deterministic. Where a test asserts that a
correct sampler PASSES, the false-alarm probability is bounded by the checker's own budget:
alpha = 1e-6 for the whole call (split over every statistical test by the AlphaLedger), so the
assertion would fail a correct sampler with probability <= 1e-6 for ANY seed; with the fixed
seed it is deterministic. Tests that assert a bug is FOUND rely on the checker's power (the
law tests are sized for power 0.99 at the mode's design TV; the bugs here are far larger and
most are caught by impossible events, which are exact) and are deterministic with the seed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from specdec_check.bugs import CONTROLS, entry
from specdec_check.checker import GENERATOR_CHECKS, VERIFIER_CHECKS, CheckReport, check_generator, check_verifier
from specdec_check.samplers import numpy_generate, numpy_verify
from specdec_check.scenarios import VerifierScenario, default_generator_battery, default_verifier_battery

ALPHA = 1e-6  # the checker's default false-alarm budget per call

# Scenarios with V >= 1000 dominate the runtime (~15 s of the ~22 s of a default battery run);
# the catalogue tests run on the rest of the battery (V <= 33, gamma 1..7, 1..4096 rows per call).
_SLOW = {"large-vocabulary", "peaked-vs-tail-heavy"}


def _battery(*names):
    battery = default_verifier_battery()
    if not names:
        return [s for s in battery if s.name not in _SLOW]
    by_name = {s.name: s for s in battery}
    return [by_name[n] for n in names]


def _strip_elapsed(value):
    if isinstance(value, dict):
        return {k: _strip_elapsed(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [_strip_elapsed(v) for v in value]
    return value


def _describe(report):
    return [(f.kind, f.check, f.scenario, f.message[:120]) for f in report.findings]


# ------------------------------------------------------------------------------------------------
# Shared reports (computed once per module; each is one checker call with seed 0)
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference_default_report():
    return check_verifier(numpy_verify, mode="default", seed=0)


@pytest.fixture(scope="module")
def reference_quick_report():  # the report object's tests: a quick run has every part a default run has
    return check_verifier(numpy_verify, mode="quick", seed=0)


@pytest.fixture(scope="module")
def resample_report():
    return check_verifier(entry("resample_from_target").sampler, scenarios=_battery(), mode="default", seed=0)


# ------------------------------------------------------------------------------------------------
# 1. The reference samplers pass
# ------------------------------------------------------------------------------------------------
def test_reference_verifier_passes_quick(reference_quick_report):
    # False alarm <= alpha = 1e-6 (checker's budget for the whole call); deterministic for seed 0.
    report = reference_quick_report
    assert report.passed, _describe(report)
    assert report.findings == ()
    assert report.verdict == "passed"
    assert report.alpha == ALPHA
    assert len(report.scenarios) == len(default_verifier_battery())
    assert report.samples_used > 0
    assert all(r.passed for r in report.results)


def test_reference_verifier_passes_default(reference_default_report):
    # False alarm <= alpha = 1e-6 (checker's budget for the whole call); deterministic for seed 0.
    report = reference_default_report
    assert report.passed, _describe(report)
    assert report.findings == ()
    assert report.mode == "default" and report.kind == "verifier"
    assert all(r.passed for r in report.results)
    # Every scenario ran to completion and the measured efficiency is near the exact one.
    for s in report.scenarios:
        assert not s.stopped_early, s.name
        assert s.samples > 0
        assert s.tokens_per_step_measured == pytest.approx(s.tokens_per_step_expected, rel=0.15), s.name


@pytest.mark.parametrize("mode", ["quick", "default"])
def test_reference_generator_passes(mode):
    # False alarm <= alpha = 1e-6 (checker's budget for the whole call); deterministic for seed 0.
    report = check_generator(numpy_generate, mode=mode, seed=0)
    assert report.passed, _describe(report)
    assert report.findings == ()
    assert report.kind == "generator"
    assert len(report.scenarios) == len(default_generator_battery())
    assert all(r.passed for r in report.results)


def test_reference_verifier_passes_thorough_small():
    # Thorough mode on two small scenarios (V = 7 and V = 33; the cheapest in thorough mode:
    # ~10 s and ~23 s on 2 cores, where "opposite-ranking" with 2 rows per call takes ~70 s).
    # False alarm <= alpha = 1e-6 (checker's budget for the whole call); deterministic for seed 0.
    report = check_verifier(numpy_verify, scenarios=_battery("low-acceptance", "many-rows"),
                            mode="thorough", seed=0)
    assert report.passed, _describe(report)
    assert report.findings == ()
    assert report.mode == "thorough" and report.design_tv == 0.02
    assert [s.name for s in report.scenarios] == ["screen", "low-acceptance", "many-rows"]  # the screen first
    assert report.screen == "ran" and report.achieved_tv <= report.design_tv


# ------------------------------------------------------------------------------------------------
# 2. Alternative exact verifiers pass
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("control", CONTROLS, ids=lambda e: e.name)
def test_controls_pass_default(control):
    # Exact by construction: false alarm <= alpha = 1e-6 per call; deterministic for seed 0.
    assert control.expected == "pass"
    report = check_verifier(control.sampler, scenarios=_battery(), mode="default", seed=0)
    assert report.passed, _describe(report)
    assert report.findings == (), _describe(report)
    assert report.verdict == "passed"


# ------------------------------------------------------------------------------------------------
# 3. Known bugs are found, with the right kind of finding
# ------------------------------------------------------------------------------------------------
def test_resample_from_target_fails(resample_report):
    report = resample_report
    assert not report.passed
    assert report.verdict == "failed"
    assert report.failures
    assert all(f.kind == "failure" for f in report.failures)


def test_ratio_inverted_fails():
    report = check_verifier(entry("ratio_inverted").sampler, scenarios=_battery(), mode="default", seed=0)
    assert not report.passed
    assert report.verdict == "failed"
    assert {f.check for f in report.failures} & {"impossible", "first_token", "step_law", "stop_conditional",
                                                 "accepted_count"}


def test_bonus_from_wrong_row_fails_with_law_or_impossible_finding():
    report = check_verifier(entry("bonus_from_wrong_row").sampler, scenarios=_battery(), mode="default", seed=0)
    assert not report.passed
    checks = {f.check for f in report.failures}
    assert checks & {"impossible", "step_law", "stop_conditional", "batch_invariance"}, _describe(report)


def test_generator_ignored_fails_independence():
    report = check_verifier(entry("generator_ignored").sampler, scenarios=_battery(), mode="default", seed=0)
    assert not report.passed
    collisions = [f for f in report.failures if f.check == "independence" and "collisions" in f.evidence]
    assert collisions, _describe(report)
    assert collisions[0].evidence["collisions"] > collisions[0].evidence["expected"]


def test_no_bonus_token_is_inefficient_not_failed():
    # Lossless: passing is bounded by the false-alarm budget (<= 1e-6); the inefficiency is exact
    # (a row with every draft accepted and no final token is counted, not tested).
    report = check_verifier(entry("no_bonus_token").sampler, scenarios=_battery("low-acceptance", "target-equals-draft"),
                            mode="default", seed=0)
    assert report.passed, _describe(report)
    assert report.verdict == "inefficient"
    assert report.failures == ()
    assert report.inefficiencies
    assert all(f.check == "efficiency" for f in report.inefficiencies)
    assert any("bonus" in f.message for f in report.inefficiencies)


def test_target_call_per_token_is_inefficient():
    report = check_generator(entry("target_call_per_token").sampler, mode="default", seed=0)
    assert report.passed, _describe(report)
    assert report.verdict == "inefficient"
    assert report.inefficiencies
    assert {f.check for f in report.inefficiencies} == {"target_calls"}


# ------------------------------------------------------------------------------------------------
# 4. Determinism
# ------------------------------------------------------------------------------------------------
def test_same_seed_same_report():
    names = ("low-acceptance", "opposite-ranking")
    first = check_verifier(numpy_verify, scenarios=_battery(*names), mode="quick", seed=3)
    second = check_verifier(numpy_verify, scenarios=_battery(*names), mode="quick", seed=3)
    assert _strip_elapsed(first.to_dict()) == _strip_elapsed(second.to_dict())


def test_same_seed_same_report_for_a_failing_verifier():
    names = ("low-acceptance", "opposite-ranking")
    sampler = entry("bonus_from_wrong_row").sampler
    first = check_verifier(sampler, scenarios=_battery(*names), mode="quick", seed=5)
    second = check_verifier(sampler, scenarios=_battery(*names), mode="quick", seed=5)
    assert _strip_elapsed(first.to_dict()) == _strip_elapsed(second.to_dict())


def test_generator_same_seed_same_report():
    scenarios = default_generator_battery()[:2]
    first = check_generator(numpy_generate, scenarios=scenarios, mode="quick", seed=1)
    second = check_generator(numpy_generate, scenarios=scenarios, mode="quick", seed=1)
    assert _strip_elapsed(first.to_dict()) == _strip_elapsed(second.to_dict())


# ------------------------------------------------------------------------------------------------
# 5. Bad input: a clear error before anything runs
# ------------------------------------------------------------------------------------------------
class _Recorder:
    """A valid verifier that records whether it was ever called."""

    def __init__(self):
        self.calls = 0

    def __call__(self, *, draft_token_ids, draft_probs, target_probs, generator):
        self.calls += 1
        return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                            generator=generator)


def test_non_callable_is_type_error():
    with pytest.raises(TypeError, match="callable"):
        check_verifier(42)
    with pytest.raises(TypeError, match="callable"):
        check_generator("not a function")


def test_missing_contract_keyword_is_type_error():
    def verify(*, draft_token_ids, draft_probs, target_probs):
        raise AssertionError("must not be called")

    with pytest.raises(TypeError, match="generator"):
        check_verifier(verify)

    def generate(*, target, draft, prompts, max_new_tokens, generator):
        raise AssertionError("must not be called")

    with pytest.raises(TypeError, match="gamma"):
        check_generator(generate)


def test_var_keyword_signature_is_accepted():
    def verify(**kwargs):
        return numpy_verify(**kwargs)

    report = check_verifier(verify, scenarios=_battery("opposite-ranking"), mode="quick", seed=0)
    assert report.passed, _describe(report)


@pytest.mark.parametrize("kwargs, match", [
    ({"mode": "fast"}, "mode"),
    ({"mode": None}, "mode"),
    ({"backend": "jax"}, "backend"),
    ({"alpha": 0.0}, "alpha"),
    ({"alpha": 1.0}, "alpha"),
    ({"alpha": -0.1}, "alpha"),
    ({"alpha": 1.5}, "alpha"),
    ({"checks": ["first_token", "no_such_check"]}, "no_such_check"),
    ({"checks": ["joint"]}, "joint"),  # a generator check is unknown to the verifier checker
    ({"seed": -1}, "seed"),
    ({"backend": "numpy", "device": "cuda"}, "device"),
    ({"backend": "numpy", "dtype": "float32"}, "dtype"),
])
def test_bad_verifier_arguments_are_value_errors(kwargs, match):
    recorder = _Recorder()
    with pytest.raises(ValueError, match=match):
        check_verifier(recorder, **kwargs)
    assert recorder.calls == 0


@pytest.mark.parametrize("kwargs, match", [
    ({"mode": "fast"}, "mode"),
    ({"backend": "jax"}, "backend"),
    ({"alpha": 0.0}, "alpha"),
    ({"alpha": 2.0}, "alpha"),
    ({"checks": ["first_token"]}, "first_token"),  # a verifier check is unknown to the generator checker
])
def test_bad_generator_arguments_are_value_errors(kwargs, match):
    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        raise AssertionError("must not be called")

    with pytest.raises(ValueError, match=match):
        check_generator(generate, **kwargs)


def test_wrong_scenario_type_is_type_error():
    recorder = _Recorder()
    with pytest.raises(TypeError, match="VerifierScenario"):
        check_verifier(recorder, scenarios=default_generator_battery()[:1])
    with pytest.raises(TypeError, match="progress"):
        check_verifier(recorder, progress="yes")
    assert recorder.calls == 0


def test_check_name_lists_are_exposed():
    assert set(VERIFIER_CHECKS) == {"screen", "contract", "non_finite", "impossible", "step_law", "first_token", "stop_conditional",
                                    "accepted_count", "efficiency", "determinism", "independence", "batch_invariance",
                                    "completed", "zero_coins"}  # the zero-coin probe runs in every verifier kind
    # The completed-law check is rule="any"'s; the standard rule's checks are the rest.
    from specdec_check.checker.chain.kind import DEFAULT_CHECKS
    assert set(DEFAULT_CHECKS["standard"]) == set(VERIFIER_CHECKS) - {"completed"}
    assert "completed" in DEFAULT_CHECKS["any"] and "step_law" not in DEFAULT_CHECKS["any"]
    assert set(GENERATOR_CHECKS) == {"contract", "joint", "marginals", "pairs", "target_calls"}


# ------------------------------------------------------------------------------------------------
# 6. The report object
# ------------------------------------------------------------------------------------------------
def test_report_json_round_trip(reference_quick_report):
    report = reference_quick_report
    assert isinstance(report, CheckReport)
    data = json.loads(report.to_json())
    assert data == json.loads(json.dumps(report.to_dict()))
    assert data["verdict"] == "passed" and data["passed"] is True
    assert data["kind"] == "verifier" and data["mode"] == "quick" and data["seed"] == 0
    assert data["alpha"] == ALPHA
    assert len(data["scenarios"]) == len(report.scenarios)
    assert len(data["results"]) == len(report.results)
    assert json.loads(report.to_json(indent=None)) == data


def test_report_json_round_trip_with_findings(resample_report):
    data = json.loads(resample_report.to_json())
    assert data["verdict"] == "failed" and data["passed"] is False
    assert len(data["findings"]) == len(resample_report.findings)
    for f in data["findings"]:
        assert set(f) >= {"kind", "check", "scenario", "message", "evidence", "repro"}


def test_summary_of_a_pass(reference_quick_report):
    text = reference_quick_report.summary()
    assert "PASSED" in text
    assert "repro:" not in text
    assert "no findings" in text


def test_summary_of_a_failure_and_repro_lines(resample_report):
    text = resample_report.summary()
    assert "FAILED" in text
    assert "repro:" in text
    for f in resample_report.findings:
        assert f.repro.startswith("specdec-check verify"), f.repro
        assert f"--scenario {f.scenario}" in f.repro
        assert "--seed 0" in f.repro and "--mode default" in f.repro
        assert "\n" not in f.repro


def test_summary_of_an_inefficiency():
    report = check_generator(entry("target_call_per_token").sampler, scenarios=default_generator_battery()[:1],
                             mode="quick", seed=0)
    assert report.verdict == "inefficient"
    assert "INEFFICIENT" in report.summary()
    for f in report.findings:
        assert f.repro.startswith("specdec-check generate")


def test_report_properties_partition_findings(resample_report):
    r = resample_report
    assert len(r.failures) + len(r.inefficiencies) + len(r.warnings) == len(r.findings)


# ------------------------------------------------------------------------------------------------
# 7-9. Misbehaving verifiers become findings, not crashes
# ------------------------------------------------------------------------------------------------
def _run_misbehaving(verify, names=("low-acceptance",), **kwargs):
    return check_verifier(verify, scenarios=_battery(*names), mode="quick", seed=0, **kwargs)


def test_raising_verifier_is_a_finding():
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        raise RuntimeError("boom")

    report = _run_misbehaving(verify, names=("low-acceptance", "opposite-ranking"))
    assert not report.passed
    assert report.verdict == "failed"
    boom = [f for f in report.failures if "boom" in f.message]
    assert boom, _describe(report)
    assert "RuntimeError" in boom[0].message
    assert {f.scenario for f in boom} == {"screen", "low-acceptance", "opposite-ranking"}


def test_verifier_modifying_inputs_is_a_contract_failure():
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        out = numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                           generator=generator)
        target_probs.sort(axis=-1)  # in place
        return out

    report = _run_misbehaving(verify)
    assert not report.passed
    contract = [f for f in report.failures if f.check == "contract"]
    assert contract, _describe(report)
    assert "target_probs" in contract[0].message
    assert contract[0].evidence["modified"] == ["target_probs"]


def test_verifier_modifying_draft_ids_is_a_contract_failure():
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        out = numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                           generator=generator)
        draft_token_ids[:] = (draft_token_ids + 1) % target_probs.shape[-1]
        return out

    report = _run_misbehaving(verify)
    assert not report.passed
    assert any(f.check == "contract" for f in report.failures), _describe(report)


def test_verifier_modifying_draft_ids_is_named_as_such():
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        out = numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                           generator=generator)
        draft_token_ids[:] = (draft_token_ids + 1) % target_probs.shape[-1]
        return out

    report = _run_misbehaving(verify)
    assert any(f.check == "contract" and "draft_token_ids" in f.message for f in report.failures), _describe(report)


def test_float_output_is_a_contract_failure():
    def verify(**kwargs):
        return numpy_verify(**kwargs).astype(np.float64)

    report = _run_misbehaving(verify)
    assert not report.passed
    contract = [f for f in report.failures if f.check == "contract"]
    assert contract, _describe(report)
    assert "dtype" in contract[0].message


def test_wrong_shape_is_a_contract_failure():
    def verify(**kwargs):
        return numpy_verify(**kwargs)[:, :-1]

    report = _run_misbehaving(verify)
    assert not report.passed
    contract = [f for f in report.failures if f.check == "contract"]
    assert contract, _describe(report)
    assert "shape" in contract[0].message


def test_out_of_range_token_is_a_contract_failure():
    def verify(**kwargs):
        out = numpy_verify(**kwargs)
        out[0, 0] = kwargs["target_probs"].shape[-1]  # == V: out of range
        return out

    report = _run_misbehaving(verify)
    contract = [f for f in report.failures if f.check == "contract"]
    assert contract, _describe(report)
    assert contract[0].evidence["row"] == 0


def test_list_output_is_read_as_array():
    # A nested list of ints is a readable output (to_host converts it): no contract failure.
    def verify(**kwargs):
        return numpy_verify(**kwargs).tolist()

    report = _run_misbehaving(verify, names=("opposite-ranking",))
    assert report.passed, _describe(report)


def _reject_first(*, draft_token_ids, draft_probs, target_probs, generator):
    """Always rejects the first draft and emits a token that differs from it (a 'residual' token)."""
    batch, _ = draft_token_ids.shape
    vocab = target_probs.shape[-1]
    out = np.full((batch, draft_token_ids.shape[1] + 1), -1, dtype=np.int64)
    residual = np.maximum(target_probs[:, 0] - draft_probs[:, 0], 0.0)
    for b in range(batch):
        total = residual[b].sum()
        if total > 0:
            y = int(generator.choice(vocab, p=residual[b] / total))
        else:
            y = int((draft_token_ids[b, 0] + 1) % vocab)
        if y == draft_token_ids[b, 0]:
            y = int((y + 1) % vocab)
        out[b, 0] = y
    return out


def test_rejection_where_p_equals_q_is_impossible():
    # p == q: the acceptance probability min(1, p/q) is 1, so any rejection is an event of probability 0.
    report = _run_misbehaving(_reject_first, names=("target-equals-draft",))
    assert not report.passed
    impossible = [f for f in report.failures if f.check == "impossible"]
    assert impossible, _describe(report)
    assert report.scenarios[0].stopped_early


def test_rejection_where_p_equals_q_names_the_row():
    report = _run_misbehaving(_reject_first, names=("target-equals-draft",))
    impossible = [f for f in report.failures if f.check == "impossible"]
    assert impossible, _describe(report)
    assert "row" in impossible[0].evidence, impossible[0]


def test_rejection_where_p_exceeds_q_is_impossible():
    # Hand-made rows with p(x) > q(x) for every token the draft can propose.
    target = np.array([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]])
    draft = np.array([[[0.4, 0.4, 0.2]]])
    scenario = VerifierScenario.from_rows("p-above-q", target_probs=np.repeat(target, 8, 0),
                                          draft_probs=np.repeat(draft, 8, 0))

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        out = np.full((draft_token_ids.shape[0], 2), -1, dtype=np.int64)
        out[:, 0] = np.where(draft_token_ids[:, 0] == 0, 1, 0)  # reject, emit the other token of p's support
        return out

    report = check_verifier(verify, scenarios=[scenario], mode="quick", seed=0)
    impossible = [f for f in report.failures if f.check == "impossible"]
    assert impossible, _describe(report)
    assert "row" in impossible[0].evidence


# ------------------------------------------------------------------------------------------------
# 10. Hand-made scenarios
# ------------------------------------------------------------------------------------------------
def _hand_rows(batch=8, gamma=2, vocab=5, seed=0):
    rng = np.random.default_rng(seed)
    target = rng.dirichlet(np.ones(vocab), size=(batch, gamma + 1))
    draft = rng.dirichlet(np.ones(vocab), size=(batch, gamma))
    return target, draft


def test_from_rows_scenario_passes_reference():
    target, draft = _hand_rows()
    scenario = VerifierScenario.from_rows("hand-made", target_probs=target, draft_probs=draft, description="test rows")
    assert scenario.vocab_size == 5 and scenario.gamma == 2 and scenario.rows_per_call == 8
    # False alarm <= alpha = 1e-6; deterministic for seed 0.
    report = check_verifier(numpy_verify, scenarios=[scenario], mode="default", seed=0,
                            checks=["first_token", "contract"])
    assert report.passed, _describe(report)
    assert report.checks == ("first_token", "contract")
    assert {r.check for r in report.results} == {"first_token"}
    assert report.scenarios[0].name == "hand-made"
    assert report.scenarios[0].samples > 0


def test_from_rows_scenario_catches_a_bug():
    target, draft = _hand_rows(seed=1)
    scenario = VerifierScenario.from_rows("hand-made", target_probs=target, draft_probs=draft)
    report = check_verifier(entry("resample_from_target").sampler, scenarios=[scenario], mode="default", seed=0,
                            checks=["first_token", "contract"])
    assert not report.passed, _describe(report)
    assert {f.check for f in report.failures} <= {"first_token", "impossible"}


def test_from_rows_scenario_all_checks_reference():
    target, draft = _hand_rows(batch=16, seed=2)
    scenario = VerifierScenario.from_rows("hand-made-16", target_probs=target, draft_probs=draft)
    report = check_verifier(numpy_verify, scenarios=[scenario], mode="quick", seed=0)
    assert report.passed, _describe(report)


def test_from_rows_validates_its_rows():
    target, draft = _hand_rows()
    with pytest.raises(ValueError):
        VerifierScenario.from_rows("bad", target_probs=target * 2, draft_probs=draft)
    with pytest.raises(ValueError):
        VerifierScenario.from_rows("bad", target_probs=target[:, :2], draft_probs=draft)


def test_malformed_output_is_a_finding_even_without_the_contract_check():
    """Shape, dtype and range are preconditions of every law test, so they are checked whatever the selection."""

    def verify(**kwargs):
        return numpy_verify(**kwargs)[:, :-1]

    report = _run_misbehaving(verify, checks=["first_token"])
    assert not report.passed
    assert any(f.check == "contract" and "shape" in f.message for f in report.failures), _describe(report)


def test_non_finite_probe_separates_guarded_from_unguarded_verifiers():
    """numpy_verify raises on a NaN row it reads; a verifier that samples it anyway gets a warning
    (a robustness policy, not exactness), which strict=True turns into a failure."""

    def unguarded(*, draft_token_ids, draft_probs, target_probs, generator):
        return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs,
                            target_probs=np.nan_to_num(target_probs, nan=1.0 / target_probs.shape[-1]),
                            generator=generator)

    good = _run_misbehaving(numpy_verify, checks=["contract", "non_finite"])
    bad = _run_misbehaving(unguarded, checks=["contract", "non_finite"])
    strict = _run_misbehaving(unguarded, checks=["contract", "non_finite"], strict=True)
    assert not good.findings, _describe(good)
    assert [(f.kind, f.check) for f in bad.findings] == [("warning", "non_finite")], _describe(bad)
    assert not bad.failures
    assert [(f.kind, f.check) for f in strict.findings] == [("failure", "non_finite")], _describe(strict)
    assert strict.verdict == "failed" and strict.strict


def _refuses_empty_prompts(*, target, draft, prompts, max_new_tokens, gamma, generator):
    prompts = np.asarray(prompts)
    if (prompts < 0).all(axis=1).any():
        raise ValueError("empty prompt")
    return numpy_generate(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                          generator=generator)


def test_a_loop_that_fails_on_padded_prompts_is_told_the_padding_convention():
    """The battery's prompts are left-padded with -1, all-padding rows included; a loop that raises on them
    gets a contract finding naming the padding it was given and the convention (README, "A decode loop")."""
    from pathlib import Path

    from specdec_check.checker.generator.caller import PADDING_CONVENTION

    report = check_generator(_refuses_empty_prompts, mode="quick", seed=0)
    finding = report.failures[0]
    assert finding.check == "contract" and "row(s) all padding" in finding.message, finding.message
    assert PADDING_CONVENTION in finding.message
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "Prompts are **left-padded with -1**" in readme
    # The README's two lines give the first-token law of an empty prompt: the start-of-sequence law.
    scenario = default_generator_battery()[0]
    prompts = np.array([[-1, -1], [-1, 2]])
    seq = np.concatenate([np.full((2, 1), -1), prompts], axis=1)
    first_law = scenario.target(seq)[:, -1]
    np.testing.assert_allclose(first_law[0], scenario.target(np.full((1, 1), -1))[0, -1])
    np.testing.assert_allclose(first_law[1], scenario.target(np.array([[2]]))[0, -1])
