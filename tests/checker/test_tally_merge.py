"""Issue 21: tallies of a scenario's shards merge in shard order. Counts add (the fixed-n test of the merged
record is the test of all the samples); the first shard's e-process, one mixture on the cumulative counts,
looks once more at each later shard's boundary; a later shard sends its counts only; a tally with its
describers pickles (the first shard's travels from a worker to the driver)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from specdec_check import stats
from specdec_check.checker.core.tally import CountTally, PitTally, ShardCounts, merge_evidence, shipped
from specdec_check.checker.chain.laws import ContextTokenName, emitted_namer, outcome_namer

LAW = np.array([0.4, 0.3, 0.2, 0.1])


def _pit(seed, n=3_000, *, sequential=True):
    rng = np.random.default_rng(seed)
    tally = PitTally("s", "first_token", bins=8, alpha=1e-4, sequential=sequential,
                     describe=outcome_namer("first_token", 4))
    tokens = rng.choice(4, size=n, p=LAW)
    tally.add_uniforms(rng.random(n), categories=tokens, expected=LAW * n)
    return tally, tokens


def test_merged_counts_are_the_counts_of_all_samples():
    first, tokens_a = _pit(1)
    second, tokens_b = _pit(2, sequential=False)
    whole = CountTally("s", "first_token", np.full(8, 1 / 8), alpha=1e-4)
    whole.add_counts(first.counts.copy())
    whole.add_counts(second.counts.copy())
    merged = first.merge(second.shipped())
    assert merged.n == 6_000 and np.array_equal(merged.counts, whole.counts)
    assert merged.category_counts.tolist() == np.bincount(np.concatenate([tokens_a, tokens_b]), minlength=4).tolist()
    record = merged.record()
    assert record.n == 6_000 and record.passed
    assert record.pvalue == pytest.approx(whole.record().pvalue)  # the fixed-n test sees every count


def test_merged_e_process_is_one_mixture_on_the_cumulative_counts():
    first, _ = _pit(3)
    second, _ = _pit(4, sequential=False)
    one = stats.SequentialIdentityTest(np.full(8, 1 / 8), alpha=0.5e-4)
    one.update(first.counts.copy())
    one.update(second.counts.copy())
    assert first.merge(second.shipped()).record().evalue == pytest.approx(one.e_value)


def test_a_later_shard_off_the_law_makes_the_merged_tally_reject():
    null, _ = _pit(5)
    off = PitTally("s", "first_token", bins=8, alpha=1e-4, sequential=False)
    off.add_uniforms(np.random.default_rng(6).random(3_000) ** 2)  # PIT values far from uniform
    assert not off.rejected_early and not null.rejected_early  # a later shard never rejects on its own
    merged = merge_evidence({"pit": {"first_token": null}, "law": None},
                            shipped({"pit": {"first_token": off}, "law": None}))
    assert merged["pit"]["first_token"].rejected_early and merged["law"] is None
    assert not merged["pit"]["first_token"].record().passed


def test_a_later_shard_sends_counts_only():
    tally, _ = _pit(9, sequential=False)
    sent = tally.shipped()
    assert isinstance(sent, ShardCounts) and not sent.rejected_early
    assert len(pickle.dumps(sent)) < len(pickle.dumps(tally))


def test_merging_another_test_is_refused():
    tally, _ = _pit(7)
    with pytest.raises(ValueError, match="not the same test"):
        tally.merge(PitTally("s", "first_token", bins=16, alpha=1e-4).shipped())
    with pytest.raises(ValueError, match="different tests"):
        merge_evidence({"a": None}, {"b": None})


def test_tallies_and_their_describers_pickle():
    tally, _ = _pit(8)
    back = pickle.loads(pickle.dumps(tally))
    assert back.outcome_describe(3) == "token 3" and np.array_equal(back.counts, tally.counts)
    prompts = np.array([[1, 2, -1], [0, -1, -1]])
    names = [pickle.loads(pickle.dumps(f)) for f in (outcome_namer("step_law", 5), ContextTokenName(5),
                                                     emitted_namer(prompts, 5, 2, 31))]
    assert names[0](7) == "1 draft(s) accepted, then token 2"
    assert names[1](11) == "token 1 after prompt context 2"
    assert names[2](0).startswith("context 0 (prompt [1, 2]) emitted tokens")
