"""Block verification in torch (Sun et al., ICLR 2025, Algorithm 2), the twin of :func:`block_verify`."""

from __future__ import annotations

import torch

from ._torch import _check_verify_inputs, _compute_dtype, _row_sums, sample_rows

__all__ = ["torch_block_verify"]


def torch_block_verify(*, draft_token_ids, draft_probs, target_probs, generator) -> torch.Tensor:
    """One speculative step by block verification in torch, device-agnostic and sync-free.

    Same algorithm and law as :func:`specdec_check.samplers.block_verify` (Sun, Mendlovic, Leviathan,
    Aharoni, Beirami, Ro, Suresh, ICLR 2025, Algorithm 2): weights ``w_i = min(w_{i-1} p_i(x_i) /
    q_i(x_i), 1)``, stop probabilities ``h_i = r_i / (r_i + 1 - w_i)`` (i < gamma) with
    ``r_i = sum_x max(w_i p_{i+1}(x) - q_{i+1}(x), 0)`` and ``h_gamma = w_gamma``; ``tau`` the largest i
    with ``eta_i < h_i``; the final token from ``norm(max(w_tau p_{tau+1} - q_{tau+1}, 0))``, or from
    ``p_{gamma+1}`` when tau = gamma.

    Works on the inputs' device; rows are renormalised first, in float32 for float32 / bfloat16 /
    float16 inputs and float64 for float64 (as :func:`torch_verify`). ``generator`` is a
    ``torch.Generator`` on that device, the only randomness (gamma uniforms per row, then the
    exponential race of :func:`~specdec_check.samplers._torch.sample_rows` for the final token).
    Returns int64 [B, gamma+1] on that device. Like :func:`torch_verify` it never synchronises with
    the host: a row holding a NaN or infinite probability comes back as all -1, a final law
    without mass falls back to the target row, and out-of-range ids raise an indexing error.
    """
    ids, q, p = _check_verify_inputs(draft_token_ids, draft_probs, target_probs, generator)
    batch, gamma = ids.shape
    compute = _compute_dtype(torch.promote_types(p.dtype, q.dtype))
    device = p.device
    p_sum = _row_sums(p, compute)  # [B, gamma+1]
    p = p.to(compute) / p_sum[..., None]
    rows = torch.arange(batch, device=device)
    zero = torch.zeros((), dtype=compute, device=device)
    if gamma:
        q_sum = _row_sums(q, compute)  # [B, gamma]
        q = q.to(compute) / q_sum[..., None]
        eta = torch.rand((batch, gamma), generator=generator, device=device, dtype=compute)
        p_at = torch.gather(p[:, :gamma], 2, ids[..., None])[..., 0]
        q_at = torch.gather(q, 2, ids[..., None])[..., 0]
        columns = [torch.ones(batch, dtype=compute, device=device)]
        for i in range(gamma):
            prev = columns[-1]
            ratio = torch.where(q_at[:, i] > 0, prev * p_at[:, i] / torch.where(q_at[:, i] > 0, q_at[:, i], 1.0),
                                ((p_at[:, i] > 0) & (prev > 0)).to(compute))
            columns.append(torch.clamp(ratio, max=1.0))
        weights = torch.stack(columns, dim=1)  # [B, gamma+1]: w_0..w_gamma
        stop = torch.empty((batch, gamma), dtype=compute, device=device)  # h_1..h_gamma
        stop[:, gamma - 1] = weights[:, gamma]
        if gamma > 1:
            mass = torch.fmax(weights[:, 1:gamma, None] * p[:, 1:gamma] - q[:, 1:gamma], zero).sum(dim=2)
            denominator = mass + 1.0 - weights[:, 1:gamma]
            ratio = mass / torch.where(denominator > 0, denominator, torch.ones_like(denominator))
            stop[:, : gamma - 1] = torch.where(denominator > 0, torch.clamp(ratio, max=1.0), zero)
        passed = eta < stop  # NaN compares False
        positions = torch.arange(1, gamma + 1, device=device)
        tau = (passed.to(torch.int64) * positions).amax(dim=1)  # largest passing i, 0 if none
        row = tau.clamp(max=gamma - 1)
        final = torch.fmax(weights[rows, tau][:, None] * p[rows, row] - q[rows, row], zero)
        final = torch.where((tau == gamma)[:, None] | (final.amax(dim=1, keepdim=True) <= 0), p[rows, tau], final)
    else:
        tau = torch.zeros(batch, dtype=torch.int64, device=device)
        final = p[:, 0]
    token = sample_rows(final, generator)

    cols = torch.arange(gamma + 1, device=device)
    padded = torch.cat([ids, torch.zeros((batch, 1), dtype=torch.int64, device=device)], dim=1)
    out = torch.where(cols < tau[:, None], padded, torch.full_like(padded, -1))
    out.scatter_(1, tau[:, None], token[:, None])
    invalid = ~torch.isfinite(p_sum).all(dim=1)
    if gamma:
        invalid |= ~torch.isfinite(q_sum).all(dim=1)
    return torch.where(invalid[:, None], torch.full_like(out, -1), out)
