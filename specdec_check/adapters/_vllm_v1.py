"""vLLM v1 ``RejectionSampler.forward`` -> the ragged verifier contract.

Facts from ``vllm/v1/sample/rejection_sampler.py`` (commit 7f6fc1c5ce8d), ``vllm/v1/spec_decode/metadata.py``
(commit 1829ff4b88c2) and ``vllm/v1/sample/metadata.py`` (commit 82ac55cf195c):

- ``forward(metadata: SpecDecodeMetadata, draft_probs: Tensor | None, logits: Tensor,
  sampling_metadata: SamplingMetadata) -> SamplerOutput``; ``logits`` [T + B, V] holds each request's
  target rows then its bonus row, located by ``metadata.target_logits_indices`` [T] and
  ``metadata.bonus_logits_indices`` [B]; the bonus token is sampled inside by ``self.sampler``;
  the tokens are ``SamplerOutput.sampled_token_ids`` int32 [B, max_spec_len + 1], -1 padded.
  An older version takes ``forward(metadata, draft_probs, target_logits [T, V], bonus_token_ids [B, 1],
  sampling_metadata)`` and returns the tensor: the adapter then samples the bonus token itself.
- ``SpecDecodeMetadata``: ``draft_token_ids`` int32 [T], ``num_draft_tokens`` list[int],
  ``cu_num_draft_tokens`` and ``cu_num_sampled_tokens`` int32 inclusive cumulative sums,
  ``target_logits_indices``, ``bonus_logits_indices``, ``logits_indices``; ``max_spec_len`` is set in
  ``__post_init__``.
- ``SamplingMetadata``: ``temperature`` [B] (None when all greedy; greedy requests hold
  ``GREEDY_TEMPERATURE``, 0 in that version, -1 before), ``all_greedy``, ``all_random``, ``top_p`` and
  ``top_k`` [B] (None when no request uses them; top-k "off" is the vocabulary size), ``generators``
  (request index -> ``torch.Generator``) and penalty / logits-processor fields that change between
  versions (vLLM 0.33.0's wheel: the same fields, plus ``logprob_token_ids`` and
  ``thinking_budget_state_holder``, both defaulted; its ``SpecDecodeMetadata`` is unchanged).
"""

from __future__ import annotations

import dataclasses
import inspect

import torch

from ..samplers._ragged_torch import _check, _processed
from ._common import draw_seeds, forked_global_rng, named

__all__ = ["SamplingMetadataStandIn", "SpecDecodeMetadataStandIn", "from_vllm_v1", "vllm_v1_metadata"]


@dataclasses.dataclass
class SpecDecodeMetadataStandIn:
    """The fields of vLLM v1's ``SpecDecodeMetadata`` (used when vLLM is not importable)."""

    draft_token_ids: torch.Tensor
    num_draft_tokens: list
    cu_num_draft_tokens: torch.Tensor
    cu_num_sampled_tokens: torch.Tensor
    target_logits_indices: torch.Tensor
    bonus_logits_indices: torch.Tensor
    logits_indices: torch.Tensor

    def __post_init__(self):
        self.max_spec_len = max(self.num_draft_tokens)


@dataclasses.dataclass
class SamplingMetadataStandIn:
    """The fields of vLLM v1's ``SamplingMetadata`` at commit 82ac55cf (used when vLLM is not importable)."""

    temperature: torch.Tensor | None
    all_greedy: bool
    all_random: bool
    top_p: torch.Tensor | None
    top_k: torch.Tensor | None
    generators: dict
    max_num_logprobs: int | None
    no_penalties: bool
    prompt_token_ids: torch.Tensor | None
    frequency_penalties: torch.Tensor
    presence_penalties: torch.Tensor
    repetition_penalties: torch.Tensor
    output_token_ids: list
    allowed_token_ids_mask: torch.Tensor | None
    bad_words_token_ids: dict
    logitsprocs: object = None
    spec_token_ids: list | None = None
    logprobs_mode_override: object = None


def _vllm_classes():
    """vLLM's own metadata classes when vLLM is importable, else the stand-ins."""
    try:
        from vllm.v1.sample.metadata import SamplingMetadata
        from vllm.v1.spec_decode.metadata import SpecDecodeMetadata
    except Exception:  # noqa: BLE001 - vLLM absent or unimportable here: the stand-ins carry the same fields
        return SpecDecodeMetadataStandIn, SamplingMetadataStandIn
    return SpecDecodeMetadata, SamplingMetadata


def _default_logitsprocs():
    try:
        from vllm.v1.sample.logits_processor import LogitsProcessors
    except Exception:  # noqa: BLE001
        return None
    try:
        return LogitsProcessors()
    except TypeError:
        return None


def _build(cls, values: dict, extra: dict, what: str):
    """``cls(**kwargs)`` with the fields ``cls`` declares, from ``values`` then ``extra``."""
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else \
        list(inspect.signature(cls).parameters)
    merged = {**values, **extra}
    kwargs = {name: merged[name] for name in names if name in merged}
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING] \
        if dataclasses.is_dataclass(cls) else []
    if missing:
        raise TypeError(f"{what} {cls.__name__} needs field(s) {missing} that this adapter does not know; pass them "
                        f"with sampling_metadata_extra={{...}} (or metadata_extra) for your vLLM version.")
    return cls(**kwargs)


def vllm_v1_metadata(*, draft_token_ids, num_draft_tokens, temperature, top_k, top_p, generators, vocab_size,
                     greedy_temperature=0.0, spec_decode_metadata_cls=None, sampling_metadata_cls=None,
                     metadata_extra=None, sampling_metadata_extra=None):
    """``(SpecDecodeMetadata, SamplingMetadata)`` of a ragged call, as vLLM v1's model runner builds them."""
    spec_cls, sampling_cls = _vllm_classes()
    spec_cls = spec_decode_metadata_cls or spec_cls
    sampling_cls = sampling_metadata_cls or sampling_cls
    device = draft_token_ids.device
    n = num_draft_tokens.long()
    batch, total = n.shape[0], draft_token_ids.shape[0]
    cu_draft = n.cumsum(0)
    cu_sampled = (n + 1).cumsum(0)
    row_start = cu_sampled - n - 1
    request = torch.repeat_interleave(torch.arange(batch, device=device), n, output_size=total)
    position = torch.arange(total, device=device) - (cu_draft - n)[request]
    spec = _build(spec_cls, {
        "draft_token_ids": draft_token_ids.to(torch.int32),
        "num_draft_tokens": [int(v) for v in n.tolist()],
        "cu_num_draft_tokens": cu_draft.to(torch.int32),
        "cu_num_sampled_tokens": cu_sampled.to(torch.int32),
        "target_logits_indices": (row_start[request] + position).to(torch.int32),
        "bonus_logits_indices": (row_start + n).to(torch.int32),
        "logits_indices": torch.arange(total + batch, device=device, dtype=torch.int32),
    }, dict(metadata_extra or {}), "SpecDecodeMetadata")
    greedy = temperature == 0
    all_greedy, all_random = bool(greedy.all()), bool((~greedy).all())
    temp = torch.where(greedy, torch.full_like(temperature, greedy_temperature), temperature).to(torch.float32)
    values = {
        "temperature": None if all_greedy else temp,
        "all_greedy": all_greedy, "all_random": all_random,
        "top_p": None if bool((top_p >= 1).all()) else top_p.to(torch.float32),
        "top_k": None if bool((top_k == 0).all()) else torch.where(top_k == 0, vocab_size, top_k).to(torch.int32),
        "no_top_p": bool((top_p >= 1).all()), "no_top_k": bool((top_k == 0).all()),
        "generators": generators, "max_num_logprobs": None, "no_penalties": True, "prompt_token_ids": None,
        "frequency_penalties": torch.zeros(batch, device=device), "presence_penalties": torch.zeros(batch, device=device),
        "repetition_penalties": torch.ones(batch, device=device), "output_token_ids": [[] for _ in range(batch)],
        "allowed_token_ids_mask": None, "bad_words_token_ids": {}, "logitsprocs": _default_logitsprocs(),
        "spec_token_ids": None, "logprobs_mode_override": None, "min_p": None, "min_tokens": {},
        "stop_token_ids": [set() for _ in range(batch)],
    }
    return spec, _build(sampling_cls, values, dict(sampling_metadata_extra or {}), "SamplingMetadata")


def _old_convention(forward) -> bool:
    try:
        return "bonus_token_ids" in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return False


def from_vllm_v1(rejection_sampler, *, greedy_temperature=0.0, spec_decode_metadata_cls=None,
                 sampling_metadata_cls=None, metadata_extra=None, sampling_metadata_extra=None):
    """Wrap a vLLM v1 ``RejectionSampler`` (the module, or its ``forward``) as a ragged verifier.

    The adapter builds ``SpecDecodeMetadata`` and ``SamplingMetadata`` as vLLM's model runner does
    (vLLM's own classes when vLLM is importable, else stand-ins with the same fields; pass
    ``*_cls`` and ``*_extra`` for another version's fields), hands vLLM a copy of the logits
    (vLLM may update them in place), converts top-k 0 (off) to the vocabulary size, marks greedy
    requests with ``greedy_temperature`` (0; -1 for versions before the sentinel changed, vLLM PR
    #27077), and seeds every request: ``generators = {i: torch.Generator(device).manual_seed(s_i)}``
    with the seeds drawn from the checker's generator, and the global RNG forked and seeded from
    it around the call (the kernels draw unseeded requests' numbers there first). With the older
    ``forward(..., target_logits, bonus_token_ids, sampling_metadata)`` the bonus token is sampled
    here, from the processed bonus row (argmax for greedy requests; exponential race otherwise).

    Example (on a CUDA machine with vLLM)::

        from vllm.v1.sample.rejection_sampler import RejectionSampler
        from vllm.v1.sample.sampler import Sampler
        from specdec_check.adapters import from_vllm_v1
        from specdec_check.checker import check_ragged_verifier

        verify = from_vllm_v1(RejectionSampler(Sampler()))
        print(check_ragged_verifier(verify, backend="torch", device="cuda").summary())
    """
    forward = getattr(rejection_sampler, "forward", rejection_sampler)
    if not callable(forward):
        raise TypeError(f"from_vllm_v1 needs a RejectionSampler or its forward; got {type(rejection_sampler).__name__}.")
    call = rejection_sampler if callable(rejection_sampler) else forward
    old = _old_convention(forward)

    def verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k, top_p, generator):
        ids, n, q, logits, temperature, top_k, top_p, _ = _check(draft_token_ids, num_draft_tokens, draft_probs,
                                                                 target_logits, temperature, top_k, top_p, None)
        device = logits.device
        batch, vocab = n.shape[0], logits.shape[1]
        seeds = draw_seeds(generator, batch + 1)
        generators = {i: torch.Generator(device=device).manual_seed(s) for i, s in enumerate(seeds[:batch])}
        spec, sampling = vllm_v1_metadata(
            draft_token_ids=ids, num_draft_tokens=n, temperature=temperature, top_k=top_k, top_p=top_p,
            generators=generators, vocab_size=vocab, greedy_temperature=greedy_temperature,
            spec_decode_metadata_cls=spec_decode_metadata_cls, sampling_metadata_cls=sampling_metadata_cls,
            metadata_extra=metadata_extra, sampling_metadata_extra=sampling_metadata_extra)
        probs = None if q is None else q.to(torch.float32).contiguous()
        with forked_global_rng(device, seeds[batch]):
            if old:
                bonus = _bonus_tokens(logits, spec.bonus_logits_indices.long(), temperature, top_k, top_p, generator)
                out = call(spec, probs, logits[spec.target_logits_indices.long()].to(torch.float32).contiguous(),
                           bonus[:, None].to(torch.int32).contiguous(), sampling)
            else:
                out = call(spec, probs, logits.clone(), sampling)
        tokens = getattr(out, "sampled_token_ids", out)
        return torch.as_tensor(tokens).to(device=device, dtype=torch.int64)

    return named(verify, forward, "from_vllm_v1")


def _bonus_tokens(logits, bonus_rows, temperature, top_k, top_p, generator):
    """Bonus tokens sampled outside an older ``forward``: argmax for greedy requests, else an
    exponential race on the processed bonus row (vLLM v1's ``Sampler``)."""
    rows = logits[bonus_rows].to(torch.float32)
    greedy = temperature == 0
    t = torch.where(greedy, torch.ones_like(temperature), temperature).to(torch.float32)
    law = _processed(rows, t, top_k, top_p.to(torch.float32), None, ("temperature", "top_k", "top_p"))
    noise = torch.empty_like(law).exponential_(generator=generator)
    return torch.where(greedy, rows.argmax(dim=1), (law / noise).argmax(dim=1))
