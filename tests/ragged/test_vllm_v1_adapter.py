"""from_vllm_v1 against a local re-implementation of vLLM v1's RejectionSampler (a fixture, not evidence:
the real kernels run in benchmarks/gpu_check.sh, or below when vLLM is importable)."""

import inspect
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specdec_check.adapters import from_vllm_v1  # noqa: E402
from specdec_check.adapters._vllm_v1 import SamplingMetadataStandIn, vllm_v1_metadata  # noqa: E402
from specdec_check.checker import check_ragged_verifier  # noqa: E402
from specdec_check.scenarios import default_ragged_battery  # noqa: E402

from _vllm_v1_fixture import RejectionSampler  # noqa: E402

SMALL = [s for s in default_ragged_battery() if s.vocab_size <= 256]


def test_metadata_is_built_as_the_model_runner_builds_it():
    n = torch.tensor([2, 0, 3])
    spec, sampling = vllm_v1_metadata(
        draft_token_ids=torch.tensor([4, 1, 0, 2, 3]), num_draft_tokens=n, temperature=torch.tensor([0.7, 0.0, 1.0]),
        top_k=torch.tensor([0, 0, 5]), top_p=torch.tensor([1.0, 1.0, 1.0]), generators={}, vocab_size=9)
    assert spec.num_draft_tokens == [2, 0, 3] and spec.max_spec_len == 3
    assert spec.cu_num_draft_tokens.tolist() == [2, 2, 5] and spec.cu_num_sampled_tokens.tolist() == [3, 4, 8]
    assert spec.target_logits_indices.tolist() == [0, 1, 4, 5, 6] and spec.bonus_logits_indices.tolist() == [2, 3, 7]
    assert spec.draft_token_ids.dtype == torch.int32
    assert isinstance(sampling, SamplingMetadataStandIn)
    assert sampling.top_k.tolist() == [9, 9, 5] and sampling.top_p is None  # top-k 0 (off) -> the vocabulary size
    assert sampling.temperature.tolist() == pytest.approx([0.7, 0.0, 1.0])
    assert not sampling.all_greedy and not sampling.all_random


def test_adapter_passes_the_fixture():
    report = check_ragged_verifier(from_vllm_v1(RejectionSampler()), scenarios=SMALL, backend="torch", mode="quick")
    assert report.passed, report.summary()
    assert report.sampler.endswith("from_vllm_v1(RejectionSampler.forward)")


def test_a_greedy_sentinel_mismatch_is_caught_on_greedy_rows():
    """vLLM PR #27077: kernels testing temperature == -1 while greedy requests carry 0."""
    report = check_ragged_verifier(from_vllm_v1(RejectionSampler(mutation="old_greedy_sentinel")), scenarios=SMALL,
                                   backend="torch", mode="quick")
    assert not report.passed
    assert any(f.check == "greedy" and "greedy decoding emits" in f.message for f in report.failures)
    fixed = from_vllm_v1(RejectionSampler(mutation="old_greedy_sentinel"), greedy_temperature=-1.0)
    assert check_ragged_verifier(fixed, scenarios=SMALL[:2], backend="torch", mode="quick").passed


class _OldForward(RejectionSampler):
    """The mid-2025 signature: target rows only, the bonus token sampled outside."""

    def forward(self, metadata, draft_probs, target_logits, bonus_token_ids, sampling_metadata):
        rows = target_logits.shape[0] + len(metadata.num_draft_tokens)
        logits = torch.zeros((rows, target_logits.shape[1]), dtype=target_logits.dtype)
        logits[metadata.target_logits_indices.long()] = target_logits
        self.sampler = lambda logits, sampling_metadata, **_: type("O", (), {"sampled_token_ids": bonus_token_ids})()
        return super().forward(metadata, draft_probs, logits, sampling_metadata)


def test_the_older_forward_with_bonus_tokens_outside():
    assert "bonus_token_ids" in inspect.signature(_OldForward().forward).parameters
    report = check_ragged_verifier(from_vllm_v1(_OldForward()), scenarios=SMALL, backend="torch", mode="quick")
    assert report.passed, report.summary()


def test_calls_leave_the_global_rng_and_the_logits_alone():
    scenario = SMALL[0]
    draw = scenario.draw(np.random.default_rng(0))
    from specdec_check.checker.ragged.caller import ragged_inputs
    from specdec_check.checker.backends.torch_backend import TorchBackend

    backend = TorchBackend("cpu", "float32")
    kwargs = ragged_inputs(backend, draw)
    logits = kwargs["target_logits"].clone()
    state = torch.random.get_rng_state()
    verify = from_vllm_v1(RejectionSampler())
    a = verify(**kwargs, generator=torch.Generator().manual_seed(3))
    b = verify(**kwargs, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(kwargs["target_logits"], logits)


def _vllm_rejection_sampler_source():
    """vLLM's own rejection_sampler.py: $SPECDEC_VLLM_REJECTION_SAMPLER, or that of an installed vLLM (not imported)."""
    import importlib.util
    from pathlib import Path

    path = os.environ.get("SPECDEC_VLLM_REJECTION_SAMPLER")
    if path:
        return Path(path)
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(list(spec.submodule_search_locations)[0]) / "v1" / "sample" / "rejection_sampler.py"
    return candidate if candidate.exists() else None


@pytest.mark.optional
def test_real_vllm_kernels_under_the_triton_interpreter():
    """vLLM's four real rejection-sampling Triton kernels (copied out of its rejection_sampler.py at run time,
    interpreted on the CPU), driven by the fixture's host code through from_vllm_v1: the exact law passes, and
    a greedy-sentinel mismatch in the plumbing fails. Needs triton and vLLM's source file (see the README of
    notes/RAGGED.md); the CUDA run of the whole RejectionSampler is benchmarks/gpu_check.sh."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    pytest.importorskip("triton")
    source = _vllm_rejection_sampler_source()
    if source is None:
        pytest.skip("no vLLM rejection_sampler.py: set SPECDEC_VLLM_REJECTION_SAMPLER or install vLLM")
    from _real_vllm_kernels import RealKernelRejectionSampler, load_kernels

    kernels = load_kernels(source)
    scenarios = [s for s in SMALL if s.name in ("ragged-mixed-v7", "ragged-greedy-v256")]
    report = check_ragged_verifier(from_vllm_v1(RealKernelRejectionSampler(kernels)), scenarios=scenarios,
                                   backend="torch", mode="quick")
    assert report.passed, report.summary()
    wrong = from_vllm_v1(RealKernelRejectionSampler(kernels), greedy_temperature=-1.0)
    report = check_ragged_verifier(wrong, scenarios=scenarios[:1], backend="torch", mode="quick")
    assert not report.passed


@pytest.mark.optional
def test_real_vllm_rejection_sampler_when_vllm_imports():
    """The whole real RejectionSampler (CUDA machines with vLLM; interpreted Triton on a CPU with TRITON_INTERPRET=1)."""
    sampler_module = pytest.importorskip("vllm.v1.sample.rejection_sampler")
    from vllm.v1.sample.sampler import Sampler

    verify = from_vllm_v1(sampler_module.RejectionSampler(Sampler()))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    report = check_ragged_verifier(verify, scenarios=SMALL[:1], backend="torch", device=device, mode="quick")
    assert report.passed, report.summary()
