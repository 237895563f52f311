"""Properties of a verifier ``verify(*, draft_token_ids, draft_probs, target_probs, generator)``.

The verifier comes from the ``specdec_verifier`` fixture (``--specdec-verifier``,
``SPECDEC_VERIFIER``, ini ``specdec_verifier``; default the numpy reference).
"""

import pytest
from hypothesis import given

from specdec_check.pytest_plugin import suite_settings
from specdec_check.suite._properties import VERIFIER_PROPERTIES as P

statistical = pytest.mark.specdec_statistical


# -- structural: asserted on outputs directly, no alpha spent -------------------------------------

@suite_settings()
@given(**P["contract"].strategies())
def test_contract(specdec_verifier, specdec_checker_options, inputs, seed):
    """int [B, gamma+1]: accepted drafts, one token of positive mass, then -1; inputs unchanged."""
    P["contract"].run(specdec_verifier, inputs=inputs, seed=seed, alpha=0.0, options=specdec_checker_options)


@suite_settings()
@given(**P["identical_accepts_all"].strategies())
def test_identical_accepts_all(specdec_verifier, specdec_checker_options, inputs, seed):
    """Target == draft: every draft is accepted, then a bonus token."""
    P["identical_accepts_all"].run(specdec_verifier, inputs=inputs, seed=seed, alpha=0.0,
                                   options=specdec_checker_options)


@suite_settings()
@given(**P["disjoint_rejects_first"].strategies())
def test_disjoint_rejects_first(specdec_verifier, specdec_checker_options, inputs, seed):
    """Disjoint supports: the first draft is rejected; one token from the target's support."""
    P["disjoint_rejects_first"].run(specdec_verifier, inputs=inputs, seed=seed, alpha=0.0,
                                    options=specdec_checker_options)


@suite_settings()
@given(**P["determinism"].strategies())
def test_determinism(specdec_verifier, specdec_checker_options, inputs, seed):
    """Same generator state, same inputs: same output."""
    P["determinism"].run(specdec_verifier, inputs=inputs, seed=seed, alpha=0.0, options=specdec_checker_options)


# -- statistical: each example spends its share of the run's false-alarm budget -------------------

def _run(name, verify, options, ledger, inputs, seed):
    P[name].run(verify, inputs=inputs, seed=seed, alpha=ledger.alpha(), options=options)


@statistical
@suite_settings()
@given(**P["step_law"].strategies())
def test_step_law(specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed):
    """P(k drafts accepted, final token y) along each drafted path equals the exact step law."""
    _run("step_law", specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed)


@statistical
@suite_settings()
@given(**P["first_token"].strategies())
def test_first_token(specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed):
    """The first emitted token follows the first target row (the speculative-sampling theorem)."""
    _run("first_token", specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed)


@statistical
@suite_settings()
@given(**P["stop_conditional"].strategies())
def test_stop_conditional(specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed):
    """Given the stop position, the emitted token follows norm(max(0, p - q)) (or p for the bonus)."""
    _run("stop_conditional", specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed)


@statistical
@suite_settings()
@given(**P["accepted_count"].strategies())
def test_accepted_count(specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed):
    """The number of accepted drafts follows its exact law."""
    _run("accepted_count", specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed)


@statistical
@suite_settings()
@given(**P["efficiency"].strategies())
def test_efficiency(specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed):
    """Drafts are accepted as often as under the optimal rule min(1, p/q)."""
    _run("efficiency", specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed)


@statistical
@suite_settings()
@given(**P["independence"].strategies())
def test_independence(specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed):
    """Identical inputs collide no more often than independent draws would, across calls and rows."""
    _run("independence", specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed)


@statistical
@suite_settings()
@given(**P["batch_invariance"].strategies())
def test_batch_invariance(specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed):
    """A row's outcome law is the same whether it is verified alone or in a batch."""
    _run("batch_invariance", specdec_verifier, specdec_checker_options, specdec_ledger, inputs, seed)
