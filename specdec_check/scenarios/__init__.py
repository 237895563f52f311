"""Ready-made target/draft scenarios: the corpus-bigram example and the checker's batteries."""

from ._battery import default_generator_battery, default_verifier_battery, markov_pair
from ._corpus import CORPUS, corpus_bigram, corpus_vocabulary
from ._ragged import RaggedDraw, RaggedRequest, RaggedScenario, default_ragged_battery
from ._scenario import GeneratorScenario, LawTables, VerifierDraw, VerifierScenario
from ._screen import OVERFLOW_TOKENS, SCREEN_PROBES, STRUCTURAL_PROBES, VerifierScreen, screen_rows

__all__ = [
    "CORPUS",
    "GeneratorScenario",
    "SCREEN_PROBES",
    "STRUCTURAL_PROBES",
    "LawTables",
    "OVERFLOW_TOKENS",
    "RaggedDraw",
    "RaggedRequest",
    "RaggedScenario",
    "VerifierDraw",
    "VerifierScenario",
    "VerifierScreen",
    "corpus_bigram",
    "corpus_vocabulary",
    "default_generator_battery",
    "default_ragged_battery",
    "default_verifier_battery",
    "markov_pair",
    "screen_rows",
]
