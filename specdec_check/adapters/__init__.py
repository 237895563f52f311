"""Adapters from popular speculative-sampling code to the checker's contracts, built from the real signatures.

Each verifier adapter ``from_*`` takes the peer's function, class or object and returns
``verify(*, draft_token_ids, draft_probs, target_probs, generator) -> int64 [B, gamma+1]``
for ``check_verifier(..., backend="torch")``. It reads the callee's signature, passes every
argument by keyword, and detects the release's layout; a signature it does not know is an
:class:`AdapterSignatureError` naming the version (a usage error, never a verdict):

* :func:`from_vllm_v0` -- vLLM v0 ``RejectionSampler`` (class, instance or ``forward``; with or
  without the bonus row, ``seeded_seqs`` dict or ``generators`` list; ``seeding="mixed"`` by default);
* :func:`from_vllm_v1_dense` -- vLLM v1 ``RejectionSampler`` fed the checker's dense rows (every
  request ``gamma`` drafts, temperature 1, logits ``log p``), for ``check_verifier``;
* :func:`from_flashinfer` -- FlashInfer ``chain_speculative_sampling`` (``uniform_samples`` before
  v0.2.3, ``generator`` after);
* :func:`from_hf_transformers` -- HF ``_speculative_sampling`` (4.37, 4.57 and 5.x signatures);
* :func:`from_gpt_fast` -- a gpt-fast-style step (Chen et al. names: q is the target, p the draft).

Other contracts:

* :func:`from_vllm_v1` -- vLLM v1 ``RejectionSampler`` in its production calling convention: a
  *ragged* verifier (logits in, per-request draft counts and sampling parameters), checked with
  ``check_ragged_verifier``;
* :func:`from_sglang_tree` -- SGLang ``tree_speculative_sampling_target_only`` (first-child /
  next-sibling arrays, ``retrive_index``, coins passed in) as a tree verifier for
  ``check_tree_verifier`` (:func:`sglang_tree_layout` builds its arrays);
* decode loops end to end, for ``check_generator``: :func:`from_gpt_fast_generate` (gpt-fast's
  ``generate`` / ``speculative_decode`` as written, on :func:`gpt_fast_models` or its real
  ``Transformer``), :func:`from_classic_loop` (a single-sequence loop in the classic HF style,
  feifeibear's or romsto's, as written), :func:`from_mlx_generate` (mlx-lm's
  ``speculative_generate_step`` on mlx models; imports mlx when called), and :mod:`specdec_check.adapters.hf` (``hf_models``, ``from_hf_generate``, ``hf_processed``).

Token samplers (temperature / top-k / top-p / min-p kernels), for ``check_token_sampler``:
:func:`from_hf_logits_processors` (transformers' own processors), :func:`from_gpt_fast_sample`,
:func:`from_vllm_topk_topp`, :func:`from_sglang_torch_sampler`, :func:`from_flashinfer_sampling`
(:mod:`specdec_check.adapters._token`).

The peers' packages are never imported here: you pass their function in (transformers' sampling path is built
by transformers' own ``_get_logits_processor``, imported when that adapter is made).
"""

from ._classic_loop import from_classic_loop
from ._common import SEEDINGS, AdapterSignatureError
from ._flashinfer import from_flashinfer
from ._gpt_fast import from_gpt_fast
from ._gpt_fast_loop import from_gpt_fast_generate, gpt_fast_models
from ._hf import from_hf_transformers
from ._mlx import from_mlx_generate
from ._sglang import from_sglang_tree, sglang_tree_layout
from ._token import (from_flashinfer_sampling, from_gpt_fast_sample, from_hf_logits_processors,
                     from_sglang_torch_sampler, from_vllm_topk_topp)
from ._vllm_v0 import from_vllm_v0
from ._vllm_v1 import from_vllm_v1
from ._vllm_v1_dense import from_vllm_v1_dense

__all__ = [
    "AdapterSignatureError",
    "SEEDINGS",
    "from_classic_loop",
    "from_flashinfer",
    "from_flashinfer_sampling",
    "from_gpt_fast",
    "from_gpt_fast_generate",
    "from_gpt_fast_sample",
    "from_hf_logits_processors",
    "from_hf_transformers",
    "from_mlx_generate",
    "from_sglang_torch_sampler",
    "from_sglang_tree",
    "from_vllm_topk_topp",
    "from_vllm_v0",
    "from_vllm_v1",
    "from_vllm_v1_dense",
    "gpt_fast_models",
    "sglang_tree_layout",
]
