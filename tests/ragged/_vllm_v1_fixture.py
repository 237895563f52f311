"""A local re-implementation of vLLM v1's ``RejectionSampler`` in plain torch: a FIXTURE, not evidence.

Written from ``vllm/v1/sample/rejection_sampler.py`` at commit 7f6fc1c5ce8d02f473b1b923debbfef3fa0b7a6a
(``forward``, ``apply_sampling_constraints``, ``expand_batch_to_tokens``, ``generate_uniform_probs``,
``sample_recovered_tokens`` and the three Triton kernels, here as Python loops) and
``vllm/v1/sample/ops/topk_topp_sampler.py`` (``apply_top_k_top_p_pytorch``, ``random_sample``); the
bonus token's ``Sampler`` follows ``vllm/v1/sample/sampler.py`` (temperature with greedy rows at 1,
top-k/top-p, softmax, argmax for greedy requests, exponential race with the request's generator
otherwise). It exists to test :func:`specdec_check.adapters.from_vllm_v1`'s plumbing (metadata,
indices, sentinels, seeding) where vLLM cannot be installed; passing against it says nothing about
vLLM itself: that is ``benchmarks/gpu_check.sh`` (the real kernels, on a CUDA machine with vLLM).

``mutation`` reproduces a plumbing bug in the fixture: "old_greedy_sentinel" (the kernels test
``temperature == -1`` while the metadata marks greedy requests with 0: vLLM PR #27077).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

PLACEHOLDER_TOKEN_ID = -1
GREEDY_TEMPERATURE = 0
_SAMPLING_EPS = 1e-5


@dataclass
class SamplerOutput:
    sampled_token_ids: torch.Tensor
    logprobs_tensors: object = None


def apply_top_k_top_p_pytorch(logits, k, p):
    """vLLM's ``apply_top_k_top_p_pytorch`` (ascending sort; top-k by the k-th value; top-p by the
    ascending cumulative mass at most ``1 - p``, always keeping the largest)."""
    if p is None and k is None:
        return logits
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        logits_sort.masked_fill_(logits_sort < top_k_mask, -float("inf"))
    if p is not None:
        probs_sum = logits_sort.softmax(dim=-1).cumsum(dim=-1)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


def random_sample(probs, generators):
    q = torch.empty_like(probs)
    if len(generators) != probs.shape[0]:
        q.exponential_()
    for i, generator in generators.items():
        q[i].exponential_(generator=generator)
    return probs.div_(q).argmax(dim=-1).view(-1)


class Sampler:
    """The bonus-token sampler (``vllm/v1/sample/sampler.py``, reduced to what the rejection sampler uses)."""

    def __call__(self, logits, sampling_metadata, **_):
        logits = logits.to(torch.float32)
        greedy = logits.argmax(dim=-1).view(-1)
        if sampling_metadata.all_greedy:
            return SamplerOutput(greedy.to(torch.int32)[:, None])
        temp = sampling_metadata.temperature
        temp = torch.where(temp < _SAMPLING_EPS, torch.ones_like(temp), temp)
        logits = apply_top_k_top_p_pytorch(logits / temp[:, None], sampling_metadata.top_k, sampling_metadata.top_p)
        sampled = random_sample(logits.softmax(dim=-1, dtype=torch.float32), sampling_metadata.generators)
        if not sampling_metadata.all_random:
            sampled = torch.where(sampling_metadata.temperature < _SAMPLING_EPS, greedy, sampled)
        return SamplerOutput(sampled.to(torch.int32)[:, None])


def expand_batch_to_tokens(x, cu_num_tokens, num_tokens, replace_from=0, replace_to=0):
    out = x.new_empty(num_tokens)
    start = 0
    for i in range(x.shape[0]):
        end = int(cu_num_tokens[i])
        value = x[i]
        out[start:end] = torch.where(value == replace_from, torch.as_tensor(replace_to, dtype=x.dtype), value)
        start = end
    return out


def apply_sampling_constraints(logits, cu_num_draft_tokens, sampling_metadata, greedy_temperature):
    if sampling_metadata.all_greedy:
        return logits
    num_tokens = logits.shape[0]
    temperature = expand_batch_to_tokens(sampling_metadata.temperature, cu_num_draft_tokens, num_tokens,
                                         replace_from=greedy_temperature, replace_to=1)
    logits.div_(temperature.unsqueeze(-1))
    top_k = None if sampling_metadata.top_k is None else \
        expand_batch_to_tokens(sampling_metadata.top_k, cu_num_draft_tokens, num_tokens)
    top_p = None if sampling_metadata.top_p is None else \
        expand_batch_to_tokens(sampling_metadata.top_p, cu_num_draft_tokens, num_tokens)
    return apply_top_k_top_p_pytorch(logits, top_k, top_p)


def generate_uniform_probs(num_tokens, num_draft_tokens, generators, device):
    uniform_probs = torch.rand((num_tokens,), dtype=torch.float64, device=device)
    start_idx = 0
    for req_idx, n in enumerate(num_draft_tokens):
        if n == 0:
            continue
        end_idx = start_idx + n
        generator = generators.get(req_idx)
        if generator is not None:
            uniform_probs[start_idx:end_idx].uniform_(generator=generator)
        start_idx = end_idx
    return uniform_probs


def sample_recovered_tokens(num_draft_tokens, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs,
                            sampling_metadata, device):
    batch_size, vocab_size = len(num_draft_tokens), target_probs.shape[-1]
    q = torch.empty((batch_size, vocab_size), dtype=torch.float32, device=device)
    q.exponential_()
    for i, generator in sampling_metadata.generators.items():
        if num_draft_tokens[i] > 0:
            q[i].exponential_(generator=generator)
    recovered = torch.empty_like(draft_token_ids)
    for req in range(batch_size):
        start = 0 if req == 0 else int(cu_num_draft_tokens[req - 1])
        for pos in range(int(cu_num_draft_tokens[req]) - start):
            t = start + pos
            if draft_probs is None:
                prob = target_probs[t].clone()
                prob[int(draft_token_ids[t])] = 0
            else:
                prob = (target_probs[t] - draft_probs[t]).clamp(min=0)
            recovered[t] = torch.argmax(prob / q[req])
    return recovered


def rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs, target_probs,
                     bonus_token_ids, sampling_metadata, greedy_temperature):
    batch_size, num_tokens = len(num_draft_tokens), draft_token_ids.shape[0]
    device = target_probs.device
    out = torch.full((batch_size, max_spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32, device=device)
    is_greedy = None if sampling_metadata.all_greedy else sampling_metadata.temperature == greedy_temperature

    def bounds(req):
        start = 0 if req == 0 else int(cu_num_draft_tokens[req - 1])
        return start, int(cu_num_draft_tokens[req])

    if not sampling_metadata.all_random:  # rejection_greedy_sample_kernel
        target_argmax = target_probs.argmax(dim=-1)
        for req in range(batch_size):
            if is_greedy is not None and not bool(is_greedy[req]):
                continue
            start, end = bounds(req)
            rejected = False
            for pos in range(end - start):
                if not rejected:
                    out[req, pos] = target_argmax[start + pos]
                    if int(draft_token_ids[start + pos]) != int(target_argmax[start + pos]):
                        rejected = True
            if not rejected:
                out[req, end - start] = bonus_token_ids[req]
        if sampling_metadata.all_greedy:
            return out
    uniform_probs = generate_uniform_probs(num_tokens, num_draft_tokens, sampling_metadata.generators, device)
    recovered = sample_recovered_tokens(num_draft_tokens, cu_num_draft_tokens, draft_token_ids, draft_probs,
                                        target_probs, sampling_metadata, device)
    for req in range(batch_size):  # rejection_random_sample_kernel
        if bool(is_greedy[req]):
            continue
        start, end = bounds(req)
        rejected = False
        for pos in range(end - start):
            if not rejected:
                t = start + pos
                x = int(draft_token_ids[t])
                draft_prob = 1 if draft_probs is None else draft_probs[t, x]
                if draft_prob > 0 and target_probs[t, x] / draft_prob >= uniform_probs[t]:
                    token = x
                else:
                    rejected = True
                    token = recovered[t]
                out[req, pos] = token
        if not rejected:
            out[req, end - start] = bonus_token_ids[req]
    return out


class RejectionSampler:
    """``forward(metadata, draft_probs, logits, sampling_metadata) -> SamplerOutput`` (the later convention)."""

    def __init__(self, sampler=None, *, mutation=None):
        self.sampler = sampler or Sampler()
        self.greedy_temperature = -1 if mutation == "old_greedy_sentinel" else GREEDY_TEMPERATURE

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, metadata, draft_probs, logits, sampling_metadata):
        bonus_logits = logits[metadata.bonus_logits_indices.long()]
        bonus_token_ids = self.sampler(bonus_logits, replace(sampling_metadata, max_num_logprobs=-1)).sampled_token_ids
        target_logits = logits[metadata.target_logits_indices.long()].to(torch.float32).clone()
        target_logits = apply_sampling_constraints(target_logits, metadata.cu_num_draft_tokens, sampling_metadata,
                                                   self.greedy_temperature)
        target_probs = target_logits.softmax(dim=-1, dtype=torch.float32)
        out = rejection_sample(metadata.draft_token_ids, metadata.num_draft_tokens, metadata.max_spec_len,
                               metadata.cu_num_draft_tokens, draft_probs, target_probs, bonus_token_ids.view(-1),
                               sampling_metadata, self.greedy_temperature)
        return SamplerOutput(out)
