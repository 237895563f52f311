"""Block verification in numpy (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh,
"Block Verification Accelerates Speculative Decoding", ICLR 2025, Algorithm 2)."""

from __future__ import annotations

import numpy as np

__all__ = ["block_verify"]

#: Rows per block of the residual-mass pass, so its [rows, V] temporaries stay near 2^20 cells.
_BLOCK_CELLS = 1 << 20


def block_verify(*, draft_token_ids, draft_probs, target_probs, generator) -> np.ndarray:
    """One speculative step by block verification, exact, vectorised over the batch.

    Algorithm 2 of Sun et al. (ICLR 2025), with p_i / q_i the target / draft rows of position
    i = 1..gamma (``target_probs[:, i-1]``, ``draft_probs[:, i-1]``) and p_{gamma+1} the bonus row:

    - weights ``w_0 = 1``, ``w_i = min(w_{i-1} p_i(x_i) / q_i(x_i), 1)``;
    - stop probabilities ``h_i = r_i / (r_i + 1 - w_i)`` for i < gamma, with the residual mass
      ``r_i = sum_x max(w_i p_{i+1}(x) - q_{i+1}(x), 0)``, and ``h_gamma = w_gamma``;
    - ``eta_1..eta_gamma`` i.i.d. Uniform(0, 1); ``tau`` is the largest i with ``eta_i < h_i``
      (0 if none): drafts ``x_1..x_tau`` are accepted;
    - the final token is drawn from ``norm(max(w_tau p_{tau+1} - q_{tau+1}, 0))`` when
      tau < gamma, else from ``p_{gamma+1}``.

    Lossless, and optimal in expected accepted drafts among valid verifiers (the paper's
    Theorems 1 and 2); never worse than Leviathan et al.'s token-by-token rule. Unlike the
    standard rule it may reject a draft with ``p >= q`` and accept a later one: it is not
    the standard rule, so check it with a rule-agnostic test.

    Conventions: a drafted token with ``q_i(x_i) = 0`` has ratio +inf when ``p_i(x_i) > 0``
    (weight 1 unless already 0) and 0 when both are 0, as in
    :func:`specdec_check.exact.acceptance_probabilities`; ``h_i = 0`` when ``r_i + 1 - w_i = 0``
    (then ``w_i = 1`` and ``p_{i+1} = q_{i+1}``: a later stop probability is 1, so tau never
    depends on it). The comparison ``eta_i < h_i`` is strict, so ``h_i = 0`` never stops.

    Parameters follow the verifier contract: ``draft_token_ids`` int [B, gamma],
    ``draft_probs`` float [B, gamma, V], ``target_probs`` float [B, gamma+1, V], ``generator``
    a ``numpy.random.Generator`` (its only source of randomness: one uniform per position and
    one for the final token, drawn as ``generator.random((B, gamma + 1))``).
    Returns int64 [B, gamma+1]: accepted drafts, the final token, then -1.
    Raises ``ValueError`` when a probability is NaN or infinite, or when the law of the final
    token has no mass; ``TypeError`` for a generator that is not a numpy Generator.
    """
    ids, draft, target = _block_verify_iv(draft_token_ids, draft_probs, target_probs, generator)
    batch, gamma = ids.shape
    uniforms = generator.random((batch, gamma + 1))
    weights, stop_probs = _weights_and_stop_probs(ids, draft, target)
    if gamma:
        accepted = uniforms[:, :gamma] < stop_probs
        # tau: the largest i in 1..gamma whose coin passed, 0 if none
        tau = np.where(accepted.any(axis=1), gamma - accepted[:, ::-1].argmax(axis=1), 0)
    else:
        tau = np.zeros(batch, dtype=np.int64)
    token = _final_tokens(draft, target, weights, tau, uniforms[:, gamma])
    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    if gamma:
        out[:, :gamma] = np.where(np.arange(gamma) < tau[:, None], ids, -1)
    out[np.arange(batch), tau] = token
    return out


def _block_verify_iv(draft_token_ids, draft_probs, target_probs, generator):
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
    ids = np.asarray(draft_token_ids)
    if ids.dtype == bool or not np.issubdtype(ids.dtype, np.integer) or ids.ndim != 2:
        raise TypeError(f"draft_token_ids must be an integer array [B, gamma]; got dtype {ids.dtype}, "
                        f"shape {ids.shape}.")
    draft = np.asarray(draft_probs, dtype=np.float64)
    target = np.asarray(target_probs, dtype=np.float64)
    batch, gamma = ids.shape
    if target.ndim != 3 or target.shape[:2] != (batch, gamma + 1) or target.shape[2] < 1:
        raise ValueError(f"target_probs must be [B, gamma+1, V] = [{batch}, {gamma + 1}, V] to match draft_token_ids "
                         f"{ids.shape}; got {target.shape}.")
    vocab = target.shape[2]
    if draft.shape != (batch, gamma, vocab):
        raise ValueError(f"draft_probs must be [B, gamma, V] = {(batch, gamma, vocab)}; got {draft.shape}.")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        bad = tuple(int(i) for i in np.argwhere((ids < 0) | (ids >= vocab))[0])
        raise ValueError(f"draft_token_ids{list(bad)} = {int(ids[bad])} is outside the vocabulary [0, {vocab}).")
    if not (np.isfinite(target).all() and np.isfinite(draft).all()):
        raise ValueError("target_probs or draft_probs holds a NaN or infinite probability; block verification reads "
                         "every row (its stop probabilities need the residual mass at each position).")
    return ids.astype(np.int64, copy=False), draft, target


def _weights_and_stop_probs(ids, draft, target):
    """``w`` [B, gamma+1] (w_0..w_gamma) and ``h`` [B, gamma] (h_1..h_gamma) of Algorithm 2."""
    batch, gamma = ids.shape
    weights = np.ones((batch, gamma + 1))
    stop_probs = np.zeros((batch, gamma))
    if gamma == 0:
        return weights, stop_probs
    p_at = np.take_along_axis(target[:, :gamma], ids[..., None], axis=2)[..., 0]
    q_at = np.take_along_axis(draft, ids[..., None], axis=2)[..., 0]
    for i in range(1, gamma + 1):
        prev, p, q = weights[:, i - 1], p_at[:, i - 1], q_at[:, i - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(q > 0, prev * p / np.where(q > 0, q, 1.0), np.where((p > 0) & (prev > 0), 1.0, 0.0))
        weights[:, i] = np.minimum(scaled, 1.0)
    stop_probs[:, gamma - 1] = weights[:, gamma]
    if gamma > 1:
        mass = _residual_masses(weights[:, 1:gamma], target[:, 1:gamma], draft[:, 1:gamma])  # r_1..r_{gamma-1}
        denominator = mass + 1.0 - weights[:, 1:gamma]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = mass / np.where(denominator > 0, denominator, 1.0)
        # h_i <= 1 in exact arithmetic (w_i <= 1); clipping undoes the rounding of r_i + 1 - w_i
        stop_probs[:, : gamma - 1] = np.where(denominator > 0, np.minimum(ratio, 1.0), 0.0)
    return weights, stop_probs


def _residual_masses(weights, target, draft):
    """``sum_x max(w p(x) - q(x), 0)`` for weights [B, m] and target / draft rows [B, m, V], by blocks of rows."""
    batch, width, vocab = target.shape
    out = np.empty((batch, width))
    step = max(1, _BLOCK_CELLS // max(1, width * vocab))
    for lo in range(0, batch, step):
        hi = min(batch, lo + step)
        diff = weights[lo:hi, :, None] * target[lo:hi]
        np.subtract(diff, draft[lo:hi], out=diff)
        np.maximum(diff, 0.0, out=diff)
        out[lo:hi] = diff.sum(axis=2)
    return out


def _final_tokens(draft, target, weights, tau, uniforms):
    """Inverse-CDF draw from ``max(w_tau p_{tau+1} - q_{tau+1}, 0)`` (or ``p_{gamma+1}`` at tau = gamma)."""
    batch, gamma = draft.shape[0], draft.shape[1]
    rows = np.arange(batch)
    law = target[rows, tau].copy()
    early = tau < gamma
    if early.any():
        r = rows[early]
        law[early] = np.maximum(weights[r, tau[early], None] * law[early] - draft[r, tau[early]], 0.0)
    cdf = np.cumsum(law, axis=1)
    total = cdf[:, -1]
    token = np.count_nonzero(cdf <= (uniforms * total)[:, None], axis=1)
    over = token >= law.shape[1]  # u * total rounded up to the total, or a row without mass
    if over.any():
        positive = law[over] > 0
        if not positive.any(axis=1).all():
            bad = int(np.flatnonzero(over)[~positive.any(axis=1)][0])
            raise ValueError(f"row {bad}: the law of the final token at position {int(tau[bad])} has no mass "
                             "(a drafted token of draft probability 0?).")
        token[over] = law.shape[1] - 1 - positive[:, ::-1].argmax(axis=1)
    return token
