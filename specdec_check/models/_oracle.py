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

__all__ = ["ModelLaw", "from_hf_model", "from_mlx_model", "from_torch_module"]

#: Sequences of one forward pass (rows of equal length batched together).
FORWARD_ROWS = 256
#: Sequences whose position laws are kept (memoised) between calls.
MEMO_SEQUENCES = 1 << 16


def _tempered_top_k(logits: np.ndarray, temperature: float, top_k: int) -> np.ndarray:
    """``softmax(logits / T)`` over the tokens whose value is at least the k-th largest (ties at the boundary kept:
    transformers' ``TopKLogitsWarper``, and :func:`~specdec_check.exact._token_law.token_laws` under the ``keep``
    rule, row by row), vectorised: one partition per row instead of a sort (at V = 32,000 the sort was 40% of a
    model-loop run). ``top_k`` 0 is off."""
    z = logits / temperature if temperature != 1.0 else logits.copy()
    if 0 < top_k < z.shape[1]:
        kth = -np.partition(-z, top_k - 1, axis=1)[:, top_k - 1:top_k]
        z[z < kth] = -np.inf
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


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
        well_formed = not (np.isnan(logits).any() or (logits == np.inf).any())  # else token_laws says what is wrong
        if well_formed and self.temperature > 0 and self.top_p >= 1.0 and not self.min_p:
            return _tempered_top_k(logits, self.temperature, int(self.top_k))
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


def _cached_module_forward(module):
    """``tokens -> logits`` of a module with gpt-fast's interface (``setup_caches(max_batch_size, max_seq_length)``,
    ``forward(idx, input_pos)``): one full pass over the whole sequence (``input_pos = arange(T)`` writes every
    position before attending, causally, so nothing stale is read), on a shadow of the module that shares its
    weights but has caches of its own, so the loop's caches are never touched. The shadow is made here, before the
    checker hooks the target to count its passes: the oracle's passes are not counted."""
    import copy

    import torch

    shared = [*module.parameters(), *module.buffers()]  # weights shared; the caches are set up anew below
    shadow = copy.deepcopy(module, memo={id(t): t for t in shared})
    shape = [None]

    def logits_of(tokens):
        rows, length = tokens.shape
        device = _device_of(shadow)
        if shape[0] != (rows, length):
            # gpt-fast keeps caches that are large enough; rows must match exactly (the cache's batch dimension
            # meets the query's in attention), so a new shape resets them; made on the model's device, as
            # gpt-fast's generate makes them (under torch.device)
            shadow.max_batch_size = shadow.max_seq_length = -1
            with torch.device(device):
                shadow.setup_caches(max_batch_size=rows, max_seq_length=length)
            shape[0] = (rows, length)
        return shadow(tokens.to(device), torch.arange(length, device=device))

    return logits_of


def _device_of(module):
    """Where a module's weights (else buffers) live; the CPU for a module with neither."""
    import torch

    tensor = next(module.parameters(), None)
    tensor = next(module.buffers(), None) if tensor is None else tensor
    return tensor.device if tensor is not None else torch.device("cpu")


def _vocab_of(fn):
    for owner in (fn, getattr(fn, "config", None)):
        vocab = getattr(owner, "vocab_size", None)
        if isinstance(vocab, int | np.integer):
            return int(vocab)
    return None


def from_torch_module(fn, vocab_size: int | None = None, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                      name: str | None = None) -> ModelLaw:
    """The oracle of any ``fn(tokens LongTensor [B, T]) -> logits [B, T, V]`` (a plain module or callable; an
    output with ``.logits`` is read there), called under ``torch.no_grad`` on the whole sequence, upcast to
    float64. A module with gpt-fast's interface (``setup_caches`` and ``forward(idx, input_pos)``, its real
    ``Transformer``) is run as one full pass with ``input_pos = arange(T)`` on a shadow sharing its weights (the
    loop's KV caches are left alone). ``vocab_size`` defaults to ``fn.vocab_size`` or ``fn.config.vocab_size``."""
    import torch

    vocab_size = _vocab_of(fn) if vocab_size is None else vocab_size
    if vocab_size is None:
        raise TypeError(f"from_torch_module: give vocab_size= ({type(fn).__name__} has neither .vocab_size nor "
                        ".config.vocab_size).")
    forward = _cached_module_forward(fn) if isinstance(fn, torch.nn.Module) and callable(
        getattr(fn, "setup_caches", None)) else fn

    def logits_of(tokens):
        with torch.no_grad():
            out = forward(torch.as_tensor(tokens))
        out = getattr(out, "logits", out)
        return out.to(torch.float64).cpu().numpy()

    dtype = None
    if isinstance(fn, torch.nn.Module):
        weight = next(fn.parameters(), None)
        dtype = None if weight is None else str(weight.dtype).replace("torch.", "")
    return ModelLaw(logits_of, int(vocab_size), name=name or getattr(fn, "__name__", type(fn).__name__),
                    temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, dtype=dtype or "float32")


def from_mlx_model(model, vocab_size: int | None = None, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                   name: str | None = None) -> ModelLaw:
    """The oracle of an mlx-lm model (``model(inputs [B, T]) -> logits [B, T, V]``, e.g. ``mlx_lm.models.llama
    .Model``): one call on the whole sequence with no cache, the logits upcast to float32 in mlx and to float64 in
    numpy, processed as declared (mlx-lm's ``make_sampler(temp=...)``: temperature 1 and nothing else by default).
    ``vocab_size`` defaults to ``model.args.vocab_size``. Needs ``mlx`` (installable on Linux as ``mlx[cpu]``)."""
    import mlx.core as mx

    if vocab_size is None:
        vocab_size = getattr(getattr(model, "args", None), "vocab_size", None) or _vocab_of(model)
    if vocab_size is None:
        raise TypeError(f"from_mlx_model: give vocab_size= ({type(model).__name__} has no .args.vocab_size).")

    def logits_of(tokens):
        out = model(mx.array(np.asarray(tokens, dtype=np.int32)))
        return np.array(out.astype(mx.float32), dtype=np.float64)

    dtype = None
    weights = getattr(model, "parameters", None)
    if callable(weights):
        import mlx.utils

        leaves = mlx.utils.tree_flatten(weights())
        dtype = str(leaves[0][1].dtype).replace("mlx.core.", "") if leaves else None
    return ModelLaw(logits_of, int(vocab_size), name=name or type(model).__name__, temperature=temperature,
                    top_k=top_k, top_p=top_p, min_p=min_p, dtype=dtype or "float32")
