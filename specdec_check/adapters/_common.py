"""Shared plumbing for the adapters (validation, seeding, padding)."""

from __future__ import annotations

import contextlib

import torch

from ..samplers._torch import _check_verify_inputs

__all__ = ["check_inputs", "draw_seeds", "forked_global_rng", "named", "pad_row"]


def check_inputs(draft_token_ids, draft_probs, target_probs, generator):
    """Contract checks shared with torch_verify: tensors on one device, a torch.Generator there."""
    return _check_verify_inputs(draft_token_ids, draft_probs, target_probs, generator)


def draw_seeds(generator: torch.Generator, n: int) -> list:
    """``n`` seeds in [0, 2**62) drawn from ``generator`` (one host read per call)."""
    if n == 0:
        return []
    return torch.randint(0, 1 << 62, (n,), generator=generator, device=generator.device).tolist()


@contextlib.contextmanager
def forked_global_rng(device: torch.device, seed: int):
    """Run a block on the *global* torch RNG seeded with ``seed``, restoring the caller's global state after.

    Forks the CPU RNG and, for a CUDA device, that device's RNG (``torch.random.fork_rng``), then
    seeds exactly those (like ``torch.manual_seed(seed)``, without queueing seeds for other
    device types, which costs ~1 ms per call).
    """
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.random.default_generator.manual_seed(seed)
        if device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            torch.cuda.default_generators[index].manual_seed(seed)
        yield


def pad_row(tokens: torch.Tensor, width: int) -> torch.Tensor:
    """A 1-D run of emitted tokens padded with -1 to ``width`` (int64, same device)."""
    tokens = tokens.reshape(-1).to(torch.int64)
    out = torch.full((width,), -1, dtype=torch.int64, device=tokens.device)
    n = min(tokens.shape[0], width)
    out[:n] = tokens[:n]
    return out


def named(verify, peer, label: str):
    """Give the returned verifier a readable name for reports: ``label(peer)``."""
    peer_name = getattr(peer, "__qualname__", None) or type(peer).__name__
    verify.__name__ = verify.__qualname__ = f"{label}({peer_name})"
    verify.__wrapped_peer__ = peer
    return verify
