"""Hypothesis' entry point for specdec-check: register the suite's settings profiles.

Hypothesis runs this at the end of ``import hypothesis``, so ``specdec-quick``, ``specdec-default``,
``specdec-ci`` and ``specdec-thorough`` exist wherever Hypothesis does: a user's conftest.py can
build on them and ``--hypothesis-profile=specdec-ci`` works. It imports nothing but the suite's
session module (standard library only). The strategies' value types register themselves when
``specdec_check.strategies`` is imported, which naming those types requires anyway.
"""


def setup() -> None:
    from specdec_check.suite._session import register_profiles

    register_profiles()
