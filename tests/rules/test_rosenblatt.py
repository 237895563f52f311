"""Completion by the target and the Rosenblatt transform, against brute force and exact identities.

Calibration: each law assertion is ``stats.identity_test`` (exact, conservative) at alpha 1e-9 on
counts that are exactly multinomial (one fixed prompt and emitted prefix per test, i.i.d. rows);
fixed seeds make the tests deterministic. 33 such assertions expect no rejection: a correct
implementation fails one for a random seed with probability below 4e-8.

The exact-identity argument for the rule-agnostic test: given a completed sequence s, its PIT values
are independent, ``u_j ~ Uniform[F_j(s_j - 1), F_j(s_j)]`` under the target conditionals, so the law
of the binned PIT vector is a fixed linear map K of the completed law. K(target joint) is the
uniform law on the cells (Rosenblatt), which ``test_pit_cell_map_sends_the_target_to_uniform`` checks
to 1e-12; for a lossy rule K(completed law) is computed exactly and the sampled cells follow it.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _rules_helpers import ALPHA  # noqa: E402

from specdec_check import HashedMarkovModel, MarkovModel, bugs, exact, stats  # noqa: E402
from specdec_check.models import last_token_probs  # noqa: E402
from specdec_check.samplers import _rosenblatt, block_verify, categorical, complete_with_target  # noqa: E402
from specdec_check.samplers import numpy_verify, rosenblatt_pit  # noqa: E402

BINS = 4  # PIT bins per position: 4^3 = 64 joint cells at L = 3


def _pair(seed, vocab, order):
    rng = np.random.default_rng(seed)
    shape = (vocab + 1,) * order
    return (MarkovModel(rng.dirichlet(np.full(vocab, 0.5), size=shape), order=order),
            MarkovModel(rng.dirichlet(np.full(vocab, 0.5), size=shape), order=order))


def _law_after(model, prompt, prefix):
    tokens = np.array([list(prompt) + list(prefix)], dtype=np.int64).reshape(1, -1)
    if tokens.shape[1] == 0:
        tokens = np.full((1, 1), -1, dtype=np.int64)
    return last_token_probs(model, tokens)[0]


def _step_inputs(target, draft, prompt, gamma, n, rng):
    """n rows drafting gamma tokens from ``draft`` after ``prompt``, scored by ``target`` along each path."""
    vocab = target.vocab_size
    tokens = np.broadcast_to(np.asarray(prompt, dtype=np.int64), (n, len(prompt))).copy()
    ids = np.empty((n, gamma), dtype=np.int64)
    dq = np.empty((n, gamma, vocab))
    tp = np.empty((n, gamma + 1, vocab))
    for i in range(gamma + 1):
        tp[:, i] = target.last_probs(tokens)
        if i == gamma:
            break
        dq[:, i] = draft.last_probs(tokens)
        ids[:, i] = categorical(dq[:, i], rng)
        tokens = np.concatenate([tokens, ids[:, i:i + 1]], axis=1)
    return ids, dq, tp


def _cells(values, bins=BINS):
    """Joint bin index of each row's PIT vector."""
    idx = np.minimum((values * bins).astype(np.int64), bins - 1)
    return idx @ (bins ** np.arange(values.shape[1] - 1, -1, -1))


def _pit_cell_law(sequence_law, target, prompt, bins=BINS):
    """K(sequence law): exact law of the binned PIT vector when sequences follow ``sequence_law`` [V]*L."""
    vocab, length = sequence_law.shape[0], sequence_law.ndim
    edges = np.arange(bins + 1) / bins
    out = np.zeros(bins**length)
    for seq in itertools.product(range(vocab), repeat=length):
        if sequence_law[seq] == 0:
            continue
        per_position = []
        for j in range(length):
            row = _law_after(target, prompt, seq[:j])
            lo, hi = row[: seq[j]].sum(), row[: seq[j] + 1].sum()
            overlap = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0.0, None)
            per_position.append(overlap / (hi - lo))
        cell = per_position[0]
        for part in per_position[1:]:
            cell = np.outer(cell, part).reshape(-1)
        out += sequence_law[seq] * cell
    return out


# --- completion ------------------------------------------------------------------------------------

@pytest.fixture(params=["keyed", "chunked", "callable"])
def target_form(request, monkeypatch):
    if request.param == "chunked":
        monkeypatch.setattr(_rosenblatt, "_TABLE_CELLS", 0)
        monkeypatch.setattr(_rosenblatt, "_CHUNK_CELLS", 3 * 4096)  # chunks of 4096 rows
    return request.param


@pytest.mark.parametrize("prompt, prefix", [([2, 0], [1]), ([], [0, 2]), ([1], [2, 2, 1])])
def test_completion_follows_the_target_conditionals(target_form, prompt, prefix):
    target, _ = _pair(1, 3, 2)
    model = target if target_form != "callable" else (lambda tokens: target(tokens))
    length, n = 4, 30_000
    emitted = np.full((n, 3), -1, dtype=np.int64)
    emitted[:, : len(prefix)] = prefix
    out = complete_with_target(emitted, generator=np.random.default_rng(len(prefix)), target=model,
                               prompts=np.array(prompt, dtype=np.int64), length=length)
    assert out.shape == (n, length) and (out[:, : len(prefix)] == prefix).all()
    rest = length - len(prefix)
    law = exact.joint(target, rest, list(prompt) + list(prefix)).reshape(-1)
    codes = out[:, len(prefix):] @ (3 ** np.arange(rest - 1, -1, -1))
    result = stats.identity_test(np.bincount(codes, minlength=3**rest), law, alpha=ALPHA)
    assert not result.rejected, result


def test_completion_with_fixed_rows_and_mixed_lengths():
    rng = np.random.default_rng(4)
    length, vocab, n = 3, 4, 40_000
    rows = rng.dirichlet(np.full(vocab, 0.7), size=(1, length))
    target_probs = np.ascontiguousarray(np.broadcast_to(rows, (n, length, vocab)))
    emitted = np.full((n, length), -1, dtype=np.int64)
    emitted[:, 0] = 1
    emitted[n // 2:, 1] = 3  # half the rows emitted two tokens
    out = complete_with_target(emitted, generator=np.random.default_rng(5), target_probs=target_probs)
    first, second = out[: n // 2], out[n // 2:]
    assert (second[:, 1] == 3).all()
    law = np.outer(rows[0, 1], rows[0, 2]).reshape(-1)
    res = stats.identity_test(np.bincount(first[:, 1] * vocab + first[:, 2], minlength=vocab**2), law, alpha=ALPHA)
    assert not res.rejected, res
    res = stats.identity_test(np.bincount(second[:, 2], minlength=vocab), rows[0, 2], alpha=ALPHA)
    assert not res.rejected, res


def test_completion_input_errors():
    target, _ = _pair(1, 3, 1)
    gen = np.random.default_rng(0)
    with pytest.raises(ValueError, match="followed only by -1"):
        complete_with_target(np.array([[0, -1, 1]]), generator=gen, target=target)
    with pytest.raises(ValueError, match="followed only by -1"):
        complete_with_target(np.array([[-1, -1]]), generator=gen, target=target)
    with pytest.raises(ValueError, match="at least the width"):
        complete_with_target(np.array([[0, 1, 2]]), generator=gen, target=target, length=2)
    with pytest.raises(ValueError, match="not both"):
        complete_with_target(np.array([[0]]), generator=gen, target=target, target_probs=np.ones((1, 1, 3)) / 3)
    with pytest.raises(TypeError, match="Generator"):
        complete_with_target(np.array([[0]]), generator=1, target=target)
    with pytest.raises(ValueError, match="B = 2 rows"):
        complete_with_target(np.array([[0], [1]]), generator=gen, target=target, prompts=np.zeros((3, 1), int))


# --- the transform ---------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["model", "rows"])
def test_pit_formula_against_brute_force(form):
    target, _ = _pair(2, 3, 2)
    rng = np.random.default_rng(6)
    sequences = rng.integers(0, 3, size=(50, 3))
    prompts = rng.integers(-1, 3, size=(50, 2))
    if form == "model":
        result = rosenblatt_pit(sequences, generator=np.random.default_rng(7), target=target, prompts=prompts)
        rows = np.array([[_law_after(target, [t for t in prompts[b] if t >= 0], sequences[b, :j]) for j in range(3)]
                         for b in range(50)])
    else:
        rows = rng.dirichlet(np.full(3, 0.5), size=(50, 3))
        result = rosenblatt_pit(sequences, generator=np.random.default_rng(7), target_probs=rows)
    u = np.random.default_rng(7).random((50, 3))
    taken = np.take_along_axis(rows, sequences[..., None], axis=2)[..., 0]
    below = np.array([[rows[b, j, : sequences[b, j]].sum() for j in range(3)] for b in range(50)])
    expected = np.where(taken > 0, below + u * taken, np.nan)
    np.testing.assert_allclose(result.values, expected, atol=1e-12)
    assert result.impossible == bool((taken == 0).any())
    np.testing.assert_array_equal(result.support_violations, np.argwhere(taken == 0))


def test_pit_reports_impossible_tokens():
    rows = np.array([[[0.5, 0.5, 0.0], [0.2, 0.0, 0.8]]])
    result = rosenblatt_pit(np.array([[2, 1]]), generator=np.random.default_rng(0), target_probs=rows)
    assert result.impossible and result.support_violations.tolist() == [[0, 0], [0, 1]]
    assert np.isnan(result.values).all()


def test_pit_cell_map_sends_the_target_to_uniform():
    target, _ = _pair(3, 3, 2)
    cells = _pit_cell_law(exact.joint(target, 3, [1]), target, [1])
    np.testing.assert_allclose(cells, 1.0 / BINS**3, atol=1e-12)


# --- the pipeline: step, completion, transform -------------------------------------------------------

def _pipeline_cells(verify, target, draft, prompt, gamma, n, seed):
    rng = np.random.default_rng(seed)
    ids, dq, tp = _step_inputs(target, draft, prompt, gamma, n, rng)
    out = verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=rng)
    prompts = np.asarray(prompt, dtype=np.int64)
    done = complete_with_target(out, generator=rng, target=target, prompts=prompts)
    pit = rosenblatt_pit(done, generator=rng, target=target, prompts=prompts)
    assert not pit.impossible
    return np.bincount(_cells(pit.values), minlength=BINS ** (gamma + 1)), done


LOSSLESS = {"standard": numpy_verify, "block": block_verify, "sampled_match": bugs.sampled_match,
            "one_hot": bugs.one_hot_rule_on_stochastic_draft}


@pytest.mark.parametrize("name", sorted(LOSSLESS))
def test_pit_is_uniform_for_lossless_rules(name):
    target, draft = _pair(8, 3, 2)
    counts, _ = _pipeline_cells(LOSSLESS[name], target, draft, [0, 2], 2, 100_000, seed=9)
    result = stats.identity_test(counts, np.full(BINS**3, BINS**-3.0), alpha=ALPHA)
    assert not result.rejected, (name, result)


def test_pit_is_uniform_for_block_verification_at_large_vocabulary():
    """V = 1000 (hashed order-1 models, keyed tables), gamma = 2: the 4^3 joint PIT cells stay uniform."""
    target = HashedMarkovModel.random(1000, num_prototypes=8, seed=1)
    draft = HashedMarkovModel.random(1000, num_prototypes=8, seed=2)
    counts, _ = _pipeline_cells(block_verify, target, draft, [5], 2, 10_000, seed=10)
    result = stats.identity_test(counts, np.full(BINS**3, BINS**-3.0), alpha=ALPHA)
    assert not result.rejected, result


def test_pit_of_a_lossy_rule_follows_its_exact_cell_law():
    """SGLang threshold_acc = 0.5: the exact completed law is K-mapped to a non-uniform cell law; the
    sampled cells follow it (not rejected) and the uniformity test rejects them."""
    target, draft = _pair(8, 3, 2)
    prompt, gamma = [0, 2], 2
    verify = bugs.sglang_threshold_verifier(threshold_acc=0.5)
    completed = exact.completed_law(verify.step_law, target=target, draft=draft, gamma=gamma, prompt=prompt)
    tv = 0.5 * np.abs(completed - exact.joint(target, gamma + 1, prompt)).sum()
    cell_law = _pit_cell_law(completed, target, prompt)
    cell_tv = 0.5 * np.abs(cell_law - BINS**-3.0).sum()
    assert 0.01 < cell_tv <= tv + 1e-12  # binning can only lose distance (data processing)
    counts, done = _pipeline_cells(verify, target, draft, prompt, gamma, 100_000, seed=11)
    assert not stats.identity_test(counts, cell_law, alpha=ALPHA).rejected
    assert stats.identity_test(counts, np.full(BINS**3, BINS**-3.0), alpha=ALPHA).rejected
    codes = done @ (3 ** np.arange(gamma, -1, -1))
    assert not stats.identity_test(np.bincount(codes, minlength=27), completed.reshape(-1), alpha=ALPHA).rejected
