"""Properties of a token sampler (temperature / top-k / top-p / min-p kernel), for the installed suite.

``sample(*, logits | probs, <steps>, [indices,] generator)`` comes from the ``specdec_token_sampler`` fixture
(``--specdec-token-sampler``, ``SPECDEC_TOKEN_SAMPLER``, ini ``specdec_token_sampler``; default the numpy
reference), declared by its ``processing`` attribute (default :class:`~specdec_check.exact.TokenProcessing`).
Each example is a :func:`~specdec_check.strategies.token_tables` table with ties common. The contract property
(shapes, every token inside its row's support, greedy rows, inputs untouched) spends no alpha; the law and
randomness properties run :func:`~specdec_check.checker.check_token_sampler` on the table at the suite's
resolution (:data:`SUITE_TV`) and spend their example's share of the run's false-alarm budget.
"""

from __future__ import annotations

from hypothesis import note

from ._properties import Property, _checker_options, _fail, _name, _python_repro, seeds

__all__ = ["SUITE_TV", "TOKEN_PROPERTIES", "TokenProperty"]

#: The TV each example's law test is sized for: a drawn table has at most 4 x 8 cells, so ~40k outputs per
#: example (a tenth of a second for a cheap kernel), and the suite's power comes from its many examples.
SUITE_TV = 0.05


class TokenProperty(Property):
    """A :class:`~specdec_check.suite._properties.Property` of a token sampler (``test_token_<name>``)."""

    @property
    def test_name(self) -> str:
        return f"test_token_{self.name}"


def _tables(options: dict) -> dict:
    from specdec_check.exact import TokenProcessing
    from specdec_check.strategies import token_tables

    return {"table": token_tables(options.get("processing") or TokenProcessing()), "seed": seeds()}


def _check(checks):
    def run(sample, *, table, seed: int, alpha: float, options: dict) -> None:
        from specdec_check.checker import check_token_sampler, mode_for_tv

        mode = mode_for_tv(SUITE_TV, "quick")
        report = check_token_sampler(sample, scenarios=[table], mode=mode, checks=list(checks), seed=seed,
                                     alpha=alpha, processing=table.processing, name=_name(sample),
                                     **_checker_options(options, kind="token_sampler"))
        note(f"{checks}: {table!r} seed={seed} alpha={alpha:.3g} verdict={report.verdict}")
        if report.failures:
            repro = _python_repro(
                "import numpy as np, pkgutil; from specdec_check import check_token_sampler; "
                "from specdec_check.checker import mode_for_tv; from specdec_check.exact import TokenProcessing; "
                "from specdec_check.scenarios import TokenScenario; "
                f"s = pkgutil.resolve_name({_name(sample)!r}); t = {table.source()}; "
                f"print(check_token_sampler(s, scenarios=[t], processing=t.processing, mode=mode_for_tv({SUITE_TV}, "
                f"'quick'), checks={list(checks)!r}, seed={seed}, alpha={alpha!r}).summary())")
            _fail(f"{_name(sample)} fails the token {'/'.join(checks)!r} property",
                  {"table": repr(table), "seed": seed, "alpha": f"{alpha:.3g}"}, repro, report.failures)

    run.__name__ = f"token_{'_'.join(checks)}"
    return run


TOKEN_PROPERTIES = {
    p.name: p for p in [
        TokenProperty("contract", "token_sampler", False, _check(("contract", "impossible")), _tables,
                      "one token per output, inside its row's processed support (greedy rows: the argmax); "
                      "inputs untouched"),
        TokenProperty("law", "token_sampler", True, _check(("token_law",)), _tables,
                      "the outputs follow each row's exact processed law"),
        TokenProperty("randomness", "token_sampler", True, _check(("determinism", "independence")), _tables,
                      "the same generator state gives the same outputs; outputs are independent across calls and "
                      "within a call"),
    ]
}
