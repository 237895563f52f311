"""Exact oracles against brute-force enumeration and hand-computed cases."""

import itertools

import numpy as np
import pytest

from specdec_check import MarkovModel, exact, mix
from specdec_check.scenarios import corpus_bigram


def _model(seed, vocab=3, order=1):
    rng = np.random.default_rng(seed)
    t = rng.random((vocab + 1,) * order + (vocab,)) ** 2
    return MarkovModel(t / t.sum(-1, keepdims=True), order=order)


def _brute_joint(model, length, prompt):
    vocab = model.vocab_size
    out = np.zeros((vocab,) * length)
    for seq in itertools.product(range(vocab), repeat=length):
        tokens = np.array([list(prompt) + list(seq)])
        probs = model(tokens)[0]
        prob = 1.0
        for i, x in enumerate(seq):
            pos = len(prompt) + i - 1
            prob *= probs[pos, x] if pos >= 0 else model.start_probs()[x]
        out[seq] = prob
    return out


def _brute_step(target, draft, gamma, prompt):
    """Simulate the rejection rule's law by summing over every draft path and branch."""
    vocab = target.vocab_size
    law = {}

    def rows(prefix):
        toks = np.array([list(prompt) + list(prefix)]) if (prompt or prefix) else np.full((1, 1), -1)
        return target(toks)[0, -1], draft(toks)[0, -1]

    def walk(prefix, weight):
        p, q = rows(prefix)
        if len(prefix) == gamma:
            for y in range(vocab):
                law[tuple(prefix) + (y,)] = law.get(tuple(prefix) + (y,), 0) + weight * p[y]
            return
        resid = np.maximum(p - q, 0)
        z = resid.sum()
        for x in range(vocab):
            if q[x] == 0:
                continue
            acc = min(1.0, p[x] / q[x])
            walk(prefix + [x], weight * q[x] * acc)
            if acc < 1:
                for y in range(vocab):
                    if resid[y] > 0:
                        key = tuple(prefix) + (y,)
                        law[key] = law.get(key, 0) + weight * q[x] * (1 - acc) * resid[y] / z

    walk([], 1.0)
    return law


class TestJointAndMarginals:
    @pytest.mark.parametrize("order, prompt", [(1, []), (1, [2]), (2, [1, 0])])
    def test_joint_matches_brute_force(self, order, prompt):
        model = _model(order, order=order)
        np.testing.assert_allclose(exact.joint(model, 3, prompt), _brute_joint(model, 3, prompt), atol=1e-15)

    @pytest.mark.parametrize("order", [1, 2])
    def test_marginals_and_pairs_match_joint(self, order):
        model = mix(_model(10, order=order), _model(11, order=1), 0.4)
        j = exact.joint(model, 4, [1])
        m = exact.marginals(model, 4, [1])
        pairs = exact.pair_marginals(model, 4, [1])
        for t in range(4):
            np.testing.assert_allclose(m[t], j.sum(axis=tuple(a for a in range(4) if a != t)), atol=1e-14)
        for t in range(3):
            np.testing.assert_allclose(pairs[t], j.sum(axis=tuple(a for a in range(4) if a not in (t, t + 1))),
                                       atol=1e-14)

    def test_hand_computed_two_state_chain(self):
        # order-1 over {0, 1}: start -> (0.25, 0.75); after 0 -> (0.5, 0.5); after 1 -> (0.1, 0.9)
        model = MarkovModel(np.array([[0.5, 0.5], [0.1, 0.9], [0.25, 0.75]]))
        j = exact.joint(model, 2)
        assert j[1, 1] == pytest.approx(0.75 * 0.9)
        assert exact.marginals(model, 2)[1, 0] == pytest.approx(0.25 * 0.5 + 0.75 * 0.1)


class TestStepLaw:
    @pytest.mark.parametrize("gamma, prompt", [(1, []), (2, [0]), (3, [2, 1])])
    def test_matches_brute_force_and_sums_to_one(self, gamma, prompt):
        target, draft = _model(20), _model(21)
        law = exact.step_law(target, draft, gamma, prompt)
        assert law.sum() == pytest.approx(1.0, abs=1e-12)
        brute = _brute_step(target, draft, gamma, prompt)
        for seq, prob in brute.items():
            code = exact.encode_emitted(np.array([list(seq) + [-1] * (gamma + 1 - len(seq))]), 3)[0]
            assert law[code] == pytest.approx(prob, abs=1e-14)
        assert len(brute) == np.count_nonzero(law)

    def test_step_law_sums_to_one_on_random_models(self):
        for seed in range(5):
            target, draft = _model(100 + seed, vocab=4, order=2), _model(200 + seed, vocab=4)
            assert exact.step_law(target, draft, 2, [seed % 4]).sum() == pytest.approx(1.0, abs=1e-12)

    def test_codec_round_trip(self):
        rng = np.random.default_rng(3)
        codes = rng.integers(0, exact.num_step_outcomes(5, 3), size=200)
        np.testing.assert_array_equal(exact.encode_emitted(exact.decode_emitted(codes, 5, 3), 5), codes)

    def test_path_laws_sum_to_one_and_agree(self):
        rng = np.random.default_rng(4)
        dp = rng.random((6, 3, 5)); dp /= dp.sum(-1, keepdims=True)
        tp = rng.random((6, 4, 5)); tp /= tp.sum(-1, keepdims=True)
        ids = rng.integers(0, 5, size=(6, 3))
        law = exact.path_step_law(ids, dp, tp)
        np.testing.assert_allclose(law.sum(axis=(1, 2)), 1.0)
        np.testing.assert_allclose(law.sum(-1), exact.path_accepted_count_law(ids, dp, tp))

    def test_accepted_count_law_and_tokens_per_step(self):
        target, draft = corpus_bigram(0.5)
        law = exact.accepted_count_law(target, draft, 3, [3])
        step = exact.step_law(target, draft, 3, [3])
        lengths = (exact.decode_emitted(np.arange(step.size), 18, 3) >= 0).sum(1)
        np.testing.assert_allclose(law, np.bincount(lengths - 1, weights=step), atol=1e-12)
        assert exact.exact_tokens_per_step(target, draft, 3, [3]) == pytest.approx(step @ lengths)

    @pytest.mark.parametrize("bad, error", [(-1, ValueError), (1.5, TypeError)])
    def test_bad_gamma(self, bad, error):
        target, draft = _model(0), _model(1)
        with pytest.raises(error, match="gamma"):
            exact.step_law(target, draft, bad)


class TestRatesAndSpeedups:
    def test_equation_1_and_theorem_3_8(self):
        assert exact.expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)
        assert exact.expected_tokens_per_step(1.0, 4) == 5.0
        assert exact.expected_speedup(0.5, 2, 0.25) == pytest.approx(1.75 / 1.5)
        assert exact.improves_walltime(0.3, 0.25) and not exact.improves_walltime(0.2, 0.25)

    def test_acceptance_rate_with_context_and_stationary(self):
        target = MarkovModel(np.array([[0.5, 0.5], [0.1, 0.9], [0.25, 0.75]]))
        draft = MarkovModel(np.array([[0.9, 0.1], [0.5, 0.5], [0.5, 0.5]]))
        assert exact.acceptance_rate(target, draft, [0]) == pytest.approx(0.6)
        # stationary law of the target chain: pi0 = 0.1 / (0.5 + 0.1) = 1/6
        pi0 = 1 / 6
        expected = pi0 * 0.6 + (1 - pi0) * (0.1 + 0.5)
        assert exact.acceptance_rate(target, draft) == pytest.approx(expected, abs=1e-10)

    def test_expected_target_calls_single_token(self):
        target, draft = _model(5), _model(6)
        assert exact.expected_target_calls(target, draft, 2, 1) == pytest.approx(1.0)
        mean, var = exact.expected_target_calls(target, draft, 0, 3, with_variance=True)
        assert mean == pytest.approx(3.0) and var == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------- properties over drawn models
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specdec_check.strategies import markov_model_pairs, markov_models, verifier_inputs  # noqa: E402


@settings(max_examples=25)
@given(model=markov_models(max_vocab=3, max_order=2), length=st.integers(1, 3), data=st.data())
def test_joint_is_the_chain_rule_for_any_model(model, length, data):
    """``P(x_1..x_L) = prod_t model(prompt + x_<t)[x_t]`` against brute force, any drawn model and prompt."""
    prompt = data.draw(st.lists(st.integers(0, model.vocab_size - 1), max_size=2), label="prompt")
    np.testing.assert_allclose(exact.joint(model, length, prompt), _brute_joint(model, length, prompt), atol=1e-14)


@settings(max_examples=25)
@given(pair=markov_model_pairs(max_vocab=3, max_order=2), gamma=st.integers(1, 2), data=st.data())
def test_step_law_is_the_rejection_rule_for_any_pair(pair, gamma, data):
    """Leviathan et al. 2023 (Algorithm 1): the enumerated step law equals the sum over every draft path
    and branch, and sums to 1, for every drawn target/draft pair (identical, disjoint, one-hot, ...)."""
    prompt = data.draw(st.lists(st.integers(0, pair.vocab_size - 1), max_size=2), label="prompt")
    vocab = pair.vocab_size
    law = exact.step_law(pair.target, pair.draft, gamma, prompt)
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    brute = _brute_step(pair.target, pair.draft, gamma, prompt)
    for seq, prob in brute.items():
        code = exact.encode_emitted(np.array([list(seq) + [-1] * (gamma + 1 - len(seq))]), vocab)[0]
        assert law[code] == pytest.approx(prob, abs=1e-13)
    assert np.count_nonzero(law > 1e-15) <= len(brute)


@given(vocab=st.integers(1, 6), gamma=st.integers(0, 3), data=st.data())
def test_emitted_codec_round_trips(vocab, gamma, data):
    codes = data.draw(st.lists(st.integers(0, exact.num_step_outcomes(vocab, gamma) - 1), min_size=1, max_size=20))
    codes = np.array(codes)
    np.testing.assert_array_equal(exact.encode_emitted(exact.decode_emitted(codes, vocab, gamma), vocab), codes)


@settings(max_examples=50)
@given(inputs=verifier_inputs(min_gamma=1, max_gamma=3, max_rows=3, max_vocab=5))
def test_path_laws_sum_to_one_and_agree_for_any_inputs(inputs):
    law = exact.path_step_law(inputs.draft_token_ids, inputs.draft_probs, inputs.target_probs)
    np.testing.assert_allclose(law.sum(axis=(1, 2)), 1.0)
    np.testing.assert_allclose(law.sum(-1), exact.path_accepted_count_law(inputs.draft_token_ids, inputs.draft_probs,
                                                                          inputs.target_probs), atol=1e-15)
