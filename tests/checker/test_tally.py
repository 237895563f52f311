"""Evidence in tokens: the law tallies name the tokens behind their most deviant cells (issue 14, item 6)."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check import stats
from specdec_check.checker.core.tally import BIN_SAMPLE, CountTally, PitTally, law_evidence


def test_worst_cells_are_pearson_residuals_largest_first():
    cells = stats.worst_cells(np.array([10, 50, 40]), np.array([1.0, 1.0, 2.0]), m=2)
    assert [c["index"] for c in cells] == [1, 0]  # expected 25, 25, 50: residuals -3, 5, -1.41
    assert cells[0]["residual"] == pytest.approx(5.0) and cells[0]["expected"] == pytest.approx(25.0)
    assert stats.worst_cells(np.zeros(3, dtype=int), np.ones(3)) == ()


@pytest.mark.parametrize("counts, probs, message", [
    (np.array([1, 2]), np.array([1.0, 1.0, 1.0]), "one length"),
    (np.array([-1, 2]), np.array([1.0, 1.0]), "non-negative"),
    (np.array([1, 2]), np.array([np.nan, 1.0]), "finite"),
    (np.array([1, 2]), np.array([0.0, 0.0]), "not all zero"),
])
def test_worst_cells_rejects_bad_input(counts, probs, message):
    with pytest.raises(ValueError, match=message):
        stats.worst_cells(counts, probs)


def test_a_count_tally_names_its_cells():
    tally = CountTally("s", "joint", np.full(4, 0.25), alpha=1e-6, sequential=False,
                       describe=lambda code: f"tokens ({code // 2}, {code % 2})")
    tally.add_counts(np.array([10, 10, 10, 70]))
    rec = tally.record()
    assert not rec.passed and rec.details["worst_cells"][0]["cell"] == "tokens (1, 1)"
    assert law_evidence(rec).startswith("; most deviant: tokens (1, 1), seen 70 time(s) vs 25 expected")


def test_a_pit_tally_over_a_wide_law_names_the_tokens_in_its_worst_bin():
    # V = 1000 is too wide to count per token: the tally keeps a sample of (bin, token) pairs instead.
    rng = np.random.default_rng(7)
    vocab, n = 1000, 20_000
    law = rng.dirichlet(np.ones(vocab))
    sampled = law.copy()
    sampled[123] += 0.2  # the sampler puts 20% extra mass on token 123
    sampled /= sampled.sum()
    tally = PitTally("s", "first_token", bins=16, alpha=1e-6, sequential=False, describe=lambda y: f"token {y}")
    for _ in range(n // 1000):
        samples = rng.choice(vocab, size=1000, p=sampled)
        tally.add(samples, np.broadcast_to(law, (1000, vocab)), rng)
    rec = tally.record()
    assert not rec.passed
    worst = rec.details["worst_cells"][0]
    assert worst["cell"].startswith(f"PIT bin {worst['index']} of 16")
    assert worst["tokens_seen"][0]["cell"] == "token 123", worst["tokens_seen"]
    assert worst["tokens_sampled"] <= BIN_SAMPLE
    assert "token 123 (" in law_evidence(rec)


def test_a_pit_tally_over_a_small_law_counts_per_token():
    rng = np.random.default_rng(3)
    law = np.array([0.5, 0.3, 0.2])
    tally = PitTally("s", "stop_conditional", bins=8, alpha=1e-6, sequential=False, describe=lambda y: f"final token {y}")
    for _ in range(20):
        samples = rng.choice(3, size=500, p=[0.3, 0.3, 0.4])
        tally.add(samples, np.broadcast_to(law, (500, 3)), rng)
    rec = tally.record()
    assert not rec.passed
    assert rec.details["worst_tokens"][0]["cell"] == "final token 2"  # 0.4 seen where 0.2 is due
    assert "most deviant: final token 2" in law_evidence(rec)


def test_a_law_with_round_off_below_zero_still_records():
    # Expected counts are differences of cumulative rows: a cell of probability zero can come out
    # as -1e-17 (seen once in ~100 quick runs of the reference, where the report crashed).
    rng = np.random.default_rng(3)
    tally = PitTally("s", "final_token", bins=16, alpha=1e-6, sequential=False, describe=lambda y: f"token {y}")
    u = rng.random(500)
    tally.add_uniforms(u, categories=rng.integers(0, 3, size=500), expected=np.array([250.0, 250.0, -1e-17]))
    rec = tally.record()
    assert rec.details["expected"][2] == 0.0 and min(rec.details["expected"]) >= 0.0
    assert all(cell["cell"].startswith("token") for cell in rec.details["worst_tokens"])
