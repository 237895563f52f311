"""vLLM v0 ``RejectionSampler.forward`` -> verifier contract."""

from __future__ import annotations

import torch

from ..samplers._torch import sample_rows
from ._common import check_inputs, draw_seeds, named

__all__ = ["from_vllm_v0"]


def from_vllm_v0(sampler_forward, *, probs_dtype=torch.float32):
    """Wrap vLLM v0 ``RejectionSampler.forward`` as a verifier.

    vLLM's call is ``forward(target_with_bonus_probs [B,k+1,V], bonus_token_ids [B,1] int64,
    draft_probs [B,k,V], draft_token_ids [B,k] int64, seeded_seqs: dict[int, torch.Generator])``
    and returns int64 [B, k+1] with -1 after the first rejection. The adapter:

    * samples the bonus token *outside* the kernel, as vLLM does, from target row ``k``
      (renormalised; exponential race) with our generator;
    * seeds every row: ``seeded_seqs = {row: torch.Generator(device).manual_seed(s_row)}`` with
      the seeds drawn from our generator, so the kernel never touches the global RNG;
    * casts the probabilities to ``probs_dtype`` (float32: vLLM's strict mode demands it; the
      bfloat16/float16 -> float32 cast is exact, so the law is the law of the rows handed in).

    Build the sampler with ``disable_bonus_tokens=False``: the default (True) blanks the last
    column, which the checker reports as a contract failure (an all-accepted step must emit
    the bonus token).

    Example::

        from vllm.model_executor.layers.rejection_sampler import RejectionSampler
        from specdec_check.adapters import from_vllm_v0
        from specdec_check.checker import check_verifier

        rs = RejectionSampler(disable_bonus_tokens=False, strict_mode=True)
        report = check_verifier(from_vllm_v0(rs.forward), backend="torch", device="cuda")
        print(report.summary())
    """
    if not callable(sampler_forward):
        raise TypeError(f"from_vllm_v0 needs RejectionSampler.forward (a callable); got {type(sampler_forward).__name__}.")

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        batch, gamma = ids.shape
        device = p.device
        p = p.to(probs_dtype)
        q = q.to(probs_dtype)
        bonus = sample_rows(p[:, gamma], generator)[:, None]
        seeded = {row: torch.Generator(device=device).manual_seed(seed)
                  for row, seed in enumerate(draw_seeds(generator, batch))}
        out = sampler_forward(p, bonus, q, ids, seeded_seqs=seeded)
        return torch.as_tensor(out).to(device=device, dtype=torch.int64)

    return named(verify, sampler_forward, "from_vllm_v0")
