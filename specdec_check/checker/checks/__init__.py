"""The checks of a scenario run: each one concern, over the steps a caller produces.

A check is built for one :class:`~specdec_check.checker._scenario_run.ScenarioRun`; ``plan``
(a class method) lists the statistical tests it will run on a scenario, so the run's alpha
ledger is sized before anything runs; ``start`` runs before the scenario's call loop,
``absorb`` takes each call's located :class:`~specdec_check.checker.checks._steps.Step`, and
``finish`` records its results after the loop. Each check states its power in ``power``.
"""

from ._base import Check
from ._steps import Step, StepCounts, locate

__all__ = ["Check", "Step", "StepCounts", "locate"]
