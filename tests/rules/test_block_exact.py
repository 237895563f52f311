"""Exact block-verification oracles: expected accepted drafts against brute force, the optimality claim
against a linear program over every valid verifier, and losslessness by enumeration. No sampling."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

sys.path.insert(0, str(Path(__file__).parent))
from _rules_helpers import all_paths, row_set  # noqa: E402

from specdec_check import MarkovModel, exact  # noqa: E402
from specdec_check.models import ConstantModel  # noqa: E402


def _markov_pair(seed, vocab, order):
    rng = np.random.default_rng(seed)
    shape = (vocab + 1,) * order
    return (MarkovModel(rng.dirichlet(np.full(vocab, 0.6), size=shape), order=order),
            MarkovModel(rng.dirichlet(np.full(vocab, 0.6), size=shape), order=order))


def _path_rows(target, draft, prompt, gamma):
    """Every drafted path with its target rows [N, g+1, V], draft rows [N, g, V] and draft probability."""
    vocab = target.vocab_size
    paths = all_paths(vocab, gamma)
    ctx = np.concatenate([np.broadcast_to(prompt, (len(paths), len(prompt))), paths], axis=1).astype(np.int64)
    tp = np.stack([target.last_probs(ctx[:, : len(prompt) + i]) if len(prompt) + i else
                   np.broadcast_to(target.start_probs(), (len(paths), vocab)) for i in range(gamma + 1)], axis=1)
    dp = np.stack([draft.last_probs(ctx[:, : len(prompt) + i]) if len(prompt) + i else
                   np.broadcast_to(draft.start_probs(), (len(paths), vocab)) for i in range(gamma)], axis=1)
    weight = np.prod(np.take_along_axis(dp, paths[..., None], axis=2)[..., 0], axis=1)
    return paths, dp, tp, weight


@pytest.mark.parametrize("gamma, vocab, seed", [(1, 4, 1), (2, 3, 2), (3, 3, 3)])
def test_expected_accepted_match_count_laws(gamma, vocab, seed):
    """Both per-row figures equal sum_k k P(k) of the rules' exact accepted-count laws, and the
    standard one is sum_i prod_{j<=i} min(1, p_j/q_j), computed here by a plain loop."""
    q, p = row_set(seed, gamma, vocab)
    paths = all_paths(vocab, gamma)
    dq, tp = np.broadcast_to(q, (len(paths),) + q.shape), np.broadcast_to(p, (len(paths),) + p.shape)
    k = np.arange(gamma + 1)
    np.testing.assert_allclose(exact.standard_expected_accepted(paths, dq, tp),
                               exact.path_accepted_count_law(paths, dq, tp) @ k, atol=1e-13)
    np.testing.assert_allclose(exact.block_expected_accepted(paths, dq, tp),
                               exact.block_path_accepted_count_law(paths, dq, tp) @ k, atol=1e-13)
    for path, value in zip(paths, exact.standard_expected_accepted(paths, dq, tp)):
        total, running = 0.0, 1.0
        for i, x in enumerate(path):
            running *= min(1.0, p[i, x] / q[i, x]) if q[i, x] > 0 else float(p[i, x] > 0)
            total += running
        assert value == pytest.approx(total, abs=1e-13)


def _optimal_valid_verifier(target, draft, prompt, gamma):
    """Brute force: the largest expected accepted count of any verifier valid on this instance.

    Variables pi(k, y | path) >= 0 summing to 1 per drafted path; constraint: the step completed by
    the target has the target's joint law of gamma + 1 tokens (what makes the decode loop exact);
    objective: sum_path q(path) sum_{k,y} k pi(k, y | path). Solved by scipy's HiGHS.
    """
    vocab = target.vocab_size
    length = gamma + 1
    paths, _, _, weight = _path_rows(target, draft, prompt, gamma)
    outcomes = [(k, y) for k in range(gamma + 1) for y in range(vocab)]
    n_var = len(paths) * len(outcomes)
    joint = exact.joint(target, length, prompt)
    a_eq, b_eq = [], []
    for x in range(len(paths)):
        row = np.zeros(n_var)
        row[x * len(outcomes): (x + 1) * len(outcomes)] = 1.0
        a_eq.append(row)
        b_eq.append(1.0)
    for s in itertools.product(range(vocab), repeat=length):
        row = np.zeros(n_var)
        for x, path in enumerate(paths):
            for o, (k, y) in enumerate(outcomes):
                if tuple(path[:k]) == s[:k] and y == s[k]:
                    prefix = joint[s[: k + 1]].sum() if k + 1 < length else joint[s]
                    continuation = joint[s] / prefix if prefix > 0 else 0.0  # p(s_{k+2..L} | s_1..s_{k+1})
                    row[x * len(outcomes) + o] += weight[x] * continuation
        a_eq.append(row)
        b_eq.append(joint[s])
    objective = np.zeros(n_var)
    for x in range(len(paths)):
        for o, (k, _) in enumerate(outcomes):
            objective[x * len(outcomes) + o] = -weight[x] * k
    result = linprog(objective, A_eq=np.array(a_eq), b_eq=np.array(b_eq), bounds=(0, None), method="highs")
    assert result.status == 0, result.message
    return -result.fun


@pytest.mark.parametrize("vocab, gamma, order, seed", [(2, 2, 1, 4), (2, 3, 1, 5), (3, 2, 1, 6), (2, 2, 2, 7)])
def test_block_verification_is_optimal_among_valid_verifiers(vocab, gamma, order, seed):
    """The average of block_expected_accepted over drafts from the draft model equals the linear
    program's optimum over every valid verifier (Sun et al., ICLR 2025, Theorem 2), and the standard
    rule's is no larger."""
    target, draft = _markov_pair(seed, vocab, order)
    prompt = np.array([1], dtype=np.int64)
    paths, dp, tp, weight = _path_rows(target, draft, prompt, gamma)
    block = weight @ exact.block_expected_accepted(paths, dp, tp)
    standard = weight @ exact.standard_expected_accepted(paths, dp, tp)
    optimum = _optimal_valid_verifier(target, draft, prompt, gamma)
    assert block == pytest.approx(optimum, abs=1e-7)
    assert block - standard > 1e-3  # the instances are ones where the optimum beats the standard rule


def test_paper_example_linear_program():
    """In the paper's two-token example the optimum over valid verifiers is 11/9 (not the 12/9 of an
    idealised block-level coupling), and block verification attains it."""
    target, draft = ConstantModel([1 / 3, 2 / 3]), ConstantModel([2 / 3, 1 / 3])
    assert _optimal_valid_verifier(target, draft, np.zeros(0, dtype=np.int64), 2) == pytest.approx(11 / 9, abs=1e-9)


def test_per_row_figure_is_not_a_per_row_bound():
    """On the drafted row (a, a) of the paper's example the standard rule accepts 3/4 in expectation,
    block verification 1/2: the per-row block figure is exact for block verification, not an upper
    bound for every valid verifier row by row (only its average over drafts is the optimum)."""
    path = np.array([[0, 0]])
    dq = np.broadcast_to([2 / 3, 1 / 3], (1, 2, 2))
    tp = np.broadcast_to([1 / 3, 2 / 3], (1, 3, 2))
    assert exact.standard_expected_accepted(path, dq, tp)[0] == pytest.approx(0.75, abs=1e-15)
    assert exact.block_expected_accepted(path, dq, tp)[0] == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("order, gamma", [(1, 1), (1, 3), (2, 2), (2, 3)])
def test_block_verification_is_lossless(order, gamma):
    """Enumerated completed law of block verification equals the target's joint (Theorem 1), on
    context-dependent Markov models where every position sees its own rows."""
    target, draft = _markov_pair(10 + order + gamma, 3, order)
    for prompt in ([], [2], [0, 1]):
        assert exact.completed_law_tv(exact.block_path_step_law, target=target, draft=draft, gamma=gamma,
                                      prompt=prompt) < 1e-13


def test_block_weights_fields_and_validation():
    q, p = row_set(3, 3, 4)
    paths = all_paths(4, 3)
    info = exact.block_weights(paths, np.broadcast_to(q, (64, 3, 4)), np.broadcast_to(p, (64, 4, 4)))
    assert info.weights.shape == (64, 4) and (info.weights[:, 0] == 1).all()
    assert (np.diff(info.weights[:, 1:], axis=1) <= 1).all() and (info.weights <= 1).all()
    assert (info.stop_probs >= 0).all() and (info.stop_probs <= 1).all()
    np.testing.assert_allclose(info.accepted_count_law.sum(axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(info.stop_probs[:, -1], info.weights[:, -1])
    with pytest.raises(ValueError, match="sums to"):
        exact.block_weights(paths, np.broadcast_to(q, (64, 3, 4)) * 2, np.broadcast_to(p, (64, 4, 4)))
    with pytest.raises(ValueError, match="out of range"):
        exact.block_path_step_law(paths + 4, np.broadcast_to(q, (64, 3, 4)), np.broadcast_to(p, (64, 4, 4)))
    with pytest.raises(ValueError, match=r"gamma\+1"):
        exact.block_expected_accepted(paths, np.broadcast_to(q, (64, 3, 4)), np.broadcast_to(p[:3], (64, 3, 4)))


def test_one_hot_law_matches_its_definition():
    q, p = row_set(4, 2, 3)
    paths = all_paths(3, 2)
    law = exact.one_hot_path_step_law(paths, np.broadcast_to(q, (9, 2, 3)), np.broadcast_to(p, (9, 3, 3)))
    for path, row in zip(paths, law):
        for k in range(3):
            reach = np.prod([p[i, path[i]] for i in range(k)])
            final = p[2] if k == 2 else np.where(np.arange(3) == path[k], 0.0, p[k])
            np.testing.assert_allclose(row[k], reach * final, atol=1e-15)
