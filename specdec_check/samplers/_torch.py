"""Reference samplers in torch: the verifier and decode-loop contracts, device-agnostic and batched.

Both functions draw every random number from the ``torch.Generator`` they are given
(never the global RNG), never synchronise with the host inside a step, and do their
arithmetic in float32 for float32 / bfloat16 / float16 inputs (float64 inputs stay in
float64). Each probability row is renormalised (in that arithmetic) before use, so the
law a sampler implements is the law of the rows it was handed: ``renormalise(row)``.
"""

from __future__ import annotations

import numpy as np
import torch

from .._torch_utils import same_device
from .._validation import check_gamma

__all__ = ["sample_rows", "torch_generate", "torch_verify"]

#: Probability dtypes the torch references accept.
PROB_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_PROB_DTYPE_NAMES = "float32, bfloat16, float16 or float64"


def check_generator(generator, device: torch.device, *, who: str = "torch_verify") -> torch.Generator:
    """``TypeError`` unless ``generator`` is a ``torch.Generator``; ``ValueError`` unless it lives on ``device``."""
    if not isinstance(generator, torch.Generator):
        kind = f"{type(generator).__module__}.{type(generator).__name__}"
        raise TypeError(
            f"{who} needs a torch.Generator on the inputs' device as generator; got {kind}. "
            f"Use torch.Generator(device={str(device)!r}).manual_seed(seed) (numpy generators go with numpy_verify)."
        )
    if not same_device(generator.device, device):
        raise ValueError(
            f"{who}: the generator is on {generator.device} but the inputs are on {device}; "
            f"create it with torch.Generator(device={str(device)!r})."
        )
    return generator


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_probs(name: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__} (numpy inputs go with numpy_verify).")
    if x.dtype not in PROB_DTYPES:
        raise ValueError(f"{name} has dtype {x.dtype}; torch_verify accepts {_PROB_DTYPE_NAMES} probabilities.")
    return x


def _check_verify_inputs(draft_token_ids, draft_probs, target_probs, generator):
    draft_probs = _check_probs("draft_probs", draft_probs)
    target_probs = _check_probs("target_probs", target_probs)
    if not isinstance(draft_token_ids, torch.Tensor):
        raise TypeError(f"draft_token_ids must be a torch.Tensor; got {type(draft_token_ids).__name__}.")
    if draft_token_ids.dtype.is_floating_point or draft_token_ids.dtype.is_complex or draft_token_ids.dtype == torch.bool:
        raise TypeError(f"draft_token_ids must be an integer tensor; got {draft_token_ids.dtype}. Cast with .long().")
    device = target_probs.device
    for name, x in (("draft_probs", draft_probs), ("draft_token_ids", draft_token_ids)):
        if not same_device(x.device, device):
            raise ValueError(f"{name} is on {x.device} but target_probs is on {device}; put all inputs on one device.")
    if target_probs.dim() != 3 or draft_probs.dim() != 3 or draft_token_ids.dim() != 2:
        raise ValueError(
            "expected draft_token_ids [B, gamma], draft_probs [B, gamma, V] and target_probs [B, gamma+1, V]; got "
            f"{tuple(draft_token_ids.shape)}, {tuple(draft_probs.shape)} and {tuple(target_probs.shape)}."
        )
    batch, gamma = draft_token_ids.shape
    vocab = target_probs.shape[-1]
    if draft_probs.shape != (batch, gamma, vocab) or target_probs.shape != (batch, gamma + 1, vocab):
        raise ValueError(
            f"with draft_token_ids of shape {(batch, gamma)}, draft_probs must be {(batch, gamma, vocab)} and "
            f"target_probs {(batch, gamma + 1, vocab)} (the last target row is the bonus position); got "
            f"{tuple(draft_probs.shape)} and {tuple(target_probs.shape)}."
        )
    if vocab < 1:
        raise ValueError("the vocabulary (last axis of the probabilities) is empty.")
    check_generator(generator, device)
    return draft_token_ids.long(), draft_probs, target_probs


def _row_sums(x: torch.Tensor, compute: torch.dtype) -> torch.Tensor:
    s = x.sum(dim=-1, dtype=compute)
    return torch.where((s > 0) | torch.isnan(s), s, torch.ones_like(s))  # NaN stays NaN: the row is invalid


def sample_rows(weights: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of non-negative ``weights`` [N, V] (any scale), int64 [N], sync-free.

    Exponential race: ``argmax_y w_y / E_y`` with ``E_y = -log U_y ~ Exp(1)`` i.i.d. from
    ``generator`` is ``y`` with probability ``w_y / sum(w)``; computed as ``argmax log(U_y) / w_y``.
    Zero-weight and NaN entries never win (NaN is read as 0), even when a uniform is exactly 0. A row with no positive weight returns 0.
    """
    compute = _compute_dtype(weights.dtype)
    w = torch.fmax(weights.to(compute), torch.zeros((), dtype=compute, device=weights.device))  # NaN -> 0
    score = torch.rand(w.shape, generator=generator, dtype=compute, device=w.device)
    # U = 0 (probability 2^-24 per float32 draw) would give every entry -inf and argmax would return
    # entry 0 whatever its weight; the smallest normal number instead keeps zero weights losing.
    score.clamp_(min=torch.finfo(compute).tiny)
    score.log_().div_(w)  # log U < 0: w = 0 gives -inf
    return torch.argmax(score, dim=-1)


def torch_verify(*, draft_token_ids, draft_probs, target_probs, generator) -> torch.Tensor:
    """One speculative step's accept/reject kernel in torch (Leviathan et al. 2023, Algorithm 1).

    Same algorithm and law as :func:`numpy_verify`: draft ``x_i`` is accepted iff
    ``u_i * q_i(x_i) < p_i(x_i)``; at the first rejection one token is drawn from
    ``norm(max(0, p_i - q_i))``; if all drafts pass, the bonus comes from ``p_{gamma+1}``.
    Rows are renormalised first (float32 arithmetic for float32/bfloat16/float16 inputs,
    float64 for float64), so low-precision rows are sampled from their own normalised law.
    Tokens are drawn by an exponential race, so nothing waits on the host.

    ``draft_token_ids`` int [B, gamma], ``draft_probs`` [B, gamma, V], ``target_probs``
    [B, gamma+1, V], all on one device; ``generator`` a ``torch.Generator`` on that device
    (the only source of randomness). Returns int64 [B, gamma+1] on that device.

    No host synchronisation means no raised data errors: a row holding a NaN or infinite
    probability is returned as all -1 (invalid input, never a token), a residual with no mass
    (p == q) falls back to ``p_i``, and out-of-range ids raise an indexing error (device assert
    on CUDA).

    Example::

        g = torch.Generator(device="cuda").manual_seed(0)
        out = torch_verify(draft_token_ids=ids, draft_probs=q, target_probs=p, generator=g)
    """
    ids, q, p = _check_verify_inputs(draft_token_ids, draft_probs, target_probs, generator)
    batch, gamma = ids.shape
    compute = _compute_dtype(torch.promote_types(p.dtype, q.dtype))
    device = p.device
    p_sum = _row_sums(p, compute)  # [B, gamma+1]

    if gamma:
        q_sum = _row_sums(q, compute)  # [B, gamma]
        u = torch.rand((batch, gamma), generator=generator, device=device, dtype=compute)
        p_at = torch.gather(p[:, :gamma], 2, ids[..., None])[..., 0].to(compute) / p_sum[:, :gamma]
        q_at = torch.gather(q, 2, ids[..., None])[..., 0].to(compute) / q_sum
        accepted = u * q_at < p_at  # NaN compares False: rejected
        stop = torch.cumprod(accepted.to(torch.int64), dim=1).sum(dim=1)  # leading accepts, [B]
    else:
        stop = torch.zeros(batch, dtype=torch.int64, device=device)

    rows = torch.arange(batch, device=device)
    final = p[rows, stop].to(compute) * (1.0 / p_sum[rows, stop])[:, None]
    if gamma:
        q_row = stop.clamp(max=gamma - 1)
        draft_scale = (stop < gamma).to(compute) / q_sum[rows, q_row]  # 0 when every draft was accepted
        residual = final - q[rows, q_row].to(compute) * draft_scale[:, None]
        residual = torch.fmax(residual, torch.zeros((), dtype=compute, device=device))  # also NaN -> 0
        no_mass = residual.amax(dim=1) <= 0
        final = torch.where(no_mass[:, None], final, residual)
    token = sample_rows(final, generator)

    cols = torch.arange(gamma + 1, device=device)
    padded = torch.cat([ids, torch.zeros((batch, 1), dtype=torch.int64, device=device)], dim=1)
    out = torch.where(cols < stop[:, None], padded, torch.full_like(padded, -1))
    out.scatter_(1, stop[:, None], token[:, None])
    # A row with a NaN or infinite probability anywhere is invalid input: mark it all -1 rather
    # than turn garbage into a token (decided on the device, no host synchronisation).
    invalid = ~torch.isfinite(p_sum).all(dim=1)
    if gamma:
        invalid |= ~torch.isfinite(q_sum).all(dim=1)
    return torch.where(invalid[:, None], torch.full_like(out, -1), out)


def _as_torch_model(model, device, name):
    from ..models import CausalModel
    from ..models import TorchModel

    if isinstance(model, TorchModel):
        if not same_device(model.device, device):
            raise ValueError(f"{name} lives on {model.device} but prompts are on {device}; use {name}.to_torch({str(device)!r}).")
        return model
    if isinstance(model, CausalModel):
        return model.to_torch(device)
    if not callable(model):
        raise TypeError(f"{name} must be a causal model (callable on int tokens [B, T]); got {type(model).__name__}.")
    return model


def _last_row(model, window: torch.Tensor) -> torch.Tensor:
    from ..models import TorchModel

    if isinstance(model, TorchModel):
        return model.last_probs(window)
    return model(window)[:, -1]


def torch_generate(*, target, draft, prompts, max_new_tokens, gamma, generator, verify=torch_verify) -> torch.Tensor:
    """Speculative decoding of ``max_new_tokens`` tokens per prompt in torch (mirrors :func:`numpy_generate`).

    ``target`` / ``draft``: :class:`~specdec_check.models.TorchModel` (e.g. ``model.to_torch(device,
    dtype)``), a numpy ``CausalModel`` (moved to the prompts' device in float64) or any callable
    ``model(tokens int [B, T] tensor) -> [B, T, V] tensor`` on the prompts' device (``-1`` padding ignored).
    ``prompts`` int tensor [B, P] (``-1`` padding allowed); ``generator`` a ``torch.Generator`` on the
    prompts' device, the only source of randomness (drafting and ``verify``).
    Returns int64 [B, max_new_tokens] on that device.

    Each step drafts ``gamma`` tokens (exponential race on the draft rows), scores all ``gamma + 1``
    positions with one target call, runs ``verify`` and advances each chain by its own emitted count.
    Steps are sync-free; the loop reads one small tensor per step to know when every chain is done.
    """
    if not isinstance(prompts, torch.Tensor):
        raise TypeError(f"prompts must be an int torch.Tensor [B, P]; got {type(prompts).__name__}.")
    if prompts.dtype.is_floating_point or prompts.dtype.is_complex or prompts.dtype == torch.bool:
        raise TypeError(f"prompts must be an integer tensor; got {prompts.dtype}.")
    if prompts.dim() != 2:
        raise ValueError(f"prompts must have shape [B, P]; got {tuple(prompts.shape)}.")
    device = prompts.device
    check_generator(generator, device, who="torch_generate")
    gamma = check_gamma(gamma)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0; got {max_new_tokens!r}.")
    max_new_tokens = int(max_new_tokens)
    target = _as_torch_model(target, device, "target")
    draft = _as_torch_model(draft, device, "draft")
    t_vocab, d_vocab = getattr(target, "vocab_size", None), getattr(draft, "vocab_size", None)
    if t_vocab is not None and d_vocab is not None and t_vocab != d_vocab:
        raise ValueError(f"target and draft must share a vocabulary; got V={t_vocab} and V={d_vocab}.")
    prompts = prompts.long()
    batch, prompt_len = prompts.shape
    width = 1 + prompt_len + max_new_tokens + 2 * (gamma + 1)
    seq = torch.full((batch, width), -1, dtype=torch.int64, device=device)
    seq[:, 1: 1 + prompt_len] = prompts
    produced = torch.zeros(batch, dtype=torch.int64, device=device)
    steps = torch.arange(gamma + 1, device=device)
    if batch == 0 or max_new_tokens == 0:
        return seq[:, 1 + prompt_len: 1 + prompt_len + max_new_tokens].clone()
    while True:
        active = produced < max_new_tokens
        base = prompt_len + produced  # each chain's last filled column
        any_active, horizon = torch.stack([active.any().to(torch.int64), base.max()]).tolist()  # the one sync
        if not any_active:
            break
        horizon = int(horizon) + gamma + 1
        window = seq[:, :horizon].clone()
        draft_ids, draft_rows = [], []
        for j in range(gamma):
            row = _last_row(draft, window)  # columns after base + j are still -1
            tok = sample_rows(row, generator)
            draft_rows.append(row)
            draft_ids.append(tok)
            window.scatter_(1, (base + 1 + j)[:, None], tok[:, None])
        scored = target(window)
        positions = (base[:, None] + steps).view(batch, gamma + 1, 1).expand(batch, gamma + 1, scored.shape[-1])
        target_rows = torch.gather(scored, 1, positions)
        vocab = target_rows.shape[-1]
        if gamma:
            drafts = torch.stack(draft_ids, dim=1)
            draft_probs = torch.stack(draft_rows, dim=1)
        else:
            drafts = torch.zeros((batch, 0), dtype=torch.int64, device=device)
            draft_probs = torch.zeros((batch, 0, vocab), dtype=target_rows.dtype, device=device)
        out = verify(draft_token_ids=drafts, draft_probs=draft_probs, target_probs=target_rows, generator=generator)
        out = out.to(device=device, dtype=torch.int64)
        emitted = (out >= 0).sum(dim=1) * active
        cols = base[:, None] + 1 + steps
        keep = steps < emitted[:, None]
        seq.scatter_(1, cols, torch.where(keep, out, torch.gather(seq, 1, cols)))
        produced = produced + emitted
    return seq[:, 1 + prompt_len: 1 + prompt_len + max_new_tokens].clone()
