"""How the verifier adapters bind each release's signature: fixtures with the historical signatures around the
local reimplementations of tests/torch/_peer_impls.py (the binding under test; the evidence on real code is in
test_upstream.py and the closing table). Laws by the calibrated G-test of tests/torch (ALPHA = 1e-9)."""

import dataclasses
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import _peer_impls as peers  # noqa: E402
from _torch_helpers import ALPHA, random_rows, tile, verify_pvalue  # noqa: E402

from specdec_check.adapters import (SEEDINGS, AdapterSignatureError, from_flashinfer, from_vllm_v0,  # noqa: E402
                                    from_vllm_v1_dense)
from specdec_check.adapters._common import plan_seeds  # noqa: E402


class _Counters:
    """What vLLM v0's base sampler holds: counters that are None until the worker initialises them."""

    def __init__(self):
        self.num_accepted_tokens = self.num_emitted_tokens = None
        self.num_draft_tokens = 0
        self.calls = []

    def _count(self):
        self.num_accepted_tokens += 0  # what _create_output does: fails on None (vLLM before init_tensors)
        self.num_emitted_tokens += 0


class V053(_Counters):
    """v0.5.3.post1: target rows without the bonus row, a generators list, disable_bonus_tokens, init_gpu_tensors(rank)."""

    def __init__(self, disable_bonus_tokens=True, strict_mode=False):
        super().__init__()
        self._disable_bonus_tokens, self._strict_mode = disable_bonus_tokens, strict_mode

    def init_gpu_tensors(self, rank: int) -> None:
        raise AssertionError("a CUDA rank on a CPU run")

    def forward(self, target_probs, bonus_token_ids, draft_probs, draft_token_ids, generators):
        self._count()
        assert target_probs.shape[1] == draft_probs.shape[1], "no bonus row in this layout"
        self.calls.append([g is not None for g in generators])
        seeded = {row: g for row, g in enumerate(generators) if g is not None}
        bonus = torch.full_like(target_probs[:, :1], 0.0)
        bonus[torch.arange(bonus.shape[0]), 0, bonus_token_ids[:, 0]] = 1.0  # the row k that yields the bonus given
        with_bonus = torch.cat([target_probs, bonus], 1)
        return peers.vllm_v0_forward(with_bonus, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=seeded)


class V065(_Counters):
    """v0.6.5: the bonus row, a seeded_seqs dict, init_tensors(device, device_type)."""

    def __init__(self, strict_mode=False, use_flashinfer=None):
        super().__init__()
        self._strict_mode = strict_mode
        self.initialised_on = None

    def init_tensors(self, device, device_type="cuda"):
        self.initialised_on = device
        self.num_accepted_tokens = torch.tensor(0)
        self.num_emitted_tokens = torch.tensor(0)

    def forward(self, target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
        self._count()
        self.calls.append(sorted((seeded_seqs or {}).keys()))
        return peers.vllm_v0_forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                                     seeded_seqs=seeded_seqs)


@pytest.mark.parametrize("cls", [V053, V065])
@pytest.mark.parametrize("seeding", SEEDINGS)
def test_vllm_v0_layouts_reproduce_the_law(cls, seeding):
    ids, q, p = random_rows(90, batch=3, gamma=2, vocab=5)
    verify = from_vllm_v0(cls, seeding=seeding)
    pvalue, impossible = verify_pvalue(verify, ids, q, p, n=8_000, seed=1)
    assert impossible == 0 and pvalue > ALPHA, pvalue


def test_vllm_v0_builds_the_sampler_as_the_worker_does():
    verify = from_vllm_v0(V053)
    assert verify.layout.startswith("target_probs (without the bonus row), generators list")
    assert verify.sampler._disable_bonus_tokens is False and verify.sampler._strict_mode is True
    sampler = V065(strict_mode=True)
    verify = from_vllm_v0(sampler)
    ids, q, p = random_rows(1, batch=4, gamma=1, vocab=3)
    verify(draft_token_ids=torch.from_numpy(ids), draft_probs=torch.from_numpy(q), target_probs=torch.from_numpy(p),
           generator=torch.Generator().manual_seed(0))
    assert sampler.initialised_on == "cpu" and sampler.num_accepted_tokens is not None
    with pytest.raises(ValueError, match="disable_bonus_tokens"):
        from_vllm_v0(V053(disable_bonus_tokens=True))


def test_mixed_seeding_mixes_every_batch():
    """Every call of a batch >= 2 has seeded and unseeded rows (#10863 needs both); "all"/"none" as named."""
    sampler = V065()
    verify = from_vllm_v0(sampler)
    ids, q, p = random_rows(2, batch=2, gamma=1, vocab=3)
    kw = dict(draft_token_ids=tile(ids, 3), draft_probs=tile(q, 3), target_probs=tile(p, 3))
    for seed in range(40):
        verify(**kw, generator=torch.Generator().manual_seed(seed))
    assert all(0 < len(rows) < 6 for rows in sampler.calls)
    fractions = np.mean([len(rows) / 6 for rows in sampler.calls])
    assert 0.3 < fractions < 0.7
    gen = torch.Generator().manual_seed(0)
    assert plan_seeds(gen, 5, "all").seeded_rows == [0, 1, 2, 3, 4] and plan_seeds(gen, 5, "none").seeded_rows == []
    with pytest.raises(ValueError, match="seeding"):
        from_vllm_v0(V065, seeding="some")


def test_vllm_unknown_layouts_are_usage_errors():
    class Future(_Counters):
        def forward(self, target_logits, bonus_token_ids, draft_probs, draft_token_ids):
            raise AssertionError("never called")

    with pytest.raises(AdapterSignatureError, match="not a layout this adapter knows"):
        from_vllm_v0(Future)

    class NeedsMore(_Counters):
        def forward(self, target_probs, bonus_token_ids, draft_probs, draft_token_ids, temperature):
            raise AssertionError("never called")

    with pytest.raises(AdapterSignatureError, match="temperature"):
        from_vllm_v0(NeedsMore())
    with pytest.raises(AdapterSignatureError, match="not a layout"):
        from_vllm_v1_dense(type("RejectionSampler", (), {"forward": lambda self, x: x}))


def flashinfer_old_api(draft_probs, draft_token_ids, uniform_samples, target_probs,
                       maybe_output_accepted_token_num=None, maybe_output_emitted_token_num=None,
                       deterministic=True):
    """FlashInfer before v0.2.3 (the signature vLLM v0 called): the uniforms [B, k+1] are passed in. The kernel's
    rule (peers.md 2): accept while u_i q(x) < p(x); residual by inverse CDF with u[min(pos + 1, k)]."""
    assert draft_token_ids.dtype == torch.int32 and uniform_samples.shape == target_probs.shape[:2]
    batch, k, vocab = draft_probs.shape
    ids, u = draft_token_ids.long(), uniform_samples
    rows, pos = torch.arange(batch), torch.arange(k)
    passes = u[:, :k] * draft_probs[rows[:, None], pos, ids] < target_probs[rows[:, None], pos, ids]
    stop = torch.cumprod(passes.long(), 1).sum(1)
    law = target_probs[rows, stop]
    if k:
        law = torch.relu(law - draft_probs[rows, stop.clamp(max=k - 1)] * (stop < k)[:, None])
    cdf = torch.cumsum(law, -1)
    token = (cdf <= (u[rows, (stop + 1).clamp(max=k)] * cdf[:, -1])[:, None]).sum(-1).clamp(max=vocab - 1)
    out = torch.where(torch.arange(k + 1) < stop[:, None], torch.cat([ids, ids[:, :1]], 1), -1)
    out[rows, stop] = token
    return out.int(), passes.sum(1).int(), stop.int()


@pytest.mark.parametrize("api", ["old", "new"])
def test_flashinfer_both_apis(api):
    kernel = flashinfer_old_api if api == "old" else peers.flashinfer_chain_speculative_sampling
    verify = from_flashinfer(kernel)
    assert verify.api.startswith("uniform_samples" if api == "old" else "generator")
    ids, q, p = random_rows(31, batch=3, gamma=2, vocab=6)
    pvalue, impossible = verify_pvalue(verify, ids, q, p, n=8_000, seed=2)
    assert impossible == 0 and pvalue > ALPHA

    def neither(draft_probs, draft_token_ids, target_probs, seed):
        raise AssertionError("never called")

    with pytest.raises(AdapterSignatureError, match="v0.2.3"):
        from_flashinfer(neither)


# ------------------------------------------------------------------ vLLM v1: flattened requests, logits in
@dataclasses.dataclass
class SpecDecodeMetadata:
    """vllm/v1/spec_decode/metadata.py (v0.8.5 fields; later releases add cu_num_sampled_tokens)."""

    draft_token_ids: torch.Tensor
    num_draft_tokens: list
    cu_num_draft_tokens: torch.Tensor
    target_logits_indices: torch.Tensor
    bonus_logits_indices: torch.Tensor
    logits_indices: torch.Tensor

    def __post_init__(self):
        self.max_spec_len = max(self.num_draft_tokens)


@dataclasses.dataclass
class SamplingMetadata:
    """vllm/v1/sample/metadata.py (the fields the rejection sampler reads; the rest as in v0.8.5)."""

    temperature: torch.Tensor
    all_greedy: bool
    all_random: bool
    top_p: object
    top_k: object
    generators: dict
    max_num_logprobs: object
    no_penalties: bool
    output_token_ids: list
    allowed_token_ids_mask: object = None


def _dense(metadata, draft_probs, target_rows, sampling_metadata):
    """Undo v1's flattening (the adapter's dense rows) and verify with the local vLLM-style kernel."""
    batch, k = len(metadata.num_draft_tokens), metadata.max_spec_len
    assert metadata.draft_token_ids.dtype == torch.int32 and sampling_metadata.all_random
    assert torch.equal(metadata.cu_num_draft_tokens, torch.arange(1, batch + 1, dtype=torch.int32) * k)
    probs = torch.softmax(target_rows / sampling_metadata.temperature.repeat_interleave(k)[:, None], -1)
    return (probs.view(batch, k, -1), draft_probs.view(batch, k, -1),
            metadata.draft_token_ids.view(batch, k).long())


class V1Early(torch.nn.Module):
    """v0.8 - v0.11: forward(metadata, draft_probs, target_logits, bonus_token_ids, sampling_metadata) -> int32."""

    def forward(self, metadata, draft_probs, target_logits, bonus_token_ids, sampling_metadata):
        p, q, ids = _dense(metadata, draft_probs, target_logits, sampling_metadata)
        bonus = torch.nn.functional.one_hot(bonus_token_ids[:, 0].long(), p.shape[-1]).to(p.dtype)[:, None]
        out = peers.vllm_v0_forward(torch.cat([p, bonus], 1), bonus_token_ids.long(), q, ids,
                                    seeded_seqs=sampling_metadata.generators)
        return out.int()


class V1Late(torch.nn.Module):
    """Later: forward(metadata, draft_probs, logits [num_tokens + B, V], sampling_metadata) -> SamplerOutput; the
    bonus rows sit among the logits and the bonus token is drawn inside (here: the global RNG)."""

    def forward(self, metadata, draft_probs, logits, sampling_metadata):
        p, q, ids = _dense(metadata, draft_probs, logits[metadata.target_logits_indices.long()], sampling_metadata)
        bonus_probs = torch.softmax(logits[metadata.bonus_logits_indices.long()], -1)
        bonus = torch.multinomial(bonus_probs, 1)
        out = peers.vllm_v0_forward(torch.cat([p, bonus_probs[:, None]], 1), bonus, q, ids,
                                    seeded_seqs=sampling_metadata.generators)
        return types.SimpleNamespace(sampled_token_ids=out.int())


@pytest.mark.parametrize("cls", [V1Early, V1Late])
def test_vllm_v1_layouts_reproduce_the_law(cls):
    verify = from_vllm_v1_dense(cls)
    assert verify.layout == ("target_logits + bonus_token_ids" if cls is V1Early
                             else "logits with bonus rows, SamplerOutput")
    ids, q, p = random_rows(44, batch=3, gamma=2, vocab=5)
    pvalue, impossible = verify_pvalue(verify, ids, q, p, n=8_000, seed=3)
    assert impossible == 0 and pvalue > ALPHA, pvalue


def test_vllm_v1_unknown_metadata_is_a_usage_error():
    @dataclasses.dataclass
    class Strange:
        brand_new_field: int

    class V1Strange(V1Early):
        pass

    ids, q, p = random_rows(1, batch=2, gamma=1, vocab=3)
    globals()["SpecDecodeMetadata"], saved = Strange, SpecDecodeMetadata
    try:
        verify = from_vllm_v1_dense(V1Strange)  # the metadata classes are read from the sampler's module
        with pytest.raises(AdapterSignatureError, match="brand_new_field"):
            verify(draft_token_ids=torch.from_numpy(ids), draft_probs=torch.from_numpy(q),
                   target_probs=torch.from_numpy(p), generator=torch.Generator())
    finally:
        globals()["SpecDecodeMetadata"] = saved
