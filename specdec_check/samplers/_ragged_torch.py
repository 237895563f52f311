"""The reference ragged verifier in torch: the production calling convention on any device.

The same contract and algorithm as :func:`specdec_check.samplers.numpy_ragged_verify`, batched on
the inputs' device: every random number comes from the ``torch.Generator`` given (uniforms for the
acceptance tests, one Exp(1) vector per request for the final token's exponential race,
``argmax(w / E)``); arithmetic is float32 for float32 / bfloat16 / float16 logits and float64 for
float64 ones. One host synchronisation reads ``max(num_draft_tokens)`` (the output's width).
"""

from __future__ import annotations

import torch

from .._torch_utils import same_device
from ..exact._sampling_params import VLLM_V1_PROCESSING, SamplingProcessing
from ._torch import check_generator

__all__ = ["torch_ragged_verifier", "torch_ragged_verify"]

_FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _tensor(name, x, device, *, floating):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__} (numpy inputs go with "
                        "numpy_ragged_verify).")
    if not same_device(x.device, device):
        raise ValueError(f"{name} is on {x.device} but target_logits is on {device}; put all inputs on one device.")
    if floating and x.dtype not in _FLOATS:
        raise ValueError(f"{name} must be a float tensor; got {x.dtype}.")
    if not floating and (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor; got {x.dtype}.")
    return x


def _check(draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k, top_p, min_p):
    logits = target_logits
    if not isinstance(logits, torch.Tensor) or logits.dtype not in _FLOATS or logits.dim() != 2:
        raise ValueError("target_logits must be a float tensor [T + B, V] (float32, float64, bfloat16 or float16).")
    device = logits.device
    n = _tensor("num_draft_tokens", num_draft_tokens, device, floating=False).long()
    ids = _tensor("draft_token_ids", draft_token_ids, device, floating=False).long()
    if n.dim() != 1 or ids.dim() != 1:
        raise ValueError(f"num_draft_tokens must be [B] and draft_token_ids [T]; got {tuple(n.shape)} and "
                         f"{tuple(ids.shape)}.")
    batch, total, vocab = n.shape[0], ids.shape[0], logits.shape[1]
    if bool((n < 0).any()) or int(n.sum()) != total:
        raise ValueError(f"num_draft_tokens must be >= 0 and sum to T = {total} drafts; got {n.tolist()}.")
    if logits.shape[0] != total + batch:
        raise ValueError(f"target_logits must be [T + B, V] = [{total + batch}, V]: each request's drafts' rows then "
                         f"its bonus row; got {tuple(logits.shape)}.")
    if bool(torch.isnan(logits).any()) or bool((logits == float("inf")).any()):
        raise ValueError("target_logits holds NaN or +inf; logits must be finite or -inf (masked).")
    if total and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise ValueError(f"draft_token_ids must lie in [0, {vocab}).")
    if draft_probs is not None:
        _tensor("draft_probs", draft_probs, device, floating=True)
        if tuple(draft_probs.shape) != (total, vocab):
            raise ValueError(f"draft_probs must be [T, V] = [{total}, {vocab}] or None; got {tuple(draft_probs.shape)}.")
        if not bool(torch.isfinite(draft_probs).all()):
            raise ValueError("draft_probs holds a NaN or infinite probability.")
    params = []
    for name, x, floating in (("temperature", temperature, True), ("top_k", top_k, False), ("top_p", top_p, True),
                              ("min_p", min_p, True)):
        if x is None:
            params.append(None)
            continue
        x = _tensor(name, x, device, floating=floating)
        if tuple(x.shape) != (batch,):
            raise ValueError(f"{name} must be [B] = [{batch}]; got {tuple(x.shape)}.")
        params.append(x)
    temperature, top_k, top_p, min_p = params
    if bool((temperature < 0).any()) or not bool(torch.isfinite(temperature).all()):
        raise ValueError("temperature must be finite and >= 0 (0 = greedy).")
    if bool((top_k < 0).any()):
        raise ValueError("top_k must be >= 0 (0 = off).")
    if bool(((top_p <= 0) | (top_p > 1)).any()):
        raise ValueError("top_p must lie in (0, 1] (1.0 = off).")
    return ids, n, draft_probs, logits, temperature, top_k.long(), top_p, min_p


def _processed(x, temperature, top_k, top_p, min_p, order):
    """Laws of every row (greedy rows at temperature 1, unused): vLLM's top-k/top-p masks, then softmax."""
    vocab = x.shape[1]
    neg = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)
    for step in order:
        if step == "temperature":
            x = x / temperature[:, None]
        elif step == "top_k":
            rows = ((top_k > 0) & (top_k < vocab)).nonzero()[:, 0]  # rows that filter: the others skip the sort
            if rows.numel():
                sub = x[rows]
                kth = sub.sort(dim=1, descending=True).values.gather(1, (top_k[rows] - 1)[:, None])
                x = x.index_put((rows,), torch.where(sub < kth, neg, sub))
        elif step == "top_p":
            rows = (top_p < 1).nonzero()[:, 0]
            if rows.numel():
                sub = x[rows]
                probs = sub.softmax(dim=1)
                ascending = probs.sort(dim=1).values
                dropped = (ascending.cumsum(dim=1) <= (1 - top_p[rows])[:, None]).sum(dim=1).clamp(max=vocab - 1)
                smallest_kept = ascending.gather(1, dropped[:, None])
                x = x.index_put((rows,), torch.where(probs < smallest_kept, neg, sub))
        elif step == "min_p" and min_p is not None:
            probs = x.softmax(dim=1)
            limit = min_p[:, None] * probs.max(dim=1, keepdim=True).values
            x = torch.where((min_p > 0)[:, None] & (probs < limit), neg, x)
    return x.softmax(dim=1)


def _verify(ids, n, draft_probs, logits, temperature, top_k, top_p, min_p, generator, order):
    device = logits.device
    cdt = torch.float64 if logits.dtype == torch.float64 else torch.float32
    batch, total, vocab = n.shape[0], ids.shape[0], logits.shape[1]
    width = int(n.max()) + 1 if batch else 1
    requests = torch.arange(batch, device=device)
    draft_start = n.cumsum(0) - n
    row_start = draft_start + requests
    draft_request = torch.repeat_interleave(requests, n, output_size=total)
    draft_position = torch.arange(total, device=device) - draft_start[draft_request]
    draft_row = row_start[draft_request] + draft_position
    row_request = torch.repeat_interleave(requests, n + 1, output_size=total + batch)
    greedy = temperature == 0
    t = torch.where(greedy, torch.ones_like(temperature), temperature).to(cdt)[row_request]
    probs = _processed(logits.to(cdt), t, top_k[row_request], top_p.to(cdt)[row_request],
                       None if min_p is None else min_p.to(cdt)[row_request], order)
    argmax = logits.argmax(dim=1)
    uniforms = torch.rand(total, generator=generator, device=device, dtype=cdt)
    p_x = probs[draft_row, ids]
    q_x = torch.ones_like(p_x) if draft_probs is None else draft_probs.to(cdt)[torch.arange(total, device=device), ids]
    accepted = torch.where(greedy[draft_request], ids == argmax[draft_row], uniforms * q_x < p_x)
    rejected = torch.ones((batch, width), dtype=torch.uint8, device=device)
    rejected[draft_request, draft_position] = (~accepted).to(torch.uint8)
    stop = rejected.argmax(dim=1)  # the first rejection, or n (the sentinel column)
    final_row = row_start + stop
    law = probs[final_row]
    recover = ~greedy & (stop < n)
    if total:
        flat = (draft_start + stop).clamp(max=total - 1)
        if draft_probs is None:
            hot = torch.zeros_like(law).scatter_(1, ids[flat][:, None], 1.0)
        else:
            hot = draft_probs.to(cdt)[flat]
        law = torch.where(recover[:, None], (law - hot).clamp(min=0), law)
    noise = torch.empty_like(law).exponential_(generator=generator)
    # An Exp(1) draw of exactly 0 (a zero uniform; 2^-24 per float32 draw) makes 0 / 0 = NaN, which argmax
    # would pick: a zero-probability entry never wins the race.
    sampled = torch.where(law > 0, law / noise, torch.full_like(law, -1.0)).argmax(dim=1)
    token = torch.where(greedy, argmax[final_row], sampled)
    out = torch.full((batch, width), -1, dtype=torch.int64, device=device)
    if total:
        keep = draft_position < stop[draft_request]
        out[draft_request[keep], draft_position[keep]] = ids[keep]
    out[requests, stop] = token
    return out


def torch_ragged_verifier(processing: SamplingProcessing = VLLM_V1_PROCESSING):
    """The torch reference ragged verifier for ``processing`` (default vLLM v1's order); with a
    processing that applies min-p it takes a ``min_p`` [B] keyword as well (0 = off)."""
    if not isinstance(processing, SamplingProcessing):
        raise TypeError(f"processing must be a SamplingProcessing; got {type(processing).__name__}.")
    order = processing.order

    def run(generator, *args):
        checked = _check(*args)
        check_generator(generator, checked[3].device, who="torch_ragged_verify")
        return _verify(*checked, generator, order)

    if processing.uses_min_p:
        def torch_ragged_verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                                top_p, min_p, generator):
            return run(generator, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                       top_p, min_p)
    else:
        def torch_ragged_verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                                top_p, generator):
            return run(generator, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                       top_p, None)
    torch_ragged_verify.__doc__ = (f"The reference ragged verifier in torch (processing {processing.describe()}); "
                                   "see specdec_check.samplers.numpy_ragged_verify for the contract.")
    torch_ragged_verify.processing = processing
    return torch_ragged_verify


torch_ragged_verify = torch_ragged_verifier()
torch_ragged_verify.__qualname__ = torch_ragged_verify.__name__ = "torch_ragged_verify"
