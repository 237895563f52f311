"""Torch-native causal models: the laws of a numpy :class:`CausalModel`, device-resident.

``TorchModel(model, device=..., dtype=...)`` (or ``model.to_torch(device, dtype)``)
keeps the model's tables on ``device`` and answers the causal interface with tensor
ops only (no host synchronisation), so it can sit inside a device-side decode loop.

Laws are computed in float64 on the device and cast to ``dtype`` at the very end,
so the law of a row handed to a sampler is exactly ``renormalise(cast(law64))``;
:meth:`TorchModel.law_model` returns that law as a numpy model for the oracles.
"""

from __future__ import annotations

import numpy as np
import torch

from ._base import CausalModel
from ._hashed import _HASH_MULTIPLIERS, HashedMarkovModel
from ._markov import ConstantModel, MarkovModel
from ._mixture import MixtureModel

__all__ = ["CastLawModel", "TorchModel", "cast_law_rows", "resolve_device", "resolve_dtype", "torch_context_indices",
           "torch_last_context_indices"]

#: dtype names accepted everywhere in the torch backend.
DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
_ALIASES = {"double": "float64", "float": "float32", "fp32": "float32", "fp64": "float64", "bf16": "bfloat16",
            "half": "float16", "fp16": "float16"}

#: Largest table (entries) the generic fallback tabulates for an unknown CausalModel subclass.
_MAX_GENERIC_TABLE = 1 << 25


def resolve_dtype(dtype, *, default=torch.float64) -> torch.dtype:
    """Return a torch floating dtype from a name or dtype; ``ValueError`` listing the allowed names otherwise."""
    if dtype is None:
        return default
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
        raise ValueError(f"dtype {dtype} is not supported; use one of {sorted(DTYPES)}.")
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        name = _ALIASES.get(name, name)
        if name in DTYPES:
            return DTYPES[name]
    raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}.")


def resolve_device(device) -> torch.device:
    """Return ``torch.device(device)`` after checking that it exists on this machine.

    ``ValueError`` for a malformed string, for CUDA when CUDA is not available, or for
    a CUDA index past the visible devices.
    """
    if device is None:
        device = "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(f"device {device!r} is not a valid torch device (e.g. 'cpu', 'cuda', 'cuda:1'): {exc}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {str(device)!r}: CUDA is not available on this machine; use device='cpu' or run on a CUDA host."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: only {torch.cuda.device_count()} CUDA device(s) are visible.")
    elif dev.type == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ValueError(f"device {str(device)!r}: MPS is not available on this machine; use device='cpu'.")
    elif dev.type != "cpu":
        raise ValueError(f"device {str(device)!r} is not supported; use 'cpu' or 'cuda[:index]'.")
    return dev


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


def _signed64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


class _Node:
    """A float64 law evaluator on the device: ``probs(ctx int64 [..., order]) -> float64 [..., V]``."""

    order: int

    def probs(self, ctx: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class _TableNode(_Node):
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


class _HashedNode(_Node):
    """Bit-exact torch port of :meth:`HashedMarkovModel.prototype_index` (uint64 emulated on int64)."""

    def __init__(self, model: HashedMarkovModel, device):
        self.order = model.order
        self.prototypes = torch.as_tensor(np.array(model.prototypes, dtype=np.float64), device=device)
        self.k = model.num_prototypes
        self.start = _signed64(model.salt * 2 + 1)
        self.mults = [_signed64(int(m)) for m in _HASH_MULTIPLIERS[: self.order]]
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


class _MixNode(_Node):
    def __init__(self, first: _Node, second: _Node, weight: float, order: int):
        self.first, self.second, self.weight, self.order = first, second, weight, order

    def probs(self, ctx):
        a = self.first.probs(ctx)
        if self.weight == 1.0:
            return a
        b = self.second.probs(ctx)
        if self.weight == 0.0:
            return b
        return self.weight * a + (1.0 - self.weight) * b


def _build(model: CausalModel, device) -> _Node:
    if isinstance(model, MarkovModel):
        return _TableNode(model.probs, model.order, device)
    if isinstance(model, ConstantModel):
        return _TableNode(model.probs[None], 0, device)
    if isinstance(model, HashedMarkovModel):
        return _HashedNode(model, device)
    if isinstance(model, MixtureModel):
        return _MixNode(_build(model.first, device), _build(model.second, device), model.weight, model.order)
    if isinstance(model, CausalModel):
        vocab, order = int(model.vocab_size), int(model.order)
        entries = (vocab + 1) ** order * vocab
        if entries > _MAX_GENERIC_TABLE:
            raise TypeError(
                f"TorchModel has no device port for {type(model).__name__} and its full table would have {entries:,} "
                f"entries (limit {_MAX_GENERIC_TABLE:,}); wrap a MarkovModel, HashedMarkovModel, MixtureModel or "
                "ConstantModel instead."
            )
        grids = np.meshgrid(*([np.arange(vocab + 1)] * order), indexing="ij")
        ctx = np.stack([g.reshape(-1) for g in grids], axis=-1) if order else np.zeros((1, 0), dtype=np.int64)
        table = np.asarray(model.probs_at(ctx), dtype=np.float64).reshape([vocab + 1] * order + [vocab])
        return _TableNode(table, order, device)
    raise TypeError(f"TorchModel wraps a specdec_check CausalModel; got {type(model).__name__}.")


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

    def __init__(self, model: CausalModel, *, device="cpu", dtype=None):
        if isinstance(model, TorchModel):
            model = model.base
        if not isinstance(model, CausalModel):
            raise TypeError(f"TorchModel wraps a specdec_check CausalModel; got {type(model).__name__}.")
        self.base = model
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.vocab_size = int(model.vocab_size)
        self.order = int(model.order)
        self._node = _build(model, self.device)

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

    def law_model(self) -> CausalModel:
        """The numpy model whose laws are the rows this model returns (cast to ``dtype``, renormalised in float64)."""
        if self.dtype == torch.float64:
            return self.base
        return CastLawModel(self.base, self.dtype)

    def __repr__(self):
        return f"TorchModel({self.base!r}, device={str(self.device)!r}, dtype={str(self.dtype).removeprefix('torch.')!r})"


def cast_law_rows(rows: np.ndarray, dtype) -> np.ndarray:
    """float64 law of ``rows`` once cast to ``dtype``: cast, back to float64, renormalise each row (zeros stay zero)."""
    dtype = resolve_dtype(dtype)
    arr = np.asarray(rows, dtype=np.float64)
    if dtype == torch.float64:
        cast = arr.copy()
    else:
        cast = torch.from_numpy(np.ascontiguousarray(arr)).to(dtype).to(torch.float64).numpy()
    total = cast.sum(axis=-1, keepdims=True)
    return np.divide(cast, total, out=np.zeros_like(cast), where=total > 0)


class CastLawModel(CausalModel):
    """Numpy model with the laws of ``base`` as a sampler sees them in ``dtype`` (cast, renormalised in float64)."""

    def __init__(self, base: CausalModel, dtype):
        self.base = base
        self.dtype = resolve_dtype(dtype)
        self.vocab_size = int(base.vocab_size)
        self.order = int(base.order)

    def probs_at(self, contexts):
        return cast_law_rows(self.base.probs_at(contexts), self.dtype)

    def __repr__(self):
        return f"CastLawModel({self.base!r}, {str(self.dtype).removeprefix('torch.')})"
