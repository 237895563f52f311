"""The structural screen: hand-built rows on which common verifier bugs emit impossible outputs.

The screen runs before the statistical battery. Its structural part alternates two probes,
one row per call, and checks only events of probability zero under the standard rule
(Leviathan et al. 2023, Algorithm 1), spending no false-alarm budget; four exact
small-sample tests on the other probes follow, one alpha share each. A bug that shows on
these rows is named after 1 to 90 rows instead of a few hundred.

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
- ``spread``: a one-hot draft the target rules out, and a target row uniform on 1,000 other
  tokens: the first draft is always rejected and the recovered token is uniform on 1,000
  tokens, so two independent steps on this row agree with probability 1/1000. Four pairs of
  identical rows in one call, then four pairs of calls with fresh generators, test that rows
  and calls draw independent randomness (exact Poisson-binomial collision counts).
- ``near-one``: one-hot drafts ``q_k = delta(a_k)`` with ``p_k(a_k) = 0.99`` (the rest on
  ``b_k``). Any lossless verifier emits ``a_0`` first with probability 0.99 (the first token's
  law is ``p_0``), so six rows with six ``a_0`` are expected; a rule that rejects whenever
  ``p < q`` emits none (an exact binomial test of the first-token law).
- ``half``: one-hot drafts with ``p_k / q_k = 1/2`` at every position: all seven drafts are
  accepted with probability ``2^-7``; a rule that reuses one uniform across a row's positions
  accepts all seven with probability 1/2 (an exact test on 24 rows of the accepted count).
- ``overflow``: one-hot drafts with ``p_k(x_k) = 0.9``; the residual is uniform on 8 other
  tokens (mass 0.1). A recovered token is the last of them with probability 1/8; sampling the
  unnormalised residual by inverse CDF puts the overflow (probability 0.9) there (an exact
  test on 28 rows of the final token given a rejection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._tables import categorical
from ._scenario import VerifierDraw, VerifierScenario

__all__ = ["OVERFLOW_MASS", "OVERFLOW_TOKENS", "SCREEN_GAMMA", "SCREEN_PROBES", "SCREEN_VOCAB", "STRUCTURAL_PROBES", "VerifierScreen", "screen_rows"]

SCREEN_GAMMA = 7
SCREEN_VOCAB = 1024
SCREEN_PROBES = ("accept-all", "partial", "spread", "near-one", "half", "overflow")
#: Residual tokens per position of the overflow probe, and its residual mass.
OVERFLOW_TOKENS, OVERFLOW_MASS = 8, 0.1
#: Probes the structural part alternates over (the spread probe serves the collision tests).
STRUCTURAL_PROBES = 2


def screen_rows(probe: str, *, gamma: int = SCREEN_GAMMA, vocab_size: int = SCREEN_VOCAB):
    """``(target_probs [gamma+1, V], draft_probs [gamma, V])`` of one screen probe.

    Position ``k`` of the accept-all and partial probes uses tokens ``3k .. 3k+2``; their bonus
    row the two tokens after those; the spread probe's first target row the tokens above.
    """
    if probe not in SCREEN_PROBES:
        raise ValueError(f"unknown screen probe {probe!r}; choose from {SCREEN_PROBES}.")
    bonus = [3 * gamma, 3 * gamma + 1]
    if vocab_size < 3 * gamma + 2 + 1000:
        raise ValueError(f"the screen needs vocab_size >= {3 * gamma + 1002}; got {vocab_size}.")
    target = np.zeros((gamma + 1, vocab_size))
    draft = np.zeros((gamma, vocab_size))
    for k in range(gamma):
        a, b, c = 3 * k, 3 * k + 1, 3 * k + 2
        if probe == "partial":
            target[k, a], target[k, b] = 0.25, 0.75
            draft[k, b], draft[k, c] = 0.75, 0.25
        else:
            target[k, [a, b]] = draft[k, [a, b]] = 0.5
    target[gamma, bonus] = 0.5
    if probe in ("near-one", "half"):
        ratio = 0.99 if probe == "near-one" else 0.5
        for k in range(gamma):
            target[k] = draft[k] = 0.0
            draft[k, 3 * k] = 1.0
            target[k, 3 * k], target[k, 3 * k + 1] = ratio, 1.0 - ratio
    if probe == "overflow":
        width = OVERFLOW_TOKENS + 1
        for k in range(gamma):
            target[k] = draft[k] = 0.0
            draft[k, width * k] = 1.0
            target[k, width * k] = 1.0 - OVERFLOW_MASS
            target[k, width * k + 1: width * (k + 1)] = OVERFLOW_MASS / OVERFLOW_TOKENS
    if probe == "spread":
        target[0] = 0.0
        target[0, 3 * gamma + 2: 3 * gamma + 1002] = 1.0 / 1000
        draft[0] = 0.0
        draft[0, 0] = 1.0
    return target, draft


@dataclass(frozen=True, eq=False)
class VerifierScreen(VerifierScenario):
    """The screen as a scenario: ``row_budget`` one-row calls alternating the structural probes, then
    ``pairs`` within-call and ``pairs`` across-call pairs of spread rows.

    Build it with :meth:`default`; the checker runs it with impossible-event checks only.
    """

    row_budget: int = 16
    pairs: int = 4
    near_one_rows: int = 6
    half_rows: int = 24
    overflow_rows: int = 28

    @classmethod
    def default(cls, *, row_budget: int = 16, pairs: int = 4) -> "VerifierScreen":
        rows = [screen_rows(p) for p in SCREEN_PROBES]
        return cls("screen", None, None, SCREEN_GAMMA, 1, prompt_pool=len(rows),
                   description="screen: accept-all and partial-overlap probes one row per call (impossible "
                               "events), then collision pairs on a spread row", fixed_target_probs=np.stack([r[0] for r in rows]),
                   fixed_draft_probs=np.stack([r[1] for r in rows]), row_budget=row_budget, pairs=pairs)


    def draw(self, rng, law_rows=None, *, pool=None, rows=None, tables=None, calls: int = 1,
             probe: int = 0, layout=None) -> VerifierDraw:
        """One row of probe ``probe`` with its drafts drawn from the probe's draft rows (one call); ``layout`` as
        in :meth:`VerifierScenario.draw`."""
        if calls != 1:
            raise ValueError(f"the screen draws one call at a time; got calls={calls}.")
        if layout is not None:
            return self.draw(rng, law_rows, pool=pool, rows=rows, tables=tables, probe=probe).head(layout)
        cast = law_rows if law_rows is not None else (lambda r: r)
        # Copies: a sampler that writes into its inputs cannot change the screen's rows for later calls.
        target = np.array(cast(self.fixed_target_probs[probe: probe + 1]))
        draft = np.array(cast(self.fixed_draft_probs[probe: probe + 1]))
        ids = np.empty((1, self.gamma), dtype=np.int64)
        for j in range(self.gamma):
            ids[:, j] = categorical(draft[:, j], rng)
        return VerifierDraw(ids, draft, target, np.full(1, probe))
