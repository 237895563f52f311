"""vLLM v1's real rejection-sampling Triton kernels, run by a host harness (for the optional interpreter test).

``load_kernels(path)`` takes vLLM's own ``vllm/v1/sample/rejection_sampler.py`` (from an installed vLLM or
an unpacked wheel: ``SPECDEC_VLLM_REJECTION_SAMPLER=/path/to/rejection_sampler.py``), copies out its four
``@triton.jit`` kernels (``rejection_greedy_sample_kernel``, ``rejection_random_sample_kernel``,
``expand_kernel``, ``sample_recovered_tokens_kernel``) unchanged, and imports them with Triton (on a CPU
under ``TRITON_INTERPRET=1``). Nothing of vLLM's code is stored in this repository. The host code
around the kernels (the metadata plumbing of ``RejectionSampler.forward``, the bonus ``Sampler``) is the
fixture's (:mod:`_vllm_v1_fixture`): what the test proves is that the real kernels, driven as vLLM drives
them, sample the exact law.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import tempfile
from pathlib import Path

import torch

import _vllm_v1_fixture as fixture

KERNELS = ("rejection_greedy_sample_kernel", "rejection_random_sample_kernel", "expand_kernel",
           "sample_recovered_tokens_kernel")


def load_kernels(path):
    """The four kernels of vLLM's ``rejection_sampler.py`` at ``path``, as a module (Triton JIT functions)."""
    source = Path(path).read_text()
    tree = ast.parse(source)
    keep = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in KERNELS]
    missing = set(KERNELS) - {node.name for node in keep}
    if missing:
        raise ValueError(f"{path} lacks the kernel(s) {sorted(missing)}")
    lines = source.splitlines()
    chunks = ["import triton", "import triton.language as tl", "PLACEHOLDER_TOKEN_ID: tl.constexpr = -1",
              "GREEDY_TEMPERATURE: tl.constexpr = 0", ""]
    for node in keep:
        start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
        chunks.append("\n".join(lines[start: node.end_lineno]))
        chunks.append("")
    folder = Path(tempfile.mkdtemp(prefix="vllm_kernels_"))
    file = folder / "vllm_rejection_kernels.py"
    file.write_text("\n".join(chunks))
    spec = importlib.util.spec_from_file_location("vllm_rejection_kernels", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _launch(kernel, grid, **values):
    """Launch ``kernel`` with the arguments its signature names (they differ between vLLM versions)."""
    names = kernel.arg_names if hasattr(kernel, "arg_names") else list(inspect.signature(kernel.fn).parameters)
    kernel[grid](**{name: values[name] for name in names if name in values})


class RealKernelRejectionSampler(fixture.RejectionSampler):
    """The fixture's ``forward`` with vLLM's real kernels doing the rejection sampling."""

    def __init__(self, kernels, sampler=None):
        super().__init__(sampler)
        self.k = kernels

    def forward(self, metadata, draft_probs, logits, sampling_metadata):
        k = self.k
        bonus = self.sampler(logits[metadata.bonus_logits_indices.long()], sampling_metadata).sampled_token_ids
        target = logits[metadata.target_logits_indices.long()].to(torch.float32).clone()
        num_tokens, batch = target.shape[0], len(metadata.num_draft_tokens)
        cu = metadata.cu_num_draft_tokens
        if not sampling_metadata.all_greedy:
            temperature = torch.empty(num_tokens, dtype=sampling_metadata.temperature.dtype)
            _launch(k.expand_kernel, (batch,), output_ptr=temperature, input_ptr=sampling_metadata.temperature,
                    cu_num_tokens_ptr=cu, replace_from=0, replace_to=1, MAX_NUM_TOKENS=128)
            target.div_(temperature.unsqueeze(-1))
            expand = []
            for values in (sampling_metadata.top_k, sampling_metadata.top_p):
                if values is None:
                    expand.append(None)
                    continue
                out = torch.empty(num_tokens, dtype=values.dtype)
                _launch(k.expand_kernel, (batch,), output_ptr=out, input_ptr=values, cu_num_tokens_ptr=cu,
                        replace_from=0, replace_to=0, MAX_NUM_TOKENS=128)
                expand.append(out)
            target = fixture.apply_top_k_top_p_pytorch(target, *expand)
        probs = target.softmax(dim=-1, dtype=torch.float32).contiguous()
        width = metadata.max_spec_len + 1
        out = torch.full((batch, width), -1, dtype=torch.int32)
        is_greedy = None if sampling_metadata.all_greedy else (sampling_metadata.temperature == 0)
        common = dict(output_token_ids_ptr=out, cu_num_draft_tokens_ptr=cu, draft_token_ids_ptr=metadata.draft_token_ids,
                      bonus_token_ids_ptr=bonus.view(-1).contiguous(), max_spec_len=metadata.max_spec_len,
                      uniform_probs_ptr=None, synthetic_conditional_rates_ptr=None, SYNTHETIC_MODE=False)
        if not sampling_metadata.all_random:
            _launch(k.rejection_greedy_sample_kernel, (batch,), target_argmax_ptr=probs.argmax(dim=-1),
                    is_greedy_ptr=is_greedy, **common)
            if sampling_metadata.all_greedy:
                return fixture.SamplerOutput(out)
        uniforms = fixture.generate_uniform_probs(num_tokens, metadata.num_draft_tokens, sampling_metadata.generators,
                                                  probs.device)
        q = torch.empty((batch, probs.shape[1]), dtype=torch.float32)
        q.exponential_()
        for i, generator in sampling_metadata.generators.items():
            if metadata.num_draft_tokens[i] > 0:
                q[i].exponential_(generator=generator)
        recovered = torch.empty_like(metadata.draft_token_ids)
        vocab = probs.shape[1]
        power = 1 << (vocab - 1).bit_length()
        no_probs = draft_probs is None
        _launch(k.sample_recovered_tokens_kernel, (batch, metadata.max_spec_len), output_token_ids_ptr=recovered,
                cu_num_draft_tokens_ptr=cu, draft_token_ids_ptr=metadata.draft_token_ids, draft_probs_ptr=draft_probs,
                target_probs_ptr=probs, q_ptr=q, inv_q_ptr=q.reciprocal(), vocab_size=vocab,
                PADDED_VOCAB_SIZE=power, BLOCK_SIZE=min(power, 8192), NO_DRAFT_PROBS=no_probs, IS_NGRAM=no_probs,
                USE_FP64_GUMBEL=False)
        _launch(k.rejection_random_sample_kernel, (batch,), draft_probs_ptr=draft_probs, target_probs_ptr=probs,
                recovered_token_ids_ptr=recovered, is_greedy_ptr=is_greedy, vocab_size=vocab,
                NO_DRAFT_PROBS=no_probs, IS_NGRAM=no_probs, **{**common, "uniform_probs_ptr": uniforms})
        return fixture.SamplerOutput(out)
