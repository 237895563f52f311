"""Exact per-position laws by forward recursion over context states (no V**length blow-up)."""

from __future__ import annotations

import numpy as np

from .._validation import as_token_array
from ..models import CausalModel
from ..models import last_context_indices

__all__ = ["acceptance_rate", "marginals", "pair_marginals", "stationary_contexts"]

#: Largest number of (context, token) pairs one recursion step may hold.
MAX_STATE_TOKENS = 50_000_000


def _require_model(model, name: str) -> CausalModel:
    if not isinstance(model, CausalModel):
        raise TypeError(
            f"{name} must be a specdec_check model (MarkovModel, HashedMarkovModel, mix(...)) for the recursive "
            f"oracles; got {type(model).__name__}. Use exact.joint() for an arbitrary causal callable."
        )
    return model


def _start_state(models, prompt):
    order = max(m.order for m in models)
    vocab = models[0].vocab_size
    prompt = np.zeros(0, dtype=np.int64) if prompt is None else as_token_array(
        np.asarray(prompt).reshape(-1), vocab_size=vocab, name="prompt", ndim=1
    )
    ctx = last_context_indices(prompt[None, :], order=order, vocab_size=vocab)
    return ctx, np.ones(1), order, vocab


def _advance(ctx, weights, probs, vocab):
    """Next context states (deduplicated) and their weights after drawing one token from ``probs``."""
    order = ctx.shape[1]
    if ctx.shape[0] * vocab > MAX_STATE_TOKENS:
        raise ValueError(f"the recursion would hold {ctx.shape[0] * vocab:,} (context, token) pairs; model too large.")
    joint = weights[:, None] * probs
    keep = joint > 0
    src, tok = np.nonzero(keep)
    if order == 0:
        return ctx[:1], np.array([joint.sum()])
    new_ctx = np.concatenate([ctx[src, 1:], tok[:, None]], axis=1)
    codes = np.zeros(new_ctx.shape[0], dtype=np.int64)
    for i in range(order):
        codes = codes * (vocab + 1) + new_ctx[:, i]
    uniq, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    new_w = np.bincount(inverse.reshape(-1), weights=joint[src, tok], minlength=uniq.size)
    return new_ctx[first], new_w


def marginals(model, length: int, prompt=None) -> np.ndarray:
    """Exact per-position laws float64 [length, V] of the next ``length`` tokens after ``prompt``.

    Forward recursion ``P(x_t = y) = sum_c P(C_t = c) P(y | c)`` over the model's context
    states ``c`` (the last ``order`` tokens), so cost grows with the number of reachable
    contexts, never with V**length.
    """
    return _forward(model, length, prompt, pairs=False)[0]


def pair_marginals(model, length: int, prompt=None) -> np.ndarray:
    """Exact adjacent-pair laws float64 [length-1, V, V]: ``P(x_t = a, x_{t+1} = b)``."""
    return _forward(model, length, prompt, pairs=True)[1]


def _forward(model, length, prompt, *, pairs):
    model = _require_model(model, "model")
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be an int >= 1; got {length!r}.")
    ctx, weights, order, vocab = _start_state([model], prompt)
    margs = np.empty((length, vocab))
    pair = np.zeros((max(length - 1, 0), vocab, vocab)) if pairs else None
    for t in range(length):
        probs = model.probs_at(ctx)
        margs[t] = weights @ probs
        if pairs and t >= 1:
            if order == 0:
                pair[t - 1] = np.outer(margs[t - 1], margs[t])
            else:
                np.add.at(pair[t - 1], ctx[:, -1], weights[:, None] * probs)
        if t + 1 < length:
            ctx, weights = _advance(ctx, weights, probs, vocab)
    return margs, pair


def stationary_contexts(model, *, tol: float = 1e-13, max_iter: int = 100_000):
    """Stationary law of the model's own chain over contexts, started from the empty prompt.

    Returns ``(contexts int [S, order], weights float [S])``. Iterates the lazy chain
    ``pi <- (pi + pi P) / 2`` (same fixed points, aperiodic) from the start-of-sequence
    context until the L1 change is below ``tol``.
    """
    model = _require_model(model, "model")
    ctx, weights, order, vocab = _start_state([model], None)
    if order == 0:
        return ctx, weights
    for _ in range(max_iter):
        nxt_ctx, nxt_w = _advance(ctx, weights, model.probs_at(ctx), vocab)
        all_ctx = np.concatenate([ctx, nxt_ctx])
        all_w = np.concatenate([weights, nxt_w]) / 2
        codes = np.zeros(all_ctx.shape[0], dtype=np.int64)
        for i in range(order):
            codes = codes * (vocab + 1) + all_ctx[:, i]
        uniq, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        new_w = np.bincount(inverse.reshape(-1), weights=all_w, minlength=uniq.size)
        new_ctx = all_ctx[first]
        old = np.zeros(uniq.size)
        pos = np.searchsorted(uniq, codes[: ctx.shape[0]])
        old[pos] = weights
        ctx, weights = new_ctx, new_w
        if np.abs(new_w - old).sum() < tol:
            break
    keep = weights > 1e-300
    return ctx[keep], weights[keep] / weights[keep].sum()


def acceptance_rate(target, draft, context=None) -> float:
    """Acceptance rate of the standard rule (Leviathan et al. 2023, Definition 3.1).

    With a ``context`` (token ids): ``beta(context) = sum_x min(p(x), q(x))`` for the
    next-token laws of target p and draft q after that context. Without one: the paper's
    ``alpha = E[beta]``, averaged over the stationary distribution of contexts of the
    *target* chain (its own sampling chain, started from the empty prompt; see
    :func:`stationary_contexts`).
    """
    target = _require_model(target, "target")
    draft = _require_model(draft, "draft")
    if target.vocab_size != draft.vocab_size:
        raise ValueError(f"target and draft must share a vocabulary; got {target.vocab_size} and {draft.vocab_size}.")
    order = max(target.order, draft.order)
    if context is not None:
        ctx, _, _, _ = _start_state([target, draft], context)
        return float(np.minimum(target.probs_at(ctx), draft.probs_at(ctx)).sum())
    # The stationary law over target contexts, lifted to the joint context length.
    lifted = _lift(target, order)
    ctx, weights = stationary_contexts(lifted)
    beta = np.minimum(target.probs_at(ctx), draft.probs_at(ctx)).sum(axis=-1)
    return float(weights @ beta)


class _Lifted(CausalModel):
    """The same laws as ``model`` but remembering ``order`` tokens of context."""

    def __init__(self, model, order):
        self.model, self.order, self.vocab_size = model, order, model.vocab_size

    def probs_at(self, contexts):
        return self.model.probs_at(contexts)


def _lift(model, order):
    return model if model.order >= order else _Lifted(model, order)
