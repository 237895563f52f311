"""A sampler kind: what it is called with, on which scenarios, by which checks. It has no loop of its own.

A kind (chain verifier, tree verifier, ragged verifier, decode loop; one folder each) is an object
with a few methods that :func:`specdec_check.checker.core.loop.run_scenario` calls in one fixed
order for every kind:

``caller(ctx, sampler)`` builds inputs and parses outputs (the guarded call itself is shared);
``counts()`` the step counts its checks share; ``check_classes(ctx)`` its checks in start/finish
order; ``law_budget(ctx, checks)`` the calls of the law loop; ``feed(ctx, caller, calls, reuse)``
its blocks of inputs; ``step(ctx, caller, counts, block, outputs)`` one block's outputs as a step the
checks absorb; ``classify(ctx, counts)`` records to findings; ``summary(ctx, counts, elapsed)``.
A new kind is a folder that fills these in.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._settings import KINDS, RULES

__all__ = ["Kind", "PlannedTest"]


@dataclass(frozen=True)
class PlannedTest:
    """A statistical test a check will run on one scenario: ``name`` identifies it within the
    scenario (and labels its alpha share), ``check`` is the selectable check that owns it."""

    name: str
    check: str


def rule_defaults(checks: tuple, standard_only: tuple) -> dict:
    """The checks each rule selects by default: the rule-agnostic "completed" test costs calls the standard
    rule's own tests make redundant, so it runs by default under "any" only (selectable under both); under
    "any" the ``standard_only`` checks (the standard rule's own laws) do not apply."""
    return {RULES[0]: tuple(c for c in checks if c != "completed"),
            RULES[1]: tuple(c for c in checks if c not in standard_only)}


class Kind:
    """The protocol of a sampler kind (see the module docstring); subclasses set the class attributes.

    ``name`` keys :data:`specdec_check._settings.KINDS` (its command, plugin option and references);
    ``role`` names the sampler in findings ("the tree verifier raised ..."); ``keywords`` the call's
    keywords; ``checks`` the selectable checks; ``rules`` the rules it can be judged under (a subset
    of :data:`specdec_check._settings.RULES`); ``rule_checks`` the checks each rule selects by default
    (None: every check); ``splittable``: whether a law loop may run as block ranges (shards).
    """

    name: str = ""
    role: str = ""
    keywords: tuple = ()
    scenario_type: type = object
    checks: tuple = ()
    rules: tuple = RULES[:1]
    rule_checks: dict | None = None
    splittable: bool = False
    #: What the report's ``screen`` field says for this kind when it has no screen.
    no_screen: str = "not a verifier check"
    #: Whether a subcommand runs this kind (its repro lines are then command lines; else the Python call).
    has_command: bool = True

    @property
    def option_kind(self) -> str:
        """The :data:`~specdec_check._settings.KINDS` entry whose options this kind takes (its own name)."""
        return self.name

    @property
    def api_function(self) -> str:
        """The ``check_*`` function that runs this kind (repro lines in Python)."""
        return f"check_{self.name}"

    def repro_keywords(self) -> tuple:
        """Keyword arguments a Python repro line needs besides the sampler and the scenario (``name=<what>``
        strings; none for the kinds whose scenarios carry everything)."""
        return ()

    # -- naming --------------------------------------------------------------------------------------
    @property
    def command(self) -> str:
        """The command line that runs this kind (its repro lines start with it)."""
        return KINDS[self.name].command

    def __reduce__(self):  # kinds are values: rebuilt from their class and declared arguments on a worker
        return (type(self), self.arguments())

    def arguments(self) -> tuple:
        return ()

    def __eq__(self, other):
        return type(other) is type(self) and other.arguments() == self.arguments()

    def __hash__(self):
        return hash((type(self), self.arguments()))

    # -- checks and rules ----------------------------------------------------------------------------
    def allowed_checks(self, rule: str = RULES[0]) -> tuple:
        """The checks a run may select under ``rule``: all under "standard"; the rule-agnostic ones otherwise."""
        return tuple(self.checks) if rule == RULES[0] or not self.rule_checks else tuple(self.rule_checks[rule])

    def default_checks(self, rule: str = RULES[0]) -> tuple:
        """The checks a run selects when ``checks=`` is not given."""
        return tuple(self.rule_checks[rule]) if self.rule_checks else tuple(self.checks)

    def scaled_mode(self, mode):
        """The :class:`~specdec_check._settings.Mode` this kind runs under for a named mode (or a ``--tv`` one):
        the same, but for kinds whose samplers are cheap enough to be held to far smaller TVs (token samplers)."""
        return mode

    def validate(self, options) -> None:
        """Raise ``ValueError`` for validated options this kind cannot run under (a backend it has no path for)."""

    # -- the battery ---------------------------------------------------------------------------------
    def default_battery(self) -> list:
        raise NotImplementedError

    def prepare(self, scenarios, selection) -> tuple:
        """``(scenarios, screen)``: the scenarios to run (the default battery for None) and what the report's
        ``screen`` field says."""
        return (self.default_battery() if scenarios is None else list(scenarios)), self.no_screen

    def plan(self, scenario, options) -> list:
        """The scenario's :class:`PlannedTest` s under ``options`` (each spends one alpha share)."""
        return [test for cls in self.check_classes_for(scenario, options) for test in cls.plan(scenario, options)]

    def check_classes_for(self, scenario, options) -> tuple:
        """The check classes of ``scenario`` in start/finish order (a ``Classify`` among them)."""
        raise NotImplementedError

    # -- one scenario's run (see the module docstring) -------------------------------------------------
    def skip_reason(self, scenario) -> str | None:
        """Why ``scenario`` cannot run under this kind (None: it can)."""
        return None

    def degenerate(self, scenario) -> bool:
        """Whether ``scenario``'s shape lies outside the contract's main domain (a crash there is robustness)."""
        return False

    def caller(self, ctx, sampler):
        raise NotImplementedError

    def counts(self):
        raise NotImplementedError

    def law_budget(self, ctx, checks) -> tuple:
        """``(calls, reuse)`` of the scenario's whole law loop (``reuse`` calls per block of inputs)."""
        raise NotImplementedError

    def feed(self, ctx, caller, calls: int, reuse: int):
        """Yield ``(block, windows)``: a block of inputs and the draws of the calls it serves now."""
        raise NotImplementedError

    def step(self, ctx, caller, counts, block, outputs):
        """One block's ``outputs`` (``[(out, parsed), ...]``, one per window) as the step its checks absorb;
        None after a finding that stops the scenario."""
        raise NotImplementedError

    def classify(self, ctx, counts) -> None:
        """Turn the scenario's rejected tests into findings."""

    def summary(self, ctx, counts, elapsed: float):
        raise NotImplementedError

    # -- after a failure -----------------------------------------------------------------------------
    def diagnosable(self, scenario) -> bool:
        """Whether the rule-agnostic diagnosis can run on ``scenario`` after a standard-rule failure."""
        return False
