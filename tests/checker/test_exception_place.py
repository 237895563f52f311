"""An exception from the code under test is named with its message (or "no message") and the innermost
frame of the user's code; a sampler returning None is a contract finding, never an internal error."""

from __future__ import annotations

import numpy as np

from specdec_check import check_verifier
from specdec_check._exception_place import exception_place, exception_summary
from specdec_check.scenarios import default_verifier_battery

SCENARIOS = [s for s in default_verifier_battery() if s.name == "low-acceptance"]


def _sample_token(row):
    if row[0] >= 0:
        raise RuntimeError  # a bare raise (feifeibear/LLMSpeculativeSampling's sample refuses token id 0)
    return 0


def bare_raise(*, draft_token_ids, draft_probs, target_probs, generator):
    _sample_token(np.asarray(target_probs)[0, 0])


def numpy_raises(*, draft_token_ids, draft_probs, target_probs, generator):
    return np.zeros(3).reshape(7)  # numpy raises; the user's frame is this line


def test_a_bare_raise_names_no_message_and_the_users_line():
    report = check_verifier(bare_raise, scenarios=SCENARIOS, mode="quick", seed=0)
    message = report.failures[0].message
    assert "raised RuntimeError (no message) at " in message, message
    assert f"{__file__}:" in message and "in _sample_token: raise RuntimeError" in message, message
    assert "Traceback" in report.failures[0].evidence["traceback"]


def test_an_exception_inside_numpy_is_placed_at_the_users_call():
    try:
        numpy_raises(draft_token_ids=None, draft_probs=None, target_probs=None, generator=None)
    except ValueError as exc:
        place = exception_place(exc)
        summary = exception_summary(exc)
    assert place.startswith(f"at {__file__}:") and "in numpy_raises: return np.zeros(3).reshape(7)" in place
    assert summary.startswith("ValueError: cannot reshape array of size 3")


def test_a_sampler_returning_none_is_a_contract_failure_not_an_internal_error():
    def returns_none(**kwargs):
        return None

    report = check_verifier(returns_none, mode="quick", seed=0)
    assert not report.passed and report.failures[0].check == "contract", report.summary()
