"""gpt-fast-style speculative step (Chen et al. names: q is the target) -> verifier contract."""

from __future__ import annotations

import inspect

import torch

from ._common import check_inputs, draw_seeds, forked_global_rng, named, pad_row

__all__ = ["from_gpt_fast"]


def _accepts_generator(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "generator" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def from_gpt_fast(speculative_step, *, probs_dtype=None):
    """Wrap a gpt-fast-style verification step as a verifier.

    gpt-fast (``generate.py::speculative_decode``) verifies inline in its decode loop, batch
    size 1, with **Chen et al.'s names: ``q`` is the target, ``p`` the draft**. To check gpt-fast's
    code as written, use :func:`from_gpt_fast_generate` (its ``generate`` or ``speculative_decode``
    on model objects with gpt-fast's interface). To check the verification block alone, factor it
    into a step callable with this signature (the one accepted here)::

        speculative_step(draft_tokens, p, q) -> tokens      # optionally also generator=...
            draft_tokens  int64 [k]      the drafted ids
            p             [k, V]         DRAFT probabilities   (gpt-fast: draft_probs)
            q             [k+1, V]       TARGET probabilities  (gpt-fast: target_probs; last row = bonus)
            returns       int [n], 1 <= n <= k+1: accepted drafts then the recovered/bonus token

    The adapter maps our names onto Chen's (``p=draft_probs, q=target_probs``, passed by
    keyword so a swap inside your step is what gets tested), loops over batch rows, and
    supplies randomness: a per-row ``torch.Generator`` (seeded from ours) if the step accepts a
    ``generator`` keyword, else the global RNG inside ``torch.random.fork_rng`` seeded from ours.
    Output rows are padded with -1 to ``k + 1``. ``probs_dtype`` optionally casts the
    probabilities first (None: as handed in).

    Example (gpt-fast's own code, lifted into a step)::

        def step(draft_tokens, p, q):
            k = draft_tokens.shape[0]
            idx = torch.arange(k)
            accept = torch.minimum(torch.ones(()), q[idx, draft_tokens] / p[idx, draft_tokens])
            rejected = (torch.rand_like(accept) > accept).nonzero()
            if rejected.shape[0] == 0:
                return torch.cat([draft_tokens, multinomial_sample_one_no_sync(q[-1])])
            n = rejected[0].item()
            new = torch.where(q[n] - p[n] > 0, q[n] - p[n], 0.0)
            return torch.cat([draft_tokens[:n], multinomial_sample_one_no_sync(new / new.sum())])

        report = check_verifier(from_gpt_fast(step), mode="quick", backend="torch")
    """
    if not callable(speculative_step):
        raise TypeError(f"from_gpt_fast needs a step callable (draft_tokens, p, q); got {type(speculative_step).__name__}.")
    own_generator = _accepts_generator(speculative_step)

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, draft, target = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        if probs_dtype is not None:
            draft, target = draft.to(probs_dtype), target.to(probs_dtype)
        batch, gamma = ids.shape
        device = target.device
        rows = []
        for row, seed in enumerate(draw_seeds(generator, batch)):
            if own_generator:
                g = torch.Generator(device=device).manual_seed(seed)
                out = speculative_step(ids[row], p=draft[row], q=target[row], generator=g)
            else:
                with forked_global_rng(device, seed):
                    out = speculative_step(ids[row], p=draft[row], q=target[row])
            rows.append(pad_row(torch.as_tensor(out, device=device), gamma + 1))
        if not rows:
            return torch.zeros((0, gamma + 1), dtype=torch.int64, device=device)
        return torch.stack(rows)

    return named(verify, speculative_step, "from_gpt_fast")
