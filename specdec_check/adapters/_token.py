"""Adapters from real token samplers to the token-sampler contract (``check_token_sampler``, torch backend).

Each returns ``sample(*, logits | probs, <steps>, generator) -> int64 [B]`` with a ``processing`` attribute that
declares what the peer's code does, read from that code (its order, its tie and boundary conventions); the
peer's function is called as it is, by keyword, on the rows the checker hands over:

* :func:`from_hf_logits_processors` -- transformers' sampling path: the ``LogitsProcessorList`` its own
  ``GenerationMixin._get_logits_processor`` builds for ``do_sample=True`` (temperature, top-k, top-p, min-p in
  its order), softmax, ``torch.multinomial``; greedy rows ``argmax`` of the raw logits;
* :func:`from_gpt_fast_sample` -- gpt-fast's ``sample(logits, temperature, top_k)`` (``generate.py``);
* :func:`from_vllm_topk_topp` -- vLLM v1's ``TopKTopPSampler.forward_native(logits, generators, k, p)``;
* :func:`from_sglang_torch_sampler` -- SGLang's ``top_k_top_p_min_p_sampling_from_probs_torch``;
* :func:`from_flashinfer_sampling` -- FlashInfer's ``top_k_top_p_sampling_from_logits`` (CUDA).

Peers whose parameters are scalars (transformers' warpers, gpt-fast's ``sample``) are called once per distinct
parameter set of the call; peers that draw from the global torch RNG are run inside a fork of it seeded from
the contract's generator (so the same generator state gives the same output, and fresh generators fresh ones).
"""

from __future__ import annotations

import torch

from ..exact._token_law import TokenProcessing
from ._common import forked_global_rng, named

__all__ = ["HF_PROCESSING", "from_flashinfer_sampling", "from_gpt_fast_sample", "from_hf_logits_processors",
           "from_sglang_torch_sampler", "from_vllm_topk_topp"]

#: transformers 5.x: ``_get_logits_processor`` appends TemperatureLogitsWarper, TopKLogitsWarper,
#: TopPLogitsWarper, MinPLogitsWarper in that order; top-k keeps every logit at least the k-th largest (ties
#: kept); top-p sorts ascending with ``torch.sort`` (not stable: ties at its boundary fall either way) and removes
#: cumulative mass at most 1 - p (the nucleus reaches p); greedy decoding is the argmax (the lowest index).
HF_PROCESSING = TokenProcessing(order=("temperature", "top_k", "top_p", "min_p"),
                                ties={"top_k": "keep", "top_p": "any", "greedy": "low_index"})


def _seed(generator) -> int:
    """A seed for the global RNG, drawn from the contract's generator (one draw per call)."""
    return int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())


def _groups(*params):
    """``[(values, rows)]``: the outputs of each distinct parameter set (scalars), in first-seen order."""
    stacked = torch.stack([p.to(torch.float64) for p in params], dim=1).cpu()
    distinct, which = torch.unique(stacked, dim=0, return_inverse=True)
    return [(distinct[j].tolist(), torch.nonzero(which == j).reshape(-1)) for j in range(distinct.shape[0])]


class _GenerationConfigOwner:
    """The object transformers' ``_get_logits_processor`` reads: a decoder-only model's config, and the mixin's
    own list-merging helper. Only what that method touches for ``do_sample=True`` warpers is here."""

    def __init__(self, vocab_size: int):
        from transformers import PretrainedConfig
        from transformers.generation.utils import GenerationMixin

        self.config = PretrainedConfig(vocab_size=vocab_size)
        self._merge_criteria_processor_list = GenerationMixin._merge_criteria_processor_list.__get__(self)


def from_hf_logits_processors():
    """transformers' own sampling path as a token sampler (see the module docstring).

    For each distinct (temperature, top_k, top_p, min_p) of a call, the processors are those transformers'
    ``GenerationMixin._get_logits_processor`` builds from ``GenerationConfig(do_sample=True, ...)``; the row's
    law is ``softmax`` of the processed scores and the token ``torch.multinomial(probs, 1)`` (transformers'
    ``_sample``), drawn from the contract's generator. Temperature 0 rows are greedy: ``argmax`` of the raw
    logits (``do_sample=False``). Declared: :data:`HF_PROCESSING`.

    Example::

        report = check_token_sampler(from_hf_logits_processors(), backend="torch", mode="quick")
    """
    from transformers import GenerationConfig
    from transformers.generation.utils import GenerationMixin

    built = {}

    def processors(vocab, t, k, p, m):
        key = (vocab, t, k, p, m)
        if key not in built:
            config = GenerationConfig(do_sample=True, temperature=t, top_k=int(k), top_p=p, min_p=m or None)
            built[key] = GenerationMixin._get_logits_processor(_GenerationConfigOwner(vocab), config)
        return built[key]

    def sample(*, logits, temperature, top_k, top_p, min_p, generator):
        out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
        for (t, k, p, m), rows in _groups(temperature, top_k, top_p, min_p):
            rows = rows.to(logits.device)
            scores = logits.index_select(0, rows)
            if t == 0:
                out[rows] = scores.argmax(dim=-1)
                continue
            scores = processors(logits.shape[1], t, k, p, m)(None, scores)
            probs = torch.softmax(scores, dim=-1)
            out[rows] = torch.multinomial(probs, 1, generator=generator).reshape(-1)
        return out

    sample.processing = HF_PROCESSING
    import transformers

    return named(sample, from_hf_logits_processors, f"transformers {transformers.__version__} sampling")


#: gpt-fast ``generate.py``: ``logits / max(temperature, 1e-5)`` (temperature 0 is a sharp sample, not an
#: argmax: tied maxima are drawn at random), top-k ``torch.where(logits < pivot, -inf, logits)`` (ties kept),
#: softmax, the exponential race on the global RNG.
GPT_FAST_PROCESSING = TokenProcessing(order=("temperature", "top_k"), ties={"top_k": "keep", "greedy": "any"})


def from_gpt_fast_sample(sample_fn):
    """gpt-fast's ``sample(logits, temperature, top_k) -> (idx_next, probs)`` as a token sampler.

    ``logits`` [B, 1, V] as gpt-fast's model returns them (it reads ``logits[:, -1]``); one call per distinct
    (temperature, top_k), top_k 0 passed as None (off); the global RNG (its ``exponential_``) forked and seeded
    from the contract's generator. Declared: :data:`GPT_FAST_PROCESSING`.

    Example::

        import sys; sys.path.insert(0, "gpt-fast")
        import generate
        report = check_token_sampler(from_gpt_fast_sample(generate.sample), backend="torch", mode="quick")
    """
    if not callable(sample_fn):
        raise TypeError(f"from_gpt_fast_sample needs gpt-fast's sample; got {type(sample_fn).__name__}.")

    def sample(*, logits, temperature, top_k, generator):
        out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
        with forked_global_rng(logits.device, _seed(generator)):
            for (t, k), rows in _groups(temperature, top_k):
                rows = rows.to(logits.device)
                idx, _ = sample_fn(logits.index_select(0, rows)[:, None, :], temperature=t,
                                   top_k=int(k) if k else None)
                out[rows] = idx.reshape(-1).to(torch.int64)
        return out

    sample.processing = GPT_FAST_PROCESSING
    return named(sample, sample_fn, "gpt-fast sample")


#: vLLM v1 ``apply_top_k_top_p_pytorch``: top-k keeps ``logits >= `` the k-th largest (ties kept); top-p on the
#: top-k law, sorted ascending with ``sort`` (not stable: boundary ties either way), removing cumulative mass
#: at most 1 - p; the temperature is applied before this op (by vLLM's ``Sampler``), so the op takes none.
VLLM_TOPK_TOPP_PROCESSING = TokenProcessing(order=("top_k", "top_p"), ties={"top_k": "keep", "top_p": "any"})


def from_vllm_topk_topp(sampler):
    """vLLM v1's ``TopKTopPSampler`` (an instance; its ``forward_native``) as a token sampler.

    ``forward_native(logits, generators, k, p)`` runs as written on a copy of the rows (it updates the logits in
    place); ``k`` per row with 0 (off) sent as V (vLLM's "no top-k"), ``p`` per row (1.0 off), ``generators``
    empty: the request-less path, whose exponential noise comes from the global RNG, forked and seeded from the
    contract's generator. Declared: :data:`VLLM_TOPK_TOPP_PROCESSING`.

    Example::

        from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler
        report = check_token_sampler(from_vllm_topk_topp(TopKTopPSampler()), backend="torch", mode="quick")
    """
    forward = getattr(sampler, "forward_native", None)
    if not callable(forward):
        raise TypeError("from_vllm_topk_topp needs a vLLM TopKTopPSampler (an object with forward_native).")

    def sample(*, logits, top_k, top_p, generator):
        vocab = logits.shape[1]
        k = torch.where(top_k > 0, top_k, torch.full_like(top_k, vocab)).to(torch.int64)
        with forked_global_rng(logits.device, _seed(generator)):
            out = forward(logits.clone(), {}, k, top_p.to(torch.float32))
        tokens = out[0] if isinstance(out, tuple) else out
        return tokens.reshape(-1).to(torch.int64)

    sample.processing = VLLM_TOPK_TOPP_PROCESSING
    return named(sample, forward, "vLLM TopKTopPSampler.forward_native")


#: SGLang ``top_k_top_p_min_p_sampling_from_probs_torch``: probabilities in, sorted descending (``sort``, not
#: stable); top-p zeroes tokens whose mass before them exceeds p (a nucleus whose mass is exactly p keeps the
#: next token: it *exceeds* p), then top-k by rank, then min-p against the largest probability; multinomial.
SGLANG_PROCESSING = TokenProcessing(inputs="probs", order=("top_p", "top_k", "min_p"), ties="any", nucleus="exceeds")


def from_sglang_torch_sampler(fn):
    """SGLang's torch top-k / top-p / min-p sampler ``fn(probs, top_ks, top_ps, min_ps, ...)`` as a token sampler.

    Called by keyword with the rows' probabilities, ``top_ks`` (0 sent as V: off), ``top_ps``, ``min_ps`` (and
    ``need_min_p_sampling`` where the release takes it); its ``torch.multinomial`` draws from the global RNG,
    forked and seeded from the contract's generator; a ``(tokens, success)`` pair is read as its tokens (a row
    it failed to sample is then a contract finding: its token is checked like any other).

    Example::

        from sglang.srt.layers.sampler import top_k_top_p_min_p_sampling_from_probs_torch as sample
        report = check_token_sampler(from_sglang_torch_sampler(sample), backend="torch", mode="quick")
    """
    import inspect

    params = inspect.signature(fn).parameters

    def sample(*, probs, top_p, top_k, min_p, generator):
        vocab = probs.shape[1]
        kwargs = {"probs": probs.clone(), "top_ks": torch.where(top_k > 0, top_k, torch.full_like(top_k, vocab)),
                  "top_ps": top_p, "min_ps": min_p}
        if "need_min_p_sampling" in params:
            kwargs["need_min_p_sampling"] = bool((min_p > 0).any())
        with forked_global_rng(probs.device, _seed(generator)):
            out = fn(**kwargs)
        tokens = out[0] if isinstance(out, tuple) else out
        return tokens.reshape(-1).to(torch.int64)

    sample.processing = SGLANG_PROCESSING
    return named(sample, fn, "SGLang torch sampler")


#: FlashInfer ``top_k_top_p_sampling_from_logits`` (``filter_apply_order="top_k_first"``): top-k then top-p on
#: the renormalised law; since #3774's fix a total order on (probability, index): exactly k kept.
FLASHINFER_PROCESSING = TokenProcessing(order=("top_k", "top_p"), ties="low_index", indices=True)


def from_flashinfer_sampling(fn):
    """FlashInfer's ``top_k_top_p_sampling_from_logits(logits, top_k, top_p, indices=..., generator=...)`` as a
    token sampler with rows reused through ``indices`` (CUDA only). ``top_k`` per output (0 sent as V: off).

    Example::

        import flashinfer
        sample = from_flashinfer_sampling(flashinfer.sampling.top_k_top_p_sampling_from_logits)
        report = check_token_sampler(sample, backend="torch", device="cuda", mode="quick")
    """

    def sample(*, logits, top_k, top_p, indices, generator):
        vocab = logits.shape[1]
        k = torch.where(top_k > 0, top_k, torch.full_like(top_k, vocab)).to(torch.int32)
        return fn(logits, k, top_p.to(torch.float32), indices=indices.to(torch.int32), deterministic=True,
                  generator=generator).reshape(-1).to(torch.int64)

    sample.processing = FLASHINFER_PROCESSING
    return named(sample, fn, "FlashInfer top_k_top_p_sampling_from_logits")
