"""The exact law of one verifier step completed to L = gamma + 1 tokens by the target.

A step emits ``O = (x_1..x_k, y)``. Completing O to L tokens by sampling the missing
positions from the exact target conditionals gives an L-token sequence; the decode loop
built from the rule is exact if and only if, for every context, this completed law equals
the target's joint law of L tokens (each emitted string is a prefix of the completion,
and the target's continuation of a target-distributed prefix is target-distributed:
induction over steps; cf. Leviathan et al. 2023, Theorem 3.5, and the notion of a valid
verifier in Sun et al., ICLR 2025). This holds whatever the rule, so it judges block
verification, sampled match or any other rule by the same yardstick.

A rule is given by its per-row step law: ``step_law(draft_token_ids [N, g], draft_probs
[N, g, V], target_probs [N, g+1, V]) -> float64 [N, g+1, V]``, ``law[n, k, y] = P(k drafts
accepted, final token y | drafted path)`` (e.g. :func:`path_step_law` for the standard
rule, :func:`block_path_step_law`). The completed law is enumerated over all ``V^g``
drafted paths, so it is for small vocabularies.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_gamma, check_probability_rows
from ..models import last_token_probs, vocab_size_of
from ._enumerate import _prompt_array, _with_prompt, joint
from ._outcomes import MAX_OUTCOMES

__all__ = ["completed_law", "completed_law_tv", "pooled_completed_law_tv", "target_completed_law"]

#: Tolerance on the row sums of a rule's step law (float64 laws summing to 1).
STEP_LAW_ATOL = 1e-9


def completed_law(step_law, *, target=None, draft=None, gamma=None, prompt=None, target_probs=None,
                  draft_probs=None) -> np.ndarray:
    """Exact law of one step of the rule ``step_law`` on drafts drawn from the draft, completed to
    L = gamma + 1 tokens by the exact target.

    ``P(s_1..s_L) = sum_x q(x) sum_k [x_1..x_k = s_1..s_k] law_x(k, s_{k+1}) prod_{j > k+1} p(s_j | s_<j)``
    over drafted paths x (see the module docstring for why this is the yardstick of exactness).

    Two ways to give the laws:

    - models: ``target`` and ``draft`` causal models, ``gamma``, optional ``prompt`` (1-d token ids);
      every row is the model's law after ``prompt`` and the tokens before it. Returns float64 [V]*L.
    - fixed rows: ``target_probs`` [B, gamma+1, V] and ``draft_probs`` [B, gamma, V], where the law at
      position j of row b is ``target_probs[b, j]`` (``draft_probs[b, j]``) whatever the tokens before
      it (as :meth:`VerifierScenario.from_rows <specdec_check.scenarios.VerifierScenario.from_rows>`
      means them). Returns float64 [B] + [V]*L, one completed law per row.

    ``step_law`` is called with keywords on every drafted path of positive draft probability and
    must return non-negative rows summing to 1 (within 1e-9); anything else raises ``ValueError``
    naming the drafted path.
    """
    if not callable(step_law):
        raise TypeError(f"step_law must be a callable (draft_token_ids, draft_probs, target_probs) -> law; "
                        f"got {type(step_law).__name__}.")
    mode = _mode(target, draft, gamma, prompt, target_probs, draft_probs)
    if mode == "models":
        gamma = check_gamma(gamma)
        vocab = _shared_vocab(target, draft)
        _check_size(vocab, gamma, rows=1)
        prompt = _prompt_array(prompt, vocab)
        target_rows = _prefix_rows(target, prompt, vocab, gamma + 1)
        draft_rows = _prefix_rows(draft, prompt, vocab, gamma)
        law = _completed_from_prefix_rows(step_law, target_rows, draft_rows, vocab, gamma)
        return law.reshape((vocab,) * (gamma + 1))
    target_probs, draft_probs = _rows_iv(target_probs, draft_probs)
    batch, gamma, vocab = draft_probs.shape
    _check_size(vocab, gamma, rows=1)
    out = np.empty((batch, vocab ** (gamma + 1)))
    for b in range(batch):
        target_rows = [np.broadcast_to(target_probs[b, m], (vocab**m, vocab)) for m in range(gamma + 1)]
        draft_rows = [np.broadcast_to(draft_probs[b, m], (vocab**m, vocab)) for m in range(gamma)]
        out[b] = _completed_from_prefix_rows(step_law, target_rows, draft_rows, vocab, gamma)
    return out.reshape((batch,) + (vocab,) * (gamma + 1))


def target_completed_law(*, target=None, gamma=None, prompt=None, target_probs=None) -> np.ndarray:
    """The target's own joint law of L = gamma + 1 tokens: what :func:`completed_law` equals for a
    lossless rule. Models: ``joint(target, gamma + 1, prompt)`` [V]*L; fixed rows
    ``target_probs`` [B, gamma+1, V]: the product of each row's position laws, [B] + [V]*L."""
    if target_probs is None:
        if target is None or gamma is None:
            raise ValueError("give either target and gamma (and optionally prompt), or target_probs [B, gamma+1, V].")
        return joint(target, check_gamma(gamma) + 1, prompt)
    if target is not None or gamma is not None or prompt is not None:
        raise ValueError("give either target and gamma (and optionally prompt), or target_probs, not both.")
    target_probs = check_probability_rows(target_probs, name="target_probs")
    if target_probs.ndim != 3:
        raise ValueError(f"target_probs must be [B, gamma+1, V]; got shape {target_probs.shape}.")
    batch, length, vocab = target_probs.shape
    if vocab**length > MAX_OUTCOMES:
        raise ValueError(f"the joint over V={vocab} and L={length} has {vocab ** length:,} outcomes "
                         f"(limit {MAX_OUTCOMES:,}).")
    law = np.ones((batch, 1))
    for m in range(length):
        law = (law[:, :, None] * target_probs[:, m][:, None, :]).reshape(batch, -1)
    return law.reshape((batch,) + (vocab,) * length)


def completed_law_tv(step_law, *, target=None, draft=None, gamma=None, prompt=None, target_probs=None,
                     draft_probs=None):
    """Exact total-variation distance between the completed law of ``step_law`` (:func:`completed_law`)
    and the target's joint of L = gamma + 1 tokens: 0 exactly for a lossless rule.

    Returns a float (models) or float64 [B] (fixed rows). ``0.5 * sum |P - P_target|``.
    """
    law = completed_law(step_law, target=target, draft=draft, gamma=gamma, prompt=prompt, target_probs=target_probs,
                        draft_probs=draft_probs)
    if target_probs is None:
        reference = target_completed_law(target=target, gamma=gamma, prompt=prompt)
        return float(0.5 * np.abs(law - reference).sum())
    reference = target_completed_law(target_probs=target_probs)
    batch = law.shape[0]
    return 0.5 * np.abs(law - reference).reshape(batch, -1).sum(axis=1)


def pooled_completed_law_tv(step_law, *, target, draft, gamma, prompts) -> float:
    """Exact TV between (prompt, completed sequence) and (prompt, target sequence) when the prompt is
    drawn uniformly from the pool ``prompts`` (int [P, T], ``-1`` padding ignored): the mean over the
    pool of :func:`completed_law_tv` (both joints share the prompt marginal, so the TV of the joints
    is the average of the per-prompt TVs). This is the distance a scenario drawing its rows' contexts
    uniformly from a prompt pool exposes to a test conditional on the context.
    """
    pool = np.asarray(prompts)
    if pool.ndim != 2 or pool.shape[0] < 1:
        raise ValueError(f"prompts must be int [P, T] with P >= 1 (-1 padding allowed); got shape {pool.shape}.")
    return float(np.mean([completed_law_tv(step_law, target=target, draft=draft, gamma=gamma, prompt=row[row >= 0])
                          for row in pool]))


def _mode(target, draft, gamma, prompt, target_probs, draft_probs):
    by_model = target is not None or draft is not None or gamma is not None or prompt is not None
    by_rows = target_probs is not None or draft_probs is not None
    if by_model == by_rows:
        raise ValueError("give either target, draft and gamma (models, optionally prompt), or target_probs "
                         "[B, gamma+1, V] and draft_probs [B, gamma, V] (fixed rows), not both.")
    if by_model and (target is None or draft is None or gamma is None):
        raise ValueError("the models form needs target, draft and gamma.")
    if by_rows and (target_probs is None or draft_probs is None):
        raise ValueError("the fixed-rows form needs both target_probs and draft_probs.")
    return "models" if by_model else "rows"


def _shared_vocab(target, draft) -> int:
    vocab = vocab_size_of(target)
    if vocab_size_of(draft) != vocab:
        raise ValueError(f"target and draft must share a vocabulary; got V={vocab} and V={vocab_size_of(draft)}.")
    return vocab


def _check_size(vocab, gamma, *, rows):
    cells = rows * (gamma + 1) * vocab ** (gamma + 1)
    if cells > MAX_OUTCOMES:
        raise ValueError(f"enumerating the completed law over V={vocab}, gamma={gamma} needs {cells:,} step-law cells "
                         f"(limit {MAX_OUTCOMES:,}); use the Rosenblatt test (specdec_check.samplers.rosenblatt_pit) "
                         "instead.")


def _rows_iv(target_probs, draft_probs):
    target_probs = check_probability_rows(target_probs, name="target_probs")
    draft_probs = check_probability_rows(draft_probs, name="draft_probs")
    if target_probs.ndim != 3 or draft_probs.ndim != 3:
        raise ValueError(f"target_probs must be [B, gamma+1, V] and draft_probs [B, gamma, V]; got "
                         f"{target_probs.shape} and {draft_probs.shape}.")
    batch, gamma, vocab = draft_probs.shape
    if target_probs.shape != (batch, gamma + 1, vocab):
        raise ValueError(f"target_probs must have shape {(batch, gamma + 1, vocab)} to match draft_probs "
                         f"{draft_probs.shape} (the last target row is the bonus position); got {target_probs.shape}.")
    return target_probs, draft_probs


def _all_prefixes(vocab, length):
    """int64 [V^length, length]: every string of ``length`` tokens, first token most significant."""
    if length == 0:
        return np.zeros((1, 0), dtype=np.int64)
    return np.stack(np.unravel_index(np.arange(vocab**length), (vocab,) * length), axis=1).astype(np.int64)


def _prefix_rows(model, prompt, vocab, count):
    """``[rows_0, ..., rows_{count-1}]`` with ``rows_m`` [V^m, V] the law after ``prompt`` + each m-token prefix."""
    return [last_token_probs(model, _with_prompt(prompt, _all_prefixes(vocab, m))) for m in range(count)]


def _completed_from_prefix_rows(step_law, target_rows, draft_rows, vocab, gamma):
    """The completed law [V^L] from the target rows after every prefix of 0..gamma tokens and the draft
    rows after every prefix of 0..gamma-1 tokens (lists of [V^m, V])."""
    paths = _all_prefixes(vocab, gamma)  # [V^g, g]
    count = paths.shape[0]
    weight = np.ones(count)
    target_probs = np.empty((count, gamma + 1, vocab))
    draft_probs = np.empty((count, gamma, vocab))
    for m in range(gamma + 1):
        prefix = np.arange(count) // vocab ** (gamma - m)  # index of x_1..x_m among the m-token prefixes
        target_probs[:, m] = target_rows[m][prefix]
        if m < gamma:
            draft_probs[:, m] = draft_rows[m][prefix]
            weight *= draft_probs[np.arange(count), m, paths[:, m]]
    # paths the draft never proposes carry no weight: the rule is not asked about them
    drawn = np.flatnonzero(weight > 0)
    weighted = np.zeros_like(target_probs)
    law = _checked_step_law(step_law, paths[drawn], draft_probs[drawn], target_probs[drawn])
    weighted[drawn] = law * weight[drawn, None, None]
    # emitted[m] [V^(m+1)]: probability of emitting exactly the m+1 tokens (x_1..x_m, y)
    emitted = [weighted[:, m].reshape(vocab**m, vocab ** (gamma - m), vocab).sum(axis=1).reshape(-1)
               for m in range(gamma + 1)]
    completed = emitted[0]
    for m in range(1, gamma + 1):
        completed = (completed.reshape(vocab**m, 1) * target_rows[m]).reshape(-1) + emitted[m]
    return completed


def _checked_step_law(step_law, paths, draft_probs, target_probs):
    law = np.asarray(step_law(draft_token_ids=paths.copy(), draft_probs=draft_probs.copy(),
                              target_probs=target_probs.copy()), dtype=np.float64)
    if law.shape != target_probs.shape:
        raise ValueError(f"step_law must return [N, gamma+1, V] = {target_probs.shape}; got {law.shape}.")
    bad = ~np.isfinite(law).all(axis=(1, 2)) | (law < -STEP_LAW_ATOL).any(axis=(1, 2))
    bad |= np.abs(law.sum(axis=(1, 2)) - 1.0) > STEP_LAW_ATOL
    if bad.any():
        n = int(np.flatnonzero(bad)[0])
        raise ValueError(f"step_law returned a row that is not a law for the drafted path {paths[n].tolist()}: "
                         f"sum {law[n].sum()!r}, min {law[n].min()!r} (need finite, >= 0, summing to 1).")
    return np.maximum(law, 0.0)
