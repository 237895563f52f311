"""Mixtures of causal models: ``w * model + (1 - w) * other``."""

from __future__ import annotations

import numpy as np

from ._base import CausalModel
from ._markov import ConstantModel

__all__ = ["MixtureModel", "mix"]


class MixtureModel(CausalModel):
    """The pointwise mixture ``weight * first + (1 - weight) * second`` of two causal models."""

    def __init__(self, first: CausalModel, second: CausalModel, weight: float):
        for name, m in (("model", first), ("other", second)):
            if not isinstance(m, CausalModel):
                raise TypeError(f"{name} must be a specdec_check model; got {type(m).__name__}.")
        if first.vocab_size != second.vocab_size:
            raise ValueError(
                f"cannot mix models over different vocabularies: V={first.vocab_size} and V={second.vocab_size}."
            )
        weight = float(weight)
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"the mixture weight w must lie in [0, 1]; got {weight}.")
        self.first, self.second, self.weight = first, second, weight
        self.vocab_size = first.vocab_size
        self.order = max(first.order, second.order)
        if first.num_law_keys is not None and second.num_law_keys is not None \
                and first.num_law_keys * second.num_law_keys < 2**62:  # keys stay int64
            self.num_law_keys = first.num_law_keys * second.num_law_keys

    def probs_at(self, contexts):
        a = self.first.probs_at(contexts)
        if self.weight == 1.0:
            return a
        b = self.second.probs_at(contexts)
        if self.weight == 0.0:
            return b
        return self.weight * a + (1.0 - self.weight) * b

    def law_keys(self, contexts):
        """The pair of the components' keys (None unless both have keys)."""
        first, second = self.first.law_keys(contexts), self.second.law_keys(contexts)
        if first is None or second is None or self.num_law_keys is None:
            return None
        return first * self.second.num_law_keys + second

    def torch_node(self, device):
        from ._torch_nodes import MixNode

        return MixNode(self.first.torch_node(device), self.second.torch_node(device), self.weight, self.order)

    def __repr__(self):
        return f"mix({self.first!r}, {self.second!r}, w={self.weight:g})"


def mix(model: CausalModel, other, w: float) -> MixtureModel:
    """Return ``w * model + (1 - w) * other``; ``other`` is a model or one fixed law [V]."""
    if not isinstance(other, CausalModel):
        other = ConstantModel(other)
    return MixtureModel(model, other, w)
