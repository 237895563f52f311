"""Peers' real code through the documented adapter calls (marked ``upstream``; each test skips with the reason when
the code is not here). Nothing of theirs is committed: installed packages are imported; otherwise a directory
given by an environment variable is loaded with only irrelevant internal imports stubbed (tests/adapters/_upstream.py):

* vLLM: ``pip install vllm`` (CUDA), or ``SPECDEC_VLLM_SRC=<unzipped vllm wheel or checkout>``;
  v1 also needs ``triton``: on a CPU export ``TRITON_INTERPRET=1`` (interpreted kernels: ~30 ms per row,
  and numpy < 2.3 for triton's interpreter);
* gpt-fast: ``SPECDEC_GPT_FAST_SRC=<checkout of pytorch-labs/gpt-fast>``;
* FlashInfer: ``pip install flashinfer-python`` on a CUDA machine.

Expected verdicts (measured, see the adapters' docstrings): vLLM v0's file fails before v0.5.5 (strict-mode
arguments passed in the wrong order, fixed by PR #7218: a crash on every call) and before v0.6.6 (unseeded
rows of a batch that mixes seeded and unseeded requests sample from uninitialised memory, fixed by PR #10863);
later files pass. gpt-fast's generate fails after its batched-generation commit 61c193d (issue #209).
"""

import importlib
import inspect
import numpy as np
import os
import re

import pytest

torch = pytest.importorskip("torch")

from _upstream import (deepspec_dir, load_deepspec, gpt_fast_dir, llmss_dir, load_gpt_fast_generate, load_llmss, load_romsto, load_vllm_v0,  # noqa
                       load_vllm_v1, romsto_dir, upstream_version, vllm_dir)

from specdec_check.adapters import (from_classic_loop, from_flashinfer, from_gpt_fast_generate, from_vllm_v0,  # noqa: E402
                                    from_vllm_v1_dense)
from specdec_check.checker import check_generator, check_verifier  # noqa: E402
from specdec_check.scenarios import default_generator_battery, default_verifier_battery  # noqa: E402

pytestmark = pytest.mark.upstream

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _version_tuple(text: str):
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(x) for x in match.groups()) if match else None


def _vllm_module(relative: str, loader):
    """(module, version text): the installed vLLM's module, or the file under SPECDEC_VLLM_SRC."""
    try:
        module = importlib.import_module(relative.replace("/", ".").removesuffix(".py"))
        import vllm

        return module, vllm.__version__
    except Exception:  # noqa: BLE001 - not installed (or not importable here): try a checkout
        pass
    src = vllm_dir()
    if src is None or not (src / relative).exists():
        pytest.skip(f"vLLM is not importable and SPECDEC_VLLM_SRC does not hold {relative}")
    return loader(src), upstream_version(src)


def test_vllm_v0_rejection_sampler():
    module, version = _vllm_module("vllm/model_executor/layers/rejection_sampler.py", load_vllm_v0)
    report = check_verifier(from_vllm_v0(module.RejectionSampler), backend="torch", device=DEVICE, mode="quick",
                            seed=0)
    v = _version_tuple(version)
    if v is None:
        pytest.skip(f"ran ({'passed' if report.passed else 'failed'}), but the version {version!r} is unknown")
    if v < (0, 5, 5):
        assert not report.passed and "raised" in report.failures[0].message, report.summary()  # PR #7218
    elif v < (0, 6, 6):
        assert not report.passed, report.summary()  # PR #10863: mixed seeded/unseeded batch
    else:
        assert report.passed, report.summary()


def test_vllm_v0_mixed_batch_bug_needs_mixed_seeding():
    """The same buggy file passes when every row is seeded (what the adapter used to do), fails mixed."""
    module, version = _vllm_module("vllm/model_executor/layers/rejection_sampler.py", load_vllm_v0)
    v = _version_tuple(version)
    if v is None or not (0, 5, 5) <= v < (0, 6, 6):
        pytest.skip(f"vLLM {version}: not a release with the #10863 bug and the #7218 fix")
    scenarios = [s for s in default_verifier_battery() if s.name in ("low-acceptance", "corpus-bigram")]
    seeded = check_verifier(from_vllm_v0(module.RejectionSampler, seeding="all"), scenarios=scenarios,
                            backend="torch", device=DEVICE, mode="quick", seed=0)
    mixed = check_verifier(from_vllm_v0(module.RejectionSampler), scenarios=scenarios, backend="torch",
                           device=DEVICE, mode="quick", seed=0)
    assert seeded.passed and not mixed.passed, (seeded.summary(), mixed.summary())


def test_vllm_v1_rejection_sampler():
    if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("vLLM v1's kernels are Triton: on a CPU export TRITON_INTERPRET=1 (slow)")
    pytest.importorskip("triton")
    module, version = _vllm_module("vllm/v1/sample/rejection_sampler.py", load_vllm_v1)
    scenarios = [s for s in default_verifier_battery()
                 if s.name in ("low-acceptance", "disjoint-supports", "one-hot-target", "draft-zeros")]
    report = check_verifier(from_vllm_v1_dense(module.RejectionSampler), scenarios=scenarios, backend="torch",
                            device=DEVICE, mode="quick", seed=0, checks=["contract", "step_law", "impossible"])
    assert report.passed, report.summary()


def test_gpt_fast_generate():
    src = gpt_fast_dir()
    if src is None or not (src / "generate.py").exists():
        pytest.skip("SPECDEC_GPT_FAST_SRC does not name a checkout of pytorch-labs/gpt-fast")
    module = load_gpt_fast_generate(src)
    scenarios = [s for s in default_generator_battery() if s.name in ("small-joint", "order2-joint")]
    report = check_generator(from_gpt_fast_generate(module.generate), scenarios=scenarios, mode="quick", seed=0)
    if "batch_size" in inspect.signature(module.generate).parameters:  # after 61c193d: issue #209
        assert not report.passed and "raised" in report.failures[0].message, report.summary()
    else:
        assert report.passed, report.summary()


def _gpt_fast_pair(module):
    """A tiny pair of gpt-fast's real ``Transformer`` (its ``model.py``, built from a ``ModelArgs``): the draft is
    the target with a flatter head, so drafts are accepted about 4 times in 10 and a residual sampled from the
    target's law instead of ``max(target - draft, 0)`` is off by TV ~0.1 at each speculative position."""
    M = module.model_module

    def tiny(scale):
        torch.manual_seed(0)
        args = M.ModelArgs(block_size=64, vocab_size=32, n_layer=2, n_head=2, dim=32, intermediate_size=64)
        model = M.Transformer(args).eval()
        with torch.no_grad():
            model.output.weight.mul_(scale)
        return model

    return tiny(8.0), tiny(2.0)


#: gpt-fast's rejection branch (generate.py, speculative_decode; gpt-fast calls the draft's law p, the target's q).
GPT_FAST_RESIDUAL = "next_token = multinomial_sample_one_no_sync(new)"


@pytest.mark.slow  # gpt-fast's loop runs a row at a time: ~40 s
@pytest.mark.parametrize("mutant", [False, True], ids=["as-written", "residual-from-target"])
def test_gpt_fast_generate_on_its_real_transformer(mutant):
    src = gpt_fast_dir()
    if src is None or not (src / "generate.py").exists():
        pytest.skip("SPECDEC_GPT_FAST_SRC does not name a checkout of pytorch-labs/gpt-fast")
    edit = (GPT_FAST_RESIDUAL, GPT_FAST_RESIDUAL.replace("(new)", "(q)")) if mutant else None
    module = load_gpt_fast_generate(src, edit)
    target, draft = _gpt_fast_pair(module)
    # one call: the oracle is from_torch_module(target) (gpt-fast's cached forward, on caches of its own)
    report = check_generator(from_gpt_fast_generate(module.generate), target=target, draft=draft, max_new_tokens=4,
                             mode="quick", seed=0)
    if "batch_size" in inspect.signature(module.generate).parameters:  # after 61c193d: issue #209
        assert not report.passed and "raised" in report.failures[0].message, report.summary()
    elif mutant:
        assert report.verdict == "failed", report.summary()
        assert {f.check for f in report.failures} & {"positions", "pairs"}, report.summary()
    else:
        assert report.verdict == "passed", report.summary()
        assert report.scenarios[0].target_calls_per_token < 1  # counted by a hook on the real module


@pytest.mark.slow  # a loop of batch size 1 in Python: ~20 s a run
@pytest.mark.parametrize("variant", ["as-released", "sample-fixed", "residual-uniform"])
def test_feifeibear_speculative_sampling_unmodified_on_the_checkers_models(variant, monkeypatch):
    # The classic HF-style loop: legacy (key, value) caches rolled back by slicing, .logits, .past_key_values and
    # model.device, all answered by the models the checker hands it; one adapter call, no glue.
    src = llmss_dir()
    if src is None or not (src / "sampling" / "speculative_sampling.py").exists():
        pytest.skip("SPECDEC_LLMSS_SRC does not name a checkout of feifeibear/LLMSpeculativeSampling")
    loop = load_llmss(src)
    if variant != "as-released":  # its sample() raises a bare RuntimeError whenever token 0 is drawn
        def sample(probs, num_samples=1):
            return torch.multinomial(probs, num_samples=num_samples)

        for module in ("kvcache_model", "speculative_sampling_module"):
            monkeypatch.setattr(loop[module], "sample", sample)
    if variant == "residual-uniform":  # BUG: after a rejection, a uniform token instead of max(target - draft, 0)
        monkeypatch.setattr(loop["speculative_sampling_module"], "max_fn",
                            lambda x: torch.ones_like(x) / x.shape[-1])
    scenarios = [s for s in default_generator_battery() if s.name == "small-joint"]
    report = check_generator(from_classic_loop(loop["speculative_sampling"]), scenarios=scenarios, mode="quick",
                             seed=0)
    if variant == "as-released":
        assert report.verdict == "failed" and "in sample: raise RuntimeError" in report.failures[0].message
    elif variant == "sample-fixed":
        assert report.verdict == "passed", report.summary()
    else:
        assert report.verdict == "failed" and report.failures[0].check == "joint", report.summary()


@pytest.mark.slow  # a loop of batch size 1 in Python: ~35 s exact
@pytest.mark.parametrize("mutant", [False, True], ids=["as-released", "residual-uniform"])
def test_romsto_speculative_generate_unmodified_on_the_checkers_models(mutant, monkeypatch):
    # input_ids= / past_key_values= / use_cache= keywords, .logits, target.config.vocab_size, target.device
    src = romsto_dir()
    if src is None or not (src / "sampling" / "speculative_decoding.py").exists():
        pytest.skip("SPECDEC_ROMSTO_SRC does not name a checkout of romsto/Speculative-Decoding")
    pytest.importorskip("termcolor")  # its utils.printing imports it
    loop = load_romsto(src)
    if mutant:  # BUG: after a rejection, a uniform token instead of max(target - draft, 0)
        monkeypatch.setattr(loop["module"], "max_fn", lambda x: torch.ones_like(x) / x.shape[-1])
    scenarios = [s for s in default_generator_battery() if s.name == "small-joint"]
    # its defaults are greedy (GreedyProcessor) and stop at token 1: sampling at temperature 1, no stop token
    generate = from_classic_loop(loop["speculative_generate"], logits_processor=loop["MultinomialProcessor"](1.0),
                                 eos_tokens_id=-2)
    report = check_generator(generate, scenarios=scenarios, mode="quick", seed=0)
    if mutant:
        assert report.verdict == "failed" and report.failures[0].check == "joint", report.summary()
    else:
        assert report.verdict == "passed", report.summary()


def _deepspec_loop(base_evaluator, sampling, temperature):
    """A DeepSpec decode loop: its real ``generate_decoding_sample`` (prefill, ``verify_draft_tokens``, rejection,
    ``sample_residual``, the target's ``DynamicCache``) with a proposer written as its EAGLE-3 evaluator's
    ``_propose`` is (each draft token ``sample_tokens(draft_logits, T)``, q ``logits_to_probs(draft_logits, T)``),
    the draft a plain causal LM run without a cache. One row at a time (DeepSpec takes batch size 1)."""
    import types

    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        out = np.full((prompts.shape[0], max_new_tokens), -1, dtype=np.int64)
        for i, row in enumerate(np.asarray(prompts)):
            torch.manual_seed(int(generator.integers(0, 2**62)))
            prompt = torch.tensor([[int(t) for t in row if t >= 0]])

            def propose(*, context, output_ids, position_ids, start, stop_token_ids=None):
                sequence, logits = output_ids[:, :start + 1], []
                for _ in range(gamma):
                    step = draft(input_ids=sequence, use_cache=False).logits[:, -1:]
                    logits.append(step)
                    sequence = torch.cat([sequence, sampling.sample_tokens(step, temperature=temperature)], dim=1)
                return base_evaluator.DraftProposal(
                    draft_token_count=gamma, verify_input_ids=sequence[:, start:],
                    draft_probs=sampling.logits_to_probs(torch.cat(logits, dim=1), temperature))

            result = base_evaluator.generate_decoding_sample(
                target_model=target, input_ids=prompt, max_new_tokens=max_new_tokens, max_proposal_tokens=gamma,
                temperature=temperature, stop_token_ids=None, init_context=lambda **_: types.SimpleNamespace(),
                propose=propose, update=lambda context, verification: None)
            new = result.output_ids[0, prompt.shape[1]:prompt.shape[1] + max_new_tokens]
            out[i, :new.shape[0]] = new.numpy()
        return out

    return generate


def _served_pair():
    """A tiny Llama target in float32 and its bf16 copy as the draft, heads with the magnitude of a served model's
    logits (a bias of 60 on every token, gaps of order 1), so that at temperature 0.3 the laws are spread (top token
    ~0.27) and a softmax of logits / 0.3 taken in bf16 is off by TV ~0.13 from the one taken in float32."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256)
    torch.manual_seed(0)
    target = transformers.LlamaForCausalLM(config).eval()
    head = torch.nn.Linear(32, 32, bias=True)
    with torch.no_grad():
        head.weight.copy_(target.lm_head.weight * 4.0)
        head.bias.fill_(60.0)
    target.lm_head = head
    target.generation_config.eos_token_id = None
    draft = __import__("copy").deepcopy(target).to(torch.bfloat16)
    return target, draft


@pytest.mark.slow  # a loop of batch size 1 through transformers: ~1 min
def test_deepspec_31_a_draft_sampled_from_bf16_logits_fails_and_its_fix_passes():
    # deepseek-ai/DeepSpec #31: sample_tokens divided bf16 logits by the temperature and took the softmax in bf16,
    # while the verifier gets logits_to_probs (float32). Fixed by 379f222 ("Use float32 softmax for draft sampling").
    src = deepspec_dir()
    if src is None or not (src / "deepspec" / "eval" / "base_evaluator.py").exists():
        pytest.skip("SPECDEC_DEEPSPEC_SRC does not name a folder holding DeepSpec's deepspec package")
    from specdec_check.models import from_hf_model

    base_evaluator, sampling = load_deepspec(src)
    fixed = ".float() / temperature" in inspect.getsource(sampling.sample_tokens)  # read from the code under test
    target, draft = _served_pair()
    report = check_generator(_deepspec_loop(base_evaluator, sampling, 0.3), target=target, draft=draft,
                             oracle=from_hf_model(target, temperature=0.3, top_k=0), max_new_tokens=4, gamma=3,
                             mode="quick", seed=0)
    if report.failures and "Calling `crop` with a positive value" in report.failures[0].message:
        import transformers

        pytest.skip(f"DeepSpec pins transformers==5.10.2; on {transformers.__version__} its loop's "
                    "DynamicCache.crop(length) raises (crop takes a negative count there)")
    if fixed:
        assert report.verdict == "passed", report.summary()
    else:
        assert report.verdict == "failed", report.summary()
        assert {f.check for f in report.failures} & {"positions", "pairs", "first_token"}, report.summary()


def test_flashinfer_chain_speculative_sampling():
    flashinfer = pytest.importorskip("flashinfer")
    if not torch.cuda.is_available():
        pytest.skip("FlashInfer kernels run on CUDA only")
    verify = from_flashinfer(flashinfer.sampling.chain_speculative_sampling)
    report = check_verifier(verify, backend="torch", device="cuda", mode="quick", seed=0)
    assert report.passed, report.summary()
