"""The suite's API for users' own test modules: ``parametrize_with_checks``."""

from __future__ import annotations

__all__ = ["parametrize_with_checks"]


def parametrize_with_checks(*, verifiers=(), generators=(), tree_verifiers=(), ragged_verifiers=(), token_samplers=(),
                            checks=None):
    """Parametrize a test over the suite's properties for your own samplers (scikit-learn style).

    ::

        from specdec_check.suite import parametrize_with_checks

        @parametrize_with_checks(verifiers=[mypkg.kernels.verify])
        def test_my_verifier(check, specdec_ledger, specdec_checker_options):
            check(ledger=specdec_ledger, options=specdec_checker_options)  # or check()

    Ids are ``<sampler>-<property>``, so ``-k first_token`` selects one property.
    ``checks`` restricts the properties by name (see :data:`VERIFIER_PROPERTIES`,
    :data:`GENERATOR_PROPERTIES`, :data:`TREE_VERIFIER_PROPERTIES` and :data:`RAGGED_PROPERTIES`: a
    ragged verifier takes the production calling convention, logits in; :data:`TOKEN_PROPERTIES` for a token
    sampler, under the processing its ``processing`` attribute declares); a tree verifier is checked
    under the drafting scheme its ``drafting`` attribute declares (top-k when it has none). With
    the ``specdec_ledger`` fixture each statistical example takes its share of the run's
    false-alarm budget; backend, device and dtype come from the plugin's options through
    ``specdec_checker_options``.
    """
    import pytest

    from ._properties import GENERATOR_PROPERTIES, TREE_VERIFIER_PROPERTIES, VERIFIER_PROPERTIES, Check
    from ._ragged_properties import RAGGED_PROPERTIES
    from ._token_properties import TOKEN_PROPERTIES

    tables = (("verifier", verifiers, VERIFIER_PROPERTIES), ("generator", generators, GENERATOR_PROPERTIES),
              ("tree_verifier", tree_verifiers, TREE_VERIFIER_PROPERTIES),
              ("ragged_verifier", ragged_verifiers, RAGGED_PROPERTIES),
              ("token_sampler", token_samplers, TOKEN_PROPERTIES))
    if checks is not None:
        unknown = [c for c in checks if not any(c in table for _, _, table in tables)]
        if unknown:
            raise ValueError(f"unknown check(s) {unknown}; choose from {sorted(VERIFIER_PROPERTIES)}, "
                             f"{sorted(GENERATOR_PROPERTIES)}, {sorted(TREE_VERIFIER_PROPERTIES)}, "
                             f"{sorted(RAGGED_PROPERTIES)} or {sorted(TOKEN_PROPERTIES)}.")
    params = []
    for kind, samplers, table in tables:
        names = list(table) if checks is None else [c for c in checks if c in table]
        for sampler in samplers:
            label = getattr(sampler, "__name__", type(sampler).__name__)
            for name in names:
                prop = table[name]
                marks = [pytest.mark.specdec_statistical] if prop.statistical else []
                params.append(pytest.param(Check(kind, sampler, prop), marks=marks, id=f"{label}-{name}"))
    if not params:
        raise ValueError("parametrize_with_checks needs at least one verifier, generator, tree or ragged verifier or "
                         "token sampler, and one known check.")
    return pytest.mark.parametrize("check", params)
