"""The classic Hugging Face calling convention, spoken by the checker's models when a decode loop uses it.

Widely copied loops (feifeibear/LLMSpeculativeSampling, romsto/Speculative-Decoding, EAGLE's and Medusa's own)
call ``model(input_ids, past_key_values=..., use_cache=...)`` or ``model(input_ids=...)`` and read
``out.logits`` and ``out.past_key_values`` (legacy ``((key, value), ...)`` tuples, sliced along dimension 2 to
roll back, or a transformers ``Cache``). :func:`hf_style_call` answers that convention over any causal model
(``model(tokens) -> laws``): the cache holds the token ids (one layer, one head, head_dim 1), each call computes
the laws of the whole sequence in one counted pass and returns those of the new positions. The result is a
:class:`LawTensor`: still the laws tensor the checker's own convention returns, with ``logits`` (``log`` of the
laws, ``-inf`` where a law is 0, so ``softmax(logits)`` gives the laws back to rounding) and ``past_key_values``
besides.
"""

from __future__ import annotations

import torch

__all__ = ["LawTensor", "hf_style_call", "is_hf_style_call"]

#: Keywords that only the HF convention uses: a call with any of them is answered in it.
HF_KEYWORDS = ("input_ids", "past_key_values", "use_cache", "attention_mask", "return_dict", "position_ids",
               "cache_position", "output_hidden_states", "output_attentions")


class LawTensor(torch.Tensor):
    """The laws of the new positions ``[B, S, V]``, with the HF output's ``logits`` and ``past_key_values``.

    Operations on it return plain tensors (no subclass propagation, so no cost on the checker's own path).
    """

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def wrap(laws: torch.Tensor, ids: torch.Tensor, cache, use_cache) -> LawTensor:
        out = laws.as_subclass(LawTensor)
        out._ids, out._cache, out._use_cache = ids, cache, use_cache
        return out

    @property
    def logits(self) -> torch.Tensor:
        return torch.log(self.as_subclass(torch.Tensor))  # log(0) = -inf: impossible tokens stay impossible

    @property
    def past_key_values(self):
        if self._use_cache is False:
            return None
        if self._cache is not None:
            return self._cache
        keys = self._ids[:, None, :, None].to(torch.float64)  # [B, heads=1, T, head_dim=1]: the token ids
        return ((keys, keys),)

    def __getitem__(self, index):
        if isinstance(index, str):  # out["logits"], as a ModelOutput is read
            return getattr(self, index)
        return super().__getitem__(index)


def is_hf_style_call(args: tuple, kwargs: dict) -> bool:
    """Whether a model call uses the HF convention: a keyword of it, or a torch tensor of token ids."""
    if any(key in kwargs for key in HF_KEYWORDS):
        return True
    return len(args) == 1 and isinstance(args[0], torch.Tensor)


def _cached_ids(past, batch: int, device) -> torch.Tensor:
    if past is None or (isinstance(past, (tuple, list)) and len(past) == 0):
        return torch.zeros((batch, 0), dtype=torch.int64, device=device)
    if isinstance(past, (tuple, list)):
        keys = past[0][0]
        return keys[:, 0, :, 0].round().to(torch.int64)
    raise TypeError(f"past_key_values of type {type(past).__name__}: the checker's models take legacy "
                    "((key, value), ...) tuples or a transformers Cache (with update()).")


def hf_style_call(model, input_ids=None, *, past_key_values=None, use_cache=None, attention_mask=None, **_ignored):
    """Answer ``model(input_ids, past_key_values=..., use_cache=..., attention_mask=...)`` as a transformers causal
    LM would, over the causal model ``model`` (one call of it). ``attention_mask`` zeros are padding (the checker's
    ``-1``); other HF keywords (``position_ids``, ``return_dict``, ...) are accepted and change nothing."""
    if input_ids is None:
        raise TypeError("the checker's models take the token ids as the first argument or input_ids=.")
    new = torch.as_tensor(input_ids)
    if new.dim() == 1:
        new = new[None]
    new = new.to(torch.int64)
    cache = past_key_values if callable(getattr(past_key_values, "update", None)) else None
    if cache is not None:
        states = new[:, None, :, None].to(torch.float64)
        keys, _ = cache.update(states, states, 0)
        ids = keys[:, 0, :, 0].round().to(torch.int64)
    else:
        ids = torch.cat([_cached_ids(past_key_values, new.shape[0], new.device), new], dim=1)
    tokens = ids
    if attention_mask is not None:
        mask = torch.as_tensor(attention_mask, device=ids.device)
        if mask.shape == ids.shape:
            tokens = torch.where(mask.to(torch.bool), ids, -1)
    laws = torch.as_tensor(model(tokens))
    laws = laws[:, laws.shape[1] - new.shape[1]:]  # the new positions' laws (none for an empty input)
    return LawTensor.wrap(laws, ids, cache, use_cache)
