"""A torch port of SGLang's ``tree_speculative_sampling_target_only`` CUDA kernel (a fixture, not evidence).

Ported line by line from sgl-project/sglang ``sgl-kernel/csrc/speculative/speculative_sampling.cuh``
at commit b227f63247cdaf7fcbc4cfec8c3379120276ec82 (``TreeSpeculativeSamplingTargetOnly``) and its
launcher ``speculative_sampling.cu`` at c28bdc9012d29bed6b96688a44d6788157ef3d86, with the Python
signature of ``sgl_kernel.speculative`` at that time (``draft_probs`` passed in; later versions
drop it). Vectorised over the batch (the CUDA kernel runs one block per request); float32
arithmetic as the kernel's. Layout: node 0 of each request is the root (the last verified
token); ``retrive_next_token`` is the first child, ``retrive_next_sibling`` the next sibling;
``retrive_index`` maps a node to its slot in the flat ``predicts``; row ``j`` of ``target_probs``
is the target's law after node ``j``'s path.

The comparison ``coin <= prob_acc / threshold_acc`` is inclusive, as in the kernel: with a coin of
exactly 0 a child of target probability 0 is accepted (SGLang issue #35771). ``strict=True``
applies the fix of SGLang PR #35788 (accept only a child of positive target probability, with a
strict comparison).
"""

from __future__ import annotations

import torch

__all__ = ["tree_speculative_sampling_target_only"]

#: The launcher caps ``threshold_acc`` at this value (``fmaxf(threshold_acc, 1e-9f)``).
MIN_THRESHOLD_ACC = 1e-9


def tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                          retrive_next_token, retrive_next_sibling, uniform_samples,
                                          uniform_samples_for_final_sampling, target_probs, draft_probs,
                                          threshold_single: float = 1.0, threshold_acc: float = 1.0,
                                          deterministic: bool = True, *, strict: bool = False) -> None:
    """Fill ``predicts``, ``accept_index`` and ``accept_token_num`` in place, as the kernel does
    (``draft_probs`` is written into too: a rejected child's target probability is stored there)."""
    del deterministic  # the kernel's block-scan determinism switch; no effect on a sequential port
    if not (0.0 <= threshold_single <= 1.0 and 0.0 <= threshold_acc <= 1.0):
        raise ValueError("threshold_single and threshold_acc must lie in [0, 1] (CHECK_GE in the launcher).")
    device = target_probs.device
    batch, num_draft_tokens = candidates.shape
    num_spec = accept_index.shape[1]
    vocab = target_probs.shape[2]
    rows = torch.arange(batch, device=device)
    threshold_acc = torch.tensor(max(threshold_acc, MIN_THRESHOLD_ACC), dtype=torch.float32, device=device)
    threshold_single = torch.tensor(threshold_single, dtype=torch.float32, device=device)
    prob_acc = torch.zeros(batch, dtype=torch.float32, device=device)
    cur_prob_row = torch.zeros(batch, dtype=torch.long, device=device)  # cur_prob_offset / d
    coin = uniform_samples[:, 0].clone()
    last_accepted = retrive_index[:, 0].clone()
    accept_index[:, 0] = last_accepted.to(accept_index.dtype)
    accepted = torch.zeros(batch, dtype=torch.long, device=device)
    cur_index = torch.zeros(batch, dtype=torch.long, device=device)
    alive = torch.ones(batch, dtype=torch.bool, device=device)
    for _ in range(1, num_spec):
        cur_index = torch.where(alive, retrive_next_token[rows, cur_index], cur_index)
        searching = alive & (cur_index != -1)
        while bool(searching.any()):
            node = cur_index.clamp(min=0)
            draft_index = retrive_index[rows, node]
            token = candidates[rows, node]
            p_single = target_probs[rows, cur_prob_row, token]
            prob_acc = torch.where(searching, prob_acc + p_single, prob_acc)
            if strict:
                take = (p_single > 0) & ((coin < prob_acc / threshold_acc) | (p_single >= threshold_single))
            else:
                take = (coin <= prob_acc / threshold_acc) | (p_single >= threshold_single)
            take = searching & take
            miss = searching & ~take
            if bool(take.any()):
                r = rows[take]
                prob_acc[r] = 0.0
                cur_prob_row[r] = node[r]
                coin[r] = uniform_samples[r, node[r]]
                predicts[last_accepted[r]] = token[r].to(predicts.dtype)
                accepted[r] += 1
                accept_index[r, accepted[r]] = draft_index[r].to(accept_index.dtype)
                last_accepted[r] = draft_index[r]
            if bool(miss.any()):
                r = rows[miss]
                draft_probs[r, cur_prob_row[r], token[r]] = target_probs[r, cur_prob_row[r], token[r]]
                cur_index[r] = retrive_next_sibling[r, node[r]]
            searching = miss & (cur_index != -1)
        alive = alive & (cur_index != -1)  # a level with no accepted child ends the walk
    accept_token_num[:] = accepted.to(accept_token_num.dtype)
    coin = uniform_samples_for_final_sampling
    p = target_probs[rows, cur_prob_row]
    q = torch.where((accepted != num_spec - 1)[:, None], draft_probs[rows, cur_prob_row], torch.zeros_like(p))
    relu = (p - q).clamp(min=0.0)
    u = coin * relu.sum(dim=1)
    cdf = relu.cumsum(dim=1)
    above = (cdf > u[:, None]) & (relu > 0)
    sampled = torch.where(above.any(dim=1), above.to(torch.uint8).argmax(dim=1), torch.full_like(accepted, vocab - 1))
    predicts[last_accepted] = sampled.to(predicts.dtype)
