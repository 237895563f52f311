"""The rule catalogue: each entry's sampler follows its declared exact step law, and that law's
completed output is exactly the target's (controls) or not (bugs, lossy rules).

Calibration: the 11 sampler-vs-law assertions are ``stats.identity_test`` at alpha 1e-9 on exactly
multinomial counts (``_rules_helpers``), with fixed seeds; a correct catalogue fails one for a random
seed with probability below 1.1e-8. The TV assertions are exact enumerations.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _rules_helpers import all_paths, row_set, step_law_test, tiled_inputs  # noqa: E402

from specdec_check import MarkovModel, bugs, exact  # noqa: E402
from specdec_check.bugs import CatalogueEntry, catalogue, rule_catalogue  # noqa: E402

ENTRIES = {e.name: e for e in rule_catalogue()}
#: Lossless entries: block verification passes; sampled match and the one-hot rule are lossless but accept
#: less than the standard rule on stochastic drafts, so their expected verdict is "inefficient".
CONTROLS = sorted(n for n, e in ENTRIES.items() if e.expected in ("pass", "inefficiency"))
FAILURES = sorted(n for n, e in ENTRIES.items() if e.expected == "failure")


def _pair(seed, vocab, order):
    rng = np.random.default_rng(seed)
    shape = (vocab + 1,) * order
    return (MarkovModel(rng.dirichlet(np.full(vocab, 0.7), size=shape), order=order),
            MarkovModel(rng.dirichlet(np.full(vocab, 0.7), size=shape), order=order))


def test_the_catalogue_holds_the_rule_entries():
    names = [e.name for e in catalogue()]
    standard = [e for e in catalogue() if e.rule == "standard"]
    assert len(names) == len(set(names)) == 47 and len(standard) == 36
    assert set(ENTRIES) == {e.name for e in catalogue() if e.rule == "any"}
    assert len(ENTRIES) == len(rule_catalogue()) == 11
    assert {n: ENTRIES[n].expected for n in ("control_block_verification", "control_one_hot_rule",
                                             "control_sampled_match")} == {
        "control_block_verification": "pass", "control_one_hot_rule": "inefficiency",
        "control_sampled_match": "inefficiency"}
    assert CONTROLS == ["control_block_verification", "control_one_hot_rule", "control_sampled_match"]
    for e in rule_catalogue():
        assert e.rule == "any" and e.kind == "verifier" and e.mechanism and e.source
        assert bugs.rule_entry(e.name) is e and callable(bugs.rule_step_law(e.name))
        assert callable(e.sampler)


def test_catalogue_entry_rule_field():
    entry = CatalogueEntry("x", "verifier", print, "m", "s", "pass")
    assert entry.rule == "standard"
    with pytest.raises(ValueError, match="rule must be"):
        CatalogueEntry("x", "verifier", print, "m", "s", "pass", rule="lossless")
    with pytest.raises(KeyError, match="no rule-catalogue entry"):
        bugs.rule_entry("nope")
    with pytest.raises(KeyError):
        bugs.rule_step_law("nope")


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_sampler_follows_its_step_law(name):
    q, p = row_set(20, 3, 4, zeros=True)
    result = step_law_test(ENTRIES[name].sampler, bugs.rule_step_law(name), q, p, n=150_000, seed=21)
    assert not result.rejected, (name, result)


def test_block_variant_law_with_nothing_changed_is_block_verification():
    """The law machinery of the buggy block verifiers, with no change, is the exact block law."""
    from specdec_check.bugs._rules import _block_variant_law

    q, p = row_set(22, 3, 4, zeros=True)
    paths = all_paths(4, 3)
    paths = paths[np.prod(q[np.arange(3), paths], axis=1) > 0]
    dq, tp = np.broadcast_to(q, (len(paths),) + q.shape), np.broadcast_to(p, (len(paths),) + p.shape)
    np.testing.assert_allclose(_block_variant_law(paths, dq, tp), exact.block_path_step_law(paths, dq, tp), atol=1e-13)


@pytest.mark.parametrize("order", [1, 2])
def test_controls_are_exactly_lossless(order):
    target, draft = _pair(30 + order, 3, order)
    for name in CONTROLS:
        for gamma in (1, 2, 3):
            assert bugs.rule_completed_tv(name, target=target, draft=draft, gamma=gamma, prompt=[0]) < 1e-13, name


@pytest.mark.parametrize("name", FAILURES)
def test_failures_move_the_completed_law(name):
    """Exact TV from the target at gamma = 3 (the block bugs need gamma >= 2: at gamma = 1 block
    verification is the standard rule and some of them coincide with it). How far each moves depends on
    the model: on ``_pair(31, 3, 1)`` after the prompt [0] the unweighted residual happens to be lossless."""
    target, draft = _pair(0, 3, 1)
    assert bugs.rule_completed_tv(name, target=target, draft=draft, gamma=3, prompt=[0]) > 1e-3


def test_fixed_rows_tv_per_row():
    rng = np.random.default_rng(5)
    tp = rng.dirichlet(np.full(3, 0.6), size=(4, 3))
    dq = rng.dirichlet(np.full(3, 0.6), size=(4, 2))
    tv = bugs.rule_completed_tv("sglang_threshold_acc", target_probs=tp, draft_probs=dq)
    assert tv.shape == (4,) and (tv > 0).all()
    assert np.abs(bugs.rule_completed_tv("control_block_verification", target_probs=tp, draft_probs=dq)).max() < 1e-13


def test_what_a_knob_costs():
    target, draft = _pair(31, 3, 1)
    laws = dict(target=target, draft=draft, gamma=3, prompt=[0])
    assert bugs.sglang_threshold_tv(**laws) < 1e-13  # SGLang's defaults (1, 1) are the one-hot rule: lossless
    costs = [bugs.sglang_threshold_tv(**laws, threshold_acc=a) for a in (0.9, 0.75, 0.5, 0.25, 0.1)]
    assert all(0 < a < b for a, b in zip(costs, costs[1:]))  # on this model, each relaxation costs more
    assert bugs.medusa_typical_tv(**laws) == pytest.approx(bugs.rule_completed_tv("medusa_typical_rule", **laws),
                                                          abs=1e-15)
    assert bugs.sglang_threshold_tv(**laws, threshold_single=0.5) == pytest.approx(
        bugs.rule_completed_tv("sglang_threshold_single", **laws), abs=1e-15)
    with pytest.raises(ValueError, match="threshold_acc must be in"):
        bugs.sglang_threshold_verifier(threshold_acc=0.0)
    with pytest.raises(ValueError, match="posterior_alpha must be"):
        bugs.medusa_typical_verifier(posterior_alpha=-1.0)


@pytest.mark.parametrize("name", CONTROLS)
def test_controls_break_the_standard_rule(name):
    """Under rule='standard' the controls fail with the impossible event 'rejected a draft whose target
    probability is at least its draft probability': it happens on these rows."""
    q, p = row_set(23, 3, 4, zeros=False)
    ids, dq, tp = tiled_inputs(q, p, 20_000, seed=24)
    out = ENTRIES[name].sampler(draft_token_ids=ids, draft_probs=dq, target_probs=tp,
                                generator=np.random.default_rng(25))
    k = (out >= 0).sum(axis=1) - 1
    rows = np.flatnonzero(k < 3)
    rejected = ids[rows, k[rows]]
    assert (p[k[rows], rejected] >= q[k[rows], rejected]).any(), name


def test_scenario_tv_is_the_mean_over_the_prompt_pool():
    from specdec_check.scenarios import VerifierScenario

    target, draft = _pair(0, 3, 1)
    scenario = VerifierScenario("small", target, draft, 2, 16, prompt_pool=4, prompt_lengths=(0, 2))
    pool = scenario.prompts()
    per_prompt = [bugs.rule_completed_tv("sglang_threshold_acc", target=target, draft=draft, gamma=2,
                                         prompt=row[row >= 0]) for row in pool]
    assert bugs.rule_scenario_tv("sglang_threshold_acc", scenario) == pytest.approx(np.mean(per_prompt), abs=1e-15)
    assert min(per_prompt) < max(per_prompt)  # the pool has prompts with different costs
    assert bugs.rule_scenario_tv("control_sampled_match", scenario) < 1e-13
    rng = np.random.default_rng(1)
    rows = VerifierScenario.from_rows("rows", target_probs=rng.dirichlet(np.ones(3), size=(3, 3)),
                                      draft_probs=rng.dirichlet(np.ones(3), size=(3, 2)))
    expected = bugs.rule_completed_tv("block_final_from_target_row", target_probs=rows.fixed_target_probs,
                                      draft_probs=rows.fixed_draft_probs).mean()
    assert bugs.rule_scenario_tv("block_final_from_target_row", rows) == pytest.approx(expected, abs=1e-15)
    with pytest.raises(ValueError, match=r"\[P, T\]"):
        exact.pooled_completed_law_tv(exact.path_step_law, target=target, draft=draft, gamma=2, prompts=[1, 2])
