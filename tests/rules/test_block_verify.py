"""``samplers.block_verify`` against the exact block-verification law, and the paper's two-token example.

Calibration: every law assertion is ``stats.identity_test`` (exact, conservative) at alpha 1e-9 on
exactly multinomial counts (see ``_rules_helpers``); the example's means use Hoeffding's bound at
alpha 1e-9 (distribution-free, exact for i.i.d. bounded counts). Seeds are fixed, so the tests are
deterministic; a correct sampler fails one of the 9 statistical assertions here for a random seed
with probability below 1e-8.
"""

from __future__ import annotations

import itertools
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _rules_helpers import ALPHA, row_set, step_law_test, tiled_inputs  # noqa: E402

from specdec_check import exact, stats  # noqa: E402
from specdec_check.samplers import block_verify, numpy_verify  # noqa: E402

#: The paper's example (Sun et al., ICLR 2025, Section 2): binary context-independent laws.
TARGET = np.array([1 / 3, 2 / 3])
DRAFT = np.array([2 / 3, 1 / 3])
EXAMPLE_GAMMA = 2
EXAMPLE_ROWS = 1_000_000


def _example_inputs(n, seed):
    return tiled_inputs(np.tile(DRAFT, (EXAMPLE_GAMMA, 1)), np.tile(TARGET, (EXAMPLE_GAMMA + 1, 1)), n, seed)


def _example_expectations():
    """Exact expected accepted drafts over the 4 drafted paths, weighted by their draft probability."""
    paths = np.array(list(itertools.product(range(2), repeat=EXAMPLE_GAMMA)))
    dq = np.broadcast_to(DRAFT, (4, EXAMPLE_GAMMA, 2))
    tp = np.broadcast_to(TARGET, (4, EXAMPLE_GAMMA + 1, 2))
    weight = np.prod(DRAFT[paths], axis=1)
    return (weight @ exact.standard_expected_accepted(paths, dq, tp),
            weight @ exact.block_expected_accepted(paths, dq, tp),
            weight @ exact.block_path_accepted_count_law(paths, dq, tp),
            weight @ exact.path_accepted_count_law(paths, dq, tp))


def test_paper_example_exact():
    standard, block, _, _ = _example_expectations()
    assert standard == pytest.approx(10 / 9, abs=1e-14)
    assert block == pytest.approx(11 / 9, abs=1e-14)


@pytest.mark.parametrize("name, verify, which", [("standard", numpy_verify, 0), ("block", block_verify, 1)])
def test_paper_example_sampled(name, verify, which):
    """10^6 rows: the mean accepted count is within Hoeffding's alpha = 1e-9 radius of 10/9 (standard)
    or 11/9 (block), and the whole accepted-count law passes the exact identity test."""
    ids, dq, tp = _example_inputs(EXAMPLE_ROWS, seed=11 + which)
    out = verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(21 + which))
    accepted = (out >= 0).sum(axis=1) - 1
    expected_mean = (10 / 9, 11 / 9)[which]
    # Hoeffding for i.i.d. values in [0, gamma]: P(|mean - mu| >= t) <= 2 exp(-2 n t^2 / gamma^2)
    radius = EXAMPLE_GAMMA * np.sqrt(np.log(2 / ALPHA) / (2 * EXAMPLE_ROWS))
    assert abs(accepted.mean() - expected_mean) < radius, (name, accepted.mean(), expected_mean, radius)
    assert radius < (11 / 9 - 10 / 9) / 10  # the bound separates the two rules tenfold
    count_law = _example_expectations()[3 - which]
    result = stats.identity_test(np.bincount(accepted, minlength=EXAMPLE_GAMMA + 1), count_law, alpha=ALPHA)
    assert not result.rejected, result


@pytest.mark.parametrize("gamma, vocab, zeros, seed", [(1, 4, False, 1), (2, 5, True, 2), (3, 4, True, 3),
                                                       (3, 3, False, 4)])
def test_block_verify_matches_block_path_step_law(gamma, vocab, zeros, seed):
    q, p = row_set(seed, gamma, vocab, zeros=zeros)
    result = step_law_test(block_verify, exact.block_path_step_law, q, p, n=200_000, seed=seed)
    assert not result.rejected, result


def test_block_verify_detects_a_wrong_law():
    """The same test on the same rows rejects the standard rule's law (it is not block verification)."""
    q, p = row_set(2, 2, 5, zeros=True)
    result = step_law_test(block_verify, exact.path_step_law, q, p, n=200_000, seed=2)
    assert result.rejected


def _brute_block_law(q, p, path):
    """Algorithm 2 on one row in exact rational arithmetic, tau's law by enumerating the 2^gamma coin events."""
    gamma, vocab = len(path), len(p[0])
    w = [Fraction(1)]
    for i, x in enumerate(path):
        ratio = p[i][x] / q[i][x] if q[i][x] > 0 else (Fraction(1) if p[i][x] > 0 else Fraction(0))
        w.append(min(w[-1] * ratio, Fraction(1)))
    residual = [[max(w[i] * p[i][y] - q[i][y], Fraction(0)) for y in range(vocab)] for i in range(gamma)]
    h = [None] + [sum(residual[i]) / (sum(residual[i]) + 1 - w[i]) if sum(residual[i]) + 1 - w[i] > 0 else
                  Fraction(0) for i in range(1, gamma)] + [w[gamma]]
    law = [[Fraction(0)] * vocab for _ in range(gamma + 1)]
    for coins in itertools.product((False, True), repeat=gamma):
        prob = Fraction(1)
        for i, c in enumerate(coins, start=1):
            prob *= h[i] if c else 1 - h[i]
        tau = max([i for i, c in enumerate(coins, start=1) if c], default=0)
        if prob == 0:
            continue
        assert tau == gamma or sum(residual[tau]) > 0, "Algorithm 2 stopped where the residual has no mass"
        final = p[gamma] if tau == gamma else [r / sum(residual[tau]) for r in residual[tau]]
        for y in range(vocab):
            law[tau][y] += prob * final[y]
    return law


@pytest.mark.parametrize("gamma, vocab, seed", [(1, 3, 5), (2, 3, 6), (3, 2, 7), (3, 3, 8)])
def test_block_path_step_law_against_brute_force(gamma, vocab, seed):
    """Rational rows; every drafted path of positive draft probability; exact law to 1e-12."""
    rng = np.random.default_rng(seed)
    p = [[Fraction(int(v)) for v in rng.integers(0, 6, vocab)] for _ in range(gamma + 1)]
    q = [[Fraction(int(v)) for v in rng.integers(0, 6, vocab)] for _ in range(gamma)]
    for rows in (p, q):
        for r in rows:
            r[int(rng.integers(vocab))] += 1
            total = sum(r)
            r[:] = [v / total for v in r]
    pf, qf = np.array(p, dtype=float), np.array(q, dtype=float)
    paths = np.array([x for x in itertools.product(range(vocab), repeat=gamma)
                      if all(q[i][x[i]] > 0 for i in range(gamma))])
    law = exact.block_path_step_law(paths, np.broadcast_to(qf, (len(paths),) + qf.shape),
                                    np.broadcast_to(pf, (len(paths),) + pf.shape))
    for path, row in zip(paths, law):
        brute = np.array(_brute_block_law(q, p, list(path)), dtype=float)
        np.testing.assert_allclose(row, brute, atol=1e-12)


def test_block_verify_edge_cases():
    q, p = row_set(9, 2, 4, zeros=True)
    ids, dq, tp = tiled_inputs(q, p, 50, seed=9)
    ids_p, _, _ = tiled_inputs(p[:2], p, 50, seed=9)  # drafts drawn from the draft rows, here q = p
    same = block_verify(draft_token_ids=ids_p, draft_probs=tp[:, :2].copy(), target_probs=tp,
                        generator=np.random.default_rng(0))
    assert (same[:, :2] == ids_p).all()  # q == p: every weight is 1, h_gamma = 1, every draft accepted
    g0 = block_verify(draft_token_ids=np.zeros((5, 0), dtype=np.int64), draft_probs=np.zeros((5, 0, 4)),
                      target_probs=tp[:5, :1], generator=np.random.default_rng(0))
    assert g0.shape == (5, 1) and (tp[0, 0][g0[:, 0]] > 0).all()
    bad = tp.copy()
    bad[3, 2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        block_verify(draft_token_ids=ids, draft_probs=dq, target_probs=bad, generator=np.random.default_rng(0))
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        block_verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=0)
    with pytest.raises(ValueError, match="target_probs must be"):
        block_verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp[:, :2], generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        block_verify(draft_token_ids=ids + 4, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(0))
    with pytest.raises(TypeError, match="integer array"):
        block_verify(draft_token_ids=ids.astype(float), draft_probs=dq, target_probs=tp,
                     generator=np.random.default_rng(0))


def test_block_verify_same_seed_same_output():
    q, p = row_set(10, 3, 5)
    ids, dq, tp = tiled_inputs(q, p, 1000, seed=10)
    a = block_verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(3))
    b = block_verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(3))
    c = block_verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(4))
    assert (a == b).all() and (a != c).any()
