"""The reference verifier in numpy (Leviathan et al. 2023, Algorithm 1)."""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_verify"]


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
    rows = np.arange(batch)
    uniforms = generator.random((batch, gamma + 1))

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
        positive = final[overflow] > 0
        if not positive.any(axis=1).all():
            bad = int(rows[overflow][~positive.any(axis=1)][0])
            raise ValueError(f"row {bad}: the law to sample at position {int(stop[bad])} has no mass.")
        token[overflow] = vocab - 1 - positive[:, ::-1].argmax(axis=1)

    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    if gamma:
        out[:, :gamma] = np.where(np.arange(gamma) < stop[:, None], ids, -1)
    out[rows, stop] = token
    return out
