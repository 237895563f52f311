"""Check modes: the design TV each mode targets and its sample and call caps."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODES", "Mode", "get_mode"]


@dataclass(frozen=True)
class Mode:
    """How hard to look: the TV the law tests are sized to detect with power 0.99, and caps."""

    name: str
    design_tv: float
    max_samples: int  # per law test and scenario
    max_calls: int  # verifier/generator calls per scenario
    pit_bins: int
    max_cells: float  # probability-table cells (rows x positions x V) handed to the sampler per scenario


MODES = {
    "quick": Mode("quick", design_tv=0.15, max_samples=6_000, max_calls=120, pit_bins=16, max_cells=2e7),
    "default": Mode("default", design_tv=0.06, max_samples=40_000, max_calls=600, pit_bins=32, max_cells=3e8),
    "thorough": Mode("thorough", design_tv=0.02, max_samples=2_000_000, max_calls=50_000, pit_bins=64, max_cells=1e10),
}


def get_mode(mode) -> Mode:
    if isinstance(mode, Mode):
        return mode
    try:
        return MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"unknown mode {mode!r}; choose one of {tuple(MODES)}.") from None
