"""Device-side law evaluators of the models: what a :class:`~specdec_check.models.TorchModel` runs.

Each model builds its own node (:meth:`CausalModel.torch_node`), so the torch model needs no
knowledge of the model classes and the model classes load torch only when asked for a node.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["HashedNode", "MixNode", "Node", "TableNode", "MAX_GENERIC_TABLE", "generic_table_node"]

#: Largest table (entries) the generic fallback tabulates for a CausalModel without a device port:
#: 2^25 float64 entries are 256 MiB on the device.
MAX_GENERIC_TABLE = 1 << 25


def _signed64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


class Node:
    """A float64 law evaluator on the device: ``probs(ctx int64 [..., order]) -> float64 [..., V]``."""

    order: int

    def probs(self, ctx: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class TableNode(Node):
    def __init__(self, table: np.ndarray, order: int, device):
        vocab = table.shape[-1]
        self.order = order
        self.table = torch.as_tensor(np.array(table, dtype=np.float64).reshape(-1, vocab), device=device)
        self.strides = [(vocab + 1) ** (order - 1 - i) for i in range(order)]

    def probs(self, ctx):
        if self.order == 0:
            return self.table[0].expand(*ctx.shape[:-1], self.table.shape[1])
        ctx = ctx[..., ctx.shape[-1] - self.order:]
        flat = ctx[..., 0] * self.strides[0]
        for i in range(1, self.order):
            flat = flat + ctx[..., i] * self.strides[i]
        return self.table[flat]


class HashedNode(Node):
    """Bit-exact torch port of :meth:`HashedMarkovModel.prototype_index` (uint64 emulated on int64)."""

    def __init__(self, prototypes, *, order: int, salt: int, multipliers, device):
        self.order = order
        self.prototypes = torch.as_tensor(np.array(prototypes, dtype=np.float64), device=device)
        self.k = self.prototypes.shape[0]
        self.start = _signed64(salt * 2 + 1)
        self.mults = [_signed64(int(m)) for m in multipliers[:order]]
        self.wrap = (1 << 64) % self.k  # 2**64 mod K: corrects the residue of negative (>= 2**63) values

    def index(self, ctx):
        ctx = ctx[..., ctx.shape[-1] - self.order:]
        acc = torch.full(ctx.shape[:-1], self.start, dtype=torch.int64, device=ctx.device)
        low35 = (1 << 35) - 1
        for i in range(self.order):
            acc = (acc ^ ctx[..., i]) * self.mults[i]  # int64 multiply wraps modulo 2**64 like uint64
            acc = acc ^ ((acc >> 29) & low35)  # logical shift right by 29
        rem = torch.remainder(acc, self.k)
        return torch.where(acc < 0, torch.remainder(rem + self.wrap, self.k), rem)

    def probs(self, ctx):
        return self.prototypes[self.index(ctx)]


class MixNode(Node):
    def __init__(self, first: Node, second: Node, weight: float, order: int):
        self.first, self.second, self.weight, self.order = first, second, weight, order

    def probs(self, ctx):
        a = self.first.probs(ctx)
        if self.weight == 1.0:
            return a
        b = self.second.probs(ctx)
        if self.weight == 0.0:
            return b
        return self.weight * a + (1.0 - self.weight) * b


def generic_table_node(model, device) -> TableNode:
    """The full table of ``model``'s laws after every context, as a :class:`TableNode`; ``TypeError``
    past :data:`MAX_GENERIC_TABLE` entries."""
    vocab, order = int(model.vocab_size), int(model.order)
    entries = (vocab + 1) ** order * vocab
    if entries > MAX_GENERIC_TABLE:
        raise TypeError(
            f"TorchModel has no device port for {type(model).__name__} and its full table would have {entries:,} "
            f"entries (limit {MAX_GENERIC_TABLE:,}); wrap a MarkovModel, HashedMarkovModel, MixtureModel or "
            "ConstantModel instead, or give the class a torch_node method."
        )
    grids = np.meshgrid(*([np.arange(vocab + 1)] * order), indexing="ij")
    ctx = np.stack([g.reshape(-1) for g in grids], axis=-1) if order else np.zeros((1, 0), dtype=np.int64)
    table = np.asarray(model.probs_at(ctx), dtype=np.float64).reshape([vocab + 1] * order + [vocab])
    return TableNode(table, order, device)
