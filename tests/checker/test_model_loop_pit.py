"""The model-loop kind's transform and oracle: the randomized PIT with the vocabulary ranked by the law (exact under
the law, sensitive to laws too peaked or too flat), and the oracle of a module with gpt-fast's cached interface."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check.checker.model_loop.laws import ranked_pit


def _laws_with_ties(rng, rows, vocab):
    laws = rng.integers(0, 4, size=(rows, vocab)).astype(float)  # repeated values: ties, and zeros
    laws[:, 0] += 1.0  # no all-zero row
    return laws / laws.sum(axis=1, keepdims=True)


def test_the_ranked_transform_tiles_the_unit_interval_so_it_is_exactly_uniform_under_the_law():
    # u = below(x) + U p(x): under the law, token x has probability p(x) and its u is uniform on [below, below + p);
    # u is exactly Uniform(0, 1) iff these intervals tile [0, 1) with no gap and no overlap, ties and zeros included.
    rng = np.random.default_rng(0)
    for law in _laws_with_ties(rng, 50, 12):
        tokens = np.flatnonzero(law > 0)
        laws = np.repeat(law[None], tokens.size, axis=0)
        low, high = ranked_pit(laws, tokens, np.zeros(tokens.size)), ranked_pit(laws, tokens, np.ones(tokens.size))
        order = np.argsort(low)
        assert np.allclose(high - low, law[tokens])
        assert low[order][0] == 0.0 and np.isclose(high[order][-1], 1.0)
        assert np.allclose(low[order][1:], high[order][:-1])  # each interval starts where the last ended


def test_the_ranked_transform_puts_the_most_probable_token_first_and_breaks_ties_by_id():
    law = np.array([[0.1, 0.3, 0.3, 0.2, 0.1]])
    start = [float(ranked_pit(law, np.array([x]), np.zeros(1))[0]) for x in range(5)]
    assert start == pytest.approx([0.8, 0.0, 0.3, 0.6, 0.9])


def test_a_law_too_peaked_moves_the_ranked_transform_towards_zero_and_one_too_flat_towards_one():
    # Exact expectations, no sampling: E[u] = sum_x r(x) (below(x) + p(x) / 2) for tokens drawn from r instead of p.
    rng = np.random.default_rng(1)
    law = rng.dirichlet(np.ones(40))
    laws = np.repeat(law[None], 40, axis=0)
    tokens = np.arange(40)
    middle = ranked_pit(laws, tokens, np.full(40, 0.5))
    peaked, flat = law ** 2 / (law ** 2).sum(), np.sqrt(law) / np.sqrt(law).sum()
    assert law @ middle == pytest.approx(0.5)
    assert peaked @ middle < 0.5 - 0.05 and flat @ middle > 0.5 + 0.05


class CachedModule:
    """A module with gpt-fast's interface (``setup_caches``, ``forward(idx, input_pos)``): logits at a position read
    the cache at every position up to it, so a pass that is not over the whole sequence, or caches shared with the
    loop, give other logits."""

    def __new__(cls, vocab):
        torch = pytest.importorskip("torch")

        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(vocab, vocab)
                self.config = type("Args", (), {"vocab_size": vocab})()
                self.cache, self.max_batch_size, self.max_seq_length = None, -1, -1

            def setup_caches(self, max_batch_size, max_seq_length):
                if self.max_seq_length >= max_seq_length and self.max_batch_size >= max_batch_size:
                    return
                self.max_batch_size, self.max_seq_length = max_batch_size, max_seq_length
                self.cache = torch.zeros(max_batch_size, max_seq_length, vocab)

            def forward(self, idx, input_pos):
                assert self.cache is not None, "Caches must be initialized first"
                self.cache[: idx.shape[0], input_pos] = self.embed(idx)
                prefix = torch.cumsum(self.cache[: idx.shape[0]], dim=1)
                return prefix[:, input_pos]

        torch.manual_seed(0)
        return Module()


def test_the_oracle_of_a_cached_module_is_its_full_pass_on_caches_of_its_own_and_is_not_counted():
    torch = pytest.importorskip("torch")
    from specdec_check.models import from_torch_module

    module = CachedModule(7)
    module.setup_caches(1, 16)
    with torch.no_grad():  # the loop's state (gpt-fast's generate runs under no_grad): a cache holding a prefix
        module(torch.tensor([[1, 2, 3]]), torch.arange(3))
    loop_cache = module.cache.clone()
    oracle = from_torch_module(module)
    calls = []
    module.register_forward_hook(lambda *_: calls.append(1))  # the checker's counter, hooked after the oracle
    sequences = [(4, 5, 6, 0), (1, 1, 2, 3)]
    laws = oracle.position_laws(sequences)
    with torch.no_grad():
        expected = torch.softmax(torch.cumsum(module.embed(torch.tensor(sequences)), 1).double(), -1).numpy()
    assert oracle.vocab_size == 7 and np.allclose(np.stack(laws), expected)
    assert torch.equal(module.cache, loop_cache) and module.max_batch_size == 1  # the loop's caches untouched
    assert calls == []  # the oracle's passes are not the target's
    assert oracle.position_laws([(2, 2)])[0].shape == (2, 7)  # another shape: caches set up again


def test_the_oracles_vectorised_top_k_is_the_exact_law_row_by_row():
    from specdec_check.exact._token_law import TokenProcessing, token_laws
    from specdec_check.models._oracle import _tempered_top_k

    rng = np.random.default_rng(2)
    logits = np.round(rng.normal(0, 2, size=(200, 40)), 1)  # rounded: ties, also at the top-k boundary
    logits[::7, :5] = -np.inf  # masked tokens
    logits[3, 10:] = -np.inf  # fewer tokens alive than k
    processing = TokenProcessing(order=("temperature", "top_k", "top_p", "min_p"), ties="keep")
    for temperature, k in [(1.0, 0), (0.7, 3), (1.3, 8), (0.3, 39)]:
        exact = token_laws(logits, processing=processing, temperature=np.full(200, temperature),
                           top_k=np.full(200, k), top_p=np.ones(200), min_p=np.zeros(200)).law
        assert np.allclose(_tempered_top_k(logits, temperature, k), exact, rtol=0, atol=1e-15)
