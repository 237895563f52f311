"""One catalogued sampler: what it is, where the bug comes from, and what the checker must say."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["EXPECTED", "FLAGGED", "NO_REPORT", "CatalogueEntry", "KindEntry", "check_expected", "ok_outcomes"]

NO_REPORT = "class of bug, no specific report"

#: What an entry's verdict should be: a wrong law (``failure``), an exact law that accepts less than it could
#: (``inefficiency``), an edge case of tiny probability reported with its rate (``warning``: every coin exactly
#: 0), or an exact control (``pass``).
EXPECTED = ("failure", "inefficiency", "warning", "pass")


def check_expected(expected: str) -> None:
    if expected not in EXPECTED:
        raise ValueError(f"expected must be one of {EXPECTED}; got {expected!r}.")


#: The outcomes that flag a bug: a failure, an inefficiency, or a raise.
FLAGGED = ("failure", "inefficiency", "error")


def ok_outcomes(expected: str, *, inefficiency_may_fail: bool = False) -> tuple:
    """The outcomes that are right for an entry that expects ``expected``: a bug is flagged, an exact entry
    is never failed (an inefficiency or an edge-case warning is exactly what it says), a control passes;
    inconclusive is never right. ``inefficiency_may_fail``: an inefficient entry that departs from the rule
    it is judged under (a chain verifier without bonus tokens, judged under Algorithm 1's step law) is
    rightly failed too."""
    if expected == "failure" or (expected == "inefficiency" and inefficiency_may_fail):
        return FLAGGED
    return (expected,)


@dataclass(frozen=True)
class CatalogueEntry:
    """One catalogued sampler.

    kind: "verifier" or "generator"; expected: one of :data:`EXPECTED`, "failure" (wrong law),
    "inefficiency" (exact law, fewer tokens per step or per target call) or "pass" (exact control).
    rule: the rule the checker should judge the entry under: "standard" (the sampler claims
    Leviathan et al.'s Algorithm 1, so any departure from it counts) or "any" (only the law
    of the completed output counts, so any lossless rule passes; see ``bugs.rule_catalogue``).
    ``expected`` is the verdict under that rule.
    """

    name: str
    kind: str
    sampler: Callable
    mechanism: str
    source: str
    expected: str
    rule: str = "standard"

    def __post_init__(self):
        if self.kind not in ("verifier", "generator"):
            raise ValueError(f"kind must be 'verifier' or 'generator'; got {self.kind!r}.")
        from .._settings import RULES

        check_expected(self.expected)
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}; got {self.rule!r}.")

    @property
    def label(self) -> str:
        """The kind, as the mutation table names it."""
        return self.kind

    @property
    def ok_outcomes(self) -> tuple:
        """The right outcomes: an inefficient chain entry departs from the standard rule's step law, so a
        failure detects it too (:func:`ok_outcomes`)."""
        return ok_outcomes(self.expected, inefficiency_may_fail=True)

    @property
    def judged_rule(self) -> str:
        return self.rule

    def report(self, mode: str, seed: int):
        """The checker's report on this entry under its own rule."""
        from ..checker import check_generator, check_verifier

        if self.kind == "verifier":
            return check_verifier(self.sampler, mode=mode, seed=seed, rule=self.rule)
        return check_generator(self.sampler, mode=mode, seed=seed)


@dataclass(frozen=True)
class KindEntry:
    """One catalogued sampler of a kind judged under its standard rule only (ragged verifiers, token samplers):
    ``expected`` "failure" (a bug) or "pass" (an exact control); a subclass says how to check it (``report``)."""

    name: str
    sampler: Callable
    mechanism: str
    source: str
    expected: str = "failure"
    kind: str = ""

    def __post_init__(self):
        check_expected(self.expected)

    @property
    def label(self) -> str:
        return self.kind

    @property
    def ok_outcomes(self) -> tuple:
        return ok_outcomes(self.expected)

    @property
    def judged_rule(self) -> str:
        return "standard"

    def report(self, mode: str, seed: int):
        raise NotImplementedError
