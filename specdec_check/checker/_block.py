"""One call's verifier inputs with the exact laws of its outputs, computed once, reused across calls.

Drawing [B, gamma+1, V] probability rows costs far more than a verifier that reads a few
entries per row. A block is therefore handed to the verifier for several calls, each with
a fresh generator: the tests of the stop position, the final token given it, the joint
(k, y) and the acceptances are conditional on the drafted paths (one exact law per row), and
given the inputs the outputs of different calls are independent, so they stay exact. The
first token's law (target row 0) and the step law integrated over drafts hold only over
fresh drafts (given its draft, the first token is that draft with probability a_1), so they
count the first use of each block alone.

The laws are kept as cumulative sums along the outcome axis, so the randomized PIT of a
sample costs two gathers instead of a pass over its row (Brockwell 2007).
"""

from __future__ import annotations

import sys

import numpy as np

from ..exact._enumerate import _count_law
from ..scenarios import LawTables, VerifierDraw

__all__ = ["StepOutcome", "VerifierBlock", "pit_from_bounds", "reuse_count"]

#: Largest number of calls one block of inputs serves.
MAX_REUSE = 16
#: A block is reused once a call hands over at least this many probability cells (float64: 8 MiB).
REUSE_CELLS = 1 << 20


def reuse_count(cells_per_call: int) -> int:
    """Calls served by one drawn block: 1 for small calls, up to :data:`MAX_REUSE` for huge ones.

    Small calls are cheap to draw, so each gets fresh rows (more contexts, and every call
    feeds the integrated step law). A call of ``c`` cells is reused ``c // REUSE_CELLS`` times,
    so the rows drawn per scenario stay above ``REUSE_CELLS`` per call.
    """
    return int(max(1, min(MAX_REUSE, cells_per_call // REUSE_CELLS)))


#: The largest float64 below 1: PIT values are clipped to [0, 1).
_BELOW_ONE = float(np.nextafter(1.0, 0.0))


def pit_from_bounds(lower, mass, total, uniforms, samples):
    """Randomized PIT ``u = (F(x-1) + U p(x)) / F(V-1)`` (Brockwell 2007; Czado, Gneiting & Held 2009).

    ``lower = F(x-1)`` and ``total = F(V-1)`` come from the cumulative (unnormalised) law of each
    sample's row; ``mass = p(x)`` is read from the row itself, never as a difference of cumulative
    sums (which would round a tiny positive mass to zero). Raises ``ValueError`` for a sample on
    an outcome of probability zero. numpy arrays or torch tensors (on any device) alike.
    """
    bad = ~(mass > 0) | ~(total > 0)
    if bool(bad.any()):
        i = int(np.flatnonzero(bad)[0]) if isinstance(bad, np.ndarray) else int(bad.nonzero()[0, 0])
        raise ValueError(f"support violation: sample {i} is outcome {int(samples[i])}, which has probability 0 "
                         "in its row; the sampler produced an impossible outcome.")
    return ((lower + uniforms * mass) / total).clip(max=_BELOW_ONE)


class StepOutcome:
    """One call's outputs located in the block's laws: each row's stop ``k``, final token ``y`` (-1
    clipped to 0) and the entries the checks read there (flat gathers, one pass each).

    Works on a host block (numpy) and on its device copy (torch) with the same code."""

    def __init__(self, block: "VerifierBlock", accepted, final):
        xp, vocab, gamma = block.xp, block.vocab, block.gamma
        self.stop, self.token = accepted, final.clip(min=0)
        at = block.rows * (gamma + 1) + accepted  # (row, stop) in the [B, gamma+1] index tables
        self.target = block.target_rows.reshape(-1)[block.target_row.reshape(-1)[at] * vocab + self.token]
        if gamma:  # q_k(y) at a rejection (k < gamma); unused at the bonus position
            draft_row = block.draft_row.reshape(-1)[block.rows * gamma + accepted.clip(max=gamma - 1)]
            self.draft = block.draft_rows.reshape(-1)[draft_row * vocab + self.token]
            self.mass = xp.where(accepted < gamma, (self.target - self.draft).clip(min=0.0), self.target)
        else:
            self.draft = self.target * 0.0
            self.mass = self.target
        if block.final_cum is not None:
            start = block.final_row.reshape(-1)[at] * vocab
            cum = block.final_cum.reshape(-1)
            self.lower = xp.where(self.token > 0, cum[start + (self.token - 1).clip(min=0)], 0.0)
            self.total = cum[start + vocab - 1]


def _expected(rows, weights, cum, size):
    """Expected outcome counts ``sum_i weights[i] * law[rows[i]]`` from cumulative rows (linear, then differenced)."""
    return np.diff(np.bincount(rows, weights=weights, minlength=size) @ cum, prepend=0.0)


class VerifierBlock:
    """A draw and the exact laws of one step given it (Leviathan et al. 2023, Algorithm 1).

    - ``accept`` [B, g]: ``a_i = min(1, p_i(x_i) / q_i(x_i))``;
    - ``count_law``, ``count_cdf`` [B, g+1]: ``P(K = k) = prod_{i<k} a_i (1 - a_k)``, and its cumulative sums;
    - ``first_cum``: cumulative target rows 0 (the law of the first emitted token);
    - ``final_cum``: cumulative laws of the final token given the stop position ``k``,
      unnormalised: ``max(0, p_k - q_k)`` for ``k < g`` and the bonus row ``p_g``.

    The laws live in 2-d row tables with per-(row, position) indices: with ``tables`` (the
    scenario's :meth:`~specdec_check.scenarios.VerifierScenario.law_tables`, rows keyed by
    ``draw.context_keys``) they are a few thousand distinct rows computed once per scenario,
    so a block costs O(B gamma); otherwise one row per (row, position) of the draw, O(B gamma V).
    ``*_expected`` are expected outcome counts per call (small vocabularies only, for plots).
    """

    def __init__(self, draw: VerifierDraw, *, conditional: bool, tables: LawTables | None = None,
                 plot_vocab: int = 64):
        self.draw = draw
        self.uses = 0
        self.xp, self.host = np, self
        ids = draw.draft_token_ids
        batch, gamma = ids.shape
        vocab = draw.target_probs.shape[-1]
        self.gamma, self.vocab = gamma, vocab
        self.rows = np.arange(batch)
        keyed = tables is not None and draw.context_keys is not None
        if keyed:
            keys = draw.context_keys
            self.target_rows, self.draft_rows = tables.target, tables.draft
            self.target_row, self.draft_row = keys, keys[:, :gamma]
            self.first_cum, first_row = tables.target_cum, keys[:, 0]
        else:
            self.target_rows = draw.target_probs.reshape(-1, vocab)
            self.draft_rows = draw.draft_probs.reshape(-1, vocab)
            self.target_row = self.rows[:, None] * (gamma + 1) + np.arange(gamma + 1)
            self.draft_row = self.rows[:, None] * gamma + np.arange(gamma)
            self.first_cum, first_row = np.cumsum(draw.target_probs[:, 0], axis=1), self.rows
        self.first_row = first_row
        if gamma:
            self.target_at = self.target_rows.reshape(-1)[self.target_row[:, :gamma] * vocab + ids]  # p_i(x_i)
            self.draft_at = self.draft_rows.reshape(-1)[self.draft_row * vocab + ids]  # q_i(x_i)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(self.draft_at > 0, self.target_at / np.where(self.draft_at > 0, self.draft_at, 1.0),
                                 np.where(self.target_at > 0, 1.0, 0.0))
            self.accept = np.minimum(ratio, 1.0)
        else:
            self.target_at = self.draft_at = self.accept = np.zeros((batch, 0))
        self.accept_first = self.accept[:, 0] if gamma else None
        self.count_law = _count_law(self.accept)
        self.count_cdf = np.cumsum(self.count_law, axis=1)
        self.count_expected = self.count_law.sum(axis=0)
        self.expected_accepted = float(self.count_expected @ np.arange(gamma + 1))
        small = vocab <= plot_vocab
        self.first_expected = _expected(first_row, None, self.first_cum, self.first_cum.shape[0]) if small else None
        self.final_cum = self.final_row = self.final_expected = self.step_expected = None
        if not conditional:
            return
        if keyed:
            self.final_cum, self.final_square = tables.final_cum, tables.final_square
            self.final_row = keys + np.where(np.arange(gamma + 1) == gamma, tables.rows, 0)
        else:
            final = np.empty_like(draw.target_probs)
            if gamma:
                np.subtract(draw.target_probs[:, :gamma], draw.draft_probs, out=final[:, :gamma])
                np.maximum(final[:, :gamma], 0.0, out=final[:, :gamma])
            final[:, gamma] = draw.target_probs[:, gamma]
            self.final_square = None  # computed on demand (collision checks use small draws)
            self.final_cum = np.cumsum(final, axis=2, out=final).reshape(-1, vocab)
            self.final_row = self.target_row
        if small:
            total = self.final_cum[self.final_row, -1]
            weight = np.divide(self.count_law, total, out=np.zeros_like(total), where=total > 0)  # P(K=k) / |r_k|
            size = self.final_cum.shape[0]
            if (gamma + 1) * vocab <= plot_vocab:
                per_stop = [_expected(self.final_row[:, k], weight[:, k], self.final_cum, size) for k in range(gamma + 1)]
                self.step_expected = np.concatenate(per_stop)
                self.final_expected = np.sum(per_stop, axis=0)
            else:
                self.final_expected = _expected(self.final_row.reshape(-1), weight.reshape(-1), self.final_cum, size)

    def collision_probs(self, *, bonus_missing: bool = False) -> np.ndarray:
        """Probability that two independent steps on the same row give the same output, [B]:
        ``sum_o P(o)^2 = sum_k P(K = k)^2 sum_y (r_k(y) / |r_k|)^2``; a verifier that omits the
        bonus token merges every fully accepted outcome into one (its term is ``P(K = gamma)^2``)."""
        if self.final_square is None:
            self.final_square = (np.diff(self.final_cum, axis=1, prepend=0.0) ** 2).sum(axis=1)
        total = self.final_cum[self.final_row, -1]
        square = np.divide(self.final_square[self.final_row], total**2, out=np.zeros_like(total), where=total > 0)
        terms = self.count_law**2 * square
        if bonus_missing:
            terms[:, self.gamma] = self.count_law[:, self.gamma] ** 2
        return terms.sum(axis=1)

    def outcome(self, accepted, final) -> StepOutcome:
        return StepOutcome(self, accepted, final)

    # -- randomized PIT of each test's samples -----------------------------------------------------
    def pit_first(self, tokens, uniforms):
        """PIT of the first emitted token against target row 0."""
        xp, vocab = self.xp, self.vocab
        start = self.first_row * vocab
        cum = self.first_cum.reshape(-1)
        lower = xp.where(tokens > 0, cum[start + (tokens - 1).clip(min=0)], 0.0)
        mass = self.target_rows.reshape(-1)[self.target_row[:, 0] * vocab + tokens]  # p_0(y)
        return pit_from_bounds(lower, mass, cum[start + vocab - 1], uniforms, tokens)

    def pit_count(self, accepted, uniforms):
        """PIT of the accepted count against its exact law given the path."""
        width = self.gamma + 1
        at = self.rows * width + accepted
        law, cdf = self.count_law.reshape(-1), self.count_cdf.reshape(-1)
        lower = self.xp.where(accepted > 0, cdf[(at - 1).clip(min=0)], 0.0)
        return pit_from_bounds(lower, law[at], cdf[self.rows * width + self.gamma], uniforms, accepted)

    def pit_final(self, outcome: StepOutcome, rows, uniforms):
        """PIT of the final token given the stop position (``rows``: those with a final token):
        the residual ``norm(max(0, p_k - q_k))``, or the bonus row ``p_g`` at ``k = gamma``."""
        return pit_from_bounds(outcome.lower[rows], outcome.mass[rows], outcome.total[rows], uniforms,
                               outcome.token[rows])

    def pit_step(self, outcome: StepOutcome, uniforms):
        """PIT of the joint (k, y), codes ``k * V + y``: ``P(K < k) + P(K = k) F_k(y-1 | k)``."""
        xp, stop, width = self.xp, outcome.stop, self.gamma + 1
        at = self.rows * width + stop
        weight = self.count_law.reshape(-1)[at]
        below = xp.where(stop > 0, self.count_cdf.reshape(-1)[(at - 1).clip(min=0)], 0.0)
        total = outcome.total
        scale = xp.where(total > 0, weight / xp.where(total > 0, total, 1.0), 0.0)
        codes = stop * self.vocab + outcome.token
        return pit_from_bounds(below + scale * outcome.lower, scale * outcome.mass,
                               self.count_cdf.reshape(-1)[self.rows * width + self.gamma], uniforms, codes)

    # -- the device copy -----------------------------------------------------------------------------
    _DEVICE_FIELDS = ("rows", "target_rows", "draft_rows", "target_row", "draft_row", "first_cum", "first_row",
                      "final_cum", "final_row", "count_law", "count_cdf", "target_at", "draft_at")

    def on_device(self, to_tensor) -> "VerifierBlock":
        """A copy whose laws are ``to_tensor(array)`` (torch tensors on the sampler's device), so
        outputs are located, PIT-transformed and counted where they are; host fields stay numpy.
        Shared law tables are converted once per table (``to_tensor`` may cache by identity)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        for name in self._DEVICE_FIELDS:
            value = getattr(self, name)
            setattr(copy, name, None if value is None else to_tensor(value))
        copy.xp = sys.modules["torch"]
        copy.host = self
        return copy
