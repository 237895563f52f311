"""Issue 14: a verdict that means exact, evidence that is enough or says so, memory shared between calls.

Each test here fails on the checker before issue 14 (commit 0f8feb0); the comment on each says how.
Samplers and scenario lists are in ``specdec_trust_samplers`` (on the CLI's PYTHONPATH).
"""

from __future__ import annotations

import json
import shlex
import sys

import pytest

import specdec_trust_samplers as trust
from specdec_check import check_generator, check_verifier
from specdec_check.bugs import one_uniform_per_row, resample_from_target, unnormalised_inverse_cdf
from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import default_generator_battery, default_verifier_battery

SMALL = ("--scenarios", "specdec_small_battery:verifier")


def _report(folder):
    return json.loads((folder / "report.json").read_text())


# ------------------------------------------------------------------------------------------------
# 1. The verdict means exact, at a stated resolution
# ------------------------------------------------------------------------------------------------
UNGUARDED = [trust.inverse_cdf_verify, trust.gumbel_verify, trust.searchsorted_verify]


@pytest.mark.parametrize("verify", UNGUARDED, ids=lambda f: f.__name__)
def test_exact_verifiers_that_do_not_guard_nan_rows_pass_with_a_warning(verify):
    # Before: "failed" (the NaN probe was a failure of exactness).
    report = check_verifier(verify, mode="quick")
    assert report.verdict == "passed" and report.passed, [f.message for f in report.findings][:3]
    kinds = {(f.kind, f.check) for f in report.findings}
    # inverse_cdf_verify accepts while ``u q(x) <= p(x)``: an exactly-zero coin accepts a draft of target
    # probability zero, the zero-coin edge case (a warning with its rate, issue 25); the others draw strictly.
    edge = {("warning", "zero_coins")} if verify is trust.inverse_cdf_verify else set()
    assert kinds == {("warning", "non_finite")} | edge, kinds
    assert all("silently turned into tokens" in f.message for f in report.findings if f.check == "non_finite")
    assert all("2^-53" in f.evidence["rate"] for f in report.findings if f.check == "zero_coins")


def test_strict_turns_the_nan_warning_into_a_failure(cli, tmp_path):
    # Before: there was no --strict.
    args = ("verify", "specdec_trust_samplers:gumbel_verify", "--mode", "quick", *SMALL, "--no-progress",
            "--no-plots")
    lenient = cli(*args, "--report", "lenient")
    strict = cli(*args, "--report", "strict", "--strict")
    assert lenient.returncode == 0 and _report(tmp_path / "lenient")["verdict"] == "passed", lenient.stdout
    assert strict.returncode == 1 and _report(tmp_path / "strict")["verdict"] == "failed", strict.stdout
    kinds = {(f["kind"], f["check"]) for f in _report(tmp_path / "strict")["findings"]}
    assert kinds == {("failure", "non_finite")}, kinds


def test_thin_evidence_at_a_qwen2_vocabulary_is_inconclusive_with_the_achieved_resolution(cli, tmp_path):
    # Before: PASSED with exit 0 on 3 to 59 samples (minimum detectable TV 0.68 to 1.0).
    proc = cli("verify", "--mode", "quick", "--scenarios", "specdec_trust_samplers:qwen2_one_row", "--no-progress",
               "--no-plots", "--report", "r")
    assert proc.returncode == 4, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    data = _report(tmp_path / "r")
    assert data["verdict"] == "inconclusive" and data["passed"] is False
    (scenario,) = [s for s in data["scenarios"] if s["name"] == "qwen2-one-row"]
    assert scenario["achieved_tv"] > data["design_tv"] and data["achieved_tv"] == scenario["achieved_tv"]  # what the law tests reached, not what they were designed for
    assert "verdict: INCONCLUSIVE" in proc.stdout and "lossless" not in proc.stdout
    assert "PASSED" not in proc.stdout.split("verdict:")[-1]


@pytest.mark.parametrize("bug", [resample_from_target, one_uniform_per_row],
                         ids=lambda f: f.__name__)
def test_bugs_that_passed_on_thin_evidence_no_longer_pass(bug):
    # Before: each of these printed PASSED on the one-row V = 152,064 scenario (11 of 22 bugs did).
    report = check_verifier(bug, mode="quick", scenarios=trust.qwen2_one_row())
    assert report.verdict in ("failed", "inconclusive") and not report.passed, report.verdict


def test_an_inefficient_verdict_exits_0_and_no_table_row_says_failed(cli, tmp_path):
    # Before: exit 1, and the efficiency row said FAILED.
    proc = cli("verify", "specdec_check.bugs:no_bonus_token", "--mode", "quick", *SMALL, "--no-progress",
               "--no-plots", "--report", "r")
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "verdict: INEFFICIENT" in proc.stdout and "FAILED" not in proc.stdout
    assert _report(tmp_path / "r")["verdict"] == "inefficient"


# ------------------------------------------------------------------------------------------------
# 4. Repro lines that reproduce
# ------------------------------------------------------------------------------------------------
def test_a_partial_sampler_and_an_odd_scenario_name_give_a_repro_that_reproduces(cli, tmp_path):
    # Before: the sampler was named `functools:partial` and the scenario name went into the line unquoted.
    given = "specdec_trust_samplers:partial_resample_from_target"
    proc = cli("verify", given, "--mode", "quick", "--scenarios", "specdec_trust_samplers:odd_name", "--no-progress",
               "--no-plots", "--report", "first")
    assert proc.returncode == 1, proc.stdout[-2000:]
    data = _report(tmp_path / "first")
    assert [s["name"] for s in data["scenarios"]] == ["screen", trust.ODD_NAME]  # the screen runs before custom lists
    odd = [f for f in data["findings"] if f["scenario"] == trust.ODD_NAME and f["kind"] == "failure"]
    assert odd, data["findings"]
    argv = shlex.split(odd[0]["repro"])
    assert argv[:3] == ["specdec-check", "verify", given]
    assert argv[argv.index("--scenario") + 1] == trust.ODD_NAME
    again = cli(*argv[1:], "--no-progress", "--no-plots", "--report", "again")
    assert again.returncode == 1, again.stdout[-2000:]
    repeated = [f for f in _report(tmp_path / "again")["findings"] if f["scenario"] == trust.ODD_NAME]
    assert [(f["check"], f["message"]) for f in repeated] == [(f["check"], f["message"]) for f in
                                                              data["findings"] if f["scenario"] == trust.ODD_NAME]


# ------------------------------------------------------------------------------------------------
# 5. Shared memory between calls
# ------------------------------------------------------------------------------------------------
def test_an_exact_verifier_returning_one_static_buffer_passes():
    # Before: failed independence with "768 of 768 pairs" (the kept outputs were one buffer).
    report = check_verifier(trust.StaticBuffer(), mode="quick", checks=["screen", "contract", "first_token",
                                                                         "determinism", "independence"])
    assert report.verdict == "passed", [f.message for f in report.findings][:3]


def test_a_write_around_the_read_only_flag_is_named_an_input_mutation():
    # Before: the write went unseen, and the changed inputs were blamed on randomness.
    scenarios = [s for s in default_verifier_battery() if s.name == "corpus-bigram"]
    report = check_verifier(trust.sneaky_write_verify, mode="quick", scenarios=scenarios)
    failures = [f for f in report.findings if f.kind == "failure"]
    assert failures and all(f.check == "contract" for f in failures), [(f.check, f.message) for f in failures]
    assert all("modified its input(s) ['target_probs']" in f.message for f in failures)
    # The write reached no state of the checker: the reference still passes the same scenarios in this process.
    screen = [s for s in default_verifier_battery() if s.name == "screen"]
    assert check_verifier(numpy_verify, mode="quick", scenarios=screen + scenarios,
                          checks=["screen", "contract", "first_token"]).passed


def test_target_passes_through_last_probs_and_start_probs_are_counted():
    # Before: only `target(...)` was counted, so this loop "called the target" 0 times and passed.
    scenarios = [s for s in default_generator_battery() if s.name == "small-joint"]
    report = check_generator(trust.last_probs_generate, mode="quick", scenarios=scenarios,
                             checks=["joint", "target_calls"])  # a law test: no verdict without one
    (finding,) = [f for f in report.findings if f.check == "target_calls"]
    assert finding.kind == "inefficiency" and report.verdict == "inefficient"
    # Every token cost one counted target pass: a prefill (start_probs / the first last_probs) and one
    # step per later token, none of which verified a draft.
    calls = finding.evidence["prefill_calls"] + finding.evidence["steps"]
    runs = finding.evidence["prefill_calls"]
    assert runs > 0 and calls == runs * scenarios[0].max_new_tokens, finding.evidence
    assert finding.evidence["drafts"] == 0 and "verified no draft" in finding.message, finding.message


# ------------------------------------------------------------------------------------------------
# 6. Evidence in tokens
# ------------------------------------------------------------------------------------------------
def test_a_failing_law_test_names_the_token_not_only_a_pit_bin():
    # Before: the evidence was "worst_cells" of PIT bin indices.
    scenarios = [s for s in default_verifier_battery() if s.name == "corpus-bigram"]
    report = check_verifier(unnormalised_inverse_cdf, mode="quick", scenarios=scenarios,
                            checks=["first_token", "stop_conditional"])
    law = [f for f in report.findings if f.check == "stop_conditional" and f.kind == "failure"]
    assert law and "most deviant: final token " in law[0].message, [f.message for f in report.findings]
    worst = law[0].evidence["worst_tokens"][0]
    assert worst["cell"].startswith("final token ") and abs(worst["residual"]) > 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
