"""Buggy decode loops: each is the reference ``numpy_generate`` loop with one thing changed.

All keep the generator contract (``generate(*, target, draft, prompts, max_new_tokens,
gamma, generator) -> int [B, max_new_tokens]``) and verify with the exact ``numpy_verify``,
so every finding comes from the loop itself.
"""

from __future__ import annotations

import numpy as np

from ..models import last_token_probs
from ..samplers import categorical, numpy_verify
from ..samplers import check_generate_args

__all__ = [
    "bonus_dropped_from_context",
    "context_keeps_rejected_draft",
    "draft_greedy_with_soft_probs",
    "draft_sampled_from_truncated_law",
    "stale_draft_context",
    "target_call_per_token",
]


def _loop(*, target, draft, prompts, max_new_tokens, gamma, generator, bug: str, verify=numpy_verify):
    """The reference loop; ``bug`` selects the one change (see the public wrappers)."""
    gamma, vocab, prompts = check_generate_args(target, draft, prompts, max_new_tokens, gamma, generator)
    batch, prompt_len = prompts.shape
    # Rows may hold more than max_new_tokens + gamma + 1 columns of context under the bugs
    # (context and output diverge), so the output is kept apart from the context.
    width = 1 + prompt_len + 2 * (max_new_tokens + gamma + 1)
    seq = np.full((batch, width), -1, dtype=np.int64)  # the context the models see
    seq[:, 1: 1 + prompt_len] = prompts
    out = np.full((batch, max_new_tokens + gamma + 1), -1, dtype=np.int64)  # the emitted tokens
    produced = np.zeros(batch, dtype=np.int64)
    ctx_len = np.full(batch, prompt_len, dtype=np.int64)  # real context columns after column 0
    rows = np.arange(batch)
    while True:
        active = rows[produced < max_new_tokens]
        if active.size == 0:
            break
        n = active.size
        base = ctx_len[active]  # index of each chain's last context column
        horizon = int(base.max()) + gamma + 1
        window = seq[active, :horizon].copy()
        drafts = np.empty((n, gamma), dtype=np.int64)
        draft_rows = np.empty((n, gamma, vocab))
        stale = window.copy()
        if bug == "stale_draft":  # the draft's cache never saw the last token of the previous step
            stale[np.arange(n), base] = np.where(produced[active] > 0, -1, stale[np.arange(n), base])
        for j in range(gamma):
            draft_window = stale if bug == "stale_draft" else window
            draft_rows[:, j] = last_token_probs(draft, draft_window)
            if bug == "greedy_draft":
                drafts[:, j] = draft_rows[:, j].argmax(axis=1)
            elif bug == "truncated_draft":
                kept = _top_k(draft_rows[:, j], 2)
                drafts[:, j] = categorical(kept, generator)
            else:
                drafts[:, j] = categorical(draft_rows[:, j], generator)
            window[np.arange(n), base + 1 + j] = drafts[:, j]
            stale[np.arange(n), base + 1 + j] = drafts[:, j]
        positions = base[:, None] + np.arange(gamma + 1)
        if bug == "per_token_target":  # one target call per scored position
            target_rows = np.empty((n, gamma + 1, vocab))
            for j in range(gamma + 1):
                scored = np.asarray(target(_prefix(window, base + j)), dtype=np.float64)
                target_rows[:, j] = scored[np.arange(n), base + j]
        else:
            scored = np.asarray(target(window), dtype=np.float64)  # one target call for all gamma+1 positions
            target_rows = np.take_along_axis(scored, positions[..., None], axis=1)
        step = np.asarray(verify(draft_token_ids=drafts, draft_probs=draft_rows, target_probs=target_rows,
                                 generator=generator))
        emitted = (step >= 0).sum(axis=1)
        keep = np.arange(gamma + 1) < emitted[:, None]
        # Output: every emitted token, in order.
        out_cols = produced[active][:, None] + np.arange(gamma + 1)
        out[np.repeat(active, keep.sum(axis=1)), out_cols[keep]] = step[keep]
        # Context: what the models will see next.
        ctx = step.copy()
        advance = emitted.copy()
        if bug == "keeps_rejected":  # the rejected draft stays where the recovered token belongs
            rejected_at = emitted - 1
            rec = rejected_at < gamma
            ctx[rec, rejected_at[rec]] = drafts[rec, rejected_at[rec]]
        elif bug == "drop_bonus":  # the bonus token is emitted but never appended to the context
            advance = np.where(emitted == gamma + 1, gamma, emitted)
        ctx_keep = np.arange(gamma + 1) < advance[:, None]
        cols = base[:, None] + 1 + np.arange(gamma + 1)
        seq[np.repeat(active, ctx_keep.sum(axis=1)), cols[ctx_keep]] = ctx[ctx_keep]
        ctx_len[active] += advance
        produced[active] += emitted
    return out[:, :max_new_tokens].copy()


def _prefix(window: np.ndarray, last: np.ndarray) -> np.ndarray:
    """``window`` with every column after ``last`` (per row) set to padding."""
    cut = window.copy()
    cut[np.arange(window.shape[1])[None, :] > last[:, None]] = -1
    return cut


def _top_k(probs: np.ndarray, k: int) -> np.ndarray:
    """Keep the ``k`` largest entries of each row, renormalised."""
    if probs.shape[1] <= k:
        return probs
    threshold = -np.sort(-probs, axis=1)[:, k - 1: k]
    kept = np.where(probs >= threshold, probs, 0.0)
    return kept / kept.sum(axis=1, keepdims=True)


def context_keeps_rejected_draft(*, target, draft, prompts, max_new_tokens, gamma, generator):
    """After a rejection the context is advanced with the rejected draft x_s where the recovered token was emitted.

    The output shows the recovered token, but the next step conditions on the draft (a KV
    cache that kept the rejected draft's entry). Source: class of bug; cf. openvinotoolkit/
    openvino.genai#4190 (a one-iteration-late rejection handler that corrupts the output).
    """
    return _loop(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                 generator=generator, bug="keeps_rejected")


def bonus_dropped_from_context(*, target, draft, prompts, max_new_tokens, gamma, generator):
    """The bonus token is emitted but never appended to the context, so the next step conditions on a context without it.

    Source: class of bug; cf. the bonus-token KV-cache bookkeeping in vLLM (vllm-project/vllm#4212,
    PR #9730 "kv corruption with bonus tokens in spec decode").
    """
    return _loop(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                 generator=generator, bug="drop_bonus")


def stale_draft_context(*, target, draft, prompts, max_new_tokens, gamma, generator):
    """The draft's context (cache) is not updated with the last token of the previous step; lossless, fewer accepted.

    The draft reports the law it really sampled from, so the output stays exact, but it
    proposes from a stale context and acceptance drops. Source: vllm-project/vllm PR #9730
    (bonus token not in the draft KV cache, "sharp drop in the average acceptance rate");
    vllm-project/vllm-metal PR #716 (draft KV out of sync, lower acceptance, correct output).
    """
    return _loop(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                 generator=generator, bug="stale_draft")


def target_call_per_token(*, target, draft, prompts, max_new_tokens, gamma, generator):
    """Calls the target once per scored position instead of once per step: exact, but no speedup.

    Source: class of bug (verification not batched over the gamma + 1 positions), no specific report.
    """
    return _loop(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                 generator=generator, bug="per_token_target")


def draft_greedy_with_soft_probs(*, target, draft, prompts, max_new_tokens, gamma, generator):
    """Drafts greedily (argmax) but hands the verifier the draft's soft law as q.

    Source: huggingface/transformers#32867 ("Speculative sampling does not maintain probability
    distribution of main model"); z-lab/dflash#74; jaymody/speculative-sampling#3.
    """
    return _loop(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                 generator=generator, bug="greedy_draft")


def draft_sampled_from_truncated_law(*, target, draft, prompts, max_new_tokens, gamma, generator):
    """Draws drafts from the draft's top-2 truncated law but hands the verifier the untruncated q.

    Source: huggingface/transformers#47932 (candidate generators return a q they did not sample
    from); deepseek-ai/DeepSpec#31 (draft sampled in another dtype than the q used in rejection).
    """
    return _loop(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                 generator=generator, bug="truncated_draft")
