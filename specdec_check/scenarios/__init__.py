"""Ready-made target/draft scenarios: the corpus-bigram example and the checker's batteries."""

from ._battery import default_generator_battery, default_verifier_battery, markov_pair
from ._corpus import CORPUS, corpus_bigram, corpus_vocabulary
from ._ragged import RaggedDraw, RaggedRequest, RaggedScenario, default_ragged_battery
from ._token import TokenScenario, default_draft_battery, default_token_battery, round_to_dtype
from ._scenario import GeneratorScenario, LawTables, VerifierDraw, VerifierScenario
from ._screen import OVERFLOW_TOKENS, SCREEN_PROBES, STRUCTURAL_PROBES, VerifierScreen, screen_rows
from ._tree import TreeDraw, TreeScenario, chain_tree, eagle_like_tree, random_tree, star_tree
from ._tree_battery import default_tree_battery

__all__ = [
    "CORPUS",
    "GeneratorScenario",
    "SCREEN_PROBES",
    "STRUCTURAL_PROBES",
    "LawTables",
    "TreeDraw",
    "TreeScenario",
    "OVERFLOW_TOKENS",
    "RaggedDraw",
    "RaggedRequest",
    "RaggedScenario",
    "VerifierDraw",
    "VerifierScenario",
    "VerifierScreen",
    "chain_tree",
    "corpus_bigram",
    "corpus_vocabulary",
    "default_generator_battery",
    "default_ragged_battery",
    "default_draft_battery",
    "default_token_battery",
    "round_to_dtype",
    "TokenScenario",
    "default_tree_battery",
    "default_verifier_battery",
    "eagle_like_tree",
    "markov_pair",
    "random_tree",
    "screen_rows",
    "star_tree",
]
