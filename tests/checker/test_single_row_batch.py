"""The batch-invariance check's single-row calls, judged at the cost of one pass per draw (issue 31): one PIT
pass gives what single-sample adds gave, and the per-row screen lets through every row with an event of
probability zero."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check.checker.chain.contract import impossible_events, parse_step
from specdec_check.checker.chain.randomness import _RowScreen
from specdec_check.checker.core.tally import BIN_SAMPLE, PitTally
from specdec_check.scenarios import VerifierDraw


def _laws(rng, n, width, zeros=0.3):
    laws = rng.dirichlet(np.full(width, 0.5), size=n)
    laws[rng.random((n, width)) < zeros] = 0.0
    laws[np.arange(n), rng.integers(0, width, n)] += 0.1  # no row without mass
    return laws / laws.sum(axis=1, keepdims=True)


def _codes(rng, laws):
    cdf = np.cumsum(laws / laws.sum(axis=1, keepdims=True), axis=1)
    return np.minimum((cdf < rng.random(len(laws))[:, None]).sum(axis=1), laws.shape[1] - 1).astype(np.int64)


@pytest.mark.parametrize("width", [12, 300])  # per-token counts (small laws), or a sample of (bin, token) pairs
def test_one_pass_adds_what_single_sample_adds_add(width):
    rng = np.random.default_rng(width)
    laws = _laws(rng, 500, width)
    codes = _codes(rng, laws)
    one_by_one = PitTally("s", "batch_invariance", bins=16, alpha=1e-6, sequential=False)
    at_once = PitTally("s", "batch_invariance", bins=16, alpha=1e-6, sequential=False)
    first, second = np.random.default_rng(7), np.random.default_rng(7)
    for i in range(200):
        one_by_one.add(codes[i:i + 1], laws[i:i + 1], first)
    at_once.add_each(codes[:200], laws[:200], second)
    for i in range(200, 500):  # a second batch after the first, as the check's draws come
        one_by_one.add(codes[i:i + 1], laws[i:i + 1], first)
    at_once.add_each(codes[200:], laws[200:], second)
    assert np.array_equal(one_by_one.counts, at_once.counts)
    assert first.random() == second.random()  # the same doubles were taken
    if width <= 64:
        assert np.array_equal(one_by_one.category_counts, at_once.category_counts)
        assert one_by_one.category_expected.tobytes() == at_once.category_expected.tobytes()  # summed in one order
    else:
        assert one_by_one.bin_sampled == at_once.bin_sampled == 500
        assert [(b.tolist(), o.tolist()) for b, o in one_by_one.bin_sample] == \
               [(b.tolist(), o.tolist()) for b, o in at_once.bin_sample]
    assert one_by_one.record().to_dict() == at_once.record().to_dict()


def test_the_sample_of_pairs_stops_where_single_adds_stop():
    rng = np.random.default_rng(3)
    laws = _laws(rng, BIN_SAMPLE + 10, 100)
    tally = PitTally("s", "batch_invariance", bins=16, alpha=1e-6, sequential=False)
    tally.add_each(_codes(rng, laws), laws, np.random.default_rng(0))
    assert tally.bin_sampled == len(tally.bin_sample) == BIN_SAMPLE


def test_a_sequential_tally_takes_the_samples_one_by_one():
    rng = np.random.default_rng(4)
    laws = _laws(rng, 300, 10)
    codes = _codes(rng, laws)
    one_by_one = PitTally("s", "law", bins=8, alpha=1e-6)
    at_once = PitTally("s", "law", bins=8, alpha=1e-6)
    first, second = np.random.default_rng(1), np.random.default_rng(1)
    for i in range(300):
        one_by_one.add(codes[i:i + 1], laws[i:i + 1], first)
    at_once.add_each(codes, laws, second)
    assert one_by_one.sequential.n == at_once.sequential.n
    assert one_by_one.record().to_dict() == at_once.record().to_dict()


def _rows(rng, batch, gamma, vocab):
    """Rows with exact ties, zeros and draft/target swaps, where the impossible events live."""
    target = rng.dirichlet(np.full(vocab, 0.7), size=(batch, gamma + 1))
    draft = rng.dirichlet(np.full(vocab, 0.7), size=(batch, gamma))
    target[rng.random(target.shape) < 0.25] = 0.0
    draft[rng.random(draft.shape) < 0.25] = 0.0
    tie = rng.random(draft.shape) < 0.2
    draft[tie] = target[:, :gamma][tie]
    target[:, :, 0] += 1e-3  # no row without mass
    draft[:, :, 0] += 1e-3
    ids = rng.integers(0, vocab, size=(batch, gamma))
    return VerifierDraw(ids, draft, target, np.zeros(batch, dtype=np.int64))


@pytest.mark.parametrize("tolerance", [0.0, 1e-6, 1e-2])
@pytest.mark.parametrize("gamma", [0, 1, 3])
def test_the_screen_lets_through_every_row_with_an_impossible_event(gamma, tolerance):
    rng = np.random.default_rng(10 * gamma + int(tolerance * 1e6))
    vocab, batch = 5, 400
    draw = _rows(rng, batch, gamma, vocab)
    screen = _RowScreen(draw, tolerance)
    flagged = events = 0
    for b in range(batch):
        # every output shape: k accepted drafts, then a final token or none
        for k in range(gamma + 1):
            for final in range(-1, vocab):
                if final < 0 and k == 0:
                    continue
                out = np.full((1, gamma + 1), -1, dtype=np.int64)
                out[0, :k] = draw.draft_token_ids[b, :k]
                out[0, k] = final
                one = draw.head(slice(b, b + 1))
                step = parse_step(out, one.draft_token_ids)
                if int(step.accepted[0]) != k:
                    continue  # a final token equal to the next draft reads as one more accepted draft
                real = bool(impossible_events(step, one.draft_token_ids, one.draft_probs, one.target_probs,
                                              tolerance=tolerance)) if final >= 0 else False
                maybe = screen.maybe_impossible(b, k, final) if final >= 0 else False
                assert maybe or not real, (b, k, final)
                flagged += maybe
                events += real
    assert events > 0 and flagged == events  # the same comparisons: no row is screened in for nothing


def test_the_screen_lets_nan_through():
    rng = np.random.default_rng(0)
    draw = _rows(rng, 2, 2, 4)
    draw.target_probs[1, 0, :] = np.nan
    screen = _RowScreen(draw, 0.0)
    assert screen.maybe_impossible(1, 0, 2)


def test_a_scenario_keeps_its_pools_contexts_and_recomputes_another_pool():
    from specdec_check.models import last_context_indices
    from specdec_check.scenarios import markov_pair, VerifierScenario

    target, draft = markov_pair("low-acceptance", vocab_size=7, order=2, seed=0)
    scenario = VerifierScenario("kept", target, draft, 2, 4, seed=0)
    pool = scenario.prompts()
    first = scenario._pool_contexts(pool, 2)
    assert np.array_equal(first, last_context_indices(pool, order=2, vocab_size=7))
    assert scenario._pool_contexts(scenario.prompts(), 2) is first  # an equal pool: kept
    other = pool.copy()
    other[:, -1] = (other[:, -1] + 1) % 7
    assert np.array_equal(scenario._pool_contexts(other, 2), last_context_indices(other, order=2, vocab_size=7))
    pool[:, -1] = 0  # the kept copy is the scenario's own: a pool changed in place is not mistaken for it
    assert np.array_equal(scenario._pool_contexts(pool, 2), last_context_indices(pool, order=2, vocab_size=7))
