"""Hypothesis' entry point for specdec-check: register the strategies' value types.

Hypothesis runs this while ``import hypothesis`` finishes. It must not touch the strategies
module's attributes: when a user imports ``specdec_check.strategies`` first, that import is
what pulls in Hypothesis, so the module is still half-initialised here. Importing it is
enough, because ``specdec_check.strategies`` registers its types at the end of its own import.
"""


def setup() -> None:
    import specdec_check.strategies  # noqa: F401  (registers on import; a no-op if importing already)
