"""The reference verifier in numpy (Leviathan et al. 2023, Algorithm 1)."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from operator import sub

import numpy as np

__all__ = ["numpy_verify"]

#: Rows are turned into laws a block at a time, about this many cells per block, so the
#: temporaries stay in cache and are reused instead of allocated (and page-faulted) per call.
_BLOCK_CELLS = 1 << 17
#: Calls of at most this many input cells are verified in Python floats (``_verify_scalar``): a call of one
#: row at V = 7 (35 cells) costs about 80 us in the vectorised kernel's forty numpy calls and 6 us here; at
#: about 1,000 cells (16 rows, gamma = 4, V = 7) both cost 80 to 86 us.
_SCALAR_CELLS = 1024
#: From this vocabulary on, the token is found by a binary search of each running sum instead of a count over
#: it (at V = 32,000: 64 rows in 0.15 ms instead of 1.6 ms; below a few thousand entries the count is as fast).
_SEARCH_MIN_VOCAB = 2048
#: Below this many rows the column-by-column cumulative sum (one ufunc call per vocabulary entry)
#: costs more in call overhead than ``np.cumsum(axis=1)`` spends per row.
_COLUMN_CUMSUM_MIN_ROWS = 512


def numpy_verify(*, draft_token_ids, draft_probs, target_probs, generator) -> np.ndarray:
    """One speculative step's accept/reject kernel, exact, vectorized over the batch.

    For i = 1..gamma in order, draft x_i is accepted iff ``u_i * q_i(x_i) < p_i(x_i)``
    (division-free form of ``u_i < min(1, p_i(x_i)/q_i(x_i))``). At the first rejection
    one token is drawn from ``norm(max(0, p_i - q_i))``; when all drafts are accepted the
    bonus token is drawn from ``p_{gamma+1}`` (Leviathan et al. 2023, Algorithm 1).

    Parameters follow the verifier contract: ``draft_token_ids`` int [B, gamma],
    ``draft_probs`` float [B, gamma, V], ``target_probs`` float [B, gamma+1, V],
    ``generator`` a ``numpy.random.Generator`` (its only source of randomness).
    Returns int64 [B, gamma+1]: accepted drafts, the recovered or bonus token, then -1.
    Raises ``ValueError`` when a probability it uses is NaN or infinite.
    """
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
    ids = np.asarray(draft_token_ids)
    draft_probs = np.asarray(draft_probs)
    target_probs = np.asarray(target_probs)
    batch, gamma = ids.shape
    vocab = target_probs.shape[-1]
    uniforms = generator.random((batch, gamma + 1))
    if 0 < batch * (2 * gamma + 1) * vocab <= _SCALAR_CELLS and _scalar_path_applies(ids, draft_probs, target_probs):
        out = _verify_scalar(ids, draft_probs, target_probs, uniforms)
        if out is not None:
            return out
    if _fast_path_applies(ids, draft_probs, target_probs, batch, gamma, vocab):
        return _verify_contiguous(ids, draft_probs, target_probs, uniforms)
    return _verify_general(ids, draft_probs, target_probs, uniforms)


def _fast_path_applies(ids, draft_probs, target_probs, batch, gamma, vocab) -> bool:
    """Whether ``_verify_contiguous`` may run: well-formed, C-contiguous float inputs, ids in range.

    Anything else goes to ``_verify_general``, which raises exactly what plain numpy indexing
    raises on malformed input. Both paths compute the same floats, so the output is the same.
    """
    if batch == 0 or vocab == 0 or ids.dtype.kind not in "iu":
        return False
    if target_probs.shape != (batch, gamma + 1, vocab) or target_probs.dtype.kind != "f":
        return False
    if not target_probs.flags.c_contiguous:
        return False
    if gamma:
        if draft_probs.shape != (batch, gamma, vocab) or draft_probs.dtype.kind != "f":
            return False
        if not draft_probs.flags.c_contiguous:
            return False
        if ids.min() < 0 or ids.max() >= vocab:
            return False
    return True


def _scalar_path_applies(ids, draft_probs, target_probs) -> bool:
    """Whether ``_verify_scalar`` may run: float64 probabilities of the contract's shapes, integer ids.

    Python floats are IEEE doubles, so float64 arithmetic in Python is numpy's float64 arithmetic."""
    batch, gamma = ids.shape
    vocab = target_probs.shape[-1]
    return (ids.dtype.kind in "iu" and target_probs.dtype == np.float64 and target_probs.shape == (batch, gamma + 1, vocab)
            and (not gamma or (draft_probs.dtype == np.float64 and draft_probs.shape == (batch, gamma, vocab))))


def _verify_scalar(ids, draft_probs, target_probs, uniforms):
    """The kernel on Python floats, row by row, for small calls; None where the vectorised paths must decide
    (a draft id outside [0, V), a non-finite probability, a row whose inverse CDF overflows).

    The same operations in the same order as ``_verify_general``: ``u * q(x) >= p(x)`` rejects, the law is
    ``max(p - q, 0)`` (``max(p - 0, 0)`` on the bonus row, ``p`` itself when gamma is 0), its running sum is
    accumulated left to right as ``np.cumsum`` does, and the token is the number of running sums
    ``<= u * total``; so every float, and the output, is the same.
    """
    batch, gamma = ids.shape
    vocab = target_probs.shape[-1]
    targets, drafts, coins = target_probs.tolist(), draft_probs.tolist() if gamma else None, uniforms.tolist()
    out = []
    for b, row_ids in enumerate(ids.tolist()):
        coin, target_rows = coins[b], targets[b]
        stop = gamma
        for j, x in enumerate(row_ids):  # every drafted position is checked, as the vectorised paths do
            if not 0 <= x < vocab:
                return None
            p, q = target_rows[j][x], drafts[b][j][x]
            if p - p != 0.0 or q - q != 0.0:  # NaN or infinite
                return None
            if stop == gamma and coin[j] * q >= p:
                stop = j
        if not gamma:
            sums = list(accumulate(target_rows[0]))  # np.cumsum's left-to-right running sum
            if sums[-1] - sums[-1] != 0.0:
                return None
            cut = coin[0] * sums[-1]
            token = sum(1 for value in sums if value <= cut)  # p itself may be negative: count, not search
        else:
            # p - q, or p - 0 = p on the bonus row; then max(., 0): the same floats (the sign of a zero aside,
            # which no running sum compared below can tell); a finite sum means every entry is finite
            diffs = target_rows[gamma] if stop == gamma else list(map(sub, target_rows[stop], drafts[b][stop]))
            if sum(diffs) - sum(diffs) != 0.0:
                return None
            sums = list(accumulate([d if d > 0.0 else 0.0 for d in diffs]))
            if sums[-1] - sums[-1] != 0.0:
                return None
            token = bisect_right(sums, coin[gamma] * sums[-1])  # sums of non-negative terms never decrease
        if token >= vocab:
            return None
        out.append(row_ids[:stop] + [token] + [-1] * (gamma - stop))
    return np.array(out, dtype=np.int64).reshape(batch, gamma + 1)


def _verify_contiguous(ids, draft_probs, target_probs, uniforms):
    """The kernel with flat gathers on C-contiguous inputs (see ``_fast_path_applies``).

    Same arithmetic, in the same order, as ``_verify_general``: only the memory traffic differs
    (no multi-array fancy indexing, laws built a block of rows at a time, and for many rows a
    running sum over a vocabulary-major buffer instead of numpy's slow per-row ``cumsum``).
    """
    batch, gamma = ids.shape
    vocab = target_probs.shape[-1]
    rows = np.arange(batch)
    target_rows = target_probs.reshape(batch * (gamma + 1), vocab)  # views (C-contiguous inputs)

    if gamma:
        draft_rows = draft_probs.reshape(batch * gamma, vocab)
        at = ids.astype(np.intp, copy=False) + np.arange(0, gamma * vocab, vocab)  # j * V + x_j
        target_at = np.take(target_probs.reshape(-1), at + ((gamma + 1) * vocab) * rows[:, None])
        draft_at = np.take(draft_probs.reshape(-1), at + (gamma * vocab) * rows[:, None])
        if not (np.isfinite(target_at).all() and np.isfinite(draft_at).all()):
            raise ValueError("target_probs or draft_probs is NaN or infinite at a drafted token.")
        # rejected[:, gamma] is a sentinel, so argmax is the first rejection or gamma (all accepted).
        rejected = np.empty((batch, gamma + 1), dtype=bool)
        rejected[:, gamma] = True
        np.greater_equal(uniforms[:, :gamma] * draft_at, target_at, out=rejected[:, :gamma])
        stop = rejected.argmax(axis=1)
        laws = _Laws(target_rows, rows * (gamma + 1) + stop, draft_rows, rows * gamma + np.minimum(stop, gamma - 1),
                     stop == gamma)
    else:
        stop = np.zeros(batch, dtype=np.intp)
        laws = _Laws(target_rows, rows)

    block = max(1, _BLOCK_CELLS // vocab)
    scratch = laws.scratch(min(block, batch))
    thresholds = uniforms[:, gamma]
    if batch >= _COLUMN_CUMSUM_MIN_ROWS and 4 * batch >= vocab and target_probs.dtype in (np.float32, np.float64):
        # Vocabulary-major [V, B] buffer: the running sum is V vectorized adds over the batch,
        # each cdf[j] = cdf[j-1] + law[j], exactly np.cumsum's sequential accumulation.
        cdf = np.empty((vocab, batch), dtype=target_probs.dtype)
        for lo in range(0, batch, block):
            hi = min(lo + block, batch)
            laws.build(lo, hi, scratch, out=cdf[:, lo:hi].T)
        for j in range(1, vocab):
            np.add(cdf[j - 1], cdf[j], out=cdf[j])
        total = cdf[-1]
        if not np.isfinite(total).all():
            raise ValueError("target_probs or draft_probs is NaN or infinite in a row the step samples from.")
        token = np.count_nonzero(cdf <= thresholds * total, axis=0)
    else:
        token = np.empty(batch, dtype=np.intp)
        cdf = np.empty((min(block, batch), vocab), dtype=target_probs.dtype)
        for lo in range(0, batch, block):
            hi = min(lo + block, batch)
            law = laws.build(lo, hi, scratch)
            block_cdf = np.cumsum(law, axis=1, out=cdf[: hi - lo])
            total = block_cdf[:, -1]
            if not np.isfinite(total).all():
                raise ValueError("target_probs or draft_probs is NaN or infinite in a row the step samples from.")
            cut = thresholds[lo:hi] * total
            if gamma and vocab >= _SEARCH_MIN_VOCAB:
                # laws max(0, p - q) >= 0 with a finite total: each running sum is non-decreasing, so the
                # number of sums <= cut is where cut goes on the right (log V reads instead of a pass over V)
                token[lo:hi] = [np.searchsorted(row, c, side="right") for row, c in zip(block_cdf, cut.tolist())]
            else:
                token[lo:hi] = np.count_nonzero(block_cdf <= cut[:, None], axis=1)

    overflow = token >= vocab  # u * total rounded up to total, or an all-zero row
    if overflow.any():
        picked = np.flatnonzero(overflow)
        _fix_overflow(token, overflow, laws.build(picked, None, laws.scratch(picked.size)), stop, vocab)
    return _emit(ids, stop, token)


class _Laws:
    """Builds the rows ``_verify_contiguous`` samples from, as ``_verify_general`` computes them.

    Row i's law is ``max(0, p - q)`` (q zeroed on the bonus rows, where every draft was accepted),
    or ``p`` itself when gamma is 0; p and q are rows ``p_at[i]`` / ``q_at[i]`` of the inputs.
    """

    def __init__(self, target_rows, p_at, draft_rows=None, q_at=None, bonus=None):
        self.target_rows, self.p_at = target_rows, p_at
        self.draft_rows, self.q_at, self.bonus = draft_rows, q_at, bonus

    def scratch(self, n):
        """Buffers for up to ``n`` rows: (p buffer, q buffer or None)."""
        vocab = self.target_rows.shape[1]
        q = None if self.draft_rows is None else np.empty((n, vocab), dtype=self.draft_rows.dtype)
        return np.empty((n, vocab), dtype=self.target_rows.dtype), q

    def build(self, lo, hi, scratch, out=None):
        """The laws of rows ``lo:hi`` (or of the row indices ``lo`` when ``hi`` is None), into ``out``."""
        pick = lo if hi is None else slice(lo, hi)
        p_buf, q_buf = scratch
        p_at = self.p_at[pick]
        # mode="clip" never clips here (indices are in range); with mode="raise", out= is buffered.
        law = np.take(self.target_rows, p_at, axis=0, out=p_buf[: p_at.size], mode="clip")
        if self.draft_rows is None:
            if out is not None:
                np.copyto(out, law)
                return out
            return law
        sub = np.take(self.draft_rows, self.q_at[pick], axis=0, out=q_buf[: p_at.size], mode="clip")
        sub[self.bonus[pick]] = 0.0
        np.subtract(law, sub, out=law)
        return np.maximum(law, 0.0, out=law if out is None else out)


def _verify_general(ids, draft_probs, target_probs, uniforms):
    """The kernel with plain numpy indexing: any input numpy can index (errors as numpy raises them)."""
    batch, gamma = ids.shape
    vocab = target_probs.shape[-1]
    rows = np.arange(batch)

    if gamma:
        target_at = np.take_along_axis(target_probs[:, :gamma], ids[..., None], axis=2)[..., 0]
        draft_at = np.take_along_axis(draft_probs, ids[..., None], axis=2)[..., 0]
        if not (np.isfinite(target_at).all() and np.isfinite(draft_at).all()):
            raise ValueError("target_probs or draft_probs is NaN or infinite at a drafted token.")
        rejected = uniforms[:, :gamma] * draft_at >= target_at
        stop = np.where(rejected.any(axis=1), rejected.argmax(axis=1), gamma)
        # The row to sample: the residual max(0, p - q) at the stop position, or the bonus row p_{gamma+1}.
        final = target_probs[rows, stop]
        subtract = draft_probs[rows, np.minimum(stop, gamma - 1)]
        subtract[stop == gamma] = 0.0
        np.subtract(final, subtract, out=final)
        np.maximum(final, 0.0, out=final)
    else:
        stop = np.zeros(batch, dtype=np.int64)
        final = target_probs[:, 0]

    cdf = np.cumsum(final, axis=1)
    total = cdf[:, -1]
    if not np.isfinite(total).all():
        raise ValueError("target_probs or draft_probs is NaN or infinite in a row the step samples from.")
    token = np.count_nonzero(cdf <= (uniforms[:, gamma] * total)[:, None], axis=1)
    overflow = token >= vocab  # u * total rounded up to total, or an all-zero row
    if overflow.any():
        _fix_overflow(token, overflow, final[overflow], stop, vocab)
    return _emit(ids, stop, token)


def _fix_overflow(token, overflow, law, stop, vocab):
    """Overflowed rows take their last token of positive mass; raise for a row with no mass at all."""
    positive = law > 0
    if not positive.any(axis=1).all():
        bad = int(np.flatnonzero(overflow)[~positive.any(axis=1)][0])
        raise ValueError(f"row {bad}: the law to sample at position {int(stop[bad])} has no mass.")
    token[overflow] = vocab - 1 - positive[:, ::-1].argmax(axis=1)


def _emit(ids, stop, token):
    """int64 [B, gamma+1]: the accepted drafts, the sampled token at ``stop``, then -1."""
    batch, gamma = ids.shape
    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    if gamma:
        out[:, :gamma] = np.where(np.arange(gamma) < stop[:, None], ids, -1)
    out[np.arange(batch), stop] = token
    return out
