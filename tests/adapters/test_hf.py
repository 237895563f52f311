"""The installed transformers, as it is: ``_speculative_sampling`` through ``from_hf_transformers`` and ``generate``
through ``from_hf_generate`` on tiny exact models. Statistics: the calibrated G-test of tests/torch at ALPHA = 1e-9."""

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _steps import run_terms  # noqa: E402
from _torch_helpers import ALPHA, g_test, random_rows, verify_pvalue  # noqa: E402
from transformers.generation.utils import _speculative_sampling  # noqa: E402

from specdec_check import exact  # noqa: E402
from specdec_check.adapters import AdapterSignatureError, from_hf_transformers  # noqa: E402
from specdec_check.adapters.hf import from_hf_generate, hf_models, hf_processed, hf_scenarios, hf_warp  # noqa: E402
from specdec_check.checker import check_generator  # noqa: E402
from specdec_check.checker.generator.caller import CountingModel  # noqa: E402
from specdec_check.checker.generator.target_calls import freedman_threshold  # noqa: E402
from specdec_check.models import MarkovModel  # noqa: E402

HAS_ENSEMBLE = "assistant_ensemble_weight" in inspect.signature(_speculative_sampling).parameters


# ------------------------------------------------------------------ _speculative_sampling, by keyword
@pytest.mark.parametrize("gamma", [1, 3])
def test_real_speculative_sampling_is_exact(gamma):
    ids, q, p = random_rows(70 + gamma, batch=3, gamma=gamma, vocab=5)
    pvalue, impossible = verify_pvalue(from_hf_transformers(_speculative_sampling), ids, q, p, n=1_200, seed=gamma)
    assert impossible == 0 and pvalue > ALPHA, pvalue


@pytest.mark.skipif(not HAS_ENSEMBLE, reason=f"transformers {transformers.__version__} has no assistant_ensemble_weight")
def test_opt_in_ensemble_verification_is_lossy():
    """transformers 5.18's DIVERSE verification (weight 0.5) accepts more than the exact rule: the law test sees it.
    Passed positionally, the old adapter's ``False`` landed in this parameter (weight 0: every draft accepted)."""
    ids, q, p = random_rows(5, batch=3, gamma=2, vocab=5)
    lossy = from_hf_transformers(_speculative_sampling, assistant_ensemble_weight=0.5)
    pvalue, _ = verify_pvalue(lossy, ids, q, p, n=1_200, seed=0)
    assert pvalue < ALPHA


def test_unknown_signature_is_a_usage_error():
    def speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits, brand_new_flag):
        raise AssertionError("never called")

    with pytest.raises(AdapterSignatureError, match="brand_new_flag"):
        from_hf_transformers(speculative_sampling)
    if not HAS_ENSEMBLE:
        with pytest.raises(AdapterSignatureError, match="5.18"):
            from_hf_transformers(_speculative_sampling, assistant_ensemble_weight=0.5)


# ------------------------------------------------------------------ the models and generate
def _pair(vocab, order, seed, concentration=1.0):
    rng = np.random.default_rng([seed, vocab, order])
    shape = (vocab + 1,) * order + (vocab,)
    target, noise = rng.gamma(concentration, size=shape), rng.gamma(concentration, size=shape)
    target /= target.sum(-1, keepdims=True)
    noise /= noise.sum(-1, keepdims=True)
    draft = 0.6 * target + 0.4 * noise
    return MarkovModel(target, order=order), MarkovModel(draft / draft.sum(-1, keepdims=True), order=order)


def test_hf_models_logits_are_the_exact_laws():
    target, draft = _pair(6, 2, seed=1)
    hf_target, hf_draft = hf_models(target, draft)
    bos = 6
    ids = torch.tensor([[bos, 3, 0, 5, 5]])
    logits = hf_target(input_ids=ids, use_cache=False).logits[0].double()
    laws = target(np.array([[-1, 3, 0, 5, 5]]))[0]
    assert torch.isinf(logits[:, bos]).all()
    np.testing.assert_allclose(torch.softmax(logits, -1)[:, :bos].numpy(), laws, rtol=1e-6, atol=1e-7)
    assert hf_target.config.vocab_size == hf_draft.config.vocab_size == 7


def test_forward_passes_are_counted():
    target, draft = _pair(5, 1, seed=2)
    counted_target, counted_draft = CountingModel(target), CountingModel(draft)
    out = from_hf_generate()(target=counted_target, draft=counted_draft, prompts=np.array([[-1], [4]]),
                             max_new_tokens=3, gamma=2, generator=np.random.default_rng(0))
    assert out.shape == (2, 3) and ((out >= 0) & (out < 5)).all()
    assert 2 <= counted_target.calls <= 6 and counted_draft.calls >= 2


def test_generate_joint_law():
    """generate with an assistant, default settings, on an order-2 pair (V=5 < 50: top-k keeps everything):
    the joint law of two tokens from two prompts (empty, and [3, 1])."""
    target, draft = _pair(5, 2, seed=3, concentration=0.7)
    prompts = [np.array([], dtype=np.int64), np.array([3, 1])]
    n = 200
    counts, law = np.zeros((2, 25)), np.zeros((2, 25))
    for i, prompt in enumerate(prompts):
        rows = np.tile(np.concatenate([[-1] * (2 - prompt.size), prompt]), (n, 1))
        out = from_hf_generate()(target=target, draft=draft, prompts=rows, max_new_tokens=2, gamma=2,
                                 generator=np.random.default_rng(10 + i))
        np.add.at(counts[i], out[:, 0] * 5 + out[:, 1], 1)
        law[i] = exact.joint(target, 2, prompt).reshape(-1)
    pvalue, impossible = g_test(counts, law)
    assert impossible == 0 and pvalue > ALPHA, pvalue


def test_default_top_k_is_the_declared_law():
    """V=64, flat laws: generate's default top_k=50 drops ~9% of the raw mass. Nothing outside the top 50 is
    ever emitted (the raw law expects ~30 such tokens in 300), and the first token follows hf_processed's law."""
    scenario = hf_scenarios()[0]
    raw = scenario.target.unprocessed
    n = 300
    out = from_hf_generate()(target=scenario.target, draft=scenario.draft, prompts=np.full((n, 1), -1),
                             max_new_tokens=1, gamma=3, generator=np.random.default_rng(5))
    start_raw = raw.start_probs()
    start_processed = scenario.target.start_probs()
    assert n * start_raw[start_processed == 0].sum() > 20  # the raw law would expect these tokens...
    assert (start_processed[out[:, 0]] > 0).all()  # ...and none is emitted
    counts = np.bincount(out[:, 0], minlength=64)[None]
    pvalue, impossible = g_test(counts, start_processed[None])
    assert impossible == 0 and pvalue > ALPHA


def test_hf_warp_matches_transformers_warpers():
    """hf_warp against transformers' own TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    rng = np.random.default_rng(0)
    probs = rng.gamma(1.0, size=(20, 64))
    probs[rng.random(probs.shape) < 0.1] = 0.0
    probs /= probs.sum(-1, keepdims=True)
    for temperature, top_k, top_p in [(1.0, 50, 1.0), (0.7, 10, 1.0), (1.3, 0, 0.8), (1.0, 50, 0.9)]:
        with np.errstate(divide="ignore"):
            logits = torch.from_numpy(np.log(probs).astype(np.float32))
        logits = torch.cat([logits, torch.full((20, 1), float("-inf"))], -1)  # the BOS logit
        if temperature != 1.0:
            logits = TemperatureLogitsWarper(temperature)(None, logits)
        if top_k:
            logits = TopKLogitsWarper(top_k)(None, logits)
        if top_p < 1.0:
            logits = TopPLogitsWarper(top_p)(None, logits)
        expected = torch.softmax(logits.double(), -1)[:, :64].numpy()
        np.testing.assert_allclose(hf_warp(probs, temperature=temperature, top_k=top_k, top_p=top_p), expected,
                                   rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("which", [0, 1])
def test_generate_target_calls_with_default_settings(which):
    """HF's defaults (its schedule; the confidence stop after a low-probability draft, which makes the number of
    drafts depend on the drafts) are judged per step: every call is a step with drafts, and the shortfall stays
    under the check's bound at alpha 1e-6 (120 runs, as quick mode makes)."""
    scenario = hf_scenarios()[which]
    shortfall, variation, totals = run_terms(from_hf_generate(), scenario, runs=120, seed=which)
    assert totals["wasted_calls"] == 0 and totals["draftless_steps"] == 0 and totals["prefill_calls"] == 0
    assert totals["tokens"] == 120 * scenario.max_new_tokens
    assert shortfall < freedman_threshold(variation, scenario.gamma, 1e-6), (shortfall, variation)


def test_reserved_arguments_are_refused():
    with pytest.raises(ValueError, match="max_new_tokens"):
        from_hf_generate(max_new_tokens=3)
    with pytest.raises(ValueError, match="do_sample"):
        from_hf_generate(do_sample=False)
    with pytest.raises(TypeError, match="CausalModel"):
        hf_processed(object())


@pytest.mark.slow
def test_generate_end_to_end_with_default_settings():
    """The whole check, in one call, on HF's generate with default settings (~2-3 minutes on one core)."""
    report = check_generator(from_hf_generate(), scenarios=hf_scenarios(), mode="quick", seed=0)
    assert report.passed, report.summary()
