"""vLLM v1 ``RejectionSampler`` (``vllm/v1/sample/rejection_sampler.py``) -> verifier contract, dense inputs flattened.

v1 verifies requests of different draft lengths flattened into one token axis, takes the target's
*logits* (it applies temperature/top-k/top-p and the softmax itself) and metadata objects whose
fields change by version. Two ``forward`` layouts are known:

* v0.8 - v0.11 (e.g. 0.8.5): ``forward(metadata, draft_probs, target_logits [num_tokens, V],
  bonus_token_ids [B, 1], sampling_metadata) -> int32 [B, max_spec_len + 1]`` (bonus sampled outside);
* later: ``forward(metadata, draft_probs, logits [num_tokens + B, V], sampling_metadata) ->
  SamplerOutput`` (the bonus rows are in ``logits``; the sampler given to ``RejectionSampler(sampler)``
  draws the bonus token).

Until the ragged verifier kind lands, every request here carries the same ``gamma`` drafts (the
checker's dense rows, flattened in v1's layout).
"""

from __future__ import annotations

import dataclasses
import inspect

import torch

from ..samplers._torch import sample_rows
from ._common import (AdapterSignatureError, check_inputs, check_seeding, forked_global_rng, named, parameters_of,
                      plan_seeds, version_of)

__all__ = ["from_vllm_v1_dense"]


def _logits(probs: torch.Tensor) -> torch.Tensor:
    """float32 ``log p`` (-inf for zeros): v1's softmax at temperature 1 gives back ``p / sum(p)``."""
    probs = probs.to(torch.float32)
    return torch.where(probs > 0, probs.log(), torch.full_like(probs, float("-inf")))


class _FromField:
    """A field value computed from the dataclass field itself (e.g. an empty instance of its type)."""

    def __init__(self, make):
        self.make = make

    def __call__(self, field):
        return self.make(field)


#: ``SamplingMetadata.logitsprocs`` (v0.10+): an empty ``LogitsProcessors`` (no processors).
_EMPTY_OF_TYPE = _FromField(lambda field: field.type())


def _dataclass(cls, known: dict, label: str, version: str):
    """``cls(**fields)`` from ``known`` values for the fields it has; a usage error naming any field it needs
    that the adapter does not know."""
    if not dataclasses.is_dataclass(cls):
        raise AdapterSignatureError(f"{label}: {version}: {cls!r} is not the dataclass this adapter knows.")
    kwargs, missing = {}, []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.name in known:
            value = known[field.name]
            kwargs[field.name] = value(field) if isinstance(value, _FromField) else value
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            missing.append(field.name)
    if missing:
        raise AdapterSignatureError(f"{label}: {version}: {cls.__name__} needs field(s) {missing} this adapter does not "
                                    "know how to fill; report the vLLM version.")
    return cls(**kwargs)


def from_vllm_v1_dense(sampler, *, seeding: str = "mixed"):
    """Wrap vLLM v1's ``RejectionSampler`` as a verifier (random sampling at temperature 1).

    ``sampler`` is the class (built with no arguments; later versions need ``RejectionSampler(sampler)``
    with vLLM's ``Sampler``: pass that instance) or an instance. The adapter reads ``forward``'s layout
    (see the module docstring) and builds, per call, from the module's own classes:

    * ``SpecDecodeMetadata``: ``draft_token_ids`` flattened (int32), ``num_draft_tokens = [gamma] * B``,
      ``cu_num_draft_tokens`` (int32 inclusive cumsum) and the target/bonus logits indices of the layout;
    * ``SamplingMetadata``: temperature 1 for every request (``all_random``), no top-k/top-p, no
      penalties, and ``generators`` for the rows seeded by ``seeding`` (``"mixed"`` by default: a
      random half, at least one of each); unseeded rows draw from the global RNG, forked and seeded
      from our generator;
    * target logits ``log p`` (float32, -inf for zeros): v1 computes ``softmax(logits / 1)``, the rows'
      own law; the bonus token (first layout) is sampled outside from target row ``k``, as vLLM does.

    Output int32 ``[B, gamma + 1]`` (placeholder -1) comes back as int64. A ``forward`` or a metadata
    class the adapter does not know is an :class:`AdapterSignatureError` naming the version. v1's
    kernels are Triton: on a CPU they need ``TRITON_INTERPRET=1`` (slow: seconds per call).

    Example::

        from vllm.v1.sample.rejection_sampler import RejectionSampler
        from specdec_check.adapters import from_vllm_v1_dense
        from specdec_check.checker import check_verifier

        report = check_verifier(from_vllm_v1_dense(RejectionSampler), backend="torch", device="cuda")
    """
    check_seeding(seeding)
    label = "from_vllm_v1_dense"
    if isinstance(sampler, type):
        required = [name for name, p in parameters_of(sampler.__init__, label).items()
                    if name != "self" and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if required:
            raise AdapterSignatureError(
                f"{label}: {version_of(sampler)}: RejectionSampler{inspect.signature(sampler.__init__)} needs "
                f"{required}; build it (e.g. RejectionSampler(Sampler())) and pass the instance.")
        sampler = sampler()
    if not callable(getattr(sampler, "forward", None)):
        raise TypeError(f"{label} needs vLLM v1's RejectionSampler (class or instance); got {type(sampler).__name__}.")
    version = version_of(sampler)
    params = parameters_of(sampler.forward, label)
    namespace = getattr(type(sampler).forward, "__globals__", {})  # the sampler module's own names
    spec_class = namespace.get("SpecDecodeMetadata")
    sampling_class = namespace.get("SamplingMetadata")
    names = set(params)
    if {"metadata", "draft_probs", "target_logits", "bonus_token_ids", "sampling_metadata"} <= names:
        bonus_inside = False
    elif {"metadata", "draft_probs", "logits", "sampling_metadata"} <= names and "bonus_token_ids" not in names:
        bonus_inside = True
    else:
        raise AdapterSignatureError(f"{label}: {version}: RejectionSampler.forward{inspect.signature(sampler.forward)} "
                                    "is not a layout this adapter knows (v0.8-v0.11: target_logits + bonus_token_ids; "
                                    "later: logits with the bonus rows).")
    if spec_class is None or sampling_class is None:
        raise AdapterSignatureError(f"{label}: {version}: the sampler's module has no SpecDecodeMetadata / "
                                    "SamplingMetadata to build its inputs from.")

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        batch, gamma = ids.shape
        device = p.device
        vocab = p.shape[-1]
        plan = plan_seeds(generator, batch, seeding)
        per_request = gamma + 1 if bonus_inside else gamma
        rows = torch.arange(batch, device=device)[:, None] * per_request
        target_rows = (rows + torch.arange(gamma, device=device)).reshape(-1).to(torch.int32)
        bonus_rows = (rows[:, 0] + gamma).to(torch.int32)
        cu = torch.arange(1, batch + 1, device=device, dtype=torch.int32) * gamma
        metadata = _dataclass(spec_class, {
            "draft_token_ids": ids.reshape(-1).to(torch.int32).contiguous(),
            "num_draft_tokens": [gamma] * batch,
            "cu_num_draft_tokens": cu,
            "cu_num_sampled_tokens": torch.arange(1, batch + 1, device=device, dtype=torch.int32) * (gamma + 1),
            "target_logits_indices": target_rows,
            "bonus_logits_indices": bonus_rows,
            "logits_indices": torch.arange(batch * (gamma + 1), device=device, dtype=torch.int32),
        }, label, version)
        sampling = _dataclass(sampling_class, {
            "temperature": torch.ones(batch, dtype=torch.float32, device=device),
            "all_greedy": False, "all_random": True, "top_p": None, "top_k": None, "min_p": None,
            "generators": plan.generators(device), "max_num_logprobs": None, "no_penalties": True,
            "prompt_token_ids": None, "frequency_penalties": torch.zeros(batch, device=device),
            "presence_penalties": torch.zeros(batch, device=device),
            "repetition_penalties": torch.ones(batch, device=device),
            "output_token_ids": [[] for _ in range(batch)], "min_tokens": {}, "logit_bias": [None] * batch,
            "allowed_token_ids_mask": None, "bad_words_token_ids": {},
            "spec_token_ids": [[int(t) for t in row] for row in ids.tolist()], "logitsprocs": _EMPTY_OF_TYPE,
        }, label, version)
        flat_q = q.to(torch.float32).reshape(batch * gamma, vocab).contiguous()
        with forked_global_rng(device, plan.global_seed):
            if bonus_inside:
                logits = _logits(p).reshape(batch * (gamma + 1), vocab).contiguous()
                out = sampler(metadata=metadata, draft_probs=flat_q, logits=logits, sampling_metadata=sampling)
                out = out.sampled_token_ids
            else:
                bonus = sample_rows(p[:, gamma], generator)[:, None].to(torch.int32).contiguous()
                logits = _logits(p[:, :gamma]).reshape(batch * gamma, vocab).contiguous()
                out = sampler(metadata=metadata, draft_probs=flat_q, target_logits=logits, bonus_token_ids=bonus,
                              sampling_metadata=sampling)
        return torch.as_tensor(out).to(device=device, dtype=torch.int64)

    verify = named(verify, type(sampler), label)
    verify.layout = "logits with bonus rows, SamplerOutput" if bonus_inside else "target_logits + bonus_token_ids"
    return verify
