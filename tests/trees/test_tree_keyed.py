"""Keyed tree laws and keyed drafting: the fast paths equal the dense oracles.

``tree_laws_keyed`` (one residual per distinct state) against ``tree_laws`` (dense rows, itself
checked by brute-force enumeration in test_tree_exact.py); ``LawRows`` reads against numpy on the
gathered rows; the trees a scenario drafts from its law tables against the exact drafting law
(``enumerate_tree_drafts``), with an identity test at alpha = 1e-9 on a fixed seed.
"""

import numpy as np
import pytest

from specdec_check import exact, stats
from specdec_check.checker.tree.block import TreeBlock, collision_probs
from specdec_check.exact._law_rows import LawRows
from specdec_check.exact._tree_drafting import draft_child
from specdec_check.exact._tree_keyed import StateTable, tree_laws_keyed
from specdec_check.exact._tree_kernels import tree_laws
from specdec_check.scenarios import TreeDraw, TreeScenario, default_tree_battery, markov_pair, star_tree

RULES = ("iid", "without_replacement", "topk")


def _random_case(rng, rule):
    vocab, keys_n, nodes, batch = int(rng.integers(2, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 7)), 24
    target = rng.dirichlet(np.full(vocab, 0.5), size=keys_n)
    draft = rng.dirichlet(np.full(vocab, 0.5), size=keys_n)
    target[:, rng.integers(vocab)] = 0.0  # a token of target probability zero
    target /= target.sum(axis=1, keepdims=True)
    draft[0] = target[0]  # target == draft on one law
    parents = np.stack([np.array([int(rng.integers(-1, i)) for i in range(nodes)]) for _ in range(batch)])
    keys = rng.integers(0, keys_n, size=(batch, nodes + 1))
    ids = rng.integers(0, vocab, size=(batch, nodes))
    if rule == "without_replacement":  # siblings distinct, as the scheme drafts them
        for b in range(batch):
            for i in range(nodes):
                taken = {ids[b, j] for j in range(i) if parents[b, j] == parents[b, i]}
                free = [t for t in range(vocab) if t not in taken]
                if not free:
                    return None
                if ids[b, i] in taken:
                    ids[b, i] = rng.choice(free)
    return parents, ids, keys, target, draft


@pytest.mark.parametrize("rule", RULES)
def test_keyed_laws_equal_the_dense_kernel(rule):
    rng = np.random.default_rng(7)
    cases = 0
    for _ in range(120):
        case = _random_case(rng, rule)
        if case is None:
            continue
        parents, ids, keys, target, draft = case
        dense = tree_laws(parents, ids, draft[keys], target[keys], rule)
        states = None
        for _ in range(2):  # the second call reuses the first's states
            keyed, states = tree_laws_keyed(parents, ids, keys, target, draft, rule, states=states)
            for field in ("accept", "reach", "stop"):
                np.testing.assert_allclose(getattr(keyed, field), getattr(dense, field), rtol=0, atol=1e-14)
            np.testing.assert_allclose(keyed.final, dense.final, rtol=0, atol=1e-14)
            assert np.array_equal(keyed.final == 0, dense.final == 0)  # impossible events are the same events
        cases += 1
    assert cases >= 100


def test_kept_states_are_shared_and_bounded():
    rng = np.random.default_rng(3)
    parents, ids, keys, target, draft = _random_case(rng, "iid")
    laws, states = tree_laws_keyed(parents, ids, keys, target, draft, "iid")
    added = states.residuals.added
    _, again = tree_laws_keyed(parents, ids, keys, target, draft, "iid", states=states)
    assert again is states and states.residuals.added == added  # the same states: nothing recomputed
    _, other = tree_laws_keyed(parents, ids, keys, target.copy(), draft, "iid", states=states)
    assert other is not states  # other tables: a fresh table
    assert isinstance(states, StateTable)
    with pytest.raises(ValueError, match="rule must be one of"):
        tree_laws_keyed(parents, ids, keys, target, draft, "sglang")


def test_law_rows_reads_equal_numpy():
    rng = np.random.default_rng(0)
    base = rng.dirichlet(np.ones(5), size=3)
    rows = LawRows(base)
    added = [rows.add(rng.dirichlet(np.ones(5), size=n)) for n in (2, 20, 1)]  # grows past its first capacity
    assert np.concatenate(added).tolist() == list(range(3, 26))
    full = np.concatenate([base, *(rows.gather(a) for a in added)])
    ids = rng.integers(0, 26, size=(4, 6))
    tokens = rng.integers(0, 5, size=(4, 6))
    np.testing.assert_array_equal(rows.gather(ids), full[ids])
    np.testing.assert_array_equal(rows.at(ids, tokens), full[ids, tokens])
    below = np.concatenate([np.zeros((26, 1)), np.cumsum(full, axis=1)], axis=1)
    np.testing.assert_allclose(rows.below_at(ids, tokens), below[ids, tokens], atol=1e-15)
    np.testing.assert_allclose(rows.cumulative_total(ids), below[ids, 5], atol=1e-15)
    np.testing.assert_allclose(rows.total(ids), full[ids].sum(axis=-1), atol=1e-15)
    np.testing.assert_allclose(rows.square(ids), (full[ids] ** 2).sum(axis=-1), atol=1e-15)


def _tree_codes(draw):
    vocab = draw.tables.vocab
    return draw.draft_token_ids @ vocab ** np.arange(draw.draft_token_ids.shape[1])[::-1]


@pytest.mark.parametrize("drafting", RULES)
def test_keyed_drafts_follow_the_scheme(drafting):
    """The trees a scenario drafts from its tables, against the exact law of the scheme (one prompt):
    an identity test at alpha = 1e-9 on 30,000 trees, and one exact draw for the deterministic top-k."""
    target, draft = markov_pair("low-acceptance", vocab_size=4, order=1, seed=5)
    parents = np.array([-1, -1, 0, 0])
    scenario = TreeScenario("s", target, draft, parents, 64, prompt_pool=1, prompt_lengths=(1, 1))
    assert scenario.keyed
    prompt = scenario.prompts()[0]
    trees = exact.enumerate_tree_drafts(target, draft, parents, drafting=drafting, prompt=prompt[prompt >= 0])
    vocab = 4
    codes = trees.ids @ vocab ** np.arange(4)[::-1]
    law = np.zeros(vocab**4)
    np.add.at(law, codes, trees.weights)
    draw = scenario.draw(np.random.default_rng(11), drafting, calls=470)
    counts = np.bincount(_tree_codes(draw), minlength=vocab**4)
    if drafting == "topk":
        assert counts[codes[0]] == draw.rows and trees.weights.tolist() == [1.0]
    else:
        res = stats.identity_test(counts, law, alpha=1e-9)
        assert not res.rejected, (res.pvalue, res.worst_cells)
    # every slot's rows are the models' laws after its path
    path_rows = exact.enumerate_tree_drafts(target, draft, parents, drafting="iid", prompt=prompt[prompt >= 0])
    index = {tuple(t): m for m, t in enumerate(path_rows.ids)}
    for b in range(0, draw.rows, 97):
        m = index[tuple(draw.draft_token_ids[b])]
        np.testing.assert_array_equal(draw.target_probs[b], path_rows.target_probs[m])
        np.testing.assert_array_equal(draw.draft_probs[b], path_rows.draft_probs[m])


def test_keyed_topk_drafts_are_the_dense_schemes():
    scenario = next(s for s in default_tree_battery("topk") if s.name == "star-8")
    draw = scenario.draw(np.random.default_rng(0), "topk", calls=3)
    removed = np.zeros((draw.rows, scenario.vocab_size), dtype=bool)
    for i in range(scenario.nodes):
        token = draft_child("topk", draw.draft_probs[:, 0], removed, np.random.default_rng(0))
        assert token.tolist() == draw.draft_token_ids[:, i].tolist()
        removed[np.arange(draw.rows), token] = True


def test_without_replacement_runs_out_of_tokens_clearly():
    rows = np.full((1, 3, 2), 0.5)
    rows[0, 0] = [1.0, 0.0]  # the root's draft row has one token of positive probability
    scenario = TreeScenario.from_rows("short", parents=star_tree(2), target_probs=rows, draft_probs=rows)
    with pytest.raises(ValueError, match="tokens of positive probability"):
        scenario.draw(np.random.default_rng(0), "without_replacement")
    with pytest.raises(ValueError, match="at most V = 2 children"):
        TreeScenario.from_rows("wide", parents=star_tree(3), target_probs=np.full((1, 4, 2), 0.5),
                               draft_probs=np.full((1, 4, 2), 0.5)).draw(np.random.default_rng(0), "topk")


def test_draws_gather_their_rows_lazily_and_windows_keep_keys():
    scenario = next(s for s in default_tree_battery("iid") if s.name == "large-vocabulary")
    draw = scenario.draw(np.random.default_rng(1), "iid", calls=4)
    assert draw._target is None and draw._draft is None  # nothing dense until a verifier needs it
    window = draw.head(slice(16, 32))
    np.testing.assert_array_equal(window.target_probs, draw.tables.target[draw.slot_keys[16:32]])
    np.testing.assert_array_equal(window.draft_probs, draw.tables.draft[draw.slot_keys[16:32]])
    assert draw._target is None
    dense = TreeDraw(window.parents, window.draft_token_ids, window.draft_probs, window.target_probs,
                     window.pool_index)
    keyed_block, dense_block = TreeBlock(window, "iid"), TreeBlock(dense, "iid")
    np.testing.assert_allclose(keyed_block.stop, dense_block.stop, atol=1e-15)
    np.testing.assert_allclose(collision_probs(keyed_block), collision_probs(dense_block), rtol=1e-12)
