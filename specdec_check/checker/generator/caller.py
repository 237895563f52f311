"""The decode loop's caller: the models it is handed (counting their forward passes), its prompts, and the
contract of what it returns (the call itself is guarded by :class:`~specdec_check.checker.core.guard.Guard`,
as for every kind)."""

from __future__ import annotations

import sys

import numpy as np

from ..core.guard import Guard

__all__ = ["GENERATOR_KEYWORDS", "PADDING_CONVENTION", "CountingModel", "GeneratorCaller", "padding_note"]

#: The keywords a decode loop is called with (on the checker's models, or on yours).
GENERATOR_KEYWORDS = ("target", "draft", "prompts", "max_new_tokens", "gamma", "generator")


class CountingModel:
    """Wraps a causal model and counts its forward passes: every entry point that returns laws
    (``__call__``, ``last_probs``, ``start_probs``, ``probs_at``, ``cdf_at``) counts one, so a loop
    cannot hide target calls behind another method. Other attributes pass through.

    Called as a transformers model (``model(input_ids, past_key_values=..., use_cache=...)``, or with a
    torch tensor) it answers in that convention too (:func:`~specdec_check.models._hf_style.hf_style_call`):
    the laws, with ``.logits`` and ``.past_key_values`` (legacy tuples, or the given ``Cache``)."""

    #: The model's entry points that compute laws (each call is one forward pass).
    COUNTED = ("last_probs", "start_probs", "probs_at", "cdf_at")

    def __init__(self, model):
        self.model = model
        self.calls = 0
        self.vocab_size = model.vocab_size
        self.order = getattr(model, "order", None)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if (len(args) == 1 and not kwargs and isinstance(args[0], np.ndarray)) or "torch" not in sys.modules:
            return self.model(*args, **kwargs)  # the checker's own convention (torch optional: no HF outputs)
        from ...models._hf_style import hf_style_call, is_hf_style_call

        if is_hf_style_call(args, kwargs):
            # a torch tensor, or HF keywords: the laws with .logits and .past_key_values (legacy tuples or a Cache)
            return hf_style_call(self.model, *args, **kwargs)
        return self.model(*args, **kwargs)

    @property
    def config(self):
        """The model's ``config`` (classic loops read ``model.config.vocab_size``): its own, else the vocabulary."""
        config = getattr(self.model, "config", None)
        if config is not None:
            return config
        import types

        return types.SimpleNamespace(vocab_size=self.vocab_size)

    @property
    def device(self):
        """Where the model's outputs live (classic loops read ``model.device``): the model's, else the CPU."""
        device = getattr(self.model, "device", None)
        if device is not None:
            return device
        import torch

        return torch.device("cpu")

    def __getattr__(self, name):
        attribute = getattr(self.model, name)
        if name not in self.COUNTED or not callable(attribute):
            return attribute

        def counted(*args, **kwargs):
            self.calls += 1
            return attribute(*args, **kwargs)

        return counted


class GeneratorCaller:
    """Calls a decode loop on prompts of one scenario's run ``ctx``; ``last_target`` is the counting target model
    of the latest call (its ``calls``: the forward passes that call made)."""

    def __init__(self, ctx, generate, *, degenerate=None):
        self.ctx, self.generate = ctx, generate
        self.scenario, self.backend = ctx.scenario, ctx.backend
        self.guard = Guard(ctx, generate, role="decode loop", watched=("prompts",), degenerate=degenerate,
                           explain=padding_note)
        self.last_target = None

    def _parse(self, out, expected_shape):
        """``(problem, out)``: the contract of a decode loop's output (checked whatever the selection: the law
        tallies need well-formed output)."""
        vocab = self.scenario.vocab_size
        if not isinstance(out, np.ndarray) or out.shape != expected_shape:
            return (f"output shape {getattr(out, 'shape', None)} != [B, max_new_tokens] = {expected_shape}", {}), None
        if not np.issubdtype(out.dtype, np.integer):
            return (f"output dtype {out.dtype} is not an integer type", {}), None
        if ((out < 0) | (out >= vocab)).any():
            row, col = (int(i) for i in np.argwhere((out < 0) | (out >= vocab))[0])
            return (f"token {int(out[row, col])} at row {row}, position {col} is not in [0, {vocab})", {}), None
        return None, out

    def call(self, prompt_index, seed, check="contract"):
        """Generate from the prompts ``prompt_index``: ``(output on the host, output)``, or ``(None, None)``."""
        s = self.scenario
        prompts = s.prompts[prompt_index]
        target, draft = self.backend.models(s.target, s.draft)
        self.last_target = target = CountingModel(target)
        kwargs = {"target": target, "draft": CountingModel(draft), "prompts": self.backend.prompts(prompts.copy()),
                  "max_new_tokens": s.max_new_tokens, "gamma": s.gamma}
        expected_shape = (prompts.shape[0], s.max_new_tokens)
        return self.guard.call(kwargs, seed, check=check, parse=lambda out: self._parse(out, expected_shape))


#: The decode-loop contract's padding convention, as a finding states it.
PADDING_CONVENTION = ("prompts are left-padded with -1 (a row's real tokens are its last ones, and a row may be all "
                      "padding: an empty prompt); a model ignores -1 positions, so the first token after an empty "
                      "prompt is read from the model's law at a -1 position (prepend one -1 column, as "
                      "specdec_check.samplers.numpy_generate does)")


def padding_note(kwargs) -> str:
    """What a finding adds when a decode loop raised on prompts with padding (see :data:`PADDING_CONVENTION`)."""
    prompts = np.asarray(kwargs.get("prompts", np.zeros((0, 0))))
    if prompts.ndim != 2 or not (prompts < 0).any():
        return ""
    empty = int((prompts < 0).all(axis=1).sum())
    return (f" (this call's prompts [{prompts.shape[0]}, {prompts.shape[1]}] hold -1 padding"
            + (f", {empty} row(s) all padding" if empty else "") + f"; the contract: {PADDING_CONVENTION})")
