"""Tests of specdec_check.strategies: invariants, bounds, validation, and that every adversarial branch is reachable.

One class per strategy, in the style of xarray's ``tests/test_strategies.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from specdec_check.models import HashedMarkovModel, MarkovModel
from specdec_check.strategies import (
    INPUT_CASES,
    LARGE_PAIR_CASES,
    PAIR_CASES,
    TILE_SIZES,
    DistributionPair,
    ModelPair,
    SpecConfig,
    VerifierInputs,
    distribution_pairs,
    hashed_markov_models,
    large_vocab_pairs,
    markov_model_pairs,
    markov_models,
    probability_vectors,
    spec_configs,
    verifier_inputs,
    vocab_sizes,
)

bounds = st.tuples(st.integers(1, 12), st.integers(1, 12)).map(sorted)
FIND = settings(max_examples=2000, database=None, suppress_health_check=list(HealthCheck))


class _Reached(Exception):
    pass


def reachable(strategy, condition, max_examples=2000):
    """Like Hypothesis' internal find_any: some example satisfies ``condition`` (no shrinking)."""

    @settings(FIND, max_examples=max_examples, phases=[Phase.generate], deadline=None)
    @given(strategy)
    def probe(value):
        if condition(value):
            raise _Reached

    try:
        probe()
    except _Reached:
        return
    raise AssertionError(f"no example of {strategy!r} satisfied the condition in {max_examples} tries")


def is_law(vec, atol=1e-12):
    vec = np.asarray(vec)
    return vec.dtype == np.float64 and np.isfinite(vec).all() and (vec >= 0).all() and abs(vec.sum() - 1) < atol


def is_ragged(v):
    return v > 1 and any(v % t in (1, t - 1) for t in TILE_SIZES if t <= v + 1)


class TestVocabSizes:
    @given(st.data(), bounds)
    def test_bounds(self, data, lo_hi):
        lo, hi = lo_hi
        v = data.draw(vocab_sizes(min_vocab=lo, max_vocab=hi))
        assert lo <= v <= hi

    def test_ragged_sizes_reachable(self):
        reachable(vocab_sizes(min_vocab=100, max_vocab=5000), lambda v: v % 128 in (1, 127))
        reachable(vocab_sizes(min_vocab=100_000, max_vocab=200_000), lambda v: v == 128256)

    @pytest.mark.parametrize("kwargs", [{"min_vocab": 0}, {"min_vocab": 5, "max_vocab": 2}, {"max_vocab": 2.5}])
    def test_invalid(self, kwargs):
        with pytest.raises(InvalidArgument):
            vocab_sizes(**kwargs).example()


class TestProbabilityVectors:
    @given(st.data(), bounds, st.integers(1, 4), st.integers(1, 40))
    def test_invariants_and_bounds(self, data, lo_hi, min_support, max_weight):
        lo, hi = lo_hi
        hi = max(hi, min_support)
        vec = data.draw(probability_vectors(min_vocab=lo, max_vocab=hi, min_support=min_support,
                                            max_weight=max_weight))
        assert is_law(vec)
        assert max(lo, min_support) <= vec.size <= hi
        assert (vec > 0).sum() >= min_support
        assert not vec.flags.writeable
        # built from integer weights <= max(max_weight, V - 1): bounded ratio between positive entries
        assert vec.max() / vec[vec > 0].min() <= max(max_weight, vec.size - 1) + 1e-9

    @given(st.data(), st.integers(1, 8), st.integers(1, 8))
    def test_support_bounds(self, data, vocab, max_support):
        vec = data.draw(probability_vectors(vocab_size=vocab, max_support=max_support, allow_tail_heavy=False))
        assert vec.size == vocab
        assert 1 <= (vec > 0).sum() <= max_support

    def test_one_hot_via_bounds(self):
        @given(probability_vectors(vocab_size=5, min_support=1, max_support=1))
        def check(vec):
            assert sorted(vec.tolist()) == [0, 0, 0, 0, 1]

        check()

    def test_branches_reachable(self):
        strat = probability_vectors(vocab_size=6)
        reachable(strat, lambda v: (v > 0).all() and v.max() <= 0.5)  # tail-heavy
        reachable(strat, lambda v: (v == 0).any())
        reachable(strat, lambda v: v.max() == 1.0)

    def test_shrinks_to_one_hot(self):
        assert find(probability_vectors(vocab_size=4), lambda v: True, settings=FIND).tolist() == [1, 0, 0, 0]

    @pytest.mark.parametrize("kwargs", [
        {"min_support": 0}, {"min_support": 3, "max_support": 2}, {"vocab_size": 2, "min_support": 3},
        {"max_vocab": 2, "min_support": 3}, {"max_weight": 0}, {"vocab_size": True}, {"allow_tail_heavy": 1},
    ])
    def test_invalid(self, kwargs):
        with pytest.raises(InvalidArgument):
            probability_vectors(**kwargs).example()

    def test_message_says_how_to_fix(self):
        with pytest.raises(InvalidArgument, match="raise max_support or lower min_support"):
            probability_vectors(min_support=3, max_support=2)


class TestDistributionPairs:
    @given(distribution_pairs(max_vocab=10))
    def test_invariants(self, pair):
        assert isinstance(pair, DistributionPair)
        assert is_law(pair.target_probs, 1e-9) and is_law(pair.draft_probs, 1e-9)
        assert pair.target_probs.shape == pair.draft_probs.shape
        assert pair.case in PAIR_CASES
        assert 0.0 <= pair.acceptance <= 1.0 + 1e-12
        assert abs(pair.tv - (1 - pair.acceptance)) < 1e-9
        assert not pair.target_probs.flags.writeable

    @given(distribution_pairs(max_vocab=10))
    def test_case_semantics(self, pair):
        p, q = pair.target_probs, pair.draft_probs
        if pair.case == "identical":
            assert np.array_equal(p, q)
        elif pair.case == "disjoint":
            assert not ((p > 0) & (q > 0)).any()
        elif pair.case == "one_hot_target":
            assert p.max() == 1.0
        elif pair.case == "one_hot_draft":
            assert q.max() == 1.0
        elif pair.case == "zeros":
            assert ((p == 0) & (q > 0)).any() and ((q == 0) & (p > 0)).any()
        elif pair.case == "near_equal":
            assert np.all(np.abs(p - q) <= np.spacing(np.maximum(p, q)))
        elif pair.case == "opposite":
            top = np.flatnonzero(p == p.max())
            assert q[top].min() == q.min()
        elif pair.case == "tail_heavy":
            assert (p > 0).all() and (q > 0).all() and p.max() <= 0.5 + 1e-12 or p.size == 1

    @given(st.data(), bounds)
    def test_vocab_bounds(self, data, lo_hi):
        lo, hi = lo_hi
        pair = data.draw(distribution_pairs(min_vocab=lo, max_vocab=max(hi, 2)))
        assert lo <= pair.vocab_size <= max(hi, 2)

    @pytest.mark.parametrize("case", PAIR_CASES)
    def test_each_case_reachable(self, case):
        reachable(distribution_pairs(), lambda pair: pair.case == case)

    def test_near_equal_residual_can_vanish(self):
        # p - q sums to zero (or one ulp) under rounding: the residual law is degenerate.
        reachable(distribution_pairs(cases=["near_equal"]),
                  lambda pair: np.maximum(pair.target_probs - pair.draft_probs, 0).sum() == 0)
        reachable(distribution_pairs(cases=["near_equal"]),
                  lambda pair: 0 < np.maximum(pair.target_probs - pair.draft_probs, 0).sum() < 1e-15)

    def test_ragged_vocab_reachable(self):
        reachable(distribution_pairs(min_vocab=10, max_vocab=40), lambda pair: pair.vocab_size in (15, 17, 31, 33))

    @given(distribution_pairs(cases=["disjoint", "identical"]))
    def test_cases_restrict(self, pair):
        assert pair.case in ("disjoint", "identical")

    def test_shrinks_to_generic(self):
        assert find(distribution_pairs(), lambda pair: True, settings=FIND).case == "generic"

    def test_compact_repr(self):
        pair = find(distribution_pairs(min_vocab=20, max_vocab=20), lambda p: True, settings=FIND)
        assert repr(pair).startswith("DistributionPair(V=20") and len(repr(pair)) < 100

    @pytest.mark.parametrize("kwargs", [
        {"cases": ["nope"]}, {"cases": "identical"}, {"cases": []}, {"max_vocab": 1, "cases": ["disjoint"]},
        {"vocab_size": 0}, {"min_vocab": 4, "max_vocab": 3},
    ])
    def test_invalid(self, kwargs):
        with pytest.raises(InvalidArgument):
            distribution_pairs(**kwargs).example()

    def test_vocab_one(self):
        @given(distribution_pairs(max_vocab=1))
        def check(pair):
            assert pair.target_probs.tolist() == [1.0] == pair.draft_probs.tolist()

        check()


class TestLargeVocabPairs:
    @settings(max_examples=10, deadline=None)
    @given(large_vocab_pairs(min_vocab=1000, max_vocab=40_000))
    def test_invariants(self, pair):
        assert 1000 <= pair.vocab_size <= 40_000
        assert is_law(pair.target_probs, 1e-9) and is_law(pair.draft_probs, 1e-9)
        assert pair.case in LARGE_PAIR_CASES
        assert "V=" in repr(pair)

    @pytest.mark.parametrize("case", LARGE_PAIR_CASES)
    def test_each_case_reachable(self, case):
        find(large_vocab_pairs(min_vocab=1000, max_vocab=2000), lambda p: p.case == case,
             settings=settings(FIND, max_examples=300))

    def test_invalid(self):
        with pytest.raises(InvalidArgument):
            large_vocab_pairs(min_vocab=1).example()


class TestMarkovModels:
    @given(st.data(), st.integers(1, 2), st.integers(1, 2))
    def test_bounds(self, data, a, b):
        lo, hi = sorted((a, b))
        model = data.draw(markov_models(min_vocab=2, max_vocab=5, min_order=lo, max_order=hi))
        assert isinstance(model, MarkovModel)
        assert lo <= model.order <= hi
        assert 2 <= model.vocab_size <= 5
        assert model.probs.shape == (model.vocab_size + 1,) * model.order + (model.vocab_size,)
        assert np.allclose(model.probs.sum(-1), 1)

    def test_orders_reachable(self):
        reachable(markov_models(), lambda m: m.order == 2)
        reachable(markov_models(), lambda m: m.order == 1)

    @pytest.mark.parametrize("kwargs", [{"max_order": 3}, {"min_order": 0}, {"min_vocab": 30, "max_vocab": 30,
                                                                            "min_order": 2}])
    def test_invalid(self, kwargs):
        with pytest.raises(InvalidArgument):
            markov_models(**kwargs).example()


class TestMarkovModelPairs:
    @given(markov_model_pairs())
    def test_invariants(self, pair):
        assert isinstance(pair, ModelPair)
        assert pair.target.vocab_size == pair.draft.vocab_size
        assert pair.target.order == pair.draft.order
        if pair.case == "identical":
            assert np.array_equal(pair.target.probs, pair.draft.probs)
        if pair.case == "disjoint":
            assert not ((pair.target.probs > 0) & (pair.draft.probs > 0)).any()

    @pytest.mark.parametrize("case", ["identical", "disjoint", "near_equal"])
    def test_case_reachable(self, case):
        reachable(markov_model_pairs(), lambda pair: pair.case == case)


class TestHashedMarkovModels:
    @settings(max_examples=10, deadline=None)
    @given(hashed_markov_models(min_vocab=1000, max_vocab=5000, max_prototypes=4))
    def test_invariants(self, model):
        assert isinstance(model, HashedMarkovModel)
        assert 1000 <= model.vocab_size <= 5000 and 1 <= model.num_prototypes <= 4
        assert np.allclose(model.last_probs(np.array([[1, 2]])).sum(), 1)

    def test_invalid(self):
        with pytest.raises(InvalidArgument):
            hashed_markov_models(min_order=5, max_order=5).example()


class TestSpecConfigs:
    @given(st.data(), st.tuples(st.integers(0, 6), st.integers(0, 6)).map(sorted), bounds)
    def test_bounds(self, data, g, r):
        cfg = data.draw(spec_configs(min_gamma=g[0], max_gamma=g[1], min_rows=r[0], max_rows=r[1]))
        assert isinstance(cfg, SpecConfig)
        assert g[0] <= cfg.gamma <= g[1] and r[0] <= cfg.rows_per_call <= r[1]

    def test_invalid(self):
        with pytest.raises(InvalidArgument, match="raise max_gamma or lower min_gamma"):
            spec_configs(min_gamma=3, max_gamma=1).example()
        with pytest.raises(InvalidArgument):
            spec_configs(min_rows=0).example()


class TestVerifierInputs:
    @given(verifier_inputs())
    def test_invariants(self, inputs):
        assert isinstance(inputs, VerifierInputs)
        b, g, v = inputs.rows, inputs.gamma, inputs.vocab_size
        assert inputs.draft_token_ids.shape == (b, g) and inputs.draft_token_ids.dtype == np.int64
        assert inputs.draft_probs.shape == (b, g, v)
        assert inputs.target_probs.shape == (b, g + 1, v)
        assert np.allclose(inputs.target_probs.sum(-1), 1) and np.allclose(inputs.draft_probs.sum(-1), 1)
        drafted = np.take_along_axis(inputs.draft_probs, inputs.draft_token_ids[..., None], axis=2)
        assert (drafted > 0).all()  # a drafted token has positive draft probability
        assert inputs.case in INPUT_CASES
        assert inputs.config == SpecConfig(g, b)
        kw = inputs.kwargs()
        assert kw["draft_probs"].flags.writeable and kw["draft_probs"] is not inputs.draft_probs

    @given(st.data(), st.tuples(st.integers(0, 4), st.integers(0, 4)).map(sorted),
           st.tuples(st.integers(1, 4), st.integers(1, 4)).map(sorted))
    def test_bounds(self, data, g, r):
        inputs = data.draw(verifier_inputs(min_gamma=g[0], max_gamma=g[1], min_rows=r[0], max_rows=r[1]))
        assert g[0] <= inputs.gamma <= g[1] and r[0] <= inputs.rows <= r[1]

    @given(verifier_inputs(cases=["markov_path"], min_gamma=2))
    def test_markov_path_rows_follow_the_path(self, inputs):
        # The target row after drafting x_i is the same function of x_i wherever x_i recurs.
        seen = {}
        for b in range(inputs.rows):
            for i in range(inputs.gamma):
                x = int(inputs.draft_token_ids[b, i])
                row = inputs.target_probs[b, i + 1].tobytes()
                assert seen.setdefault(x, row) == row

    @pytest.mark.parametrize("case", INPUT_CASES)
    def test_each_case_reachable(self, case):
        reachable(verifier_inputs(), lambda inputs: inputs.case == case)

    def test_gamma_zero_reachable(self):
        reachable(verifier_inputs(), lambda inputs: inputs.gamma == 0)

    def test_drafts_shrink(self):
        found = find(verifier_inputs(min_gamma=1, max_gamma=1, max_rows=1, cases=["generic"]), lambda i: True,
                     settings=FIND)
        assert found.draft_token_ids.tolist() == [[0]]

    def test_repr_is_compact(self):
        inputs = find(verifier_inputs(min_rows=2, max_rows=2, min_gamma=3, max_gamma=3), lambda i: True,
                      settings=FIND)
        assert repr(inputs) == f"VerifierInputs(B=2, gamma=3, V={inputs.vocab_size}, case={inputs.case!r})"
        from hypothesis.vendor.pretty import pretty

        assert pretty(inputs) == repr(inputs)  # falsifying examples print compactly too

    @pytest.mark.parametrize("kwargs", [
        {"min_gamma": -1}, {"min_rows": 0}, {"max_rows": 500, "max_vocab": 1000}, {"cases": ["mixed", "x"]},
        {"max_vocab": 1, "cases": ["disjoint"]},
    ])
    def test_invalid(self, kwargs):
        with pytest.raises(InvalidArgument):
            verifier_inputs(**kwargs).example()


def test_hypothesis_setup_hook_registers_types():
    from specdec_check.strategies import _hypothesis_setup_hook

    _hypothesis_setup_hook()

    @settings(max_examples=5, database=None, derandomize=True)
    @given(st.from_type(DistributionPair), st.from_type(SpecConfig))
    def registered(pair, config):
        assert isinstance(pair, DistributionPair) and isinstance(config, SpecConfig)

    registered()


def test_all_is_sorted():
    import specdec_check.strategies as s

    assert s.__all__ == sorted(s.__all__)
    assert all(hasattr(s, name) for name in s.__all__)


@pytest.mark.parametrize("first", ["specdec_check.strategies", "hypothesis"])
def test_import_order_does_not_matter(first):
    """Hypothesis runs its entry points while it is imported; importing the strategies first must still work."""
    import subprocess
    import sys

    code = (f"import {first}\n"
            "import hypothesis.strategies as st\n"
            "from specdec_check.strategies import SpecConfig\n"
            "assert st.from_type(SpecConfig) is not None\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
