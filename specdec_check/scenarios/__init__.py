"""Ready-made target/draft scenarios: the corpus-bigram example and the checker's battery."""

from ._corpus import CORPUS, corpus_bigram, corpus_vocabulary

__all__ = ["CORPUS", "corpus_bigram", "corpus_vocabulary"]
