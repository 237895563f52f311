"""Small scenario lists for fast end-to-end CLI tests (``--scenarios specdec_small_battery:verifier``)."""

from specdec_check.scenarios import default_generator_battery, default_verifier_battery

VERIFIER_NAMES = ("corpus-bigram", "disjoint-supports")


def verifier():
    return [s for s in default_verifier_battery() if s.name in VERIFIER_NAMES]


def generator():
    return list(default_generator_battery())[:1]
