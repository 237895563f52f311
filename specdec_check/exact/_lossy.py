"""Exact per-row step laws of lossy verification rules used in production, as functions of their knobs.

Both are written for a chain (one drafted path) with the verifier contract's rows:
``target_probs[:, i-1]`` is p_i, ``target_probs[:, gamma]`` the bonus row p_{gamma+1}.
Their drafts' own laws (``draft_probs``) are not read: neither rule uses them.
"""

from __future__ import annotations

import numpy as np

from ._enumerate import _check_path

__all__ = ["MEDUSA_ENTROPY_EPS", "medusa_thresholds", "medusa_typical_path_step_law", "sglang_threshold_path_step_law"]

#: Medusa's entropy is ``-sum p log(p + 1e-5)`` (FasterDecoding/Medusa, medusa/model/utils.py).
MEDUSA_ENTROPY_EPS = 1e-5


def _positive_knob(name, value, *, upper=None):
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not number or not np.isfinite(value):
        raise TypeError(f"{name} must be a finite number; got {value!r}.")
    if value <= 0 or (upper is not None and value > upper):
        bound = f"in (0, {upper}]" if upper is not None else "> 0"
        raise ValueError(f"{name} must be {bound}; got {value!r}.")
    return float(value)


def medusa_thresholds(target_probs, *, posterior_threshold=0.09, posterior_alpha=0.3) -> np.ndarray:
    """Medusa's typical-acceptance threshold of each target row, float64 [...]:
    ``min(posterior_threshold, posterior_alpha * exp(-H(p)))`` with ``H(p) = -sum p log(p + 1e-5)``.

    FasterDecoding/Medusa ``medusa/model/utils.py`` (``evaluate_posterior``, ``get_typical_one_token``);
    the defaults are ``medusa_generate``'s (``posterior_threshold=0.09``, ``posterior_alpha=0.3``).
    """
    posterior_threshold = _positive_knob("posterior_threshold", posterior_threshold)
    posterior_alpha = _positive_knob("posterior_alpha", posterior_alpha)
    p = np.asarray(target_probs, dtype=np.float64)
    entropy = -(p * np.log(p + MEDUSA_ENTROPY_EPS)).sum(axis=-1)
    return np.minimum(posterior_threshold, posterior_alpha * np.exp(-entropy))


def medusa_typical_path_step_law(draft_token_ids, draft_probs, target_probs, *, posterior_threshold=0.09,
                                 posterior_alpha=0.3, fast=True) -> np.ndarray:
    """Exact step law [B, gamma+1, V] of Medusa's typical acceptance on a chain, given the drafted path.

    Draft ``x_i`` passes iff ``p_i(x_i) > t_i`` with ``t_i`` from :func:`medusa_thresholds`; the
    accepted count tau is the number of leading passes (``cumprod(posterior_mask).sum()``). The
    next token, at position tau + 1, is the first candidate of Medusa's next step
    (``generate_candidates``): the target's argmax when ``fast`` (``medusa_generate``'s default;
    ties go to the lowest id, as ``torch.argmax``), else a draw from ``p_{tau+1}`` restricted to
    ``{y: p_{tau+1}(y) >= t_{tau+1}}`` and renormalised (``get_typical_one_token``). The step is
    deterministic given the drafts when ``fast``. Source: FasterDecoding/Medusa @ e2a5d20,
    ``medusa/model/utils.py`` and ``medusa/model/medusa_model.py::medusa_generate`` (temperature 1).
    """
    ids, _, target_probs = _check_path(draft_token_ids, draft_probs, target_probs)
    thresholds = medusa_thresholds(target_probs, posterior_threshold=posterior_threshold,
                                   posterior_alpha=posterior_alpha)  # [B, gamma+1]
    batch, gamma = ids.shape
    rows = np.arange(batch)
    p_at = np.take_along_axis(target_probs[:, :gamma], ids[..., None], axis=2)[..., 0]
    passed = p_at > thresholds[:, :gamma]
    tau = np.cumprod(passed, axis=1).sum(axis=1) if gamma else np.zeros(batch, dtype=np.int64)
    final_row = target_probs[rows, tau]
    if fast:
        final = np.zeros_like(final_row)
        final[rows, final_row.argmax(axis=1)] = 1.0
    else:
        kept = np.where(final_row >= thresholds[rows, tau][:, None], final_row, 0.0)
        mass = kept.sum(axis=1, keepdims=True)
        if not (mass > 0).all():  # the argmax passes whenever posterior_alpha <= 1
            raise ValueError(f"row {int(np.flatnonzero(mass[:, 0] <= 0)[0])}: Medusa's typical sampling keeps no "
                             "token at these knobs (posterior_alpha above 1?).")
        final = kept / mass
    law = np.zeros_like(target_probs)
    law[rows, tau] = final
    return law


def sglang_threshold_path_step_law(draft_token_ids, draft_probs, target_probs, *, threshold_single=1.0,
                                   threshold_acc=1.0) -> np.ndarray:
    """Exact step law [B, gamma+1, V] of SGLang's target-only verification on a chain, given the drafted path.

    SGLang ``tree_speculative_sampling_target_only`` (sgl-kernel/csrc/speculative/speculative_sampling.cuh,
    ``TreeSpeculativeSamplingTargetOnly``): with one child per node, draft ``x_i`` is accepted iff
    ``coin_i <= p_i(x_i) / threshold_acc`` or ``p_i(x_i) >= threshold_single`` (one uniform coin per
    node), so with probability ``a_i = 1`` if ``p_i(x_i) >= threshold_single`` else
    ``min(1, p_i(x_i) / threshold_acc)``. At the first rejection the token is drawn from
    ``relu(p_i - d)`` where the (zero) draft buffer ``d`` got ``d(x_i) = p_i(x_i)``: ``p_i`` with
    ``x_i`` removed; after gamma acceptances, from ``p_{gamma+1}``. With both thresholds 1 (SGLang's
    defaults, ``--speculative-accept-threshold-single/-acc``) this is the one-hot rule, lossless
    for any draft; below 1 it accepts more and is lossy.
    """
    threshold_single = _positive_knob("threshold_single", threshold_single, upper=1.0)
    threshold_acc = _positive_knob("threshold_acc", threshold_acc, upper=1.0)
    ids, _, target_probs = _check_path(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    p_at = np.take_along_axis(target_probs[:, :gamma], ids[..., None], axis=2)[..., 0]
    accept = np.where(p_at >= threshold_single, 1.0, np.minimum(1.0, p_at / threshold_acc))
    reach = np.concatenate([np.ones((batch, 1)), np.cumprod(accept, axis=1)], axis=1)  # P(tau >= k)
    law = target_probs.copy()
    if gamma:
        np.put_along_axis(law[:, :gamma], ids[..., None], 0.0, axis=2)
        mass = law[:, :gamma].sum(axis=2, keepdims=True)
        law[:, :gamma] = np.divide(law[:, :gamma], mass, out=np.zeros_like(law[:, :gamma]), where=mass > 0)
        law[:, :gamma] *= (reach[:, :gamma] * (1.0 - accept))[..., None]
    law[:, gamma] *= reach[:, gamma, None]
    return law
