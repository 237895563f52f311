"""FlashInfer ``chain_speculative_sampling`` -> verifier contract, for the old and the new API."""

from __future__ import annotations

import inspect

import torch

from ._common import AdapterSignatureError, check_inputs, named, parameters_of, version_of

__all__ = ["from_flashinfer"]

#: The parameters both APIs have (``flashinfer/sampling.py``).
_COMMON = ("draft_probs", "draft_token_ids", "target_probs")


def from_flashinfer(chain_speculative_sampling, *, probs_dtype=torch.float32):
    """Wrap FlashInfer ``chain_speculative_sampling`` as a verifier (old and new API, read from the signature).

    * Before v0.2.3 (the API vLLM v0 called; v0.1.6 9ee26e73 .. v0.2.2 986e5b1f):
      ``chain_speculative_sampling(draft_probs, draft_token_ids, uniform_samples [B, k+1], target_probs,
      ...)``: the adapter draws the uniforms from our generator.
    * v0.2.3 (fdedc432) and later: ``(draft_probs, draft_token_ids, target_probs, ..., deterministic=True,
      generator=None)`` (later also ``seed``/``offset``): the adapter passes our generator.

    Every argument is passed by keyword; ids are cast to int32, probabilities to ``probs_dtype``
    (float32, as the kernel does internally; exact for bfloat16/float16). The first element of the
    returned tuple (int32 ``[B, k+1]``, -1 padded) comes back as int64. A signature with neither
    ``uniform_samples`` nor ``generator`` is an :class:`AdapterSignatureError` naming the version.

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
    params = parameters_of(chain_speculative_sampling, "from_flashinfer")
    old_api = "uniform_samples" in params
    if any(name not in params for name in _COMMON) or not (old_api or "generator" in params):
        raise AdapterSignatureError(
            f"from_flashinfer: {version_of(chain_speculative_sampling)}: chain_speculative_sampling"
            f"{inspect.signature(chain_speculative_sampling)} is not an API this adapter knows: it needs "
            f"{list(_COMMON)} and either uniform_samples (before v0.2.3) or generator (v0.2.3 and later).")
    fixed = {"deterministic": True} if "deterministic" in params else {}

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        batch, gamma = ids.shape
        kwargs = dict(fixed, draft_probs=q.to(probs_dtype), draft_token_ids=ids.to(torch.int32),
                      target_probs=p.to(probs_dtype))
        if old_api:
            kwargs["uniform_samples"] = torch.rand((batch, gamma + 1), generator=generator, dtype=torch.float32,
                                                   device=p.device)
        else:
            kwargs["generator"] = generator
        result = chain_speculative_sampling(**kwargs)
        out = result[0] if isinstance(result, (tuple, list)) else result
        return out.to(device=p.device, dtype=torch.int64)

    verify = named(verify, chain_speculative_sampling, "from_flashinfer")
    verify.api = "uniform_samples (before v0.2.3)" if old_api else "generator (v0.2.3+)"
    return verify
