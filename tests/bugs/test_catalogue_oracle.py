"""The catalogue against the exact oracles directly (no checker).

Verifiers: three fixed row sets (V=5, gamma=2, peaked rows rand**3, different per row and
position, with p=0 at drafted tokens and q=0 where p>0), tiled to 210,000 rows, drafts drawn
from q. The pooled (row, accepted count, final token) counts are compared with
``exact.path_step_law`` by a G-test at alpha 1e-9 (cells with expected < 20 pooled; any draw
in a zero-probability cell rejects outright), and the first emitted token with target row 0.
Decode loops: order-1 Markov target and draft over V=3, 30,000 copies of one prompt,
4 new tokens, gamma=2, G-test of the joint law of the 4 tokens against ``exact.joint``.
Every test uses fixed seeds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _oracle import expected_cells, first_token_cells, fixed_rows, g_test, step_cells, tiled_inputs  # noqa: E402

from specdec_check.bugs import CONTROLS, GENERATOR_BUGS, VERIFIER_BUGS, catalogue  # noqa: E402
from specdec_check.exact import joint, path_step_law  # noqa: E402
from specdec_check.models import MarkovModel  # noqa: E402
from specdec_check.samplers import numpy_generate, numpy_verify  # noqa: E402

N_PER_ROW = 70_000
# The standard-rule oracle judges the entries that claim the standard rule; those under rule "any" have
# other step laws (tests/rules/ checks them against their own).
VERIFIERS = [e for e in catalogue("verifier") if e.name != "generator_ignored" and e.rule == "standard"]
# Entries whose every row has the exact law but whose rows are coupled: a pooled count of one call cannot
# see them (antithetic and stratified rows even pool closer to expectation), a pair of rows can.
COUPLED_ROWS = ("antithetic_row_pairs", "stratified_rows", "systematic_rows")


@pytest.fixture(scope="module")
def tiled():
    q, p = fixed_rows()
    group, ids, dq, tp = tiled_inputs(q, p, N_PER_ROW, seed=1)
    batch, gamma, vocab = q.shape[0], q.shape[1], p.shape[2]
    law = path_step_law(ids, dq, tp)
    tokens_expected = float((law.sum(axis=2) * (np.arange(gamma + 1) + 1)).sum())
    return dict(q=q, p=p, group=group, ids=ids, dq=dq, tp=tp, batch=batch, gamma=gamma, vocab=vocab,
                expected=expected_cells(group, ids, dq, tp, batch),
                expected_first=(np.bincount(group, minlength=batch)[:, None] * p[:, 0]).reshape(-1),
                tokens_expected=tokens_expected)


def _run(sampler, t, seed=2):
    return np.asarray(sampler(draft_token_ids=t["ids"], draft_probs=t["dq"], target_probs=t["tp"],
                              generator=np.random.default_rng(seed)))


def test_catalogue_contents():
    assert len(VERIFIER_BUGS) >= 20 and len(GENERATOR_BUGS) >= 4 and len(CONTROLS) >= 4
    names = [e.name for e in catalogue()]
    assert len(names) == len(set(names))
    for e in catalogue():
        assert e.mechanism and e.source and e.sampler.__doc__, e.name
        assert "Source" in e.sampler.__doc__ or e.expected == "pass", e.name
    assert {e.expected for e in VERIFIER_BUGS + GENERATOR_BUGS} <= {"failure", "inefficiency"}
    assert all(e.expected == "pass" for e in CONTROLS)


def test_reference_matches_oracle(tiled):
    out = _run(numpy_verify, tiled)
    assert not g_test(step_cells(out, tiled["ids"], tiled["group"], tiled["batch"], tiled["gamma"], tiled["vocab"]),
                      tiled["expected"])[0]
    assert not g_test(first_token_cells(out, tiled["group"], tiled["batch"], tiled["vocab"]), tiled["expected_first"])[0]


@pytest.mark.parametrize("e", [e for e in VERIFIERS if e.name not in COUPLED_ROWS], ids=lambda e: e.name)
def test_verifier_against_oracle(e, tiled):
    t = tiled
    out = _run(e.sampler, t)
    step_rejected, step_detail = g_test(step_cells(out, t["ids"], t["group"], t["batch"], t["gamma"], t["vocab"]),
                                        t["expected"])
    first_rejected, first_detail = g_test(first_token_cells(out, t["group"], t["batch"], t["vocab"]),
                                          t["expected_first"])
    emitted = (out >= 0).sum(axis=1)
    tokens = float(emitted.sum())
    se = float(np.sqrt(emitted.var() * emitted.size))
    if e.expected == "pass":
        assert not step_rejected, step_detail
        assert not first_rejected, first_detail
        assert abs(tokens - t["tokens_expected"]) < 6 * se
    elif e.expected == "failure":
        # rows_share_uniforms: within one call all rows share a coin, so the pooled counts are far off
        assert step_rejected, step_detail
    else:  # inefficiency: the first token keeps the target law, the step emits fewer tokens
        assert step_rejected, step_detail
        assert not first_rejected, first_detail
        assert tokens < t["tokens_expected"] - 6 * se


@pytest.mark.parametrize("name", COUPLED_ROWS)
def test_coupled_rows_have_exact_row_laws_and_dependent_pairs(name, tiled):
    """Each row's law is exact: the pooled step law of one call of 210,000 rows is not rejected. Two rows
    of one call on identical inputs whose first draft is accepted with probability 1/2 both accept or both
    reject it with probability 1/2 when independent; these do so in none of 200 two-row calls (an exact
    binomial p-value of 2 * 2^-200)."""
    from specdec_check.bugs import entry

    t, sampler = tiled, entry(name).sampler
    out = _run(sampler, t)
    rejected, detail = g_test(step_cells(out, t["ids"], t["group"], t["batch"], t["gamma"], t["vocab"]), t["expected"])
    assert not rejected, detail
    ids, q, p = np.array([[0, 3]]), np.zeros((1, 2, 6)), np.zeros((1, 3, 6))
    q[0, 0, 0] = q[0, 1, 3] = 1.0
    p[0, 0, :2], p[0, 1, 3:5], p[0, 2, :] = 0.5, 0.5, 1 / 6  # p/q = 1/2 at each draft
    rng = np.random.default_rng(3)
    agree = 0
    for _ in range(200):
        pair = np.asarray(sampler(draft_token_ids=np.repeat(ids, 2, 0), draft_probs=np.repeat(q, 2, 0),
                                  target_probs=np.repeat(p, 2, 0), generator=rng))
        agree += int((pair[0, 0] == 0) == (pair[1, 0] == 0))
    assert agree == 0


def test_generator_ignored_repeats_itself(tiled):
    from specdec_check.bugs._verifiers import generator_ignored

    a, b = _run(generator_ignored, tiled, seed=2), _run(generator_ignored, tiled, seed=3)
    assert np.array_equal(a, b)
    assert not np.array_equal(_run(numpy_verify, tiled, seed=2), _run(numpy_verify, tiled, seed=3))


def test_rows_share_uniforms_makes_identical_rows():
    from specdec_check.bugs._verifiers import rows_share_uniforms

    q, p = fixed_rows()
    ids = np.array([[2, 3]] * 64)
    dq, tp = np.repeat(q[2:3], 64, axis=0), np.repeat(p[2:3], 64, axis=0)
    bug = rows_share_uniforms(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(0))
    ref = numpy_verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(0))
    assert (bug == bug[0]).all()
    assert not (ref == ref[0]).all()


def _edge_cases():
    rng = np.random.default_rng(11)
    cases = []
    for gamma in range(1, 8):
        for batch in (1, 3):
            vocab = 6
            p = rng.random((batch, gamma + 1, vocab)) ** 3
            q = rng.random((batch, gamma, vocab)) ** 3
            cases.append((f"random-g{gamma}-b{batch}", p / p.sum(-1, keepdims=True), q / q.sum(-1, keepdims=True)))
    gamma, vocab = 3, 5
    hot = np.zeros((2, gamma + 1, vocab))
    hot[..., 2] = 1.0
    cases.append(("one-hot-both", hot, hot[:, :gamma].copy()))
    disjoint_p = np.zeros((2, gamma + 1, vocab))
    disjoint_p[..., :2] = 0.5
    disjoint_q = np.zeros((2, gamma, vocab))
    disjoint_q[..., 3:] = 0.5
    cases.append(("disjoint", disjoint_p, disjoint_q))
    same = rng.random((2, gamma + 1, vocab))
    same /= same.sum(-1, keepdims=True)
    cases.append(("p-equals-q", same, same[:, :gamma].copy()))
    return cases


@pytest.mark.parametrize("e", catalogue("verifier"), ids=lambda e: e.name)
def test_verifier_survives_edge_cases(e):
    for label, p, q in _edge_cases():
        rng = np.random.default_rng(5)
        batch, gamma, vocab = q.shape
        ids = np.stack([[rng.choice(vocab, p=q[b, i]) for i in range(gamma)] for b in range(batch)])
        for seed in range(5):
            out = np.asarray(e.sampler(draft_token_ids=ids, draft_probs=q, target_probs=p,
                                       generator=np.random.default_rng(seed)))
            assert out.shape == (batch, gamma + 1), label
            assert ((out >= -1) & (out < vocab)).all(), label
            emitted = (out >= 0).sum(axis=1)
            assert (emitted >= 1).all(), label
            assert (out >= 0)[np.arange(gamma + 1)[None, :] < emitted[:, None]].all(), label  # -1 only at the end


# --- decode loops --------------------------------------------------------------------------------

V_GEN, T_GEN, N_GEN = 3, 4, 30_000


class _CountingModel:
    """Counts the rows the target scores (one row per sequence per call)."""

    def __init__(self, model):
        self.model, self.vocab_size, self.rows = model, model.vocab_size, 0

    def __call__(self, tokens):
        self.rows += np.asarray(tokens).shape[0]
        return self.model(tokens)


@pytest.fixture(scope="module")
def markov():
    rng = np.random.default_rng(3)
    tp = rng.random((V_GEN + 1, V_GEN)) ** 4  # peaked, strongly context-dependent
    tp /= tp.sum(-1, keepdims=True)
    noise = rng.random((V_GEN + 1, V_GEN))
    dp = 0.9 * tp + 0.1 * noise / noise.sum(-1, keepdims=True)  # a draft close to the target
    target, draft = MarkovModel(tp), MarkovModel(dp)
    prompt = np.array([[1]])
    expected = joint(target, T_GEN, prompt[0]).reshape(-1) * N_GEN
    return target, draft, prompt, expected


def _generate(sampler, markov, seed=5):
    target, draft, prompt, expected = markov
    out = sampler(target=target, draft=draft, prompts=np.repeat(prompt, N_GEN, axis=0), max_new_tokens=T_GEN,
                  gamma=2, generator=np.random.default_rng(seed))
    codes = (np.asarray(out) * V_GEN ** np.arange(T_GEN)[::-1]).sum(axis=1)
    observed = np.bincount(codes, minlength=V_GEN ** T_GEN).astype(float)
    return observed, expected


def _rows_per_token(sampler, markov, seed=6, n=4_000, length=32):
    """Target rows scored per emitted token over long generations (reference: about 1 / tokens per step)."""
    target, draft, prompt, _ = markov
    counted = _CountingModel(target)
    sampler(target=counted, draft=draft, prompts=np.repeat(prompt, n, axis=0), max_new_tokens=length, gamma=2,
            generator=np.random.default_rng(seed))
    return counted.rows / (n * length)


@pytest.fixture(scope="module")
def reference_rows_per_token(markov):
    assert not g_test(*_generate(numpy_generate, markov))[0]
    return _rows_per_token(numpy_generate, markov)


@pytest.mark.parametrize("e", GENERATOR_BUGS, ids=lambda e: e.name)
def test_decode_loop_against_oracle(e, markov, reference_rows_per_token):
    rejected, detail = g_test(*_generate(e.sampler, markov))
    rows = _rows_per_token(e.sampler, markov) if e.expected == "inefficiency" else None
    if e.expected == "failure":
        assert rejected, detail
    else:  # exact law, more target work per emitted token
        assert not rejected, detail
        assert rows > 1.01 * reference_rows_per_token, (rows, reference_rows_per_token)
