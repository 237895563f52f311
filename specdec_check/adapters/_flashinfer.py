"""FlashInfer ``chain_speculative_sampling`` -> verifier contract."""

from __future__ import annotations

import torch

from ._common import check_inputs, named

__all__ = ["from_flashinfer"]


def from_flashinfer(chain_speculative_sampling, *, probs_dtype=torch.float32):
    """Wrap FlashInfer ``chain_speculative_sampling`` as a verifier.

    FlashInfer's call is ``chain_speculative_sampling(draft_probs [B,k,V], draft_token_ids [B,k] int32,
    target_probs [B,k+1,V], maybe_output_accepted_token_num=None, maybe_output_emitted_draft_token_num=None,
    deterministic=True, generator=None)`` returning ``(output_token_ids [B,k+1] int32, accepted_num,
    emitted_num)``. The adapter casts the ids to int32, the probabilities to ``probs_dtype``
    (float32, as the kernel does internally; exact for bfloat16/float16), passes our
    generator, keeps the first tuple element and returns it as int64.

    FlashInfer kernels run on CUDA only: check with ``device="cuda"``.

    Example::

        import flashinfer
        from specdec_check.adapters import from_flashinfer
        from specdec_check.checker import check_verifier

        verify = from_flashinfer(flashinfer.sampling.chain_speculative_sampling)
        report = check_verifier(verify, backend="torch", device="cuda", dtype="bfloat16")
        assert report.passed, report.summary()
    """
    if not callable(chain_speculative_sampling):
        raise TypeError("from_flashinfer needs flashinfer.sampling.chain_speculative_sampling (a callable); "
                        f"got {type(chain_speculative_sampling).__name__}.")

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        result = chain_speculative_sampling(q.to(probs_dtype), ids.to(torch.int32), p.to(probs_dtype),
                                            deterministic=True, generator=generator)
        out = result[0] if isinstance(result, (tuple, list)) else result
        return out.to(device=p.device, dtype=torch.int64)

    return named(verify, chain_speculative_sampling, "from_flashinfer")
