"""Hypothesis strategies for speculative-decoding samplers (``specdec_check.strategies``).

Probability vectors are built from small integer weights and normalised, so they
are exact rationals rounded once and shrink towards few tokens. Adversarial
relations between target and draft (identical, disjoint supports, one-hot rows,
zeros on either side, rows within an ulp, opposite rankings, tail-heavy rows,
vocabulary sizes one off a tile multiple) are branches the shrinker can switch
off, never frequency knobs.

>>> from specdec_check.strategies import distribution_pairs
>>> distribution_pairs(max_vocab=4).example()  # doctest: +SKIP
DistributionPair(target=[0.25 0.75], draft=[1 0], case='one_hot_draft')

The value types are registered with Hypothesis (``st.from_type``) when this package is
imported; the ``hypothesis`` entry point (:mod:`specdec_check._hypothesis_hook`) imports it.
"""

from ._configs import SpecConfig, spec_configs
from ._inputs import INPUT_CASES, VerifierInputs, verifier_inputs
from ._ragged import RaggedBatch, SampleParams, ragged_batches, sample_params
from ._models import ModelPair, hashed_markov_models, markov_model_pairs, markov_models
from ._tokens import token_tables
from ._trees import TreeCase, tree_cases, trees
from ._vectors import (
    LARGE_PAIR_CASES,
    PAIR_CASES,
    TILE_SIZES,
    DistributionPair,
    distribution_pairs,
    large_vocab_pairs,
    probability_vectors,
    vocab_sizes,
)

__all__ = [
    "DistributionPair",
    "INPUT_CASES",
    "LARGE_PAIR_CASES",
    "ModelPair",
    "PAIR_CASES",
    "RaggedBatch",
    "SampleParams",
    "SpecConfig",
    "TILE_SIZES",
    "TreeCase",
    "VerifierInputs",
    "distribution_pairs",
    "hashed_markov_models",
    "large_vocab_pairs",
    "markov_model_pairs",
    "markov_models",
    "probability_vectors",
    "ragged_batches",
    "sample_params",
    "spec_configs",
    "token_tables",
    "tree_cases",
    "trees",
    "verifier_inputs",
    "vocab_sizes",
]


def _hypothesis_setup_hook() -> None:
    """Register default strategies for this package's value types (idempotent)."""
    from hypothesis import strategies as st

    st.register_type_strategy(DistributionPair, distribution_pairs())
    st.register_type_strategy(SpecConfig, spec_configs())
    st.register_type_strategy(VerifierInputs, verifier_inputs())
    st.register_type_strategy(ModelPair, markov_model_pairs())
    st.register_type_strategy(SampleParams, sample_params())
    st.register_type_strategy(RaggedBatch, ragged_batches())
    st.register_type_strategy(TreeCase, tree_cases())


_hypothesis_setup_hook()
