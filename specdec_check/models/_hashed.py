"""A large-vocabulary model whose memory does not grow with V**order."""

from __future__ import annotations

import numpy as np

from .._validation import check_probability_rows
from ._base import CausalModel

__all__ = ["HashedMarkovModel"]

# Odd 63-bit multipliers for the context hash (fixed so laws are reproducible).
_HASH_MULTIPLIERS = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5], dtype=np.uint64
)


class HashedMarkovModel(CausalModel):
    """An order-``k`` model with ``K`` prototype rows and a fixed context hash.

    The law after a context ``c_1 .. c_k`` is ``prototypes[h(c_1..c_k)]`` where
    ``h`` is a fixed multiplicative hash into ``[0, K)`` salted by ``salt``.
    Memory is ``K * V`` floats, so V = 128256 (Llama 3) with K = 16 takes 16 MB.
    """

    def __init__(self, prototypes, *, order: int = 1, salt: int = 0):
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= len(_HASH_MULTIPLIERS):
            raise ValueError(f"order must be an int in [1, {len(_HASH_MULTIPLIERS)}]; got {order!r}.")
        table = np.asarray(prototypes, dtype=np.float64)
        if table.ndim != 2:
            raise ValueError(f"prototypes must have shape [K, V]; got shape {table.shape}.")
        self.prototypes = check_probability_rows(table, name="HashedMarkovModel prototypes")
        self.prototypes.setflags(write=False)
        self.num_prototypes, self.vocab_size = (int(s) for s in table.shape)
        self.order = int(order)
        self.salt = int(salt)
        self.num_law_keys = self.num_prototypes

    @classmethod
    def random(cls, vocab_size: int, *, num_prototypes: int = 16, order: int = 1, zipf_exponent: float = 1.1,
               seed: int = 0) -> "HashedMarkovModel":
        """A vocabulary-like model: each prototype is a Zipf law over its own random token ranking."""
        rng = np.random.default_rng(seed)
        weights = np.arange(1, vocab_size + 1, dtype=np.float64) ** -zipf_exponent
        weights /= weights.sum()
        protos = np.empty((num_prototypes, vocab_size))
        for k in range(num_prototypes):
            protos[k, rng.permutation(vocab_size)] = weights
        return cls(protos, order=order, salt=int(rng.integers(2**31)))

    def prototype_index(self, contexts) -> np.ndarray:
        """Return the prototype row used after each context (int64 [...])."""
        ctx = np.asarray(contexts, dtype=np.int64)[..., -self.order:].astype(np.uint64)
        acc = np.full(ctx.shape[:-1], np.uint64(self.salt * 2 + 1), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for i in range(self.order):
                acc = (acc ^ ctx[..., i]) * _HASH_MULTIPLIERS[i]
                acc ^= acc >> np.uint64(29)
        return (acc % np.uint64(self.num_prototypes)).astype(np.int64)

    def probs_at(self, contexts):
        return self.prototypes[self.prototype_index(contexts)]

    def law_keys(self, contexts):
        """The prototype row (:meth:`prototype_index`)."""
        return self.prototype_index(contexts)

    def torch_node(self, device):
        """A bit-exact device port of :meth:`prototype_index` (uint64 arithmetic emulated on int64)."""
        from ._torch_nodes import HashedNode

        return HashedNode(self.prototypes, order=self.order, salt=self.salt, multipliers=_HASH_MULTIPLIERS,
                          device=device)

    def __repr__(self):
        return f"HashedMarkovModel(V={self.vocab_size}, K={self.num_prototypes}, order={self.order})"
