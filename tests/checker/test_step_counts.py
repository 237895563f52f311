"""The step counts' first-draft acceptances stay bounded in memory: past COMPRESS_VALUES they are kept once per
distinct probability with their trial counts, the same trials, and the efficiency test's law the same."""

from types import SimpleNamespace

import numpy as np
import pytest

from specdec_check import stats
from specdec_check.checker.chain import counts as C

LEVELS = np.array([0.1, 0.25, 0.5, 0.9, 1.0])


def _run(counts, seed, blocks=60, rows=8):
    """Feed ``blocks`` blocks of ``rows`` rows, each served to 1 to 3 calls; the trials as (probabilities, calls)."""
    rng = np.random.default_rng(seed)
    trials = []
    for _ in range(blocks):
        accept = LEVELS[rng.integers(0, LEVELS.size, size=(rows, 2))]
        block = SimpleNamespace(gamma=2, accept_first=accept[:, 0], expected_accepted=0.0, optimal_accepted=0.0)
        calls = int(rng.integers(1, 4))
        for _ in range(calls):
            parsed = SimpleNamespace(accepted=(rng.random(rows) < accept[:, 0]).astype(np.int64), emitted=np.ones(rows))
            counts.add(C.Step(block, None, parsed, None, host=True, fresh=False))
        trials.append((accept[:, 0].copy(), calls))
    return trials


def _multiset(probs, repeats):
    out = {}
    for p, r in zip(probs.tolist(), np.broadcast_to(repeats, probs.shape).tolist()):
        out[p] = out.get(p, 0) + r
    return out


def test_below_the_bound_every_trial_is_kept_in_order():
    counts = C.StepCounts()
    trials = _run(counts, seed=1)
    probs, repeats = counts.first_accept_probs()
    np.testing.assert_array_equal(probs, np.concatenate([p for p, _ in trials]))
    np.testing.assert_array_equal(repeats, np.concatenate([np.full(p.size, c) for p, c in trials]))


@pytest.mark.parametrize("bound", [40, 100])
def test_past_the_bound_the_same_trials_are_kept_per_distinct_value(monkeypatch, bound):
    monkeypatch.setattr(C, "COMPRESS_VALUES", bound)
    counts, plain = C.StepCounts(), C.StepCounts()
    trials = _run(counts, seed=2)
    probs, repeats = counts.first_accept_probs()
    bits = int(repeats.max()).bit_length()
    # one block's rows loose at most past the bound, and each level once per bit of its trial count
    assert probs.size <= bound + 8 + LEVELS.size * bits
    assert repeats.dtype.kind == "i" and repeats.min() >= 1
    assert np.unique(repeats).size <= 3 + bits  # few distinct repeats: the Poisson-binomial law stays cheap
    expected = _multiset(np.concatenate([p for p, _ in trials]), np.concatenate([np.full(p.size, c) for p, c in trials]))
    assert _multiset(probs, repeats) == expected
    monkeypatch.setattr(C, "COMPRESS_VALUES", 10**9)
    _run(plain, seed=2)
    all_probs, all_repeats = plain.first_accept_probs()
    full = stats.poisson_binomial_test(plain.first_accepted, all_probs, alpha=1e-3, repeats=all_repeats)
    compact = stats.poisson_binomial_test(counts.first_accepted, probs, alpha=1e-3, repeats=repeats)
    assert counts.first_accepted == plain.first_accepted
    assert compact.n == full.n and compact.expected == pytest.approx(full.expected, rel=1e-12)
    assert compact.pvalue == pytest.approx(full.pvalue, rel=1e-9, abs=1e-13)


def test_merged_shards_keep_the_trials_of_both_and_travel_without_a_block(monkeypatch):
    import pickle

    monkeypatch.setattr(C, "COMPRESS_VALUES", 50)
    first, second = C.StepCounts(), C.StepCounts()
    trials = _run(first, seed=3) + _run(second, seed=4)
    second = pickle.loads(pickle.dumps(second))  # as a shard hands it over
    assert second._group_source is None
    first.merge(second)
    probs, repeats = first.first_accept_probs()
    expected = _multiset(np.concatenate([p for p, _ in trials]), np.concatenate([np.full(p.size, c) for p, c in trials]))
    assert _multiset(probs, repeats) == expected
    assert probs.size <= 50 + LEVELS.size * int(repeats.max()).bit_length()


def test_merged_counts_reach_the_efficiency_test_as_few_distinct_repeats(monkeypatch):
    """Many distinct probabilities with widely spread trial counts (a long run on a large vocabulary): the merged
    group reaches the Poisson-binomial law split by the bits of each count, so its distinct repeats are at most one
    per bit (one per count convolved thousands of groups), with the same trials."""
    monkeypatch.setattr(C, "COMPRESS_VALUES", 1000)
    rng = np.random.default_rng(11)
    counts, trials = C.StepCounts(), {}
    for _ in range(400):
        accept = rng.choice(np.linspace(0.05, 0.95, 3000), size=(16, 1))
        block = SimpleNamespace(gamma=1, accept_first=accept[:, 0], expected_accepted=0.0, optimal_accepted=0.0)
        calls = int(rng.lognormal(1.0, 1.0)) + 1
        for _ in range(calls):
            parsed = SimpleNamespace(accepted=np.zeros(16, dtype=np.int64), emitted=np.ones(16))
            counts.add(C.Step(block, None, parsed, None, host=True, fresh=False))
        for p in accept[:, 0].tolist():
            trials[p] = trials.get(p, 0) + calls
    probs, repeats = counts.first_accept_probs()
    assert _multiset(probs, repeats) == trials
    assert np.unique(repeats).size <= int(repeats.max()).bit_length() + 40  # + the loose groups' own counts
    merged = counts.first_accept_groups[0][1]
    assert np.ndim(merged) == 1 and np.unique(merged).size > 40  # without the split: one group per distinct count
