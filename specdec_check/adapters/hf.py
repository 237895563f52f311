"""HuggingFace transformers decode loops end to end: the tool's exact models as ``PreTrainedModel`` s, and ``generate``.

* :func:`hf_models` ``(target, draft)`` -> two transformers models whose logits are the tool's
  exact laws (``log p``), for any causal model, with a real ``DynamicCache`` of the installed
  transformers (so ``generate`` crops and extends it as it does for any model);
* :func:`from_hf_generate` ``(**generate_kwargs)`` -> the checker's decode-loop contract around
  ``target.generate(..., assistant_model=draft, do_sample=True)``;
* :func:`hf_processed` -> the law ``generate`` samples by default (``top_k=50``), to declare as a
  scenario's target; :func:`hf_scenarios` -> scenarios that do, vocabularies above 50 included.

Example::

    from specdec_check.adapters.hf import from_hf_generate, hf_scenarios
    from specdec_check.checker import check_generator

    report = check_generator(from_hf_generate(), scenarios=hf_scenarios(), mode="quick")
    print(report.summary())
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import torch

from ..models import CausalModel
from ._common import draw_seeds, forked_global_rng
from ._hf_processing import HFProcessedModel, hf_processed, hf_warp

__all__ = ["HFProcessedModel", "assisted_generate", "from_hf_generate", "hf_models", "hf_processed", "hf_scenarios", "hf_warp"]

#: generate() arguments the contract sets itself.
_RESERVED = ("input_ids", "inputs", "assistant_model", "max_new_tokens", "generation_config")


def _unprocessed(model):
    """The raw-law numpy model behind ``model`` when its laws are :func:`hf_processed` ones, else None.

    Looks through the wrappers the checker puts around a scenario's model (a counting wrapper's
    ``model``, a torch model's ``base``), at most a few levels deep.
    """
    seen = model
    for _ in range(6):
        if isinstance(seen, HFProcessedModel):
            return seen.unprocessed
        inner = getattr(seen, "__dict__", {})
        seen = inner.get("model", inner.get("base"))
        if seen is None:
            return None
    return None


@functools.lru_cache(maxsize=1)
def _classes():
    """The config and model classes, built once against the installed transformers."""
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutputWithPast

    cache_field = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
    #: Before 4.42 generate made no cache for a model: the model returned a legacy tuple of (key, value) layers.
    legacy = _legacy_transformers = not hasattr(GenerationMixin, "_prepare_cache_for_generation")

    class SpecdecTableConfig(PretrainedConfig):
        """A causal LM with no weights: one cache layer that stores the token ids (head_dim 1)."""

        model_type = "specdec_table"
        legacy = _legacy_transformers

        def __init__(self, vocab_size=2, **kwargs):
            for key, value in dict(num_hidden_layers=1, hidden_size=1, num_attention_heads=1, num_key_value_heads=1,
                                   head_dim=1, max_position_embeddings=1 << 20, is_decoder=True,
                                   tie_word_embeddings=False, use_cache=True).items():
                kwargs.setdefault(key, value)
            super().__init__(**kwargs)
            self.vocab_size = vocab_size

    class SpecdecTableLM(PreTrainedModel, GenerationMixin):
        """Logits ``log p`` of a specdec_check causal model (``p`` over ``V`` ids; the id ``V`` is BOS,
        logit ``-inf``, read as start-of-sequence). Each forward pass is one call of the model."""

        config_class = SpecdecTableConfig
        base_model_prefix = "table"
        main_input_name = "input_ids"
        _supports_cache_class = True
        _supports_static_cache = False

        def __init__(self, config, laws=None, raw=None):
            super().__init__(config)
            self.anchor = torch.nn.Parameter(torch.zeros(1), requires_grad=False)  # gives the model a device
            self.laws, self.raw = laws, raw
            self.post_init()

        def _init_weights(self, module):  # no weights to initialise
            return None

        def get_input_embeddings(self):
            return None

        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, cache=None,
                    use_cache=None, logits_to_keep=0, cache_position=None, return_dict=None, **kwargs):
            store = cache if cache is not None else past_key_values
            new = input_ids.to(torch.int64)
            states = new[:, None, :, None].to(torch.float32)  # [B, heads=1, S, head_dim=1]: the token ids
            if isinstance(store, tuple) or (store is None and legacy and use_cache is not False):
                keys = states if not store else torch.cat([store[0][0], states], dim=2)
                store = ((keys, keys),)
            elif store is not None:
                keys, _ = store.update(states, states, 0)
            else:
                keys = states
            tokens = keys[:, 0, :, 0].round().to(torch.int64)
            logits = self.table_logits(tokens)[:, -new.shape[1]:]
            if isinstance(logits_to_keep, int) and logits_to_keep > 0:
                logits = logits[:, -logits_to_keep:]
            return CausalLMOutputWithPast(logits=logits, **{cache_field: store})

        def table_logits(self, tokens: torch.Tensor) -> torch.Tensor:
            """float32 [B, T, V+1]: log p after each prefix (one counted call of the law model)."""
            vocab = self.config.vocab_size - 1
            real = torch.where(tokens >= vocab, -1, tokens)  # BOS -> start of sequence
            laws = self.laws(real)  # the counted call (a checker's counting wrapper, or the model itself)
            if self.raw is not None:  # processed laws declared: generate applies the warpers to the raw ones
                laws = self.raw(real.cpu().numpy())
            laws = torch.as_tensor(np.asarray(laws.cpu() if isinstance(laws, torch.Tensor) else laws),
                                   dtype=torch.float64)
            with np.errstate(divide="ignore"):
                logits = torch.where(laws > 0, laws.log(), torch.tensor(float("-inf"), dtype=torch.float64))
            bos = torch.full(logits.shape[:-1] + (1,), float("-inf"), dtype=torch.float64)
            return torch.cat([logits, bos], -1).to(device=tokens.device, dtype=torch.float32)

        def prepare_inputs_for_generation(self, input_ids, **kwargs):
            """The installed transformers' own preparation; before 4.42 (no generic one): the uncached tokens."""
            if not legacy:
                return super().prepare_inputs_for_generation(input_ids, **kwargs)
            past_key_values = kwargs.get("past_key_values")
            if past_key_values:
                input_ids = input_ids[:, past_key_values[0][0].shape[2]:]
            return {"input_ids": input_ids, "past_key_values": past_key_values, "use_cache": kwargs.get("use_cache")}

    return SpecdecTableConfig, SpecdecTableLM


def _vocab_of(model) -> int:
    size = getattr(model, "vocab_size", None)
    if size is None:
        raise TypeError(f"hf_models needs causal models with a vocab_size; got {type(model).__name__}.")
    return int(size)


def hf_models(target, draft=None):
    """``(target_model, draft_model)``: transformers ``PreTrainedModel`` s whose logits are the exact laws.

    ``target`` and ``draft`` are specdec_check causal models (or the checker's wrappers of them:
    every forward pass is one call of the given object, so the checker counts it). Each model has
    ``V + 1`` logits, ``log p`` over the ``V`` ids and ``-inf`` for the id ``V``, its BOS token (read
    as start-of-sequence, so a prompt is ``[V] + tokens``). A ``DynamicCache`` of the installed
    transformers holds the token ids (one layer, head_dim 1): ``generate`` creates, crops and extends
    it as for any model, and each pass reads the whole sequence from it. When a model's laws are
    :func:`hf_processed` ones, its logits are the raw laws, so ``generate``'s warpers do the processing.
    Returns ``draft_model = None`` when ``draft`` is None.
    """
    config_class, model_class = _classes()
    built = []
    for model in (target, draft):
        if model is None:
            built.append(None)
            continue
        vocab = _vocab_of(model)
        # EOS: none; transformers before 4.42 needs one in assisted decoding: the BOS id, never sampled.
        eos = vocab if getattr(config_class, "legacy", False) else None
        config = config_class(vocab_size=vocab + 1, bos_token_id=vocab, pad_token_id=eos, eos_token_id=eos)
        built.append(model_class(config, laws=model, raw=_unprocessed(model)).eval())
    if built[1] is not None and built[1].config.vocab_size != built[0].config.vocab_size:
        raise ValueError("hf_models: target and draft vocabularies differ.")
    return built[0], built[1]


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' logger at ERROR for the block (its deprecation and padding notices would repeat once
    per row), restored after."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


@contextlib.contextmanager
def _restored(configs):
    """The configs' attributes as they were on entry, given back on exit (a row that raised included)."""
    saved = [dict(vars(config)) for config in configs]
    try:
        yield
    finally:
        for config, attributes in zip(configs, saved):
            vars(config).clear()
            vars(config).update(attributes)


def _new_tokens(sequence, ids, max_new_tokens: int, eos, target) -> np.ndarray:
    """The row's new tokens, ``-1`` after them (int64 ``[max_new_tokens]``). With a stop token, the padding
    transformers appends after it becomes ``-1``; tokens it generated past the stop token stay, and the contract
    names them (transformers #47912: a stop token accepted inside a drafted block did not end the row)."""
    new = sequence[0, ids.shape[1]:].cpu().numpy()[:max_new_tokens]
    if eos is not None:
        stops = np.flatnonzero(np.isin(new, np.atleast_1d(eos)))
        if stops.size and (new[stops[0] + 1:] == target.generation_config.pad_token_id).all():
            new = new[:stops[0] + 1]
    row = np.full(max_new_tokens, -1, dtype=np.int64)
    row[:new.shape[0]] = new
    return row


def _row_seeds(generator, n: int) -> list:
    if isinstance(generator, torch.Generator):
        return draw_seeds(generator, n)
    return [int(s) for s in np.asarray(generator.integers(0, 1 << 62, size=n))]


def from_hf_generate(**generate_kwargs):
    """The decode-loop contract around transformers' ``generate`` with an assistant model.

    Returns ``generate(*, target, draft, prompts, max_new_tokens, gamma, generator)`` for
    :func:`~specdec_check.checker.check_generator` that builds :func:`hf_models` from the checker's
    models and, for each prompt row in turn (HF's assisted generation takes batch size 1):

    * prepends BOS (the id ``V``) to the row's real tokens (``-1`` padding dropped), so an empty
      prompt is a valid input;
    * sets the assistant's ``generation_config.num_assistant_tokens = gamma`` and leaves every other
      setting at the installed transformers' defaults (its schedule, confidence threshold, and
      ``top_k=50``) unless ``generate_kwargs`` say otherwise; both models' generation configs are
      restored before each row, so rows do not share HF's heuristic state;
    * runs ``target.generate(input_ids, attention_mask, assistant_model=draft, do_sample=True,
      max_new_tokens=max_new_tokens, **generate_kwargs)`` on the global torch RNG forked and seeded
      from the contract's generator (results depend on it only; the caller's RNG is untouched).

    Returns int64 ``[B, max_new_tokens]`` (numpy for numpy prompts, torch otherwise). Check it on
    scenarios whose laws are :func:`hf_processed` (:func:`hf_scenarios`): ``generate`` samples
    the processed law, not the raw one.

    With ``prompt_lookup_num_tokens=k`` it is transformers' prompt lookup decoding (drafts are n-grams copied
    from the sequence so far), with ``assistant_early_exit=k`` self-speculation from the target's first ``k``
    layers: no assistant model is passed to either (the checker's draft is then unused).

    Handed your own transformers models (``check_generator(..., target=model, draft=model)``), it runs them as
    they are: no BOS is prepended (the prompts are real token strings), and a row ends at the target's
    ``eos_token_id`` (-1 after it).

    Example::

        report = check_generator(from_hf_generate(), scenarios=hf_scenarios(), mode="quick")
    """
    clash = sorted(set(generate_kwargs) & set(_RESERVED))
    if clash:
        raise ValueError(f"from_hf_generate sets {clash} itself (from the contract); leave them out.")
    if generate_kwargs.get("do_sample", True) is not True:
        raise ValueError("from_hf_generate checks sampling (do_sample=True); greedy decoding has no law to check.")
    settings = dict(generate_kwargs)
    settings.pop("do_sample", None)
    # Prompt lookup drafts from the sequence itself, early exit with the target's own first layers: transformers
    # takes no assistant model with either.
    lookup = any(settings.get(k) is not None for k in ("prompt_lookup_num_tokens", "assistant_early_exit"))

    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        real = hasattr(target, "generate") and hasattr(target, "config")  # your own transformers models, as they are
        hf_target, hf_draft = (target, draft) if real else hf_models(target, draft)
        bos = [] if real else [hf_target.config.vocab_size - 1]
        eos = hf_target.generation_config.eos_token_id if real else None
        is_torch = isinstance(prompts, torch.Tensor)
        rows = prompts.detach().cpu().numpy() if is_torch else np.asarray(prompts)
        # a block drafter (DFlash's assistant) is a bare model with no generation_config: its block size is its own
        drafts_by_config = getattr(hf_draft, "generation_config", None) is not None
        # transformers' heuristics write into the models' generation configs (the assistant's num_assistant_tokens
        # after each generate): each row starts from the configs as they were, restored attribute by attribute in
        # the same objects, and the caller gets them back as given
        configs = [hf_target.generation_config] + ([hf_draft.generation_config] if drafts_by_config else [])
        saved = [dict(vars(config)) for config in configs]
        out = np.full((rows.shape[0], max_new_tokens), -1, dtype=np.int64)
        with _quiet_transformers(), _restored(configs):
            for i, seed in enumerate(_row_seeds(generator, rows.shape[0])):
                for config, attributes in zip(configs, saved):
                    vars(config).clear()
                    vars(config).update(attributes)
                if drafts_by_config:
                    hf_draft.generation_config.num_assistant_tokens = int(gamma)
                ids = torch.tensor([bos + [int(t) for t in rows[i] if t >= 0]], dtype=torch.int64)
                assistant = {} if lookup else {"assistant_model": hf_draft}
                with forked_global_rng(torch.device("cpu"), seed), torch.no_grad():
                    sequence = hf_target.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                                  max_new_tokens=int(max_new_tokens), **assistant, **settings)
                out[i] = _new_tokens(sequence, ids, max_new_tokens, eos, hf_target)
        return torch.from_numpy(out).to(prompts.device) if is_torch else out

    generate.__name__ = generate.__qualname__ = "from_hf_generate(GenerationMixin.generate)"
    return generate


#: transformers' assisted generation with its defaults, as a decode loop (``specdec-check generate
#: specdec_check.adapters.hf:assisted_generate --target-model M:T --draft-model M:D``).
assisted_generate = from_hf_generate()


@functools.lru_cache(maxsize=1)
def _hf_battery() -> tuple:
    from ..models import MarkovModel
    from ..scenarios import GeneratorScenario

    def pair(vocab, seed, concentration, mix_weight):
        rng = np.random.default_rng([seed, vocab])
        target = rng.gamma(concentration, size=(vocab + 1, vocab))
        noise = rng.gamma(concentration, size=(vocab + 1, vocab))
        target /= target.sum(-1, keepdims=True)
        noise /= noise.sum(-1, keepdims=True)
        draft = mix_weight * target + (1 - mix_weight) * noise
        return MarkovModel(target), MarkovModel(draft / draft.sum(-1, keepdims=True))

    wide_target, wide_draft = pair(64, 21, 2.0, 0.7)
    small_target, small_draft = pair(5, 22, 0.5, 0.5)
    return (
        GeneratorScenario("hf-top-k-64", hf_processed(wide_target), hf_processed(wide_draft), 3, 3,
                          np.array([[-1], [7]]), rows_per_call=64,
                          description="V=64 order 1, flat laws (top-50 drops ~9% of the raw mass); HF's default "
                                      "top_k=50 declared: the processed target law, per-position and pair laws"),
        GeneratorScenario("hf-small-joint", hf_processed(small_target), hf_processed(small_draft), 2, 3,
                          np.array([[-1], [2]]), rows_per_call=64,
                          description="V=5 order 1 (top-50 keeps all), joint law of 3 tokens"),
    )


def hf_scenarios() -> list:
    """Generator scenarios for HF ``generate`` with its default warpers declared (:func:`hf_processed`
    on target and draft): a V=64 vocabulary where ``top_k=50`` changes the law, and a small one."""
    return list(_hf_battery())
