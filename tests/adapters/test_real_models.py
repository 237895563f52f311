"""Decode loops on a real model pair, the target itself the oracle (issue 26): tiny random Llama models built from a
config (no download), heads scaled so the laws are peaked.

The fast tests run hand-written loops (exact, and one with a position bug) through the oracle and the kind; the
slow ones run transformers' own assisted generation, exact and with #47932 reintroduced."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from specdec_check import check_generator  # noqa: E402
from specdec_check.models import from_hf_model  # noqa: E402


def tiny_llama(seed: int, vocab: int = 32, scale: float = 30.0):
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)  # random heads give near-uniform laws: peaked ones exercise acceptance
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


@pytest.fixture(scope="module")
def pair():
    # The draft is the target with a flatter head: the same ranking (drafts are accepted), its top 3 tokens hold
    # ~0.2 of its mass, so a q returned unprocessed (0.2 of the processed one) accepts nearly every draft and the
    # loop emits the draft's law (first-token TV ~0.24 at top-k 3).
    return tiny_llama(0), tiny_llama(0, scale=8.0)


#: Prompts of equal length: the hand-written loops below run every row of a call in one forward pass.
PROMPTS = [(1, 2, 3), (4, 5, 6), (7, 7, 7), (0, 9, 30)]


def _loop(position_of):
    """A loop sampling every token from the target at ``position_of(length)`` of the sequence so far (the last
    position: exact, with no speculation), all rows of the call in one forward pass, no cache."""

    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        rows = torch.as_tensor(np.asarray(prompts))
        torch_generator = torch.Generator().manual_seed(int(generator.integers(0, 2**62)))
        for _ in range(max_new_tokens):
            with torch.no_grad():
                logits = target(input_ids=rows, use_cache=False).logits[:, position_of(rows.shape[1])].double()
            token = torch.multinomial(torch.softmax(logits, -1), 1, generator=torch_generator)
            rows = torch.cat([rows, token], dim=1)
        return rows[:, -max_new_tokens:].numpy()

    return generate


sample_from_the_target = _loop(lambda length: length - 1)
one_token_late = _loop(lambda length: length - 2)  # BUG: a position off by one


def _stopping_at(eos, *, keep_going=False):
    """The exact loop with a stop token: a row ends at its first ``eos`` (``-1`` after it); with ``keep_going`` a
    loop that commits the tokens after it too (transformers #47912: a stop accepted mid-block)."""

    def generate(**kwargs):
        out = sample_from_the_target(**kwargs)
        if not keep_going:
            for row in out:
                hit = np.flatnonzero(row == eos)
                if hit.size:
                    row[hit[0] + 1:] = -1
        return out

    return generate


def _a_frequent_token(target, prompts):
    """A token the target emits often after the prompts, so that rows stop early in many calls."""
    with torch.no_grad():
        logits = target(input_ids=torch.as_tensor(prompts), use_cache=False).logits[:, -1].double()
    mass = torch.softmax(logits, -1).mean(0)
    return int(torch.argsort(mass, descending=True)[1])  # the second most probable: stops often, not always


def test_an_exact_loop_on_real_models_passes_and_its_forward_passes_are_counted(pair):
    target, draft = pair
    report = check_generator(sample_from_the_target, target=target, draft=draft, mode="quick", max_new_tokens=4,
                             prompts=PROMPTS, rows_per_call=64, seed=0)
    assert report.verdict == "passed", report.summary()
    # one forward pass per step for the call's 64 rows, counted by a hook on the model: 1/64 per token
    assert report.scenarios[0].target_calls_per_token == pytest.approx(1 / 64)
    assert report.scenarios[0].vocab_size == 32


def test_a_loop_that_reads_the_wrong_position_fails(pair):
    target, draft = pair
    report = check_generator(one_token_late, target=target, draft=draft, mode="quick", max_new_tokens=4,
                             prompts=PROMPTS, rows_per_call=64, seed=0)
    assert report.verdict == "failed", report.summary()
    assert {f.check for f in report.findings} & {"positions", "pairs", "first_token"}


def test_a_loop_that_stops_at_its_stop_token_passes_and_one_that_runs_past_it_fails(pair):
    target, draft = pair
    eos = _a_frequent_token(target, PROMPTS)
    options = dict(target=target, draft=draft, mode="quick", max_new_tokens=4, prompts=PROMPTS, rows_per_call=64,
                   seed=0, eos_token_id=eos)
    exact = check_generator(_stopping_at(eos), **options)
    assert exact.verdict == "passed", exact.summary()
    tested = {r.details["test"]: r.n for r in exact.results if "test" in r.details}
    # rows end early: later positions have fewer tokens than the first; the pair test still has every pair
    assert tested["position[3]"] < tested["position[0]"], tested
    past = check_generator(_stopping_at(eos, keep_going=True), **options)
    assert past.verdict == "failed", past.summary()
    assert any("after the stop token" in f.message for f in past.findings), past.summary()


def test_a_transformers_target_stops_at_its_generation_configs_stop_token_by_default():
    # from_hf_generate ends rows at these tokens too (tests/adapters/test_readme_example.py runs the two together)
    from specdec_check.checker.model_loop.kind import model_loop_kind

    target, draft = tiny_llama(0), tiny_llama(0, scale=8.0)
    target.generation_config.eos_token_id = [5, 7]
    kind = model_loop_kind(target, draft, prompts=PROMPTS)
    assert kind.battery[0].eos_token_id == (5, 7)  # read from generation_config, as generate reads it
    assert model_loop_kind(target, draft, prompts=PROMPTS, eos_token_id=3).battery[0].eos_token_id == 3


def test_the_oracle_is_the_uncached_forward_pass_upcast_and_processed(pair):
    target, _ = pair
    raw = from_hf_model(target)
    top = from_hf_model(target, top_k=3)
    sequence = (3, 1, 4, 1, 5)
    laws, top_laws = raw.position_laws([sequence])[0], top.position_laws([sequence])[0]
    with torch.no_grad():
        logits = target(input_ids=torch.tensor([sequence]), use_cache=False).logits[0].double()
    assert np.allclose(laws, torch.softmax(logits, -1).numpy())
    assert ((top_laws > 0).sum(axis=1) == 3).all() and np.allclose(top_laws.sum(axis=1), 1.0)
    assert "top-k 3" in top.describe() and "uncached forward pass" in top.describe()


@pytest.mark.slow  # transformers' assisted generation: ~70 ms a row
def test_transformers_assisted_generation_is_exact_and_47932_reintroduced_fails(pair, monkeypatch):
    from transformers.generation import candidate_generator

    from specdec_check.adapters.hf import from_hf_generate

    target, draft = pair
    options = dict(target=target, draft=draft, oracle=from_hf_model(target, top_k=3), mode="quick", seed=0)
    exact = check_generator(from_hf_generate(top_k=3), **options)
    assert exact.verdict == "passed", exact.summary()

    def raw_q(self, generation_args):  # drafts sampled from processed scores, the raw logits returned as q
        out = self.assistant_model.generate(**generation_args, **self.assistant_kwargs, output_logits=True)
        self.assistant_kwargs["cache"] = out.cache
        return out.sequences, torch.stack(out.logits, dim=1)

    monkeypatch.setattr(candidate_generator.AssistedCandidateGenerator, "_generate_candidates", raw_q)
    mutant = check_generator(from_hf_generate(top_k=3), **options)
    assert mutant.verdict == "failed", mutant.summary()


#: Prompts with repeated n-grams, so that prompt lookup finds drafts to copy.
LOOKUP_PROMPTS = [(1, 2, 3, 1, 2), (4, 5, 4, 5, 4), (7, 7, 7, 7, 7), (0, 9, 30, 0, 9)]


@pytest.mark.slow  # transformers' prompt lookup decoding, B = 1: ~100 ms a row
def test_transformers_prompt_lookup_decoding_is_exact(pair):
    from specdec_check.adapters.hf import from_hf_generate

    target, draft = pair
    report = check_generator(from_hf_generate(top_k=3, prompt_lookup_num_tokens=3), target=target, draft=draft,
                             oracle=from_hf_model(target, top_k=3), prompts=LOOKUP_PROMPTS, mode="quick", seed=0)
    assert report.verdict == "passed", report.summary()
    assert report.scenarios[0].target_calls_per_token < 1  # some copied drafts were accepted


def bpe_tokenizer(merges, *, ids_descending=False):
    """A small BPE tokenizer built offline: the letters a to t, then ``merges``. Its ``get_vocab()`` lists the ids in
    ascending order, or descending with ``ids_descending`` (a ``tokenizers`` vocabulary is a hash map: its order is
    arbitrary, and code that depends on it must not care)."""
    from tokenizers import Tokenizer, decoders, models

    vocab = {letter: i for i, letter in enumerate("abcdefghijklmnopqrst")}
    for left, right in merges:
        vocab[left + right] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=list(merges)))
    backend.decoder = decoders.Fuse()  # decode joins the tokens' text, with no spaces between them

    class Tokenizer_(transformers.PreTrainedTokenizerFast):
        def get_vocab(self):
            return dict(sorted(super().get_vocab().items(), key=lambda item: -item[1] if ids_descending else item[1]))

    return Tokenizer_(tokenizer_object=backend)


TARGET_MERGES = [("a", "b"), ("c", "d"), ("e", "f"), ("g", "h"), ("i", "j"), ("k", "l"), ("m", "n"), ("o", "p"),
                 ("q", "r"), ("s", "t"), ("ab", "cd"), ("ef", "gh")]
DRAFT_MERGES = [("b", "c"), ("d", "e"), ("f", "g"), ("h", "i"), ("j", "k"), ("l", "m")]


def _vocabulary_map_is_consistent(translator) -> bool:
    """Whether transformers' pruned-head translator puts the draft's logit ``k`` at the target id of the token its
    candidate ids map ``k`` to (``get_target_logits`` against ``get_target_ids``)."""
    to_target = translator._assistant_to_target_input_ids
    placed = to_target[to_target != translator.SUPPRESS_TOKEN_ID]           # where get_target_logits puts logit k
    drafted = to_target[translator.assistant_overlap_token_ids]             # the target id get_target_ids gives k
    return bool(torch.equal(placed, drafted))


@pytest.mark.slow  # transformers' universal assisted generation, B = 1, two runs: ~200 s
@pytest.mark.parametrize("ids_descending", [False, True], ids=["vocab-ids-ascending", "vocab-ids-descending"])
def test_transformers_universal_assisted_generation_is_exact_where_its_vocabulary_map_is(ids_descending):
    """Universal speculative decoding (two tokenizers, do_sample=True). Its pruned-head translator lists the shared
    tokens in ``get_vocab()`` order for the candidate ids, and in id order for the draft's logits: the two agree only
    when the draft's vocabulary lists its ids in ascending order. With the other order the returned q belongs to
    other tokens, and the loop is not exact (transformers 5.24.0 and 5.25.0, candidate_generator.py)."""
    from transformers.generation.candidate_generator import AssistantVocabTranslatorCache

    from specdec_check.adapters.hf import from_hf_generate

    target_tokenizer, draft_tokenizer = bpe_tokenizer(TARGET_MERGES), bpe_tokenizer(DRAFT_MERGES,
                                                                                    ids_descending=ids_descending)
    target = tiny_llama(0, vocab=len(target_tokenizer))
    draft = tiny_llama(1, vocab=len(draft_tokenizer), scale=8.0)
    loop = from_hf_generate(top_k=3, tokenizer=target_tokenizer, assistant_tokenizer=draft_tokenizer)
    report = check_generator(loop, target=target, draft=draft, oracle=from_hf_model(target, top_k=3), prompts=PROMPTS,
                             max_new_tokens=2, mode="quick", seed=0)
    translator = AssistantVocabTranslatorCache.get_translator(target_tokenizer, draft_tokenizer, len(target_tokenizer))
    consistent = _vocabulary_map_is_consistent(translator)
    assert consistent is not ids_descending  # the premise, read from the installed transformers' own translator
    assert report.verdict == ("passed" if consistent else "failed"), report.summary()


def tiny_gemma4_pair(vocab: int = 32):
    """A tiny Gemma 4 text model and a Gemma 4 assistant over it (the assistant reads the target's KV states and
    hidden state: transformers drafts with it through SinglePositionMultiTokenCandidateGenerator)."""
    from transformers.models.gemma4 import Gemma4ForCausalLM, Gemma4TextConfig
    from transformers.models.gemma4_assistant import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

    def text_config(**changes):
        return Gemma4TextConfig(**{**dict(
            vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=16, global_head_dim=16, hidden_size_per_layer_input=0,
            vocab_size_per_layer_input=0, max_position_embeddings=256, sliding_window=64,
            layer_types=["sliding_attention", "full_attention"], pad_token_id=0, eos_token_id=None,
            bos_token_id=None), **changes})

    torch.manual_seed(0)
    target = Gemma4ForCausalLM(text_config()).eval()
    assistant = Gemma4AssistantForCausalLM(Gemma4AssistantConfig(
        text_config=text_config(num_kv_shared_layers=2), backbone_hidden_size=32, num_centroids=8,
        centroid_intermediate_top_k=4)).eval()
    target.generation_config.eos_token_id = None
    return target, assistant


def drafted_point_mass(get_candidates):
    """``get_candidates`` with q replaced by the point mass on each drafted token: the law an argmax draft is really
    drawn from (then the standard rule is exact)."""

    def wrapped(self, input_ids, *args, **kwargs):
        candidate_ids, candidate_logits = get_candidates(self, input_ids, *args, **kwargs)
        if candidate_logits is None:
            return candidate_ids, candidate_logits
        drafted = candidate_ids[:, -candidate_logits.shape[1]:]
        q = torch.full_like(candidate_logits, float("-inf"))
        return candidate_ids, q.scatter(-1, drafted[..., None], 0.0)

    return wrapped


@pytest.mark.slow  # transformers' Gemma 4 assistant drafting, B = 1, two runs: ~100 s
def test_transformers_single_position_multi_token_drafting_is_exact_only_with_the_q_it_drafts_from(monkeypatch):
    """SinglePositionMultiTokenCandidateGenerator (the Gemma 4 assistant) drafts each token by argmax and returns the
    assistant's raw logits as q, under do_sample=True too (transformers 5.24.0 and 5.25.0): the standard rule then
    accepts with the wrong ratio. The same drafts with q their point mass are exact."""
    import inspect

    from transformers.generation import candidate_generator

    from specdec_check.adapters.hf import from_hf_generate

    generator = candidate_generator.SinglePositionMultiTokenCandidateGenerator
    drafts_by_argmax = "argmax" in inspect.getsource(generator.get_candidates)  # the premise, read from the source
    target, assistant = tiny_gemma4_pair()
    # 4 new tokens: the first comes from the target's prefill alone, and a round drafts at most up to one token
    # before max_length, so the drafts first reach the output at position 1 of 3 new tokens or more.
    options = dict(target=target, draft=assistant, oracle=from_hf_model(target, top_k=3), prompts=PROMPTS,
                   max_new_tokens=4, mode="quick", seed=0)
    as_installed = check_generator(from_hf_generate(top_k=3), **options)
    assert as_installed.verdict == ("failed" if drafts_by_argmax else "passed"), as_installed.summary()
    monkeypatch.setattr(generator, "get_candidates", drafted_point_mass(generator.get_candidates))
    if drafts_by_argmax:
        fixed = check_generator(from_hf_generate(top_k=3), **options)
        assert fixed.verdict == "passed", fixed.summary()


def _dflash_pair():
    """A tiny Llama target (4 layers) and a DFlash block drafter of the installed transformers (the Muse Glimmer
    assistant: one layer reading the target's layers 0 and 2, blocks of 4 tokens), both built from configs; None
    where the installed release has no DFlash."""
    config_class = getattr(transformers, "MuseGlimmerAssistantConfig", None)
    if config_class is None:
        return None
    target = tiny_llama(0, scale=8.0)
    config = transformers.LlamaConfig(**{**target.config.to_dict(), "num_hidden_layers": 4})
    torch.manual_seed(0)
    target = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        target.lm_head.weight.mul_(8.0)
    target.generation_config.eos_token_id, target.generation_config.pad_token_id = None, 0
    torch.manual_seed(1)
    assistant = transformers.MuseGlimmerAssistantModel(config_class(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        head_dim=16, block_size=4, mask_token_id=31, target_layer_ids=[0, 2], max_position_embeddings=256,
        sliding_window=256, bos_token_id=None, eos_token_id=None, pad_token_id=0)).eval()
    return target, assistant


@pytest.mark.slow  # transformers' DFlash loop, a row at a time: ~60 s each
@pytest.mark.parametrize("stop", [False, True], ids=["no-stop-token", "stop-token"])
def test_transformers_dflash_block_drafting_is_exact_and_stops_where_47912_is_fixed(stop):
    import inspect

    from specdec_check.adapters.hf import from_hf_generate

    pair = _dflash_pair()
    if pair is None:
        pytest.skip(f"transformers {transformers.__version__} has no DFlash drafter (MuseGlimmerAssistantModel)")
    target, assistant = pair
    if stop:
        # token 1: of the drafts this pair accepts with a token committed after them, the most frequent (8 of 26
        # in 100 rows on transformers 5.15.0): a stop token accepted inside a block, the case of #47912
        target.generation_config.eos_token_id = 1
    report = check_generator(from_hf_generate(top_k=3, speculation_type="dflash"), target=target, draft=assistant,
                             oracle=from_hf_model(target, top_k=3), max_new_tokens=8, prompts=PROMPTS, mode="quick",
                             seed=0)
    # #47912 (a stop token accepted inside a drafted block did not end the row) is fixed by #48981, which put the
    # stop tokens into _assisted_decoding itself: read from the installed code
    source = inspect.getsource(transformers.generation.utils.GenerationMixin._assisted_decoding)
    if stop and "Same tensor the stopping criteria" not in source:
        assert report.verdict == "failed", report.summary()
        assert any("after the stop token" in f.message for f in report.failures), report.summary()
    else:
        assert report.verdict == "passed", report.summary()
