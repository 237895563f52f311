"""``exact.completed_law`` against a literal brute-force enumeration, and what it says about each rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from specdec_check import MarkovModel, exact
from specdec_check.models import last_token_probs


def _pair(seed, vocab, order):
    rng = np.random.default_rng(seed)
    shape = (vocab + 1,) * order
    return (MarkovModel(rng.dirichlet(np.full(vocab, 0.5), size=shape), order=order),
            MarkovModel(rng.dirichlet(np.full(vocab, 0.5), size=shape), order=order))


def _law_after(model, prompt, prefix):
    tokens = np.array([list(prompt) + list(prefix)], dtype=np.int64)
    if tokens.shape[1] == 0:
        tokens = np.full((1, 1), -1, dtype=np.int64)
    return last_token_probs(model, tokens)[0]


def _brute_completed(step_law, target, draft, gamma, prompt):
    """Literal sum over drafted paths, outcomes (k, y) and completions, one sequence at a time."""
    vocab = target.vocab_size
    length = gamma + 1
    out = np.zeros((vocab,) * length)
    for path in itertools.product(range(vocab), repeat=gamma):
        q_rows = [_law_after(draft, prompt, path[:i]) for i in range(gamma)]
        p_rows = [_law_after(target, prompt, path[:i]) for i in range(gamma + 1)]
        weight = np.prod([q_rows[i][path[i]] for i in range(gamma)])
        if weight == 0:
            continue
        law = step_law(draft_token_ids=np.array([path], dtype=np.int64).reshape(1, gamma),
                       draft_probs=np.array(q_rows).reshape(1, gamma, vocab), target_probs=np.array([p_rows]))[0]
        for k in range(gamma + 1):
            for y in range(vocab):
                emitted = tuple(path[:k]) + (y,)
                for rest in itertools.product(range(vocab), repeat=length - k - 1):
                    seq = emitted + rest
                    cont = np.prod([_law_after(target, prompt, seq[:j])[seq[j]] for j in range(k + 1, length)])
                    out[seq] += weight * law[k, y] * cont
    return out


def _lossy(**knobs):
    return lambda **rows: exact.sglang_threshold_path_step_law(**rows, **knobs)


@pytest.mark.parametrize("step_law", [exact.path_step_law, exact.block_path_step_law, exact.one_hot_path_step_law,
                                      exact.medusa_typical_path_step_law, _lossy(threshold_acc=0.4)],
                         ids=["standard", "block", "one_hot", "medusa", "sglang_acc"])
@pytest.mark.parametrize("gamma, vocab, order, prompt", [(1, 3, 1, [2]), (2, 2, 2, [1, 0]), (2, 3, 1, []),
                                                         (3, 2, 1, [0])])
def test_completed_law_matches_brute_force(step_law, gamma, vocab, order, prompt):
    target, draft = _pair(gamma * 10 + vocab + order, vocab, order)
    law = exact.completed_law(step_law, target=target, draft=draft, gamma=gamma, prompt=prompt)
    np.testing.assert_allclose(law, _brute_completed(step_law, target, draft, gamma, prompt), atol=1e-13)
    assert law.sum() == pytest.approx(1.0, abs=1e-12)


def test_completed_law_fixed_rows_matches_brute_force():
    """Fixed rows: position j's law is the row's j-th row whatever the tokens; one completed law per row."""
    rng = np.random.default_rng(3)
    batch, gamma, vocab = 3, 2, 3
    tp = rng.dirichlet(np.full(vocab, 0.5), size=(batch, gamma + 1))
    dq = rng.dirichlet(np.full(vocab, 0.5), size=(batch, gamma))
    for step_law in (exact.block_path_step_law, _lossy(threshold_single=0.3)):
        law = exact.completed_law(step_law, target_probs=tp, draft_probs=dq)
        assert law.shape == (batch,) + (vocab,) * (gamma + 1)
        for b in range(batch):
            brute = np.zeros((vocab,) * (gamma + 1))
            for path in itertools.product(range(vocab), repeat=gamma):
                weight = np.prod([dq[b, i, path[i]] for i in range(gamma)])
                row_law = step_law(draft_token_ids=np.array([path]), draft_probs=dq[b:b + 1],
                                   target_probs=tp[b:b + 1])[0]
                for k in range(gamma + 1):
                    for y in range(vocab):
                        for rest in itertools.product(range(vocab), repeat=gamma - k):
                            seq = tuple(path[:k]) + (y,) + rest
                            cont = np.prod([tp[b, j, seq[j]] for j in range(k + 1, gamma + 1)])
                            brute[seq] += weight * row_law[k, y] * cont
            np.testing.assert_allclose(law[b], brute, atol=1e-13)
    joint = exact.target_completed_law(target_probs=tp)
    np.testing.assert_allclose(joint[1], np.einsum("i,j,k->ijk", tp[1, 0], tp[1, 1], tp[1, 2]), atol=1e-15)
    assert np.abs(exact.completed_law_tv(exact.block_path_step_law, target_probs=tp, draft_probs=dq)).max() < 1e-13


def test_lossless_rules_equal_the_target_and_lossy_ones_do_not():
    target, draft = _pair(5, 3, 2)
    for step_law in (exact.path_step_law, exact.block_path_step_law, exact.one_hot_path_step_law, _lossy()):
        assert exact.completed_law_tv(step_law, target=target, draft=draft, gamma=3, prompt=[1]) < 1e-13
    for step_law in (exact.medusa_typical_path_step_law, _lossy(threshold_acc=0.5), _lossy(threshold_single=0.2)):
        assert exact.completed_law_tv(step_law, target=target, draft=draft, gamma=3, prompt=[1]) > 1e-3


def test_completed_law_input_errors():
    target, draft = _pair(1, 3, 1)
    with pytest.raises(ValueError, match="not both"):
        exact.completed_law(exact.path_step_law, target=target, draft=draft, gamma=1,
                            target_probs=np.ones((1, 2, 3)) / 3, draft_probs=np.ones((1, 1, 3)) / 3)
    with pytest.raises(ValueError, match="needs target, draft and gamma"):
        exact.completed_law(exact.path_step_law, target=target, gamma=1)
    with pytest.raises(TypeError, match="callable"):
        exact.completed_law("standard", target=target, draft=draft, gamma=1)

    def half(**rows):
        return exact.path_step_law(**rows) / 2

    with pytest.raises(ValueError, match="not a law for the drafted path"):
        exact.completed_law(half, target=target, draft=draft, gamma=1)
    with pytest.raises(ValueError, match="limit"):
        exact.completed_law(exact.path_step_law, target=_pair(2, 40, 1)[0], draft=_pair(2, 40, 1)[1], gamma=4)
    with pytest.raises(ValueError, match="bonus position"):
        exact.completed_law(exact.path_step_law, target_probs=np.ones((1, 3, 3)) / 3,
                            draft_probs=np.ones((1, 1, 3)) / 3)
