"""Exact oracles: float64 laws by enumeration or recursion, no sampling.

Notation follows Leviathan et al. 2023: p is the target, q the draft, gamma the
number of drafted tokens per step.
"""

from ._enumerate import (
    acceptance_probabilities,
    accepted_count_law,
    joint,
    path_accepted_count_law,
    path_step_law,
    residual_probs,
    step_law,
)
from ._outcomes import decode_emitted, encode_emitted, num_step_outcomes
from ._recursion import acceptance_rate, marginals, pair_marginals, stationary_contexts
from ._speed import exact_tokens_per_step, expected_target_calls, expected_speedup, expected_tokens_per_step, improves_walltime

__all__ = [
    "acceptance_probabilities",
    "acceptance_rate",
    "accepted_count_law",
    "decode_emitted",
    "encode_emitted",
    "exact_tokens_per_step",
    "expected_speedup",
    "expected_target_calls",
    "expected_tokens_per_step",
    "improves_walltime",
    "joint",
    "marginals",
    "num_step_outcomes",
    "pair_marginals",
    "path_accepted_count_law",
    "path_step_law",
    "residual_probs",
    "stationary_contexts",
    "step_law",
]
