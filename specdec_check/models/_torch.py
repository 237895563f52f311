"""Torch-native causal models: the laws of a numpy :class:`CausalModel`, device-resident.

``TorchModel(model, device=..., dtype=...)`` (or ``model.to_torch(device, dtype)``)
keeps the model's tables on ``device`` and answers the causal interface with tensor
ops only (no host synchronisation), so it can sit inside a device-side decode loop.

Laws are computed in float64 on the device and cast to ``dtype`` at the very end,
so the law of a row handed to a sampler is exactly ``renormalise(cast(law64))``;
:class:`~specdec_check.models.CastLawModel` gives that law as a numpy model for the oracles.
The model builds its own device evaluator (``model.torch_node(device)``), so this module
knows no model class.
"""

from __future__ import annotations

import numpy as np
import torch

from .._torch_utils import resolve_device, resolve_dtype

__all__ = ["TorchModel", "torch_context_indices", "torch_last_context_indices"]


def torch_context_indices(tokens: torch.Tensor, *, order: int, vocab_size: int) -> torch.Tensor:
    """Torch port of ``context_indices``: int64 [B, T, order], the last ``order`` real tokens up to each position."""
    batch, length = tokens.shape
    out = torch.full((batch, length, order), vocab_size, dtype=torch.int64, device=tokens.device)
    if order == 0 or length == 0 or batch == 0:
        return out
    real = tokens >= 0
    seen = torch.cumsum(real, dim=1)
    compact = torch.gather(tokens, 1, torch.argsort((~real).to(torch.int8), dim=1, stable=True))
    for back in range(order):
        pos = seen - 1 - back
        vals = torch.gather(compact, 1, pos.clamp(min=0))
        out[:, :, order - 1 - back] = torch.where(pos >= 0, vals, vocab_size)
    return out


def torch_last_context_indices(tokens: torch.Tensor, *, order: int, vocab_size: int) -> torch.Tensor:
    """Torch port of ``last_context_indices``: int64 [B, order], the context after each whole row."""
    batch, length = tokens.shape
    out = torch.full((batch, order), vocab_size, dtype=torch.int64, device=tokens.device)
    if order == 0 or length == 0 or batch == 0:
        return out
    real = tokens >= 0
    seen = real.sum(dim=1, keepdim=True)
    compact = torch.gather(tokens, 1, torch.argsort((~real).to(torch.int8), dim=1, stable=True))
    for back in range(order):
        pos = seen - 1 - back
        vals = torch.gather(compact, 1, pos.clamp(min=0))[:, 0]
        out[:, order - 1 - back] = torch.where(pos[:, 0] >= 0, vals, vocab_size)
    return out


class TorchModel:
    """A numpy :class:`CausalModel`'s laws as a torch causal model on ``device``.

    ``model(tokens)`` with ``tokens`` an int tensor [B, T] (``-1`` padding, anywhere)
    returns ``dtype`` [B, T, V] on ``device`` with the same context rule as the numpy
    model (the last ``order`` real tokens; start-of-sequence index V). Laws are computed
    in float64 on the device and cast to ``dtype`` last. No host synchronisation happens
    inside a call (ids are not range-checked for that reason; out-of-range ids index
    arbitrary rows or raise a device-side error).

    Example::

        from specdec_check.models import HashedMarkovModel
        tm = HashedMarkovModel.random(1000, seed=1).to_torch("cuda", "bfloat16")
        probs = tm(torch.tensor([[5, 7, -1]], device="cuda"))   # bfloat16 [1, 3, 1000]
    """

    def __init__(self, model, *, device="cpu", dtype=None):
        if isinstance(model, TorchModel):
            model = model.base
        if not callable(getattr(model, "torch_node", None)):
            raise TypeError(f"TorchModel wraps a specdec_check CausalModel; got {type(model).__name__}.")
        self.base = model
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.vocab_size = int(model.vocab_size)
        self.order = int(model.order)
        self._node = model.torch_node(self.device)

    def _tokens(self, tokens) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor):
            tokens = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must be an integer tensor; got {tokens.dtype}. Cast with .long().")
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape [B, T]; got {tuple(tokens.shape)}.")
        return tokens.to(device=self.device, dtype=torch.int64)

    def _cast(self, law64: torch.Tensor) -> torch.Tensor:
        return law64.to(self.dtype) if self.dtype != torch.float64 else law64.contiguous()

    def __call__(self, tokens) -> torch.Tensor:
        tokens = self._tokens(tokens)
        ctx = torch_context_indices(tokens, order=self.order, vocab_size=self.vocab_size)
        return self._cast(self._node.probs(ctx))

    def last_probs(self, tokens) -> torch.Tensor:
        """``dtype`` [B, V]: the law after each whole row (``model(tokens)[:, -1]`` when the last column is real)."""
        tokens = self._tokens(tokens)
        ctx = torch_last_context_indices(tokens, order=self.order, vocab_size=self.vocab_size)
        return self._cast(self._node.probs(ctx))

    def start_probs(self) -> torch.Tensor:
        """``dtype`` [V]: the law of the first token after an empty prompt."""
        ctx = torch.full((1, self.order), self.vocab_size, dtype=torch.int64, device=self.device)
        return self._cast(self._node.probs(ctx))[0]

    def to_torch(self, device="cpu", dtype=None) -> "TorchModel":
        return TorchModel(self.base, device=device, dtype=dtype)

    def __repr__(self):
        return f"TorchModel({self.base!r}, device={str(self.device)!r}, dtype={str(self.dtype).removeprefix('torch.')!r})"
