"""Small local reimplementations of the peers' verification conventions (from notes in peers.md).

They copy each project's *calling convention and algorithm*, not its code: enough to test
that the adapters translate the conventions correctly. None of those projects is installed.
"""

from __future__ import annotations

import torch


# --------------------------------------------------------------------------- vLLM v0 RejectionSampler.forward
def vllm_v0_forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
    """vLLM v0: u < min(p/q, 1) per row from seeded_seqs; recovered = clamp(p - q, tiny) normalised, exponential race."""
    batch, k, vocab = draft_probs.shape
    assert target_with_bonus_probs.dtype == torch.float32 and draft_probs.dtype == torch.float32  # strict mode
    assert bonus_token_ids.shape == (batch, 1) and draft_token_ids.dtype == torch.int64
    target = target_with_bonus_probs[:, :k]
    rows = torch.arange(batch, device=draft_probs.device)[:, None]
    pos = torch.arange(k, device=draft_probs.device)
    p_at = target[rows, pos, draft_token_ids]
    q_at = draft_probs[rows, pos, draft_token_ids]
    u = torch.empty((batch, k), device=draft_probs.device)
    noise = torch.empty((batch, k, vocab), device=draft_probs.device)
    for row in range(batch):
        gen = (seeded_seqs or {}).get(row)
        u[row].uniform_(generator=gen)
        noise[row].exponential_(generator=gen)
    accepted = u < torch.clamp(p_at / q_at, max=1.0)
    recovered = torch.clamp(target - draft_probs, min=torch.finfo(torch.float32).tiny)
    recovered = recovered / recovered.sum(-1, keepdim=True)
    recovered_ids = torch.argmax(recovered / noise, dim=-1)
    # _create_output: first False is the limit
    limits = torch.where(accepted.all(1), torch.full((batch,), k, device=u.device), (~accepted).int().argmax(1))
    out = torch.full((batch, k + 1), -1, dtype=torch.int64, device=u.device)
    cols = torch.arange(k + 1, device=u.device)
    padded = torch.cat([draft_token_ids, bonus_token_ids], 1)
    rec = torch.cat([recovered_ids, bonus_token_ids], 1)
    out = torch.where(cols < limits[:, None], padded, out)
    out = torch.where(cols == limits[:, None], rec, out)
    return out


# --------------------------------------------------------------------------- FlashInfer chain_speculative_sampling
def flashinfer_chain_speculative_sampling(draft_probs, draft_token_ids, target_probs,
                                          maybe_output_accepted_token_num=None,
                                          maybe_output_emitted_draft_token_num=None,
                                          deterministic=True, generator=None):
    """FlashInfer: accept while u_i * q < p; residual by inverse CDF with u[min(pos+1, k)]; int32 ids; tuple result."""
    assert draft_token_ids.dtype == torch.int32, "FlashInfer takes int32 ids"
    draft_probs, target_probs = draft_probs.float(), target_probs.float()
    batch, k, vocab = draft_probs.shape
    ids = draft_token_ids.long()
    u = torch.rand((batch, k + 1), generator=generator, device=target_probs.device)
    rows = torch.arange(batch, device=u.device)
    pos = torch.arange(k, device=u.device)
    p_at = target_probs[rows[:, None], pos, ids]
    q_at = draft_probs[rows[:, None], pos, ids]
    passes = u[:, :k] * q_at < p_at
    stop = torch.cumprod(passes.long(), 1).sum(1)
    row_p = target_probs[rows, stop]
    law = row_p
    if k:
        row_q = draft_probs[rows, stop.clamp(max=k - 1)] * (stop < k)[:, None]
        law = torch.relu(row_p - row_q)
    cdf = torch.cumsum(law, -1)
    coin = u[rows, (stop + 1).clamp(max=k)] * cdf[:, -1]
    token = (cdf <= coin[:, None]).sum(-1).clamp(max=vocab - 1)  # a scan that never passes u emits V - 1
    cols = torch.arange(k + 1, device=u.device)
    padded = torch.cat([ids, torch.zeros((batch, 1), dtype=torch.int64, device=u.device)], 1)
    out = torch.where(cols < stop[:, None], padded, torch.full_like(padded, -1))
    out[rows, stop] = token
    accepted = passes.sum(1).int()
    emitted = stop.int()
    if maybe_output_accepted_token_num is not None:
        maybe_output_accepted_token_num += accepted
    if maybe_output_emitted_draft_token_num is not None:
        maybe_output_emitted_draft_token_num += emitted
    return out.int(), accepted, emitted


# --------------------------------------------------------------------------- HF transformers _speculative_sampling
def hf_speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits, is_done_candidate):
    """transformers.generation.utils._speculative_sampling (batch 1, global RNG), transcribed."""
    new_candidate_input_ids = candidate_input_ids[:, -candidate_length:]
    q = candidate_logits.softmax(dim=-1)
    q_i = q[:, torch.arange(candidate_length), new_candidate_input_ids].squeeze(0, 1)
    p = new_logits.softmax(dim=-1)
    p_i = p[:, torch.arange(candidate_length), new_candidate_input_ids].squeeze(0, 1)
    probability_ratio = p_i / q_i
    r_i = torch.rand_like(probability_ratio)
    is_accepted = r_i <= probability_ratio
    n_matches = ((~is_accepted).cumsum(dim=-1) < 1).sum()
    if is_done_candidate and n_matches == candidate_length:
        n_matches -= 1
        valid_tokens = new_candidate_input_ids[:, : n_matches + 1]
    else:
        gamma = candidate_logits.shape[1]
        p_n_plus_1 = p[:, n_matches, :]
        if n_matches < gamma:
            q_n_plus_1 = q[:, n_matches, :]
            p_prime = torch.clamp((p_n_plus_1 - q_n_plus_1), min=0)
            p_prime.div_(p_prime.sum())
        else:
            p_prime = p_n_plus_1
        t = torch.multinomial(p_prime, num_samples=1).squeeze(1)[None, :]
        if n_matches > 0:
            valid_tokens = torch.cat((new_candidate_input_ids[:, :n_matches], t), dim=-1)
        else:
            valid_tokens = t
    return valid_tokens, n_matches


# --------------------------------------------------------------------------- gpt-fast step (q = target, p = draft)
def multinomial_sample_one_no_sync(probs_sort, generator=None):
    q = torch.empty_like(probs_sort).exponential_(1, generator=generator)
    return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)


def gpt_fast_step(draft_tokens, p, q):
    """gpt-fast's verification block from speculative_decode (global RNG)."""
    k = draft_tokens.shape[0]
    idx = torch.arange(k, device=q.device)
    accept = torch.minimum(torch.ones((), device=q.device), q[idx, draft_tokens] / p[idx, draft_tokens])
    rejected = (torch.rand_like(accept) > accept).nonzero()
    if rejected.shape[0] == 0:
        return torch.cat([draft_tokens, multinomial_sample_one_no_sync(q[-1])])
    n = rejected[0].item()
    new = q[n] - p[n]
    new = torch.where(new > 0, new, 0.0)
    new = new / new.sum()
    return torch.cat([draft_tokens[:n], multinomial_sample_one_no_sync(new)])


def gpt_fast_step_with_generator(draft_tokens, p, q, generator=None):
    """The same step drawing from an explicit generator."""
    k = draft_tokens.shape[0]
    idx = torch.arange(k, device=q.device)
    accept = torch.minimum(torch.ones((), device=q.device), q[idx, draft_tokens] / p[idx, draft_tokens])
    u = torch.rand(accept.shape, generator=generator, device=q.device)
    rejected = (u > accept).nonzero()
    if rejected.shape[0] == 0:
        return torch.cat([draft_tokens, multinomial_sample_one_no_sync(q[-1], generator)])
    n = rejected[0].item()
    new = torch.where(q[n] - p[n] > 0, q[n] - p[n], 0.0)
    return torch.cat([draft_tokens[:n], multinomial_sample_one_no_sync(new / new.sum(), generator)])


def gpt_fast_step_names_swapped(draft_tokens, p, q):
    """Bug: treats p as the target (Leviathan's names) inside a Chen-named loop."""
    return gpt_fast_step(draft_tokens, p=q[:-1], q=torch.cat([p, q[-1:]]))
