"""One catalogued sampler: what it is, where the bug comes from, and what the checker must say."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["NO_REPORT", "CatalogueEntry"]

NO_REPORT = "class of bug, no specific report"


@dataclass(frozen=True)
class CatalogueEntry:
    """One catalogued sampler.

    kind: "verifier" or "generator"; expected: "failure" (wrong law), "inefficiency"
    (exact law, fewer tokens per step or per target call) or "pass" (exact control).
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
        if self.expected not in ("failure", "inefficiency", "pass"):
            raise ValueError(f"expected must be 'failure', 'inefficiency' or 'pass'; got {self.expected!r}.")
        if self.rule not in ("standard", "any"):
            raise ValueError(f"rule must be 'standard' or 'any'; got {self.rule!r}.")
