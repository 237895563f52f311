"""Token samplers of real projects, run as they are through their adapters (issue 27).

transformers is installed (a test dependency): its own ``_get_logits_processor`` builds the processors and its
warpers run as written. gpt-fast, vLLM and SGLang are not installable here: their real files run when a
checkout or the file is given (``SPECDEC_GPT_FAST_SRC``, ``SPECDEC_VLLM_TOPK_TOPP``, ``SPECDEC_SGLANG_SAMPLER``;
see ``_upstream.py``), and are skipped with that reason otherwise. FlashInfer's kernels need CUDA.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from _upstream import (gpt_fast_dir, load_gpt_fast_generate, load_sglang_sampler, load_vllm_topk_topp,  # noqa: E402
                       vllm_topk_topp_sampler)

from specdec_check import check_token_sampler  # noqa: E402
from specdec_check.adapters import (from_flashinfer_sampling, from_gpt_fast_sample, from_hf_logits_processors,  # noqa: E402
                                    from_sglang_torch_sampler, from_vllm_topk_topp)
from specdec_check.scenarios import default_token_battery  # noqa: E402

#: The scenarios every real sampler is run on here: ties, exact boundaries, greedy ties, heterogeneous rows,
#: degenerate rows and V = 2 (V <= 32: the row-per-output kernels stay within seconds in quick mode).
SMALL = ("heterogeneous-v16", "top-k-ties", "top-p-boundary", "min-p-boundary", "greedy-ties", "degenerate-rows",
         "binary", "shared-logits-own-parameters")


def _run(sample, *names):
    scenarios = [s for s in default_token_battery(sample.processing) if s.name in (names or SMALL)]
    return check_token_sampler(sample, scenarios=scenarios, backend="torch", mode="quick", seed=0)


def test_transformers_sampling_path_is_exact_on_ties_and_greedy_rows():
    report = _run(from_hf_logits_processors(), "top-k-ties", "greedy-ties", "min-p-boundary")
    assert report.verdict == "passed", report.summary()


@pytest.mark.upstream
def test_gpt_fast_sample_as_written():
    src = gpt_fast_dir()
    if src is None or not (src / "generate.py").exists():
        pytest.skip("SPECDEC_GPT_FAST_SRC does not name a checkout of pytorch-labs/gpt-fast")
    report = _run(from_gpt_fast_sample(load_gpt_fast_generate(src).sample))
    assert report.verdict == "passed", report.summary()


def _file(variable):
    path = os.environ.get(variable)
    if not path or not Path(path).is_file():
        pytest.skip(f"{variable} does not name the upstream file")
    return Path(path)


@pytest.mark.upstream
def test_vllm_v1_topk_topp_forward_native_as_written():
    module = load_vllm_topk_topp(_file("SPECDEC_VLLM_TOPK_TOPP"))
    report = _run(from_vllm_topk_topp(vllm_topk_topp_sampler(module)))
    assert report.verdict == "passed", report.summary()


@pytest.mark.upstream
def test_sglang_torch_sampler_as_written():
    module = load_sglang_sampler(_file("SPECDEC_SGLANG_SAMPLER"))
    report = _run(from_sglang_torch_sampler(module.top_k_top_p_min_p_sampling_from_probs_torch))
    assert report.verdict == "passed", report.summary()


@pytest.mark.upstream
@pytest.mark.cuda
def test_flashinfer_top_k_top_p_sampling_from_logits():
    flashinfer = pytest.importorskip("flashinfer")
    if not torch.cuda.is_available():
        pytest.skip("FlashInfer kernels run on CUDA only")
    sample = from_flashinfer_sampling(flashinfer.sampling.top_k_top_p_sampling_from_logits)
    scenarios = [s for s in default_token_battery(sample.processing) if s.name in SMALL]
    report = check_token_sampler(sample, scenarios=scenarios, backend="torch", device="cuda", mode="quick", seed=0)
    assert report.verdict == "passed", report.summary()
