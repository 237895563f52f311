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

import numpy as np

from ..._tables import exclusive_cumsum
from ...exact.kernels import block_weights, count_law
from ...scenarios import LawTables, VerifierDraw
from ..backends.xp import flatnonzero

__all__ = ["StepOutcome", "VerifierBlock", "pit_from_bounds", "reuse_count"]

#: Probability cells of the rows block verification's weights are computed over at once: its
#: temporaries are [rows, gamma, V] arrays, so 2^20 cells bound them at 8 MiB each.
OPTIMAL_CHUNK_CELLS = 1 << 20
#: From this vocabulary on, block verification's residual masses at weight 1 are handed from the law tables to
#: :func:`~specdec_check.exact.kernels.block_weights` (``unit_residual_mass``: a pass over V for the other
#: (row, position)s only; 7.5 -> 3.2 ms a block of 64 rows at V = 32,000); at V = 7 to 33 looking them up and
#: gathering the other rows costs as much as the pass it saves (2.0 -> 2.1 ms for 2,056 rows at V = 33).
UNIT_RESIDUAL_MIN_VOCAB = 256
#: Largest vocabulary whose expected outcome counts a block computes (for the report's plots of small laws).
PLOT_VOCAB = 64
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


def _require_possible(mass, samples):
    """Raise ``ValueError`` naming the first sample whose probability ``mass`` is not positive (or NaN).

    Two reductions in the common case (numpy arrays or torch tensors); the index is looked up
    only when a sample is impossible."""
    if mass.shape[0] and not bool(mass.min() > 0):
        i = int(flatnonzero(~(mass > 0))[0])
        raise ValueError(f"support violation: sample {i} is outcome {int(samples[i])}, which has probability 0 "
                         "in its row; the sampler produced an impossible outcome.")


def pit_from_bounds(lower, mass, total, uniforms, samples):
    """Randomized PIT ``u = (F(x-1) + U p(x)) / F(V-1)`` (Brockwell 2007; Czado, Gneiting & Held 2009).

    ``lower = F(x-1)`` and ``total = F(V-1)`` come from the cumulative (unnormalised) law of each
    sample's row; ``mass = p(x)`` is read from the row itself, never as a difference of cumulative
    sums (which would round a tiny positive mass to zero). Raises ``ValueError`` for a sample on
    an outcome of probability zero, or whose row total is not positive (NaN included). numpy
    arrays or torch tensors (on any device) alike.
    """
    _require_possible(mass, samples)
    _require_possible(total, samples)
    return ((lower + uniforms * mass) / total).clip(max=_BELOW_ONE)


class StepOutcome:
    """One call's outputs located in the block's laws: each row's stop ``k``, final token ``y`` (-1
    clipped to 0) and the entries the checks read there (flat gathers, one pass each):

    - ``target``, ``draft``: ``p_k(y)`` and ``q_k(y)`` (``q`` unused at the bonus position);
    - ``mass``, ``lower``, ``total``: ``r_k(y)``, ``sum_{t<y} r_k(t)`` and ``|r_k|`` of the final
      token's unnormalised law ``r_k = max(0, p_k - q_k)`` (``p_gamma`` at the bonus position);
    - ``count_mass``, ``count_below``: ``P(K = k)`` and ``P(K < k)`` given the row's path.

    Works on a host block (numpy) and on its device copy (torch) with the same code."""

    def __init__(self, block: "VerifierBlock", accepted, final):
        gamma = block.gamma
        self.stop, self.token = accepted, final.clip(min=0)
        at = block.stop_base + accepted  # (row, stop) in the [B, gamma+1] tables
        self.target = block.target_rows.reshape(-1)[block.target_offset.reshape(-1)[at] + self.token]
        if gamma:  # the draft offset at the bonus position repeats the last draft row (unused there)
            self.draft = block.draft_rows.reshape(-1)[block.draft_offset.reshape(-1)[at] + self.token]
            # r_k(y) = max(0, p_k(y) - q_k(y)), and p_g(y) at the bonus position (q * 0 = 0 exactly: no where()).
            self.mass = (self.target - self.draft * (accepted < gamma)).clip(min=0.0)
        else:
            self.draft = self.target * 0.0
            self.mass = self.target
        self.count_mass = block.count_law.reshape(-1)[at]
        self.count_below = block.count_below.reshape(-1)[block.count_base + accepted]
        if block.final_below is not None:
            start = block.final_offset.reshape(-1)[at]
            below = block.final_below.reshape(-1)
            self.lower = below[start + self.token]
            self.total = below[start + block.vocab]


def _expected(rows, weights, below):
    """Expected outcome counts ``sum_i weights[i] * law[rows[i]]`` from exclusive cumulative rows."""
    return np.diff(np.bincount(rows, weights=weights, minlength=below.shape[0]) @ below)


class VerifierBlock:
    """A draw and the exact laws of one step given it (Leviathan et al. 2023, Algorithm 1).

    - ``accept`` [B, g]: ``a_i = min(1, p_i(x_i) / q_i(x_i))``;
    - ``count_law`` [B, g+1]: ``P(K = k) = prod_{i<k} a_i (1 - a_k)``; ``count_below`` [B, g+2] its
      exclusive cumulative sums (``count_total``, the last column, is 1 up to rounding);
    - ``first_below``: exclusive cumulative target rows 0 (the law of the first emitted token);
    - ``final_below``: exclusive cumulative laws of the final token given the stop position ``k``,
      unnormalised: ``max(0, p_k - q_k)`` for ``k < g`` and the bonus row ``p_g``.

    The laws live in 2-d row tables with per-(row, position) row indices (``*_row``) and flat
    offsets (``*_offset``, the row index times the row width): with ``tables`` (the scenario's
    :meth:`~specdec_check.scenarios.VerifierScenario.law_tables`, rows keyed by
    ``draw.context_keys``) they are a few thousand distinct rows computed once per scenario,
    so a block costs O(B gamma); otherwise one row per (row, position) of the draw, O(B gamma V).
    ``*_expected`` are expected outcome counts per call (small vocabularies only, for plots).
    """

    def __init__(self, draw: VerifierDraw, *, conditional: bool, tables: LawTables | None = None,
                 plot_vocab: int = PLOT_VOCAB):
        self.draw = draw
        self.uses = 0
        batch, gamma = draw.draft_token_ids.shape
        vocab = draw.target_probs.shape[-1]
        self.gamma, self.vocab = gamma, vocab
        self.rows = np.arange(batch)
        self.stop_base = self.rows * (gamma + 1)
        self.count_base = self.rows * (gamma + 2)
        keyed = tables is not None and draw.context_keys is not None
        self._index_rows(draw, tables if keyed else None)
        self._acceptance(draw.draft_token_ids)
        self.count_law = count_law(self.accept)
        self.count_below = exclusive_cumsum(self.count_law)
        self.count_total = self.count_below[:, -1].copy()
        self.count_expected = np.ones(batch) @ self.count_law
        self.expected_accepted = float(self.count_expected @ np.arange(gamma + 1))
        small = vocab <= plot_vocab
        self.first_expected = _expected(self.first_row, None, self.first_below) if small else None
        self.final_below = self.final_row = self.final_offset = self.final_expected = self.step_expected = None
        if conditional:
            self._final_laws(draw, tables if keyed else None)
            if small:
                self._final_expected(plot_vocab)

    def _index_rows(self, draw, tables) -> None:
        """The row tables and each (row, position)'s row index in them: the scenario's keyed ``tables``, or
        the draw's own rows."""
        gamma, vocab = self.gamma, self.vocab
        #: [B, gamma] residual masses at weight 1 of each (row, position)'s laws, from the tables (None: unkeyed)
        self.unit_residual_mass = None
        if tables is not None:
            keys = draw.context_keys
            masses = getattr(tables, "residual_mass", None)
            if masses is not None and vocab >= UNIT_RESIDUAL_MIN_VOCAB:
                self.unit_residual_mass = masses[keys[:, :gamma]]
            self.target_rows, self.draft_rows = tables.target, tables.draft
            self.target_row, self.draft_row = keys, keys[:, :gamma]
            self.first_below, self.first_row = tables.target_below, keys[:, 0]
        else:
            self.target_rows = draw.target_probs.reshape(-1, vocab)
            self.draft_rows = draw.draft_probs.reshape(-1, vocab)
            self.target_row = self.stop_base[:, None] + np.arange(gamma + 1)
            self.draft_row = self.rows[:, None] * gamma + np.arange(gamma)
            self.first_below, self.first_row = exclusive_cumsum(draw.target_probs[:, 0]), self.rows
        self.first_offset = self.first_row * (vocab + 1)
        self.target_offset = self.target_row * vocab

    def _acceptance(self, ids) -> None:
        """``a_i = min(1, p_i(x_i) / q_i(x_i))`` (Leviathan et al. 2023, Algorithm 1), with p / 0 = 1 and
        0 / 0 = 0 (a draft the draft law cannot draw is never accepted)."""
        batch, gamma, vocab = len(self.rows), self.gamma, self.vocab
        self.draft_offset = np.zeros((batch, gamma + 1), dtype=np.int64)
        if gamma:
            np.multiply(self.draft_row, vocab, out=self.draft_offset[:, :gamma])
            self.draft_offset[:, gamma] = self.draft_offset[:, gamma - 1]
            self.target_at = self.target_rows.reshape(-1)[self.target_offset[:, :gamma] + ids]  # p_i(x_i)
            self.draft_at = self.draft_rows.reshape(-1)[self.draft_offset[:, :gamma] + ids]  # q_i(x_i)
            with np.errstate(divide="ignore", invalid="ignore"):  # p / 0 = inf -> 1; 0 / 0 = nan -> 0 below
                self.accept = np.minimum(self.target_at / self.draft_at, 1.0)
            if np.isnan(self.accept.min()):
                self.accept[np.isnan(self.accept)] = 0.0
        else:
            self.target_at = self.draft_at = self.accept = np.zeros((batch, 0))
        self.accept_first = self.accept[:, 0] if gamma else None

    def _final_laws(self, draw, tables) -> None:
        """Exclusive cumulative laws of the final token given the stop position ``k``: ``max(0, p_k - q_k)``
        for ``k < g`` and the bonus row ``p_g`` (unnormalised; Leviathan et al. 2023, Algorithm 1)."""
        gamma, vocab = self.gamma, self.vocab
        if tables is not None:
            self.final_below, self.final_square = tables.final_below, tables.final_square
            self.final_row = draw.context_keys + np.where(np.arange(gamma + 1) == gamma, tables.rows, 0)
        else:
            below = np.empty(draw.target_probs.shape[:2] + (vocab + 1,))
            below[..., 0] = 0.0
            final = below[..., 1:]
            if gamma:
                np.subtract(draw.target_probs[:, :gamma], draw.draft_probs, out=final[:, :gamma])
                np.maximum(final[:, :gamma], 0.0, out=final[:, :gamma])
            final[:, gamma] = draw.target_probs[:, gamma]
            np.cumsum(final, axis=2, out=final)
            self.final_square = None  # computed on demand (collision checks use small draws)
            self.final_below = below.reshape(-1, vocab + 1)
            self.final_row = self.target_row
        self.final_offset = self.final_row * (vocab + 1)

    def _final_expected(self, plot_vocab: int) -> None:
        """Expected final-token counts per call (all stops, and per stop where they fit the plot)."""
        gamma, vocab = self.gamma, self.vocab
        with np.errstate(divide="ignore", invalid="ignore"):  # |r_k| = 0 only where P(K = k) = 0
            weight = self.count_law / self.final_below.reshape(-1)[self.final_offset + vocab]  # P(K=k) / |r_k|
        if not np.isfinite(weight.sum()):
            weight[~np.isfinite(weight)] = 0.0
        if (gamma + 1) * vocab <= plot_vocab:
            per_stop = [_expected(self.final_row[:, k], weight[:, k], self.final_below) for k in range(gamma + 1)]
            self.step_expected = np.concatenate(per_stop)
            self.final_expected = np.sum(per_stop, axis=0)
        else:
            self.final_expected = _expected(self.final_row.reshape(-1), weight.reshape(-1), self.final_below)

    @property
    def optimal_accepted(self) -> float:
        """Block verification's expected accepted drafts summed over the block's rows: the optimum
        among valid verifiers in expectation over drafts (Sun et al., ICLR 2025, Algorithm 2 and
        Theorem 2). Computed once per block, on the host."""
        return float(self.optimal_accepted_rows.sum())

    @property
    def optimal_accepted_rows(self) -> np.ndarray:
        """Block verification's expected accepted drafts on each row given its drafts, float64 [B]
        (Sun et al., ICLR 2025, Algorithm 2). Not a per-row bound on a valid verifier: only its mean
        over drafts drawn from the draft model is (Theorem 2)."""
        if "_optimal" not in self.__dict__:
            draw = self.draw
            batch = draw.draft_token_ids.shape[0]
            per_row = np.empty(batch)
            rows = max(1, OPTIMAL_CHUNK_CELLS // max(1, (2 * self.gamma + 1) * self.vocab))
            unit = self.unit_residual_mass
            for start in range(0, batch, rows):  # bounded temporaries at any V
                part = slice(start, start + rows)
                laws = block_weights(draw.draft_token_ids[part], draw.draft_probs[part], draw.target_probs[part],
                                     None if unit is None else unit[part]).accepted_count_law
                per_row[part] = laws @ np.arange(self.gamma + 1)
            self._optimal = per_row
        return self._optimal

    def collision_probs(self, *, bonus_missing: bool = False) -> np.ndarray:
        """Probability that two independent steps on the same row give the same output, [B]:
        ``sum_o P(o)^2 = sum_k P(K = k)^2 sum_y (r_k(y) / |r_k|)^2``; a verifier that omits the
        bonus token merges every fully accepted outcome into one (its term is ``P(K = gamma)^2``)."""
        if self.final_square is None:
            self.final_square = (np.diff(self.final_below, axis=1) ** 2).sum(axis=1)
        total = self.final_below[self.final_row, -1]
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
        below = self.first_below.reshape(-1)
        mass = self.target_rows.reshape(-1)[self.target_offset[:, 0] + tokens]  # p_0(y)
        return pit_from_bounds(below[self.first_offset + tokens], mass, below[self.first_offset + self.vocab],
                               uniforms, tokens)

    def pit_count(self, outcome: StepOutcome, uniforms):
        """PIT of the accepted count against its exact law given the path."""
        return pit_from_bounds(outcome.count_below, outcome.count_mass, self.count_total, uniforms, outcome.stop)

    def pit_final(self, outcome: StepOutcome, rows, uniforms):
        """PIT of the final token given the stop position (``rows``: those with a final token, None
        for all): the residual ``norm(max(0, p_k - q_k))``, or the bonus row ``p_g`` at ``k = gamma``."""
        if rows is None:
            return pit_from_bounds(outcome.lower, outcome.mass, outcome.total, uniforms, outcome.token)
        return pit_from_bounds(outcome.lower[rows], outcome.mass[rows], outcome.total[rows], uniforms,
                               outcome.token[rows])

    def pit_step(self, outcome: StepOutcome, uniforms):
        """PIT of the joint (k, y), codes ``k * V + y``: ``(P(K < k) + P(K = k) F_k(y-1 + U | k)) / P(K <= g)``."""
        codes = outcome.stop * self.vocab + outcome.token
        _require_possible(outcome.count_mass, codes)
        within = pit_from_bounds(outcome.lower, outcome.mass, outcome.total, uniforms, codes)
        return ((outcome.count_below + outcome.count_mass * within) / self.count_total).clip(max=_BELOW_ONE)

    # -- the device copy -----------------------------------------------------------------------------
    #: The laws and indices the per-call code reads; a device copy holds these as device tensors.
    DEVICE_FIELDS = ("rows", "stop_base", "count_base", "target_rows", "draft_rows", "target_row", "draft_row",
                     "target_offset", "draft_offset", "first_below", "first_row", "first_offset", "final_below",
                     "final_row", "final_offset", "count_law", "count_below", "count_total", "target_at", "draft_at")

    def on_device(self, to_tensor) -> "VerifierBlock":
        """A copy whose :data:`DEVICE_FIELDS` are ``to_tensor(array)`` (torch tensors on the sampler's
        device), so outputs are located, PIT-transformed and counted where they are; the other fields
        are shared with this block. ``host`` on the copy is this block (the host block keeps no
        reference to its copies: no reference cycle holds a block's arrays alive)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        for name in self.DEVICE_FIELDS:
            value = getattr(self, name)
            setattr(copy, name, None if value is None else to_tensor(value))
        copy.host = self
        return copy
