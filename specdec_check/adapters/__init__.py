"""Adapters from popular speculative-sampling kernels to the verifier contract.

Each ``from_*`` takes the peer's function (or bound method) and returns
``verify(*, draft_token_ids, draft_probs, target_probs, generator) -> int64 [B, gamma+1]``
for ``check_verifier(..., backend="torch")``. Conventions handled for you:

* :func:`from_vllm_v0` -- vLLM v0 ``RejectionSampler.forward`` (bonus sampled outside, per-row generators);
* :func:`from_vllm_v1` -- vLLM v1 ``RejectionSampler`` (a *ragged* verifier: logits in, per-request sampling
  parameters; check it with ``check_ragged_verifier``);
* :func:`from_flashinfer` -- FlashInfer ``chain_speculative_sampling`` (int32 ids, tuple result);
* :func:`from_hf_transformers` -- HF ``_speculative_sampling`` (logits, batch 1, global RNG);
* :func:`from_gpt_fast` -- gpt-fast-style step (Chen et al. names: q is the target, p the draft);
* :func:`from_sglang_tree` -- SGLang ``tree_speculative_sampling_target_only`` (first-child / next-sibling
  arrays, ``retrive_index``, coins passed in) as a tree verifier for ``check_tree_verifier``.

The peers' packages are never imported here: you pass their function in.
"""

from ._flashinfer import from_flashinfer
from ._gpt_fast import from_gpt_fast
from ._hf import from_hf_transformers
from ._sglang import from_sglang_tree, sglang_tree_layout
from ._vllm import from_vllm_v0
from ._vllm_v1 import from_vllm_v1

__all__ = ["from_flashinfer", "from_gpt_fast", "from_hf_transformers", "from_sglang_tree", "from_vllm_v0",
           "from_vllm_v1", "sglang_tree_layout"]
