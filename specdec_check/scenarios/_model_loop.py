"""Scenarios of a decode loop on the user's own model pair: prompts (token strings), new tokens, gamma."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ModelLoopScenario", "default_model_loop_battery"]


@dataclass(frozen=True, eq=False)
class ModelLoopScenario:
    """``prompts``: token strings (each at least one token), handed left-padded with -1 as ``[B, P]``; each call
    draws ``rows_per_call`` of them at random. ``eos_token_id``: a token, or several (transformers allows a list),
    after which the loop stops (the rest of its row is -1)."""

    name: str
    prompts: tuple
    max_new_tokens: int
    gamma: int
    rows_per_call: int = 1
    eos_token_id: int | tuple | None = None
    description: str = ""

    def __post_init__(self):
        prompts = tuple(tuple(int(t) for t in p) for p in self.prompts)
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError(f"scenario {self.name!r}: give one or more prompts of at least one token each.")
        if self.max_new_tokens < 1 or self.gamma < 1 or self.rows_per_call < 1:
            raise ValueError(f"scenario {self.name!r}: max_new_tokens, gamma and rows_per_call must be >= 1.")
        object.__setattr__(self, "prompts", prompts)
        if self.eos_token_id is not None and not isinstance(self.eos_token_id, (int, np.integer)):
            object.__setattr__(self, "eos_token_id", tuple(int(t) for t in self.eos_token_id))

    @property
    def stop_tokens(self) -> np.ndarray:
        """int64 [k]: the tokens that end a row (none without ``eos_token_id``)."""
        return np.atleast_1d(np.asarray(() if self.eos_token_id is None else self.eos_token_id, dtype=np.int64))

    @property
    def vocab_size(self) -> int:  # the report's scenario table: the model's, set by the kind
        return 0

    def padded(self, index) -> np.ndarray:
        """int64 [B, P]: the prompts ``index``, left-padded with -1."""
        chosen = [self.prompts[i] for i in index]
        width = max(len(p) for p in chosen)
        out = np.full((len(chosen), width), -1, dtype=np.int64)
        for r, p in enumerate(chosen):
            out[r, width - len(p):] = p
        return out


def default_model_loop_battery(vocab_size: int, *, prompts=None, max_new_tokens: int = 8, gamma: int = 3,
                               rows_per_call: int = 1, eos_token_id=None, seed: int = 26) -> list:
    """The default scenario of a model pair: the user's ``prompts`` (token strings), else 8 random token strings
    of lengths 1 to 12; ``max_new_tokens`` new tokens with ``gamma`` drafts per step."""
    if prompts is None:
        rng = np.random.default_rng(seed)
        prompts = [tuple(rng.integers(0, vocab_size, size=n).tolist()) for n in (1, 1, 2, 3, 5, 8, 12, 12)]
        description = f"8 random token strings of 1 to 12 tokens over V = {vocab_size:,}"
    else:
        description = f"{len(prompts)} given prompt(s)"
    return [ModelLoopScenario("model-pair", tuple(prompts), max_new_tokens, gamma, rows_per_call, eos_token_id,
                              f"{description}; {max_new_tokens} new tokens, gamma {gamma}")]
