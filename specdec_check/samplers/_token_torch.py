"""The reference token sampler in torch (any device): the numpy reference's contract and law
(:mod:`specdec_check.samplers._token_numpy`), computed batched in float64 on the device, one inverse-CDF
draw per output from the sampler's ``torch.Generator``."""

from __future__ import annotations

import torch

from ._token_numpy import NUMPY_TOKEN_PROCESSING

__all__ = ["torch_sample"]


def _processed(logits, temperature, top_k, top_p, min_p):
    """float64 [B, V]: each output's law (temperature, top-k with ties kept, top-p with ties kept, min-p)."""
    z = logits.to(torch.float64)
    vocab = z.shape[1]
    greedy = temperature == 0
    z = z / torch.where(greedy, torch.ones_like(temperature), temperature).to(torch.float64)[:, None]
    k = top_k.to(torch.int64)
    use_k = (k > 0) & (k < vocab)
    if bool(use_k.any()):
        ranked = torch.sort(z, dim=1, descending=True).values
        kth = ranked.gather(1, (k.clamp(1, vocab) - 1)[:, None])
        z = torch.where(use_k[:, None] & (z < kth), torch.full_like(z, float("-inf")), z)
    p = torch.softmax(z, dim=1)
    use_p = top_p < 1.0
    if bool(use_p.any()):
        desc = torch.sort(p, dim=1, descending=True).values
        before = torch.cumsum(desc, dim=1) - desc
        count = (before < top_p.to(torch.float64)[:, None]).sum(dim=1)
        last = desc.gather(1, (count - 1).clamp(min=0)[:, None])
        p = torch.where(use_p[:, None] & (p < last), torch.zeros_like(p), p)
        p = p / p.sum(dim=1, keepdim=True)
    use_m = min_p > 0
    if bool(use_m.any()):
        threshold = min_p.to(torch.float64)[:, None] * p.max(dim=1, keepdim=True).values
        p = torch.where(use_m[:, None] & (p < threshold), torch.zeros_like(p), p)
        p = p / p.sum(dim=1, keepdim=True)
    if bool(greedy.any()):
        one_hot = torch.zeros_like(p)
        one_hot.scatter_(1, logits.argmax(dim=1, keepdim=True), 1.0)
        p = torch.where(greedy[:, None], one_hot, p)
    return p


def torch_sample(*, logits, temperature, top_k, top_p, min_p, indices, generator):
    """:func:`~specdec_check.samplers.numpy_sample` in torch: output ``i`` from row ``indices[i]`` of ``logits``
    with its own parameters; returns int64 [B] on the logits' device."""
    indices = indices.to(torch.int64)
    params = torch.stack([indices.to(torch.float64), temperature.to(torch.float64), top_k.to(torch.float64),
                          top_p.to(torch.float64), min_p.to(torch.float64)], dim=1)
    distinct, which = torch.unique(params, dim=0, return_inverse=True)  # the laws are built once per distinct row
    rows = logits.index_select(0, distinct[:, 0].to(torch.int64))
    cast = temperature.dtype
    law = _processed(rows, distinct[:, 1].to(cast), distinct[:, 2].to(torch.int64), distinct[:, 3].to(cast),
                     distinct[:, 4].to(cast))
    cdf = torch.cumsum(law, dim=1)
    cdf = cdf / cdf[:, -1:]
    vocab = logits.shape[1]
    # one search over the distinct laws laid end to end: law j's cumulative sums live in [j, j + 1]
    flat = (cdf + torch.arange(cdf.shape[0], device=cdf.device, dtype=cdf.dtype)[:, None]).reshape(-1)
    u = torch.rand(indices.shape[0], generator=generator, device=logits.device, dtype=torch.float64)
    position = torch.searchsorted(flat, which.to(torch.float64) + u, right=True) - which * vocab
    return position.clamp(max=vocab - 1)


torch_sample.processing = NUMPY_TOKEN_PROCESSING
