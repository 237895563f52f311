"""The rule-agnostic exactness test at any vocabulary size: completion by the target, then the
Rosenblatt transform.

One verifier step emits ``O = (x_1..x_k, y)``. :func:`complete_with_target` completes O to L
tokens by sampling the missing positions from the exact target conditionals given the
realized prefix; :func:`rosenblatt_pit` maps an L-token sequence to L numbers, the randomized
probability integral transform of each position under its exact target conditional given the
realized prefix. The decode loop built from the rule is exact iff the completed sequence has
the target's joint law (see :mod:`specdec_check.exact._completed`), and then the L values are
i.i.d. Uniform(0, 1) (Rosenblatt 1952, "Remarks on a multivariate transformation", Ann. Math.
Statist. 23; randomized for discrete laws as in Brockwell 2007, Stat. Probab. Lett. 77), for
every rule alike. A lossy rule moves the completed law and so the joint law of the L values.

The target is given either as a causal model with per-row prompts (the law at position j is
the model's law after the prompt and the sequence's first j tokens), or as fixed rows
``target_probs`` [B, L, V] (the law at position j is ``target_probs[b, j]`` whatever the
tokens before it, as :meth:`VerifierScenario.from_rows
<specdec_check.scenarios.VerifierScenario.from_rows>` means them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_token_array, check_probability_rows
from ..models import CausalModel, last_token_probs, vocab_size_of
from .._tables import exclusive_cumsum, search_table
from ..models import last_context_indices

__all__ = ["RosenblattPIT", "complete_with_target", "rosenblatt_pit"]

#: Largest keyed law table (distinct laws x V) built per position for models that name their laws.
_TABLE_CELLS = 1 << 22
#: Rows of full laws gathered at a time otherwise (about this many cells per chunk).
_CHUNK_CELLS = 1 << 20


@dataclass(frozen=True)
class RosenblattPIT:
    """Result of :func:`rosenblatt_pit`.

    ``values`` float64 [B, L]: ``F_j(s_j - 1) + U_j p_j(s_j)`` under the exact target conditional of
    each position given the realized prefix (NaN where ``p_j(s_j) = 0``); i.i.d. Uniform(0, 1)
    when the sequences are target-distributed. ``support_violations`` int64 [n, 2]: the
    ``(row, position)`` of every token of target probability 0 (an impossible sequence).
    """

    values: np.ndarray
    support_violations: np.ndarray

    @property
    def impossible(self) -> bool:
        """Whether some sequence holds a token the target gives probability 0 after its prefix."""
        return bool(self.support_violations.shape[0])


def complete_with_target(emitted, *, generator, target=None, prompts=None, target_probs=None,
                         length=None) -> np.ndarray:
    """Complete each row of emitted tokens to ``length`` tokens by sampling from the exact target.

    ``emitted`` int [B, m]: a verifier's output, 1..m tokens followed only by ``-1`` padding.
    Position j of row b (from the first missing one to ``length - 1``, in order) is drawn from
    the target's law after the prompt and the row's first j tokens (models), or from
    ``target_probs[b, j]`` (fixed rows). ``length`` defaults to m (models) or
    ``target_probs.shape[1]`` (fixed rows) and must be at least m.
    ``generator`` (numpy Generator) is the only randomness: ``generator.random((B, length))``
    once, entry ``[b, j]`` drawing position j of row b by inverse CDF.
    Returns int64 [B, length].
    """
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
    arr = np.asarray(emitted)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or arr.ndim != 2:
        raise TypeError(f"emitted must be an integer array [B, m]; got dtype {arr.dtype}, shape {arr.shape}.")
    laws = _Conditionals(target, prompts, target_probs, arr.shape[0], length if length is not None else
                         (arr.shape[1] if target_probs is None else None))
    if laws.length < arr.shape[1]:
        raise ValueError(f"length ({laws.length}) must be at least the width of emitted ({arr.shape[1]}).")
    counts = _emitted_counts(arr, laws.vocab)
    batch = arr.shape[0]
    seq = np.full((batch, laws.length), -1, dtype=np.int64)
    seq[:, : arr.shape[1]] = arr
    uniforms = generator.random((batch, laws.length))
    for j in range(laws.length):
        rows = np.flatnonzero(counts <= j)
        if rows.size == 0:
            continue
        for sel, below, probs, index in laws.tables(j, rows, seq):
            seq[sel, j] = _inverse_cdf(below, probs, index, uniforms[sel, j], sel, j)
    return seq


def rosenblatt_pit(sequences, *, generator, target=None, prompts=None, target_probs=None) -> RosenblattPIT:
    """Randomized probability integral transform of every position of every sequence under its
    exact target conditional given the realized prefix (the Rosenblatt transform).

    ``sequences`` int [B, L] (no padding). ``values[b, j] = F(s_j - 1) + U p(s_j)`` with ``p`` the
    target's law of position j given ``s_1..s_{j-1}`` (and the prompt), ``F`` its CDF and ``U`` from
    ``generator.random((B, L))``; a token of probability 0 is reported in ``support_violations``
    and gets NaN. If every sequence is a draw from the target's joint law, the B*L values are
    i.i.d. Uniform(0, 1) (Rosenblatt 1952; Brockwell 2007), whatever produced the prefixes.
    """
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
    arr = np.asarray(sequences)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or arr.ndim != 2:
        raise TypeError(f"sequences must be an integer array [B, L]; got dtype {arr.dtype}, shape {arr.shape}.")
    laws = _Conditionals(target, prompts, target_probs, arr.shape[0], arr.shape[1])
    if arr.shape[1] != laws.length:
        raise ValueError(f"sequences have {arr.shape[1]} positions but target_probs has {laws.length}.")
    seq = as_token_array(arr, vocab_size=laws.vocab, name="sequences", allow_padding=False)
    batch, length = seq.shape
    uniforms = generator.random((batch, length))
    values = np.empty((batch, length))
    all_rows = np.arange(batch)
    for j in range(length):
        for sel, below, probs, index in laws.tables(j, all_rows, seq):
            token = seq[sel, j]
            lower = below[index, token]
            mass = probs[index, token]
            total = below[index, laws.vocab]
            with np.errstate(invalid="ignore", divide="ignore"):
                u = (lower + uniforms[sel, j] * mass) / total
            values[sel, j] = np.where(mass > 0, np.minimum(u, np.nextafter(1.0, 0.0)), np.nan)
    violations = np.argwhere(np.isnan(values)).astype(np.int64)
    return RosenblattPIT(values, violations)


def _emitted_counts(arr, vocab):
    """Number of tokens per row, after checking 1..m ids in range followed only by -1."""
    real = arr >= 0
    counts = real.sum(axis=1)
    well_formed = np.all(real == (np.arange(arr.shape[1]) < counts[:, None]), axis=1) & (counts >= 1)
    well_formed &= np.all((arr >= -1) & (arr < vocab), axis=1)
    if not well_formed.all():
        row = int(np.flatnonzero(~well_formed)[0])
        raise ValueError(f"emitted row {row} {arr[row].tolist()} is not 1..{arr.shape[1]} token ids in [0, {vocab}) "
                         "followed only by -1 padding; reject malformed verifier outputs before completing them.")
    return counts


def _inverse_cdf(below, probs, index, uniforms, sel, position):
    """One token per row by inverse CDF on exclusive cumulative rows ``below[index]`` (branchless binary search)."""
    vocab = probs.shape[1]
    table = search_table(below)
    width = table.shape[1]
    flat = table.reshape(-1)
    offset = index * width
    total = flat[offset + vocab]
    if not (total > 0).all():
        bad = int(sel[np.flatnonzero(~(total > 0))[0]])
        raise ValueError(f"row {bad}: the target's law at position {position} has no mass.")
    x = uniforms * total
    token = np.zeros(index.shape[0], dtype=np.int64)
    step = width // 2
    while step:  # invariant: below[token] <= x, the answer lies below token + 2 * step
        token += step * (flat[offset + token + step] <= x)
        step //= 2
    over = token >= vocab  # u * total rounded up to the total: take the last token of positive mass
    if over.any():
        rows = probs[index[over]] > 0
        token[over] = vocab - 1 - rows[:, ::-1].argmax(axis=1)
    return token


class _Conditionals:
    """The target's law of each position given the realized prefix, served as exclusive cumulative tables."""

    def __init__(self, target, prompts, target_probs, batch, length):
        if (target is None) == (target_probs is None):
            raise ValueError("give either target (a causal model, with optional prompts) or target_probs "
                             "[B, L, V] (fixed rows), not both.")
        if target_probs is not None:
            if prompts is not None:
                raise ValueError("prompts go with target (a model); fixed rows target_probs have no context.")
            rows = check_probability_rows(target_probs, name="target_probs")
            if rows.ndim != 3 or rows.shape[0] != batch:
                raise ValueError(f"target_probs must be [B, L, V] with B = {batch} rows; got shape {rows.shape}.")
            if length is not None and length != rows.shape[1]:
                raise ValueError(f"length must be target_probs.shape[1] = {rows.shape[1]}; got {length}.")
            self.rows, self.length, self.vocab = rows, int(rows.shape[1]), int(rows.shape[2])
            self.model = None
            return
        if not callable(target):
            raise TypeError("target must be a causal model (callable on int tokens [B, T]); "
                            f"got {type(target).__name__}.")
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise ValueError(f"length must be an int >= 1; got {length!r}.")
        self.model, self.rows, self.length = target, None, int(length)
        self.vocab = vocab_size_of(target)
        if prompts is None:
            prompts = np.zeros((batch, 0), dtype=np.int64)
        prompts = np.asarray(prompts)
        if prompts.ndim == 1:
            prompts = np.broadcast_to(prompts, (batch, prompts.shape[0]))
        prompts = as_token_array(prompts, vocab_size=self.vocab, name="prompts")
        if prompts.shape[0] != batch:
            raise ValueError(f"prompts must be [B, P] with B = {batch} rows (or one 1-d prompt); got {prompts.shape}.")
        self.prompts = prompts

    def tables(self, position, rows, seq):
        """Yield ``(sel, below [K, V+1], probs [K, V], index [n])`` covering ``rows``: row ``sel[i]``'s law
        at ``position`` is ``probs[index[i]]`` (exclusive cumulative sums ``below[index[i]]``)."""
        vocab = self.vocab
        if self.model is None:
            step = max(1, _CHUNK_CELLS // vocab)
            for lo in range(0, rows.size, step):
                sel = rows[lo: lo + step]
                probs = self.rows[sel, position]
                yield sel, exclusive_cumsum(probs), probs, np.arange(sel.size)
            return
        tokens = np.concatenate([np.full((rows.size, 1), -1, dtype=np.int64), self.prompts[rows], seq[rows, :position]],
                                axis=1)
        model = self.model
        if isinstance(model, CausalModel):
            contexts = last_context_indices(tokens, order=model.order, vocab_size=vocab)
            keys = model.law_keys(contexts) if model.num_law_keys is not None else None
            if keys is not None:
                distinct, first, index = np.unique(np.asarray(keys).reshape(-1), return_index=True, return_inverse=True)
                if distinct.size * vocab <= _TABLE_CELLS:
                    probs = np.asarray(model.probs_at(contexts[first]), dtype=np.float64)
                    yield rows, exclusive_cumsum(probs), probs, index.reshape(-1)
                    return
            step = max(1, _CHUNK_CELLS // vocab)
            for lo in range(0, rows.size, step):
                probs = np.asarray(model.probs_at(contexts[lo: lo + step]), dtype=np.float64)
                yield rows[lo: lo + step], exclusive_cumsum(probs), probs, np.arange(probs.shape[0])
            return
        step = max(1, _CHUNK_CELLS // vocab)
        for lo in range(0, rows.size, step):
            probs = last_token_probs(model, tokens[lo: lo + step])
            yield rows[lo: lo + step], exclusive_cumsum(probs), probs, np.arange(probs.shape[0])
