"""Models: validation and the causal interface (padding on either side)."""

import numpy as np
import pytest

from specdec_check import HashedMarkovModel, MarkovModel, mix
from specdec_check.scenarios import CORPUS, corpus_bigram, corpus_vocabulary


def _table(rng, vocab, order):
    t = rng.random((vocab + 1,) * order + (vocab,))
    return t / t.sum(-1, keepdims=True)


class TestMarkovModel:
    def test_order1_causal_interface_matches_table(self):
        rng = np.random.default_rng(0)
        table = _table(rng, 4, 1)
        model = MarkovModel(table)
        tokens = np.array([[2, 0, 3], [-1, 1, 1]])
        out = model(tokens)
        assert out.shape == (2, 3, 4) and out.dtype == np.float64
        np.testing.assert_array_equal(out[0, 0], table[2])
        np.testing.assert_array_equal(out[0, 2], table[3])
        np.testing.assert_array_equal(out[1, 0], table[4])  # only padding so far: start of sequence
        np.testing.assert_array_equal(out[1, 1], table[1])

    def test_order2_left_and_right_padding_agree(self):
        rng = np.random.default_rng(1)
        table = _table(rng, 3, 2)
        model = MarkovModel(table, order=2)
        left = model(np.array([[-1, -1, 2, 1]]))
        right = model(np.array([[2, 1, -1, -1]]))
        np.testing.assert_array_equal(left[0, 3], table[2, 1])
        np.testing.assert_array_equal(right[0, 1], table[2, 1])
        np.testing.assert_array_equal(right[0, 3], table[2, 1])  # padding after the end changes nothing
        np.testing.assert_array_equal(left[0, 2], table[3, 2])  # one real token: (start, 2)

    @pytest.mark.parametrize(
        "probs, order, match",
        [
            (np.full((3, 2), 0.5)[:2], 1, "shape"),
            (np.array([[0.5, 0.5], [0.25, 0.5], [1.0, 0.0]]), 1, r"row \(1,\) sums to 0.75"),
            (np.array([[0.5, 0.5], [-0.1, 1.1], [1.0, 0.0]]), 1, "negative"),
            (np.array([[0.5, np.nan], [0.5, 0.5], [1.0, 0.0]]), 1, "non-finite"),
            (np.full((3, 2), 0.5), 0, "order"),
        ],
    )
    def test_malformed_tables_are_rejected(self, probs, order, match):
        with pytest.raises(ValueError, match=match):
            MarkovModel(probs, order=order)

    @pytest.mark.parametrize("tokens, error", [(np.array([[0, 5]]), ValueError), (np.array([[0, -2]]), ValueError),
                                               (np.array([0, 1]), ValueError), (np.array([[0.5]]), TypeError)])
    def test_bad_tokens(self, tokens, error):
        model = MarkovModel(np.full((4, 3), 1 / 3))
        with pytest.raises(error):
            model(tokens)


class TestHashedAndMixture:
    def test_hashed_model_memory_and_laws(self):
        model = HashedMarkovModel.random(128_256, num_prototypes=4, seed=0)
        assert model.prototypes.nbytes < 1e9 / 8
        out = model(np.array([[5, 7, -1]]))
        np.testing.assert_allclose(out.sum(-1), 1.0)
        np.testing.assert_array_equal(out[0, 2], out[0, 1])  # padding keeps the context

    def test_mix_is_pointwise(self):
        rng = np.random.default_rng(2)
        a, b = MarkovModel(_table(rng, 3, 1)), MarkovModel(_table(rng, 3, 1))
        tokens = np.array([[0, 2, 1]])
        np.testing.assert_allclose(mix(a, b, 0.3)(tokens), 0.3 * a(tokens) + 0.7 * b(tokens))
        fixed = np.array([0.2, 0.3, 0.5])
        np.testing.assert_allclose(mix(a, fixed, 0.25)(tokens), 0.25 * a(tokens) + 0.75 * fixed)
        with pytest.raises(ValueError, match="weight"):
            mix(a, b, 1.5)


class TestCorpusBigram:
    def test_vocabulary_and_counts(self):
        vocab = corpus_vocabulary()
        assert len(CORPUS) == 80 and len(vocab) == 18 and list(vocab) == sorted(vocab)
        target, draft = corpus_bigram(1.0)
        # hand count: "t" follows the start once ("to..."), 18 add-one cells in the start row
        t, o = vocab.index("t"), vocab.index("o")
        assert target.probs[18, t] == pytest.approx(2 / 19)
        # "o" follows "t" in "to" (x3) and "not" has "t" after "o"; count pairs "to" directly
        pairs = sum(1 for a, b in zip(CORPUS, CORPUS[1:]) if a == "t" and b == "o")
        row_total = sum(1 for a in CORPUS[:-1] if a == "t") + 18
        assert target.probs[t, o] == pytest.approx((pairs + 1) / row_total)
        np.testing.assert_allclose(draft(np.array([[t]])), target(np.array([[t]])))
        _, uni = corpus_bigram(0.0)
        counts = np.array([CORPUS.count(ch) for ch in vocab]) + 1.0
        np.testing.assert_allclose(uni(np.array([[t]]))[0, 0], counts / counts.sum())


def _keyed_models():
    rng = np.random.default_rng(5)
    first, second = MarkovModel(_table(rng, 5, 1)), MarkovModel(_table(rng, 5, 2), order=2)
    hashed = HashedMarkovModel.random(5, num_prototypes=3, order=2, seed=4)
    constant = mix(first, np.full(5, 0.2), 0.0).second
    return {"markov-1": first, "markov-2": second, "hashed": hashed, "constant": constant,
            "mix-markov-hashed": mix(second, hashed, 0.3), "mix-of-mix": mix(mix(first, constant, 0.5), hashed, 0.7)}


@pytest.mark.parametrize("name", list(_keyed_models()))
def test_law_keys_name_laws(name):
    """Equal keys mean equal laws, keys lie in [0, num_law_keys), and different laws get different keys."""
    model = _keyed_models()[name]
    contexts = np.stack(np.unravel_index(np.arange(6**2), (6, 6)), axis=1)  # every order-2 context over V=5
    keys, probs = model.law_keys(contexts), model.probs_at(contexts)
    assert keys.shape == (36,) and keys.dtype == np.int64
    assert 0 <= keys.min() and keys.max() < model.num_law_keys
    for key in np.unique(keys):
        same = probs[keys == key]
        np.testing.assert_array_equal(same, np.broadcast_to(same[0], same.shape))
    distinct_laws = np.unique(probs, axis=0).shape[0]
    assert np.unique(keys).size == distinct_laws


def test_models_without_law_keys_say_so():
    from specdec_check.models import CausalModel

    class Network(CausalModel):
        vocab_size, order = 3, 1

        def probs_at(self, contexts):
            return np.full(np.asarray(contexts).shape[:-1] + (3,), 1 / 3)

    model = Network()
    assert model.law_keys(np.zeros((2, 1), dtype=np.int64)) is None and model.num_law_keys is None
    assert mix(model, np.full(3, 1 / 3), 0.5).law_keys(np.zeros((2, 1), dtype=np.int64)) is None


# --------------------------------------------------------------------------- properties over drawn models
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specdec_check.strategies import markov_models  # noqa: E402


@settings(max_examples=40)
@given(model=markov_models(max_vocab=4, max_order=2), data=st.data())
def test_every_row_is_a_law_and_padding_on_either_side_agrees(model, data):
    """For any drawn model and sequence: rows are probability vectors, and a sequence read left-padded
    gives at its last position the row the same sequence gives right-padded at its last real token."""
    vocab = model.vocab_size
    seq = data.draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=5), label="tokens")
    pad = data.draw(st.integers(0, 3), label="padding")
    left = model(np.array([[-1] * pad + seq]))[0]
    right = model(np.array([seq + [-1] * pad]))[0]
    for rows in (left, right):
        assert rows.shape == (len(seq) + pad, vocab) and (rows >= 0).all()
        np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(left[-1], right[len(seq) - 1])
    np.testing.assert_array_equal(right[-1], right[len(seq) - 1])  # padding after the end changes nothing
