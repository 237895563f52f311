"""The structural screen: hand-built rows on which common verifier bugs emit impossible outputs.

The screen runs before the statistical battery, one row per call, alternating two probes.
Every check it makes is an event of probability zero under the standard rule (Leviathan
et al. 2023, Algorithm 1), so it spends no false-alarm budget, and a bug that shows on
these rows is named after one or two rows instead of a few hundred.

Each draft position ``k`` owns three tokens ``a_k, b_k, c_k`` (disjoint across positions)
and the bonus row owns the last two, so a law read from the wrong position puts mass on
tokens the right law rules out.

- ``accept-all``: ``p_k = q_k`` uniform on ``{a_k, b_k}``. Every draft is accepted with
  probability 1 and the bonus token must come from the bonus row: a rejection, a missing
  bonus or a bonus from another row is seen on the first row.
- ``partial``: ``p_k = (a: 1/4, b: 3/4)``, ``q_k = (b: 3/4, c: 1/4)``. A drafted ``b`` is
  accepted with probability 1; a drafted ``c`` (``p = 0``) is always rejected and the
  residual ``norm(max(0, p - q))`` is the point mass on ``a``. A row stops at a rejection
  with probability ``1 - (3/4)^7 = 0.87``; resampling from ``p`` instead of the residual,
  swapped operands, an inverted ratio, a residual from another position, an unnormalised
  inverse CDF or continuing after the rejection then emits an impossible token with
  probability at least 0.65 per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..samplers import categorical
from ._scenario import VerifierDraw, VerifierScenario

__all__ = ["SCREEN_GAMMA", "SCREEN_PROBES", "VerifierScreen", "screen_rows"]

SCREEN_GAMMA = 7
SCREEN_PROBES = ("accept-all", "partial")


def screen_rows(probe: str, *, gamma: int = SCREEN_GAMMA):
    """``(target_probs [gamma+1, V], draft_probs [gamma, V])`` of one screen probe, V = 3 gamma + 2."""
    if probe not in SCREEN_PROBES:
        raise ValueError(f"unknown screen probe {probe!r}; choose from {SCREEN_PROBES}.")
    vocab = 3 * gamma + 2
    target = np.zeros((gamma + 1, vocab))
    draft = np.zeros((gamma, vocab))
    for k in range(gamma):
        a, b, c = 3 * k, 3 * k + 1, 3 * k + 2
        if probe == "accept-all":
            target[k, [a, b]] = draft[k, [a, b]] = 0.5
        else:
            target[k, a], target[k, b] = 0.25, 0.75
            draft[k, b], draft[k, c] = 0.75, 0.25
    target[gamma, [vocab - 2, vocab - 1]] = 0.5
    return target, draft


@dataclass(frozen=True, eq=False)
class VerifierScreen(VerifierScenario):
    """The structural screen as a scenario: ``row_budget`` one-row calls alternating the probes.

    Build it with :meth:`default`; the checker runs it with impossible-event checks only.
    """

    row_budget: int = 16

    @classmethod
    def default(cls, *, row_budget: int = 16) -> "VerifierScreen":
        rows = [screen_rows(p) for p in SCREEN_PROBES]
        return cls("screen", None, None, SCREEN_GAMMA, 1, prompt_pool=len(rows),
                   description="structural screen: accept-all and partial-overlap probes, one row per call, "
                               "impossible events only", fixed_target_probs=np.stack([r[0] for r in rows]),
                   fixed_draft_probs=np.stack([r[1] for r in rows]), row_budget=row_budget)

    @property
    def probes(self) -> int:
        return int(self.fixed_target_probs.shape[0])

    def draw(self, rng, law_rows=None, *, pool=None, rows=None, tables=None, probe: int = 0) -> VerifierDraw:
        """One row of probe ``probe`` with its drafts drawn from the probe's draft rows."""
        cast = law_rows if law_rows is not None else (lambda r: r)
        target = cast(self.fixed_target_probs[probe: probe + 1])
        draft = cast(self.fixed_draft_probs[probe: probe + 1])
        ids = np.empty((1, self.gamma), dtype=np.int64)
        for j in range(self.gamma):
            ids[:, j] = categorical(draft[:, j], rng)
        return VerifierDraw(ids, draft, target, np.full(1, probe))
