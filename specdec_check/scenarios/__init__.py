"""Ready-made target/draft scenarios: the corpus-bigram example and the checker's batteries."""

from ._battery import default_generator_battery, default_verifier_battery, markov_pair
from ._corpus import CORPUS, corpus_bigram, corpus_vocabulary
from ._scenario import GeneratorScenario, LawTables, VerifierDraw, VerifierScenario

__all__ = [
    "CORPUS",
    "GeneratorScenario",
    "LawTables",
    "VerifierDraw",
    "VerifierScenario",
    "corpus_bigram",
    "corpus_vocabulary",
    "default_generator_battery",
    "default_verifier_battery",
    "markov_pair",
]
