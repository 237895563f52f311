"""Shared plumbing for the adapters: validation, signatures, seeding, padding."""

from __future__ import annotations

import contextlib
import inspect
import sys

import torch

from ..samplers._torch import _check_verify_inputs

__all__ = [
    "SEEDINGS",
    "AdapterSignatureError",
    "SeedPlan",
    "check_inputs",
    "check_seeding",
    "draw_seeds",
    "forked_global_rng",
    "named",
    "pad_row",
    "parameters_of",
    "plan_seeds",
    "version_of",
]

#: How the adapters seed the rows of one call. ``"mixed"`` (the default) seeds a random subset of
#: the rows and leaves the others on the global RNG, as a production batch mixes requests with and
#: without a seed (vLLM's #10863 only shows in such a batch); ``"all"`` seeds every row;
#: ``"none"`` seeds no row. Whatever the choice, every random number comes from the contract's
#: generator: per-row seeds are drawn from it and the global RNG is forked and seeded from it.
SEEDINGS = ("mixed", "all", "none")


class AdapterSignatureError(TypeError):
    """The peer's callable has a signature the adapter does not know: a usage error, not a verdict."""


def check_inputs(draft_token_ids, draft_probs, target_probs, generator):
    """Contract checks shared with torch_verify: tensors on one device, a torch.Generator there."""
    return _check_verify_inputs(draft_token_ids, draft_probs, target_probs, generator)


def check_seeding(seeding: str) -> str:
    if seeding not in SEEDINGS:
        raise ValueError(f"seeding must be one of {SEEDINGS}; got {seeding!r}.")
    return seeding


def version_of(obj) -> str:
    """``package version (module file)`` of the package ``obj`` comes from, for error messages."""
    module_name = getattr(obj, "__module__", None) or type(obj).__module__
    module = sys.modules.get(module_name or "")
    top = sys.modules.get((module_name or "").split(".")[0])
    version = getattr(top, "__version__", None)
    where = getattr(module, "__file__", None) or module_name or "unknown module"
    return f"{(module_name or '?').split('.')[0]} {version or '(version unknown)'} ({where})"


def parameters_of(fn, label: str) -> dict:
    """``{name: inspect.Parameter}`` of ``fn``; ``AdapterSignatureError`` when it cannot be inspected."""
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as exc:
        raise AdapterSignatureError(f"{label}: cannot read the signature of {fn!r} ({exc}); pass the Python "
                                    "function or method itself.") from None


def draw_seeds(generator: torch.Generator, n: int) -> list:
    """``n`` seeds in [0, 2**62) drawn from ``generator`` (one host read per call)."""
    if n == 0:
        return []
    return torch.randint(0, 1 << 62, (n,), generator=generator, device=generator.device).tolist()


class SeedPlan:
    """One call's seeding, drawn from the contract's generator: ``seeds[row]`` (None for an unseeded
    row) and ``global_seed`` for the global RNG the unseeded rows use (forked, so the caller's global
    state is untouched)."""

    def __init__(self, seeds: list, global_seed: int):
        self.seeds, self.global_seed = seeds, global_seed

    def generators(self, device) -> dict:
        """``{row: torch.Generator}`` for the seeded rows (vLLM's ``seeded_seqs`` / ``generators`` dict)."""
        return {row: torch.Generator(device=device).manual_seed(seed)
                for row, seed in enumerate(self.seeds) if seed is not None}

    @property
    def seeded_rows(self) -> list:
        return [row for row, seed in enumerate(self.seeds) if seed is not None]


def plan_seeds(generator: torch.Generator, batch: int, seeding: str) -> SeedPlan:
    """A :class:`SeedPlan` for ``batch`` rows: ``"all"``, ``"none"``, or ``"mixed"``: each row seeded
    with probability 1/2, and at least one seeded and one unseeded row when ``batch >= 2``."""
    draws = draw_seeds(generator, batch + 1) if batch else draw_seeds(generator, 1)
    row_seeds, global_seed = draws[:batch], draws[-1]
    if seeding == "all":
        return SeedPlan(row_seeds, global_seed)
    if seeding == "none":
        return SeedPlan([None] * batch, global_seed)
    seeded = [bool(s & 1) for s in row_seeds]  # the low bit of each seed: a fair coin from the generator
    if batch >= 2 and all(seeded):
        seeded[global_seed % batch] = False
    elif batch >= 2 and not any(seeded):
        seeded[global_seed % batch] = True
    return SeedPlan([s if keep else None for s, keep in zip(row_seeds, seeded)], global_seed)


@contextlib.contextmanager
def forked_global_rng(device: torch.device, seed: int):
    """Run a block on the *global* torch RNG seeded with ``seed``, restoring the caller's global state after.

    Forks the CPU RNG and, for a CUDA device, that device's RNG (``torch.random.fork_rng``), then
    seeds exactly those (like ``torch.manual_seed(seed)``, without queueing seeds for other
    device types, which costs ~1 ms per call).
    """
    device = torch.device(device)
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
    """Give the returned sampler a readable name for reports: ``label(peer)``."""
    peer_name = getattr(peer, "__qualname__", None) or type(peer).__name__
    verify.__name__ = verify.__qualname__ = f"{label}({peer_name})"
    verify.__wrapped_peer__ = peer
    return verify
