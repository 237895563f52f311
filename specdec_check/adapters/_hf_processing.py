"""The laws HuggingFace ``generate`` samples from by default: temperature, top-k, top-p applied to a model's laws.

numpy only (no transformers import): a :class:`HFProcessedModel` is a causal model the checker can
enumerate, so a generator scenario can declare the *processed* target law that ``generate`` with
default settings (``top_k=50``) actually targets.
"""

from __future__ import annotations

import numpy as np

from ..models import CausalModel

__all__ = ["HFProcessedModel", "hf_processed", "hf_warp"]

#: The HF models of :func:`specdec_check.adapters.hf.hf_models` carry one more logit than the
#: vocabulary (the BOS id ``V``, always ``-inf``); top-k counts it, as HF's ``TopKLogitsWarper`` does.
EXTRA_LOGITS = 1


def _log32(probs: np.ndarray) -> np.ndarray:
    """The float32 logits the HF models hand to ``generate``: log(p), -inf where p == 0."""
    with np.errstate(divide="ignore"):
        return np.log(probs).astype(np.float32)


def hf_warp(probs, *, temperature=1.0, top_k=50, top_p=1.0) -> np.ndarray:
    """HF's sampling warpers on float64 law rows ``probs [..., V]``: the law ``generate(do_sample=True)`` draws from.

    Mirrors ``transformers.generation.logits_process`` as ``_get_logits_processor`` orders them
    (temperature, then top-k, then top-p; each skipped at its neutral value), on the float32
    logits ``log p`` (:func:`hf_models` builds exactly those, plus one ``-inf`` BOS logit):

    * ``TemperatureLogitsWarper``: ``logits / temperature``;
    * ``TopKLogitsWarper``: keep the logits ``>=`` the ``min(top_k, V + 1)``-th largest (ties at the
      threshold are kept);
    * ``TopPLogitsWarper``: sort ascending, drop the tokens whose cumulative softmax is
      ``<= 1 - top_p`` (float32, as HF computes it), always keeping the largest.

    Returns ``softmax`` of the warped logits in float64. Ties in the top-p sort are broken by a
    stable sort here (torch's sort does not promise an order among equal logits).
    """
    probs = np.asarray(probs, dtype=np.float64)
    logits = _log32(probs)
    if temperature is not None and temperature != 1.0:
        logits = (logits / np.float32(temperature)).astype(np.float32)
    if top_k is not None and top_k != 0:
        width = probs.shape[-1] + EXTRA_LOGITS
        k = min(max(int(top_k), 1), width)
        padded = np.concatenate([logits, np.full(logits.shape[:-1] + (EXTRA_LOGITS,), -np.inf, np.float32)], -1)
        threshold = -np.sort(-padded, axis=-1)[..., k - 1: k]
        logits = np.where(logits < threshold, np.float32(-np.inf), logits)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(logits, axis=-1, kind="stable")
        ranked = np.take_along_axis(logits, order, -1)
        shifted = np.exp((ranked - ranked[..., -1:]).astype(np.float32))
        cumulative = np.cumsum(shifted / shifted.sum(-1, keepdims=True, dtype=np.float32), axis=-1, dtype=np.float32)
        remove = cumulative <= np.float32(1.0 - top_p)
        remove[..., -1] = False  # min_tokens_to_keep = 1
        dropped = np.zeros_like(remove)
        np.put_along_axis(dropped, order, remove, -1)
        logits = np.where(dropped, np.float32(-np.inf), logits)
    finite = np.isfinite(logits)
    top = np.max(np.where(finite, logits, -np.inf), axis=-1, keepdims=True)
    weights = np.where(finite, np.exp(logits.astype(np.float64) - top), 0.0)
    return weights / weights.sum(-1, keepdims=True)


class HFProcessedModel(CausalModel):
    """``model``'s laws after HF's default sampling warpers (:func:`hf_warp`): the law ``generate`` targets.

    ``unprocessed`` is the model itself; :func:`~specdec_check.adapters.hf.hf_models` builds its
    transformers model from those raw laws, so ``generate`` applies the warpers itself and the
    checker compares its output with this processed law.
    """

    def __init__(self, model: CausalModel, *, temperature=1.0, top_k=50, top_p=1.0):
        if not isinstance(model, CausalModel):
            raise TypeError(f"hf_processed needs a specdec_check CausalModel; got {type(model).__name__}.")
        if temperature is not None and not temperature > 0:
            raise ValueError(f"temperature must be > 0 (HF's TemperatureLogitsWarper); got {temperature!r}.")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0):
            raise ValueError(f"top_k must be an int >= 0 (0 or None: off); got {top_k!r}.")
        if top_p is not None and not 0.0 <= top_p <= 1.0:
            raise ValueError(f"top_p must lie in [0, 1]; got {top_p!r}.")
        self.unprocessed = model
        self.warpers = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
        self.vocab_size = int(model.vocab_size)
        self.order = int(model.order)
        self.num_law_keys = model.num_law_keys

    def probs_at(self, contexts):
        return hf_warp(self.unprocessed.probs_at(contexts), **self.warpers)

    def law_keys(self, contexts):
        return self.unprocessed.law_keys(contexts)  # equal raw laws give equal processed laws

    def __repr__(self):
        settings = ", ".join(f"{k}={v}" for k, v in self.warpers.items())
        return f"HFProcessedModel({self.unprocessed!r}, {settings})"


def hf_processed(model: CausalModel, *, temperature=1.0, top_k=50, top_p=1.0) -> HFProcessedModel:
    """``model`` as ``generate(do_sample=True)`` samples it with these settings (HF's defaults:
    ``temperature=1.0, top_k=50, top_p=1.0``): put it as a generator scenario's target (and draft,
    since HF warps the assistant's logits too) to check HF's loop against the law it targets."""
    return HFProcessedModel(model, temperature=temperature, top_k=top_k, top_p=top_p)
