"""Expected tokens per step and wall-time speedup (Leviathan et al. 2023, Section 3)."""

from __future__ import annotations

import numpy as np

from .._validation import check_gamma
from ._enumerate import accepted_count_law

__all__ = ["exact_tokens_per_step", "expected_speedup", "expected_tokens_per_step", "improves_walltime"]


def _check_rate(value, name):
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1]; got {value}.")
    return value


def expected_tokens_per_step(alpha, gamma) -> float:
    """Expected tokens emitted per step, ``(1 - alpha^(gamma+1)) / (1 - alpha)`` (Equation 1).

    Assumes i.i.d. acceptance with rate ``alpha``; equals ``gamma + 1`` at ``alpha = 1``.
    """
    alpha = _check_rate(alpha, "alpha")
    gamma = check_gamma(gamma)
    if alpha == 1.0:
        return float(gamma + 1)
    return float((1.0 - alpha ** (gamma + 1)) / (1.0 - alpha))


def expected_speedup(alpha, gamma, cost_ratio) -> float:
    """Expected wall-time improvement factor ``(1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1))``.

    Leviathan et al. 2023, Theorem 3.8, with ``c = cost_ratio`` the draft/target cost ratio.
    """
    cost_ratio = float(cost_ratio)
    if cost_ratio < 0 or not np.isfinite(cost_ratio):
        raise ValueError(f"cost_ratio must be a finite number >= 0; got {cost_ratio}.")
    return expected_tokens_per_step(alpha, gamma) / (check_gamma(gamma) * cost_ratio + 1.0)


def improves_walltime(alpha, cost_ratio) -> bool:
    """Corollary 3.9: some gamma gives a speedup iff ``alpha > c``."""
    return _check_rate(alpha, "alpha") > float(cost_ratio)


def exact_tokens_per_step(target, draft, gamma, prompt=None) -> float:
    """Exact expected tokens per step from ``prompt``, without the i.i.d. assumption: ``1 + E[K]``."""
    law = accepted_count_law(target, draft, gamma, prompt)
    return float(1.0 + law @ np.arange(law.size))
