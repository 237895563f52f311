"""The exact tree oracles against brute-force enumeration (tests/trees/_brute.py) and the theorems they obey."""

import numpy as np
import pytest

from specdec_check import MarkovModel, exact
from specdec_check.exact import ThresholdRule
from specdec_check.scenarios import markov_pair

from ._brute import brute_drafts, brute_step_law

TREES = [[-1], [-1, 0, 1], [-1, -1, -1], [-1, 0, 0, -1, 3], [-1, -1, 0, 1, 0, 2]]
RULES = ["iid", "without_replacement", "topk", ("sglang", 1.0, 1.0), ("sglang", 0.3, 0.6), ("sglang", 1.0, 0.5)]


def _rule(rule):
    return ThresholdRule(rule[1], rule[2]) if isinstance(rule, tuple) else rule


def _rows(rng, batch, slots, vocab, zeros):
    rows = rng.gamma(0.5, size=(batch, slots, vocab))
    if zeros:
        rows *= rng.random(rows.shape) < 0.6
        rows[..., :3] += 1e-3  # every row keeps mass on 3 tokens (drafting 3 siblings without replacement)
    return rows / rows.sum(-1, keepdims=True)


def _drafted(rng, parents, draft, drafting):
    """Children drawn per row with the scheme (a brute Python loop)."""
    batch, slots, vocab = draft.shape
    ids = np.zeros((batch, len(parents)), dtype=np.int64)
    for b in range(batch):
        taken = {}
        for i, p in enumerate(parents):
            q = draft[b, p + 1]
            used = taken.setdefault(p, [])
            if drafting == "iid":
                t = rng.choice(vocab, p=q)
            elif drafting == "topk":
                t = max((t for t in range(vocab) if t not in used), key=lambda t: (q[t], -t))
            else:
                w = np.array([0.0 if t in used else q[t] for t in range(vocab)])
                t = rng.choice(vocab, p=w / w.sum())
            used.append(int(t))
            ids[b, i] = t
    return ids


def _assert_brute(law, parents, ids, draft, target, rule):
    """Every row of ``law`` [B, S, V] equals the brute-force walk of its tree (tests/trees/_brute.py)."""
    for b in range(ids.shape[0]):
        brute = brute_step_law(parents, ids[b].tolist(), draft[b].tolist(), target[b].tolist(), rule)
        dense = np.zeros_like(law[b])
        for (slot, y), p in brute.items():
            dense[slot, y] = p
        np.testing.assert_allclose(law[b], dense, atol=1e-12)


@pytest.mark.parametrize("parents", TREES, ids=str)
@pytest.mark.parametrize("rule", RULES, ids=str)
def test_step_law_matches_brute_force(parents, rule):
    rng = np.random.default_rng([len(parents), len(str(rule))])
    vocab = 5
    for zeros in (False, True):
        draft = _rows(rng, 6, len(parents) + 1, vocab, zeros)
        target = _rows(rng, 6, len(parents) + 1, vocab, zeros)
        drafting = rule if rule in exact.DRAFTING_SCHEMES else "topk"
        ids = _drafted(rng, parents, draft, drafting)
        law = exact.tree_step_law(parents, ids, draft, target, rule=_rule(rule))
        assert law.sum(axis=(1, 2)) == pytest.approx(1.0, abs=1e-12)
        _assert_brute(law, parents, ids, draft, target, rule)


def test_duplicate_siblings_are_merged_in_the_emitted_law():
    parents = [-1, -1, 0, 1]
    rng = np.random.default_rng(5)
    draft, target = _rows(rng, 1, 5, 3, False), _rows(rng, 1, 5, 3, False)
    ids = np.array([[1, 1, 2, 2]])  # siblings 0 and 1 both drafted token 1; their children both token 2
    step = exact.tree_step_law(parents, ids, draft, target, rule="iid")[0]
    emitted = exact.tree_emitted_law(parents, ids, draft, target, rule="iid")[0]
    codes = exact.encode_emitted(np.array([[1, 2, 0], [1, 2, 1], [1, 0, -1]]), 3)
    assert emitted[codes[0]] == pytest.approx(step[3, 0] + step[4, 0], abs=1e-15)
    assert emitted[codes[1]] == pytest.approx(step[3, 1] + step[4, 1], abs=1e-15)
    assert emitted[codes[2]] == pytest.approx(step[1, 0] + step[2, 0], abs=1e-15)
    assert emitted.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("gamma", [1, 3])
def test_a_chain_under_the_iid_rule_is_the_chain_rule(gamma):
    rng = np.random.default_rng(gamma)
    draft, target = _rows(rng, 8, gamma + 1, 6, True), _rows(rng, 8, gamma + 1, 6, True)
    parents = list(range(-1, gamma - 1))
    ids = _drafted(rng, parents, draft, "iid")
    tree = exact.tree_step_law(parents, ids, draft, target, rule="iid")
    chain = exact.path_step_law(ids, draft[:, :gamma], target)
    np.testing.assert_allclose(tree, chain, atol=1e-14)
    count = exact.tree_accepted_length_law(parents, ids, draft, target, rule="iid")
    np.testing.assert_allclose(count, exact.path_accepted_count_law(ids, draft[:, :gamma], target), atol=1e-14)


def _small_models(seed, vocab=3):
    rng = np.random.default_rng(seed)
    t, d = rng.gamma(0.6, size=(2, vocab + 1, vocab))
    return MarkovModel(t / t.sum(-1, keepdims=True)), MarkovModel(d / d.sum(-1, keepdims=True))


@pytest.mark.parametrize("drafting", exact.DRAFTING_SCHEMES)
@pytest.mark.parametrize("parents", [[-1, -1], [-1, 0, -1], [-1, -1, 1]], ids=str)
def test_integrated_sequence_law_matches_brute_force(drafting, parents):
    target, draft = _small_models(len(parents))
    prompt = [2]
    vocab = 3
    law = exact.tree_sequence_law(target, draft, parents, drafting=drafting, prompt=prompt)
    depth = exact.tree_depth(parents)

    def row(model, path):
        return model(np.array([prompt + list(path)]))[0, -1]

    expected = np.zeros_like(law)
    drafts = brute_drafts(parents, lambda path: row(draft, path).tolist(), vocab, drafting)
    assert sum(w for _, w in drafts) == pytest.approx(1.0, abs=1e-12)
    for ids, weight in drafts:
        paths = [()]
        for i, p in enumerate(parents):
            paths.append(paths[p + 1] + (ids[i],))
        target_rows = [row(target, path).tolist() for path in paths]
        draft_rows = [row(draft, path).tolist() for path in paths]
        for (slot, y), p in brute_step_law(parents, list(ids), draft_rows, target_rows, drafting).items():
            emitted = np.full((1, depth + 1), -1)
            emitted[0, : len(paths[slot]) + 1] = list(paths[slot]) + [y]
            expected[exact.encode_emitted(emitted, vocab)[0]] += weight * p
    np.testing.assert_allclose(law, expected, atol=1e-13)


@pytest.mark.parametrize("drafting", exact.DRAFTING_SCHEMES)
@pytest.mark.parametrize("parents", [[-1, -1, -1], [-1, 0, 0], [-1, -1, 0, 1]], ids=str)
def test_each_reference_rule_is_lossless_on_its_scheme(drafting, parents):
    """Completed by the target, one step of the scheme's reference rule is the target's joint law."""
    for seed in range(3):
        target, draft = markov_pair("low-acceptance", vocab_size=4, order=1, seed=seed)
        assert exact.tree_loss_tv(target, draft, parents, drafting=drafting, prompt=[seed % 4]) < 1e-12


@pytest.mark.parametrize("drafting,rule", [("topk", "iid"), ("without_replacement", "iid"),
                                           ("iid", "without_replacement"), ("topk", ThresholdRule(0.2, 1.0)),
                                           ("topk", ThresholdRule(1.0, 0.5))],
                         ids=str)
def test_a_rule_off_its_scheme_is_lossy(drafting, rule):
    target, draft = markov_pair("opposite-ranking", vocab_size=4, order=1, seed=1)
    assert exact.tree_loss_tv(target, draft, [-1, -1, -1], drafting=drafting, rule=rule, prompt=[1]) > 1e-3


@pytest.mark.parametrize("drafting", exact.DRAFTING_SCHEMES)
def test_the_one_hot_rule_is_lossless_on_every_scheme(drafting):
    """The top-k rule never reads the draft law (it samples the target and walks the tree while the
    sample is a child), so it is exact however the children were chosen."""
    target, draft = markov_pair("opposite-ranking", vocab_size=4, order=1, seed=1)
    assert exact.tree_loss_tv(target, draft, [-1, -1, 0], drafting=drafting, rule="topk", prompt=[2]) < 1e-12


def test_sglang_rule_with_unit_thresholds_is_the_topk_rule():
    rng = np.random.default_rng(9)
    parents = [-1, -1, 0, 0, 2]
    draft, target = _rows(rng, 16, 6, 7, True), _rows(rng, 16, 6, 7, True)
    ids = _drafted(rng, parents, draft, "topk")
    np.testing.assert_allclose(exact.tree_step_law(parents, ids, draft, target, rule=ThresholdRule(1.0, 1.0)),
                               exact.tree_step_law(parents, ids, draft, target, rule="topk"), atol=1e-15)


def test_accepted_length_and_expectation_are_consistent():
    rng = np.random.default_rng(3)
    parents = [-1, 0, 1, -1, 3]
    draft, target = _rows(rng, 10, 6, 5, False), _rows(rng, 10, 6, 5, False)
    ids = _drafted(rng, parents, draft, "iid")
    step = exact.tree_step_law(parents, ids, draft, target, rule="iid")
    depth = np.array([0, 1, 2, 3, 1, 2])
    law = exact.tree_accepted_length_law(parents, ids, draft, target, rule="iid")
    for k in range(4):
        np.testing.assert_allclose(law[:, k], step[:, depth == k].sum(axis=(1, 2)), atol=1e-14)
    np.testing.assert_allclose(exact.tree_expected_accepted_length(parents, ids, draft, target, rule="iid"),
                               law @ np.arange(4), atol=1e-14)


def test_bad_trees_and_rules_are_named():
    with pytest.raises(ValueError, match="earlier"):
        exact.check_tree([-1, 1])
    with pytest.raises(ValueError, match="earlier"):
        exact.check_tree([0])
    with pytest.raises(TypeError, match="integer"):
        exact.check_tree([-1.0, 0.0])
    with pytest.raises(ValueError, match="drafting must be one of"):
        exact.tree_sequence_law(*_small_models(0), [-1], drafting="beam")
    with pytest.raises(ValueError, match="rule must be one of"):
        exact.tree_step_law([-1], [[0]], np.full((1, 2, 2), 0.5), np.full((1, 2, 2), 0.5), rule="greedy")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ThresholdRule(1.5, 1.0)


@pytest.mark.parametrize("rule", ["iid", "without_replacement"])
def test_a_child_the_draft_row_gives_probability_zero_is_accepted_exactly_when_the_residual_wants_it(rule):
    """``min(1, r(x) / q(x))`` with ``q(x) = 0`` is 1 when ``r(x) > 0`` and 0 otherwise (SpecInfer,
    Algorithm 2): children given by the caller need not be in the draft row's support."""
    rng = np.random.default_rng(22)
    parents, vocab = [-1, -1, 0], 5
    draft = _rows(rng, 8, len(parents) + 1, vocab, zeros=True)
    target = _rows(rng, 8, len(parents) + 1, vocab, zeros=False)
    ids = rng.integers(0, vocab, size=(8, len(parents)))
    first = ids[:, 0]
    draft[np.arange(8), 0, first] = 0.0  # the first root child was never drawable
    draft /= draft.sum(-1, keepdims=True)
    target[np.arange(0, 8, 2), 0, first[::2]] = 0.0  # ... and in even rows the target does not want it either
    target /= target.sum(-1, keepdims=True)
    law = exact.tree_step_law(parents, ids, draft, target, rule=rule)
    accepted_first = law[:, [1, 3]].sum(axis=(1, 2))  # the walk stops at node 0 or at its child, node 2
    np.testing.assert_allclose(accepted_first, np.arange(8) % 2, atol=1e-12)  # r = p at the first child
    _assert_brute(law, parents, ids, draft, target, rule)
