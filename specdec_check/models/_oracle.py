"""The target is the oracle: a real model's exact next-token laws, from its own uncached forward pass.

A decode loop on a real model pair is exact when every token it emits, given the prompt and the tokens before
it, is a sample of the target's processed law there (Leviathan et al. 2023, Theorem 3.5, applied step by step).
"Exact" here means *equal to the target model's full forward pass without a cache*, upcast to float64 and
processed as declared (temperature, top-k, top-p, min-p in transformers' order, ties kept; see
:mod:`specdec_check.exact._token_law`): cache, position or precision bugs of the loop are then differences from
it. :class:`ModelLaw` computes those laws for many sequences at once (one forward pass per sequence gives the law
after each of its prefixes), memoised by sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ModelLaw", "from_hf_model", "from_torch_module"]

#: Sequences of one forward pass (rows of equal length batched together).
FORWARD_ROWS = 256
#: Sequences whose position laws are kept (memoised) between calls.
MEMO_SEQUENCES = 1 << 16


@dataclass
class ModelLaw:
    """Next-token laws of a causal model given by ``logits_of(tokens int64 [B, T]) -> float [B, T, V]``
    (position ``t``: the logits of the token after ``tokens[:, :t+1]``), processed by ``temperature``, ``top_k``,
    ``top_p``, ``min_p`` (0 / 1.0 / 0 = off). ``name`` names the model in reports; ``dtype`` the dtype its logits
    come in (the tolerance of impossible events follows it)."""

    logits_of: object
    vocab_size: int
    name: str = "model"
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    dtype: str = "float32"

    def __post_init__(self):
        self._memo = {}
        from ..exact._token_law import TokenProcessing

        self.processing = TokenProcessing(order=("temperature", "top_k", "top_p", "min_p"), ties="keep")

    def describe(self) -> str:
        steps = [f"temperature {self.temperature:g}"] + ([f"top-k {self.top_k}"] if self.top_k else []) + (
            [f"top-p {self.top_p:g}"] if self.top_p < 1 else []) + ([f"min-p {self.min_p:g}"] if self.min_p else [])
        return f"{self.name}'s uncached forward pass in float64, {', '.join(steps)}"

    def _process(self, logits: np.ndarray) -> np.ndarray:
        from ..exact._token_law import token_laws

        rows = logits.shape[0]
        if self.temperature == 1.0 and not self.top_k and self.top_p >= 1.0 and not self.min_p:
            z = logits - logits.max(axis=1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=1, keepdims=True)
        return token_laws(logits, processing=self.processing, temperature=np.full(rows, self.temperature),
                          top_k=np.full(rows, self.top_k), top_p=np.full(rows, self.top_p),
                          min_p=np.full(rows, self.min_p)).law

    def position_laws(self, sequences) -> list:
        """For each sequence (ints), float64 [len, V]: row ``j`` the law of the token after ``sequence[:j+1]``."""
        out = [None] * len(sequences)
        todo = {}
        for i, sequence in enumerate(sequences):
            key = tuple(int(t) for t in sequence)
            if key in self._memo:
                out[i] = self._memo[key]
            else:
                todo.setdefault(len(key), {}).setdefault(key, []).append(i)
        for length, groups in todo.items():
            keys = list(groups)
            for start in range(0, len(keys), FORWARD_ROWS):
                chunk = keys[start:start + FORWARD_ROWS]
                logits = np.asarray(self.logits_of(np.array(chunk, dtype=np.int64)), dtype=np.float64)
                if logits.shape[:2] != (len(chunk), length):
                    raise ValueError(f"{self.name}: logits of shape {logits.shape} for tokens [{len(chunk)}, {length}]")
                laws = self._process(logits.reshape(-1, logits.shape[-1])).reshape(logits.shape)
                for key, law in zip(chunk, laws):
                    if len(self._memo) < MEMO_SEQUENCES:
                        self._memo[key] = law
                    for i in groups[key]:
                        out[i] = law
        return out


def from_hf_model(model, *, temperature=None, top_k=None, top_p=None, min_p=None) -> ModelLaw:
    """The oracle of a transformers causal LM: ``model(input_ids=...).logits`` with no cache, in float64, processed
    as ``generate(do_sample=True)`` processes it: each parameter left None is read from ``model.generation_config``
    (transformers' defaults: temperature 1, top-k 50, top-p 1, no min-p); 0 / 1.0 / 0 turn a step off."""
    import torch

    config = model.generation_config

    def setting(given, name, off):
        value = getattr(config, name, None) if given is None else given
        return off if value is None else value

    temperature, top_k = setting(temperature, "temperature", 1.0), setting(top_k, "top_k", 0)
    top_p, min_p = setting(top_p, "top_p", 1.0), setting(min_p, "min_p", 0.0)

    device = next(model.parameters()).device

    def logits_of(tokens):
        with torch.no_grad():
            out = model(input_ids=torch.as_tensor(tokens, device=device), use_cache=False)
        return out.logits.to(torch.float64).cpu().numpy()

    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    return ModelLaw(logits_of, int(model.config.get_text_config().vocab_size), name=type(model).__name__,
                    temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, dtype=dtype)


def from_torch_module(fn, vocab_size: int, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                      name: str | None = None) -> ModelLaw:
    """The oracle of any ``fn(tokens LongTensor [B, T]) -> logits [B, T, V]`` (gpt-fast's ``Transformer`` with its
    ``input_pos``, a plain module): called under ``torch.no_grad`` on the whole sequence, upcast to float64."""
    import torch

    def logits_of(tokens):
        with torch.no_grad():
            out = fn(torch.as_tensor(tokens))
        out = getattr(out, "logits", out)
        return out.to(torch.float64).cpu().numpy()

    return ModelLaw(logits_of, int(vocab_size), name=name or getattr(fn, "__name__", type(fn).__name__),
                    temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
