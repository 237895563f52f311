"""The causal interface shared by every target and draft model."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .._validation import as_token_array
from ._contexts import context_indices, last_context_indices

__all__ = ["CausalModel", "last_token_probs", "vocab_size_of"]


class CausalModel(ABC):
    """A finite-context language model with a transformer-like forward pass.

    ``model(tokens)`` with ``tokens`` int [B, T] returns float64 [B, T, V] where
    ``[:, t]`` is the next-token law after the real (non ``-1``) tokens of
    ``tokens[:, :t+1]``. Padding ``-1`` may be on the left or the right. Given a
    ``torch.Tensor`` it returns a ``torch.Tensor`` on the same device (float64);
    :meth:`to_torch` gives a device-resident copy.

    Subclasses implement :meth:`probs_at`, the law after an explicit context of
    the last ``order`` token ids (``vocab_size`` standing for start-of-sequence).
    """

    vocab_size: int
    order: int
    #: How many distinct laws :meth:`law_keys` can name (None: the model cannot say).
    num_law_keys: int | None = None

    @abstractmethod
    def probs_at(self, contexts: np.ndarray) -> np.ndarray:
        """Return float64 [..., V] for int contexts [..., order'] with order' >= ``order``.

        Only the trailing ``order`` entries are read; index ``vocab_size`` is the
        start-of-sequence context.
        """

    def law_keys(self, contexts: np.ndarray) -> np.ndarray | None:
        """Return int64 [...] keys in ``[0, num_law_keys)`` for int contexts [..., order'] such that
        equal keys mean equal laws (:meth:`probs_at`), or None when the model cannot say.

        A checker then keeps one law row per key instead of one per context: a table of
        ``num_law_keys`` rows stands for every context (Markov: the context itself; hashed:
        the prototype). A subclass that changes :meth:`probs_at` must change this too.
        """
        return None

    def cdf_at(self, contexts: np.ndarray) -> np.ndarray:
        """Return ``np.cumsum(self.probs_at(contexts), axis=-1)``; table models gather a cached one."""
        return np.cumsum(self.probs_at(contexts), axis=-1)

    def __call__(self, tokens):
        if _is_torch_tensor(tokens):
            import torch

            out = self(tokens.detach().cpu().numpy())
            return torch.from_numpy(out).to(tokens.device)
        arr = as_token_array(tokens, vocab_size=self.vocab_size)
        return self.probs_at(context_indices(arr, order=self.order, vocab_size=self.vocab_size))

    def last_probs(self, tokens) -> np.ndarray:
        """Return float64 [B, V]: the law after each whole row (``model(tokens)[:, -1]``, cheaper)."""
        arr = as_token_array(tokens, vocab_size=self.vocab_size)
        return self.probs_at(last_context_indices(arr, order=self.order, vocab_size=self.vocab_size))

    def start_probs(self) -> np.ndarray:
        """Return float64 [V]: the law of the first token after an empty prompt."""
        return self.probs_at(np.full((self.order,), self.vocab_size, dtype=np.int64))

    def to_torch(self, device="cpu", dtype=None):
        """Return this model's laws as a torch-native causal model on ``device``."""
        from ._torch import TorchModel  # local import: torch is optional

        return TorchModel(self, device=device, dtype=dtype)

    def torch_node(self, device):
        """This model's laws as a device-side evaluator (:mod:`._torch_nodes`): the full table of its
        laws by default; the built-in models give exact ports that need no table."""
        from ._torch_nodes import generic_table_node

        return generic_table_node(self, device)


def _is_torch_tensor(obj) -> bool:
    mod = type(obj).__module__
    return mod.startswith("torch") and type(obj).__name__ in ("Tensor", "Parameter")


def vocab_size_of(model) -> int:
    """Return the vocabulary size of a causal model (attribute or one forward pass)."""
    size = getattr(model, "vocab_size", None)
    if size is not None:
        return int(size)
    return int(np.asarray(model(np.full((1, 1), -1, dtype=np.int64))).shape[-1])


def last_token_probs(model, tokens: np.ndarray) -> np.ndarray:
    """Law after each whole row of ``tokens`` for any causal model (fast path when available)."""
    if isinstance(model, CausalModel):
        return model.last_probs(tokens)
    if tokens.shape[1] == 0:
        tokens = np.full((tokens.shape[0], 1), -1, dtype=np.int64)
    return np.asarray(model(tokens), dtype=np.float64)[:, -1]
