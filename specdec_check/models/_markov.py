"""Finite-order Markov models over a token vocabulary, stored as a full table."""

from __future__ import annotations

import numpy as np

from .._validation import check_probability_rows
from ._base import CausalModel

__all__ = ["ConstantModel", "MarkovModel"]


class MarkovModel(CausalModel):
    """An order-``k`` Markov model given by its full transition table.

    ``probs`` has shape ``[V+1]*order + [V]``: ``probs[c_1, ..., c_k]`` is the law
    of the next token after the context ``c_1 .. c_k`` (oldest first), where
    index ``V`` is the start-of-sequence context. Rows are validated at
    construction: finite, non-negative, summing to 1 in float64.
    """

    def __init__(self, probs, *, order: int = 1):
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
            raise ValueError(f"order must be an int >= 1; got {order!r}.")
        table = np.asarray(probs, dtype=np.float64)
        if table.ndim != order + 1:
            raise ValueError(
                f"an order-{order} table needs {order + 1} dimensions, shape [V+1]*{order} + [V]; "
                f"got shape {table.shape}."
            )
        vocab = table.shape[-1]
        if vocab < 1 or table.shape[:-1] != (vocab + 1,) * order:
            raise ValueError(
                f"an order-{order} table over V={vocab} tokens needs shape {tuple([vocab + 1] * order + [vocab])} "
                f"(context index V={vocab} is start-of-sequence); got {table.shape}."
            )
        self.probs = check_probability_rows(table, name="MarkovModel probs")
        self.probs.setflags(write=False)
        self.vocab_size = int(vocab)
        self.order = int(order)
        self.num_law_keys = (self.vocab_size + 1) ** self.order

    def probs_at(self, contexts):
        ctx = np.asarray(contexts)[..., -self.order:]
        return self.probs[tuple(ctx[..., i] for i in range(self.order))]

    def law_keys(self, contexts):
        """The context itself, as a base-(V+1) number of its last ``order`` ids."""
        ctx = np.asarray(contexts, dtype=np.int64)[..., -self.order:]
        return ctx @ (self.vocab_size + 1) ** np.arange(self.order - 1, -1, -1, dtype=np.int64)

    def cdf_at(self, contexts):
        """The cumulative rows of :meth:`probs_at`, gathered from a table computed once (bitwise equal)."""
        if getattr(self, "_cdf", None) is None:
            self._cdf = np.cumsum(self.probs, axis=-1)
            self._cdf.setflags(write=False)
        ctx = np.asarray(contexts)[..., -self.order:]
        return self._cdf[tuple(ctx[..., i] for i in range(self.order))]

    def torch_node(self, device):
        from ._torch_nodes import TableNode

        return TableNode(self.probs, self.order, device)

    def __repr__(self):
        return f"MarkovModel(V={self.vocab_size}, order={self.order})"


class ConstantModel(CausalModel):
    """A context-free model: the same next-token law after every context (order 0)."""

    order = 0
    num_law_keys = 1

    def __init__(self, probs):
        arr = np.asarray(probs, dtype=np.float64)
        if arr.ndim != 1:
            raise ValueError(f"ConstantModel probs must be one law of shape [V]; got shape {arr.shape}.")
        self.probs = check_probability_rows(arr, name="ConstantModel probs")
        self.probs.setflags(write=False)
        self.vocab_size = int(arr.shape[0])

    def probs_at(self, contexts):
        shape = np.asarray(contexts).shape[:-1]
        return np.broadcast_to(self.probs, shape + (self.vocab_size,)).copy()

    def law_keys(self, contexts):
        return np.zeros(np.asarray(contexts).shape[:-1], dtype=np.int64)

    def torch_node(self, device):
        from ._torch_nodes import TableNode

        return TableNode(self.probs, self.order, device)

    def torch_node(self, device):
        from ._torch_nodes import TableNode

        return TableNode(self.probs[None], 0, device)

    def __repr__(self):
        return f"ConstantModel(V={self.vocab_size})"
