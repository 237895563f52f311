"""Shared pieces of the buggy and control samplers (numpy, vectorised over the batch).

Each helper mirrors a step of the reference :func:`specdec_check.samplers.numpy_verify`
so that a catalogued variant differs from it in exactly one place.
"""

from __future__ import annotations

import numpy as np

__all__ = ["as_arrays", "assemble", "final_rows", "first_rejection", "gumbel_argmax", "inverse_cdf", "probs_at",
           "residual"]


def as_arrays(draft_token_ids, draft_probs, target_probs):
    """The three verifier inputs as int64 / float64 numpy arrays."""
    ids = np.asarray(draft_token_ids).astype(np.int64, copy=False)
    draft = np.asarray(draft_probs, dtype=np.float64)
    target = np.asarray(target_probs, dtype=np.float64)
    if not (np.isfinite(draft).all() and np.isfinite(target).all()):
        raise ValueError("draft_probs or target_probs holds a NaN or infinite probability.")
    return ids, draft, target


def probs_at(probs: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``probs[b, i, ids[b, i]]`` for the first ``ids.shape[1]`` positions, float64 [B, g]."""
    return np.take_along_axis(probs[:, : ids.shape[1]], ids[..., None], axis=2)[..., 0]


def residual(target_row: np.ndarray, draft_row: np.ndarray) -> np.ndarray:
    """Unnormalised residual ``max(0, p - q)`` row-wise."""
    return np.maximum(target_row - draft_row, 0.0)


def first_rejection(rejected: np.ndarray) -> np.ndarray:
    """Index of the first True per row, or ``g`` when none (int64 [B])."""
    gamma = rejected.shape[1]
    if gamma == 0:
        return np.zeros(rejected.shape[0], dtype=np.int64)
    return np.where(rejected.any(axis=1), rejected.argmax(axis=1), gamma).astype(np.int64)


def inverse_cdf(weights: np.ndarray, u: np.ndarray, *, normalise: bool = True) -> np.ndarray:
    """One token per row of the (unnormalised) ``weights`` [N, V] by inverse CDF with uniforms ``u`` [N].

    A row whose scan never passes ``u`` (zero or NaN mass, or ``normalise=False`` with a
    row summing to less than ``u``) yields its last positive-mass token, or ``V - 1`` when
    the row has no mass at all; that is what block-scan kernels that start ``sampled_id``
    at ``V - 1`` do (FlashInfer, SGLang), so a 0/0 shows up as a wrong law, not an exception.
    """
    vocab = weights.shape[1]
    cdf = np.cumsum(weights, axis=1)
    scale = cdf[:, -1] if normalise else np.ones(weights.shape[0])
    with np.errstate(invalid="ignore"):
        token = (cdf <= (u * scale)[:, None]).sum(axis=1)
    over = token >= vocab
    if over.any():
        positive = weights[over] > 0
        last = vocab - 1 - positive[:, ::-1].argmax(axis=1)
        token[over] = np.where(positive.any(axis=1), last, vocab - 1)
    return token.astype(np.int64)


def gumbel_argmax(weights: np.ndarray, exp_noise: np.ndarray) -> np.ndarray:
    """Exponential race: ``argmax(w / E)`` with ``E ~ Exp(1)``; zero-mass entries never win."""
    with np.errstate(divide="ignore", invalid="ignore"):
        keys = np.where(weights > 0, weights / exp_noise, -np.inf)
    return keys.argmax(axis=1).astype(np.int64)


def assemble(ids: np.ndarray, stop: np.ndarray, token: np.ndarray) -> np.ndarray:
    """Contract output [B, g+1]: drafts before ``stop``, ``token`` at ``stop``, then -1.

    A ``token`` of -1 leaves the position empty (used by the no-bonus variant).
    """
    batch, gamma = ids.shape
    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    if gamma:
        out[:, :gamma] = np.where(np.arange(gamma) < stop[:, None], ids, -1)
    out[np.arange(batch), stop] = token
    return out


def final_rows(ids, draft, target, stop):
    """The row the final token comes from, unnormalised: ``max(0, p_s - q_s)`` at a rejection s < g, ``p_g`` else."""
    batch, gamma = ids.shape
    rows = np.arange(batch)
    final = target[rows, stop].copy()
    rec = stop < gamma
    if rec.any():
        final[rec] = residual(target[rows[rec], stop[rec]], draft[rows[rec], stop[rec]])
    return final
