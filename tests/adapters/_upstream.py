"""Loading real upstream files that cannot be installed here, for the tests marked ``upstream``.

Nothing of the upstream projects is committed: each loader takes a directory (a git checkout, or
an unpacked wheel) given by an environment variable and loads the project's real file from it.
Only the imports of project internals that the file does not need for sampling are stubbed,
and each stub is listed in the loader's docstring.

* ``SPECDEC_VLLM_SRC``: a directory holding ``vllm/model_executor/layers/rejection_sampler.py``
  (vLLM v0) and/or ``vllm/v1/sample/rejection_sampler.py`` (vLLM v1), e.g. ``unzip vllm-0.6.5-*.whl``.
* ``SPECDEC_GPT_FAST_SRC``: a checkout of pytorch-labs/gpt-fast (``generate.py``, ``model.py``).
* ``SPECDEC_LLMSS_SRC``: a checkout of feifeibear/LLMSpeculativeSampling (its ``sampling`` package).
* ``SPECDEC_ROMSTO_SRC``: a checkout of romsto/Speculative-Decoding (its ``sampling`` and ``utils`` packages; they
  import ``termcolor``).
* ``SPECDEC_DEEPSPEC_SRC``: a folder holding deepseek-ai/DeepSpec's ``deepspec`` package (``git archive <commit>
  deepspec | tar -x``; the checkout's data files are not needed).
* ``SPECDEC_VLLM_TOPK_TOPP``: vLLM v1's ``vllm/v1/sample/ops/topk_topp_sampler.py``.
* ``SPECDEC_SGLANG_SAMPLER``: SGLang's ``python/sglang/srt/layers/sampler.py``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import sys
import types
from pathlib import Path

__all__ = ["deepspec_dir", "load_deepspec", "gpt_fast_dir", "llmss_dir", "load_gpt_fast_generate", "load_llmss", "load_romsto", "romsto_dir", "load_sglang_sampler", "load_vllm_topk_topp", "load_vllm_v0", "load_vllm_v1",
           "upstream_version", "vllm_dir", "vllm_topk_topp_sampler"]


def vllm_dir():
    """The directory named by SPECDEC_VLLM_SRC, or None."""
    path = os.environ.get("SPECDEC_VLLM_SRC")
    return Path(path) if path else None


def gpt_fast_dir():
    return _env_dir("SPECDEC_GPT_FAST_SRC")


def _env_dir(variable: str):
    """The directory named by the environment variable, or None."""
    path = os.environ.get(variable)
    return Path(path) if path else None


@contextlib.contextmanager
def _checkout(src: Path, packages: tuple):
    """Import from the checkout ``src``: ``packages`` (top-level names) are dropped from ``sys.modules`` first
    (another checkout's package of the same name), and ``src`` is on ``sys.path`` for the block."""
    for name in [n for n in sys.modules if n.split(".")[0] in packages]:
        del sys.modules[name]
    sys.path.insert(0, str(src))
    try:
        yield
    finally:
        sys.path.remove(str(src))


def llmss_dir():
    return _env_dir("SPECDEC_LLMSS_SRC")


def load_llmss(src: Path) -> dict:
    """feifeibear/LLMSpeculativeSampling's real ``sampling`` package from a checkout ``src``, nothing stubbed:
    ``{"speculative_sampling": fn, "utils": module, "kvcache_model": module, "speculative_sampling_module":
    module}`` (its ``__init__`` rebinds ``sampling.speculative_sampling`` to the function, so the modules are
    read from ``sys.modules``)."""
    with _checkout(src, ("sampling",)):
        import sampling  # noqa: F401 - the checkout's package (it imports its globals.py too)

        return {"speculative_sampling": sys.modules["sampling"].speculative_sampling,
                "utils": sys.modules["sampling.utils"], "kvcache_model": sys.modules["sampling.kvcache_model"],
                "speculative_sampling_module": sys.modules["sampling.speculative_sampling"]}


def deepspec_dir():
    return _env_dir("SPECDEC_DEEPSPEC_SRC")


def load_deepspec(src: Path) -> tuple:
    """``(base_evaluator, sampling)``: DeepSpec's real ``deepspec/eval/base_evaluator.py`` (its decode loop
    ``generate_decoding_sample``, ``verify_draft_tokens``, ``DraftProposal``) and ``deepspec/utils/sampling.py``,
    imported from ``src`` as they are (nothing stubbed)."""
    with _checkout(src, ("deepspec",)):
        import deepspec.eval.base_evaluator as base_evaluator
        import deepspec.utils.sampling as sampling

        return base_evaluator, sampling


def romsto_dir():
    return _env_dir("SPECDEC_ROMSTO_SRC")


def load_romsto(src: Path) -> dict:
    """romsto/Speculative-Decoding's real ``speculative_generate`` and ``MultinomialProcessor`` from a checkout
    ``src``, nothing stubbed; ``"module"`` its ``sampling.speculative_decoding`` (read from ``sys.modules``: the
    package's ``__init__`` rebinds the name). Both checkouts name their package ``sampling``: whichever was loaded
    first is dropped from ``sys.modules``."""
    with _checkout(src, ("sampling", "utils")):
        from sampling import speculative_generate
        from utils.logits_processor import MultinomialProcessor

        return {"speculative_generate": speculative_generate, "MultinomialProcessor": MultinomialProcessor,
                "module": sys.modules["sampling.speculative_decoding"]}


def upstream_version(src: Path) -> str:
    """vLLM's version and commit as recorded in the unpacked wheel or checkout (``?`` when absent)."""
    parts = []
    for name in ("vllm/_version.py", "vllm/version.py", "vllm/commit_id.py"):
        file = src / name
        if file.exists():
            text = file.read_text()
            for key in ("__version__", "__commit__"):
                match = re.search(rf"{key}\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", text)
                if match and match.group(1) not in parts and "PLACEHOLDER" not in match.group(1):
                    parts.append(match.group(1))
    return " ".join(parts) or "?"


def _package(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a bare package: its __init__ (which imports all of vLLM) is not run
    return module


@contextlib.contextmanager
def _modules(stubs: dict):
    """Put ``stubs`` in sys.modules for the duration of the loads; restore what was there after."""
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def _load(name: str, path: Path, edit: tuple | None = None) -> types.ModuleType:
    """The module of the file at ``path``; with ``edit = (old, new)``, its source with the one line ``old``
    replaced by ``new`` (a mutant of the real file: ``old`` must occur exactly once)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if edit is None:
        spec.loader.exec_module(module)
        return module
    source = path.read_text()
    if source.count(edit[0]) != 1:
        raise ValueError(f"{path}: {edit[0]!r} occurs {source.count(edit[0])} times, not once")
    exec(compile(source.replace(edit[0], edit[1]), str(path), "exec"), module.__dict__)
    return module


def load_vllm_v0(src: Path) -> types.ModuleType:
    """vLLM v0's real ``rejection_sampler.py`` (and its real ``spec_decode_base_sampler.py``) from ``src``.

    Stubbed, because importing the ``vllm`` package pulls in the whole engine: ``vllm`` and its
    sub-packages are bare packages (no ``__init__`` run); ``vllm.envs`` gives only
    ``VLLM_USE_FLASHINFER_SAMPLER = False`` (FlashInfer cannot run on a CPU); ``vllm.logger.init_logger``
    is ``logging.getLogger``; ``vllm.platforms.current_platform.simple_compile_backend`` is
    ``"inductor"`` (what vLLM's CUDA and CPU platforms say). Both sampler files run as released.
    """
    layers = src / "vllm" / "model_executor" / "layers"
    envs = types.ModuleType("vllm.envs")
    envs.VLLM_USE_FLASHINFER_SAMPLER = False
    logger = types.ModuleType("vllm.logger")
    logger.init_logger = logging.getLogger
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(simple_compile_backend="inductor")
    stubs = {"vllm": _package("vllm"), "vllm.envs": envs, "vllm.logger": logger, "vllm.platforms": platforms,
             "vllm.model_executor": _package("vllm.model_executor"),
             "vllm.model_executor.layers": _package("vllm.model_executor.layers"),
             "vllm.model_executor.layers.spec_decode_base_sampler": None,
             "vllm.model_executor.layers.rejection_sampler": None}
    with _modules(stubs):
        _load("vllm.model_executor.layers.spec_decode_base_sampler", layers / "spec_decode_base_sampler.py")
        return _load("vllm.model_executor.layers.rejection_sampler", layers / "rejection_sampler.py")


def load_vllm_v1(src: Path) -> types.ModuleType:
    """vLLM v1's real ``vllm/v1/sample/rejection_sampler.py`` from ``src``, with its real imports
    ``vllm/v1/spec_decode/metadata.py``, ``vllm/v1/sample/metadata.py`` and
    ``vllm/v1/sample/ops/topk_topp_sampler.py``. Its kernels are Triton: on a CPU set
    ``TRITON_INTERPRET=1`` before importing triton.

    Stubbed: bare ``vllm`` packages (no ``__init__`` run); ``vllm.envs`` (``VLLM_USE_FLASHINFER_SAMPLER =
    False``); ``vllm.logger.init_logger = logging.getLogger``; ``vllm.platforms.current_platform``
    (every ``is_*()`` False: no platform-specific top-k/top-p path, which the rejection sampler does
    not use); ``vllm.config.LogprobsMode = str``; ``vllm.triton_utils`` gives the installed ``triton``
    and ``triton.language`` (vLLM's own module turns Triton off without a GPU driver);
    ``vllm.v1.sample.logits_processor.LogitsProcessors`` is an empty class (no logits processors).
    """
    import triton
    import triton.language as tl

    def stub(name, **attrs):
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        return module

    platform = types.SimpleNamespace(simple_compile_backend="inductor", device_type="cpu")
    for name in ("is_cuda", "is_rocm", "is_tpu", "is_cpu", "is_xpu", "is_out_of_tree", "is_cuda_alike"):
        setattr(platform, name, lambda: False)
    stubs = {name: _package(name) for name in ("vllm", "vllm.v1", "vllm.v1.sample", "vllm.v1.sample.ops",
                                                 "vllm.v1.spec_decode")}
    stubs.update({
        "vllm.envs": stub("vllm.envs", VLLM_USE_FLASHINFER_SAMPLER=False),
        "vllm.logger": stub("vllm.logger", init_logger=logging.getLogger),
        "vllm.platforms": stub("vllm.platforms", current_platform=platform),
        "vllm.config": stub("vllm.config", LogprobsMode=str),
        "vllm.triton_utils": stub("vllm.triton_utils", triton=triton, tl=tl, HAS_TRITON=True),
        "vllm.v1.sample.logits_processor": stub("vllm.v1.sample.logits_processor",
                                                LogitsProcessors=type("LogitsProcessors", (), {})),
    })
    files = ("vllm.v1.spec_decode.metadata", "vllm.v1.sample.metadata", "vllm.v1.sample.ops.topk_topp_sampler",
             "vllm.v1.sample.rejection_sampler")
    stubs.update({name: None for name in files})
    with _modules(stubs):
        for name in files:
            module = _load(name, src / (name.replace(".", "/") + ".py"))
        return module


def load_gpt_fast_generate(src: Path, edit: tuple | None = None) -> types.ModuleType:
    """gpt-fast's real ``generate.py`` from a checkout ``src`` (its real ``model.py`` is imported too, and kept
    as the returned module's ``model_module``).

    Stubbed: the ``tokenizer`` module (it imports sentencepiece and tiktoken, which decoding does
    not use); ``generate.py``'s ``get_tokenizer`` is then never called. ``edit = (old, new)`` replaces one line
    of ``generate.py`` (a mutant of the real file).
    """
    tokenizer = types.ModuleType("tokenizer")
    tokenizer.get_tokenizer = lambda *a, **k: None
    stubs = {"tokenizer": tokenizer, "model": None, "gpt_fast_generate": None}
    sys.path.insert(0, str(src))
    try:
        with _modules(stubs):
            model = _load("model", src / "model.py")
            generate = _load("gpt_fast_generate", src / "generate.py", edit)
            generate.model_module = model  # its real Transformer and ModelArgs, for models built from a config
            return generate
    finally:
        sys.path.remove(str(src))


def _package(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a bare package: its __init__ is never run
    return module


def load_vllm_topk_topp(path: Path) -> types.ModuleType:
    """vLLM v1's real ``vllm/v1/sample/ops/topk_topp_sampler.py`` (``SPECDEC_VLLM_TOPK_TOPP``).

    Stubbed: the ``vllm`` packages it imports are bare; ``vllm.triton_utils.HAS_TRITON`` is False (the file then
    takes its PyTorch path, ``apply_top_k_top_p_pytorch``); ``current_platform`` is a CPU-less, CUDA-less
    platform whose ``is_cpu()`` is False (so top-k alone goes through the sort path, as on a GPU without
    Triton); ``init_logger`` is ``logging.getLogger``; the other imported names are placeholders the
    native path never touches.
    """
    platform = types.SimpleNamespace(is_cpu=lambda: False, is_cuda=lambda: False, is_xpu=lambda: False,
                                     is_cuda_alike=lambda: False, simple_compile_backend="eager")
    names = {
        "vllm": _package("vllm"), "vllm.envs": types.ModuleType("vllm.envs"),
        "vllm._aiter_ops": types.SimpleNamespace(rocm_aiter_ops=None),
        "vllm.config": _package("vllm.config"),
        "vllm.config.model": types.SimpleNamespace(PROCESSED_LOGPROBS_MODES=("processed_logits",
                                                                             "processed_logprobs"),
                                                   LogprobsMode=str),
        "vllm.logger": types.SimpleNamespace(init_logger=logging.getLogger),
        "vllm.platforms": types.SimpleNamespace(CpuArchEnum=None, current_platform=platform),
        "vllm.platforms.interface": types.SimpleNamespace(DeviceCapability=None),
        "vllm.triton_utils": types.SimpleNamespace(HAS_TRITON=False),
    }
    with _modules(names):
        return _load("vllm_topk_topp_sampler", Path(path))


def vllm_topk_topp_sampler(module):
    """A ``TopKTopPSampler`` of the loaded file without its ``__init__`` (which picks an accelerator path):
    the attributes ``forward_native`` reads, as the constructor's defaults set them."""
    import torch

    sampler = module.TopKTopPSampler.__new__(module.TopKTopPSampler)
    torch.nn.Module.__init__(sampler)
    sampler.logprobs_mode, sampler.use_fp64_gumbel = "raw_logprobs", False
    return sampler


def load_sglang_sampler(path: Path) -> types.ModuleType:
    """SGLang's real ``python/sglang/srt/layers/sampler.py`` (``SPECDEC_SGLANG_SAMPLER``).

    Stubbed: ``flashinfer.sampling`` (its CUDA kernels; the torch fallback does not call them), vLLM's
    ``CustomOp`` (a plain class), SGLang's ``global_server_args_dict`` and ``SamplingBatchInfo`` (read by the
    CUDA path only).
    """
    flashinfer_sampling = types.SimpleNamespace(min_p_sampling_from_probs=None, top_k_renorm_prob=None,
                                                top_k_top_p_sampling_from_probs=None, top_p_renorm_prob=None)
    names = {
        "flashinfer": _package("flashinfer"), "flashinfer.sampling": flashinfer_sampling,
        "vllm": _package("vllm"), "vllm.model_executor": _package("vllm.model_executor"),
        "vllm.model_executor.custom_op": types.SimpleNamespace(CustomOp=object),
        "sglang": _package("sglang"), "sglang.srt": _package("sglang.srt"),
        "sglang.srt.managers": _package("sglang.srt.managers"),
        "sglang.srt.managers.schedule_batch": types.SimpleNamespace(global_server_args_dict={}),
        "sglang.srt.sampling": _package("sglang.srt.sampling"),
        "sglang.srt.sampling.sampling_batch_info": types.SimpleNamespace(SamplingBatchInfo=object),
    }
    with _modules(names):
        return _load("sglang_sampler", Path(path))
