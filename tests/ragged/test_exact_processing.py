"""The exact processed laws, the ragged layout and greedy decoding's output, against brute force."""

import itertools

import numpy as np
import pytest

from specdec_check._ragged_layout import ragged_layout
from specdec_check.exact import SamplingProcessing, greedy_outputs, process_logits, processed_target_probs
from specdec_check.exact._sampling_params import SORT_VOCAB

ORDERS = [("temperature",) + p for p in itertools.permutations(("top_k", "top_p", "min_p"))] + [
    ("top_p", "temperature", "top_k"), ("top_k", "top_p", "temperature")]


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def brute_law(logits, t, k, p, min_p, order):
    """The definition, one row: every filter on the law the previous steps left; top-p by enumerating subsets."""
    vocab = logits.size
    if t == 0:
        law = np.zeros(vocab)
        law[np.argmax(logits)] = 1.0
        return law
    x = logits.astype(float).copy()
    for step in order:
        if step == "temperature":
            x = x / t
        elif step == "top_k" and 0 < k < vocab:
            keep = np.zeros(vocab, bool)
            keep[np.argsort(-x)[:k]] = True
            x[~keep] = -np.inf
        elif step == "top_p" and p < 1:
            q = _softmax(x)
            best = None
            for size in range(1, vocab + 1):  # the smallest set reaching p; among those the most probable
                for subset in itertools.combinations(range(vocab), size):
                    mass = q[list(subset)].sum()
                    if mass >= p and (best is None or mass > best[0]):
                        best = (mass, subset)
                if best is not None:
                    break
            keep = np.zeros(vocab, bool)
            keep[list(best[1])] = True
            x[~keep] = -np.inf
        elif step == "min_p" and min_p > 0:
            q = _softmax(x)
            x[q < min_p * q.max()] = -np.inf
    return _softmax(x)


def test_layout_of_a_ragged_batch():
    lay = ragged_layout([2, 0, 3])
    assert lay.draft_start.tolist() == [0, 2, 2]
    assert lay.row_start.tolist() == [0, 3, 4]
    assert lay.bonus_row.tolist() == [2, 3, 7]
    assert lay.draft_row.tolist() == [0, 1, 4, 5, 6]
    assert lay.draft_request.tolist() == [0, 0, 2, 2, 2]
    assert lay.row_request.tolist() == [0, 0, 0, 1, 2, 2, 2, 2]
    assert lay.width == 4 and lay.num_rows == 8
    assert lay.padded(np.arange(5), -1).tolist() == [[0, 1, -1], [-1, -1, -1], [2, 3, 4]]
    with pytest.raises(ValueError, match=">= 0"):
        ragged_layout([1, -1])


@pytest.mark.parametrize("order", ORDERS)
def test_processed_laws_match_the_definition(order):
    rng = np.random.default_rng(ORDERS.index(order))
    processing = SamplingProcessing(order)
    for _ in range(40):
        vocab = int(rng.integers(2, 7))
        n = [int(v) for v in rng.integers(0, 3, size=int(rng.integers(1, 4)))]
        rows = sum(n) + len(n)
        logits = rng.normal(0, 2, size=(rows, vocab))
        t = rng.choice([0.0, 0.4, 1.0, 1.7], size=len(n))
        k = rng.integers(0, vocab + 1, size=len(n))
        p = rng.choice([1.0, 0.3, 0.6, 0.9], size=len(n))
        m = rng.choice([0.0, 0.05, 0.3], size=len(n))
        law = processed_target_probs(logits, n, t, k, p, m if processing.uses_min_p else None, processing=processing)
        req = ragged_layout(n).row_request
        for r in range(rows):
            i = req[r]
            expected = brute_law(logits[r], t[i], k[i], p[i], m[i] if processing.uses_min_p else 0.0, order)
            np.testing.assert_allclose(law[r], expected, atol=1e-12)


def test_large_vocabulary_path_matches_the_sorted_path():
    """Rows above SORT_VOCAB are filtered row by row with partitions; the result equals a full sort."""
    rng = np.random.default_rng(3)
    vocab = SORT_VOCAB + 904
    logits = rng.normal(0, 3, size=(6, vocab))
    t, k, p = np.full(6, 0.8), np.array([0, 5, 0, 40, 0, 0]), np.array([0.9, 1.0, 0.5, 0.95, 0.999, 1.0])
    big, margins = process_logits(logits, t, k, p, margins=True)
    for r in range(6):
        x = logits[r] / t[r]
        if k[r]:
            x = np.where(x >= np.sort(x)[-k[r]], x, -np.inf)
        q = _softmax(x)
        if p[r] < 1:
            desc = np.sort(q)[::-1]
            cum = np.cumsum(desc)
            m = 1 + np.count_nonzero(cum[:-1] < p[r])
            x = np.where(q >= desc[m - 1], x, -np.inf)
            assert margins["top_p_margin"][r] == pytest.approx(min(p[r] - (cum[m - 2] if m > 1 else 0), cum[m - 1] - p[r]))
        np.testing.assert_allclose(big[r], _softmax(x), atol=1e-12)


def test_margins_measure_the_distance_to_every_boundary():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05], [0.5, 0.3, 0.15, 0.05], [0.6, 0.25, 0.1, 0.05]]))
    _, margins = process_logits(logits, np.array([1.0, 1.0, 0.0]), np.array([2, 0, 0]), np.array([1.0, 0.7, 1.0]),
                                margins=True)
    assert margins["top_k_gap"][0] == pytest.approx(np.log(0.3 / 0.15))
    assert margins["top_p_margin"][1] == pytest.approx(0.1)  # 0.7 lies between C_1 = 0.5 and C_2 = 0.8
    assert margins["greedy_gap"][2] == pytest.approx(np.log(0.6 / 0.25))
    assert np.isinf(margins["top_p_margin"][0]) and np.isinf(margins["top_k_gap"][1])


def test_greedy_outputs_match_a_loop_over_requests():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = rng.integers(0, 4, size=int(rng.integers(1, 5)))
        lay = ragged_layout(n)
        logits = rng.normal(size=(lay.num_rows, 3))
        ids = rng.integers(0, 3, size=lay.num_drafts)
        out = greedy_outputs(ids, n, logits)
        for i, count in enumerate(n):
            emitted = []
            for j in range(count + 1):
                a = int(np.argmax(logits[lay.row_start[i] + j]))
                if j == count or ids[lay.draft_start[i] + j] != a:
                    emitted.append(a)
                    break
                emitted.append(a)
            assert out[i].tolist() == emitted + [-1] * (lay.width - len(emitted))


@pytest.mark.parametrize("kwargs, match", [
    ({"target_logits": np.full((3, 4), np.nan)}, "must be finite or -inf"),
    ({"target_logits": np.zeros((2, 4))}, r"\[T \+ B, V\]"),
    ({"temperature": [-1.0, 1.0]}, "temperature must be >= 0"),
    ({"top_p": [0.0, 1.0]}, r"top_p must lie in \(0, 1\]"),
    ({"top_k": [-1, 0]}, "top_k must be >= 0"),
    ({"min_p": [0.1, 0.0]}, "does not apply it"),
])
def test_bad_inputs_are_named(kwargs, match):
    base = {"target_logits": np.zeros((3, 4)), "num_draft_tokens": [1, 0], "temperature": [1.0, 1.0],
            "top_k": [0, 0], "top_p": [1.0, 1.0]}
    with pytest.raises(ValueError, match=match):
        processed_target_probs(**{**base, **kwargs})


def test_processing_orders_are_validated():
    assert SamplingProcessing().describe() == "temperature -> top_k -> top_p -> softmax"
    assert SamplingProcessing(("temperature", "top_p", "top_k", "min_p")).uses_min_p
    with pytest.raises(ValueError, match="lacks"):
        SamplingProcessing(("temperature", "top_k"))
    with pytest.raises(ValueError, match="repeats"):
        SamplingProcessing(("temperature", "top_k", "top_p", "top_k"))
    with pytest.raises(ValueError, match="unknown"):
        SamplingProcessing(("temperature", "top_k", "top_p", "typical_p"))
