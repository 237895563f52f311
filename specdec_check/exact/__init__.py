"""Exact oracles: float64 laws by enumeration or recursion, no sampling.

Notation follows Leviathan et al. 2023: p is the target, q the draft, gamma the
number of drafted tokens per step.
"""

from ._block import (
    BlockWeights,
    block_expected_accepted,
    block_path_accepted_count_law,
    block_path_step_law,
    block_weights,
    one_hot_path_step_law,
    standard_expected_accepted,
)
from ._completed import completed_law, completed_law_tv, pooled_completed_law_tv, target_completed_law
from ._enumerate import (
    acceptance_probabilities,
    accepted_count_law,
    joint,
    path_accepted_count_law,
    path_step_law,
    residual_probs,
    step_law,
)
from ._lossy import medusa_thresholds, medusa_typical_path_step_law, sglang_threshold_path_step_law
from ._outcomes import decode_emitted, encode_emitted, num_step_outcomes
from ._recursion import acceptance_rate, marginals, pair_marginals, stationary_contexts
from ._sampling_params import (
    PROCESSING_STEPS,
    VLLM_V1_PROCESSING,
    SamplingProcessing,
    greedy_outputs,
    process_logits,
    processed_target_probs,
)
from ._token_law import BOUNDARY_TOLERANCE, TokenLaws, TokenProcessing, token_laws
from ._speed import exact_tokens_per_step, expected_target_calls, expected_speedup, expected_tokens_per_step, improves_walltime
from ._tree import (
    DRAFTING_SCHEMES,
    RULES,
    ThresholdRule,
    TreeLaws,
    check_tree,
    enumerate_tree_drafts,
    tree_accepted_length_law,
    tree_completed_law,
    tree_depth,
    tree_emitted_law,
    tree_expected_accepted_length,
    tree_laws_of,
    tree_loss_tv,
    tree_sequence_law,
    tree_step_law,
)

__all__ = [
    "BOUNDARY_TOLERANCE",
    "BlockWeights",
    "TokenLaws",
    "TokenProcessing",
    "token_laws",
    "DRAFTING_SCHEMES",
    "RULES",
    "ThresholdRule",
    "TreeLaws",
    "PROCESSING_STEPS",
    "SamplingProcessing",
    "VLLM_V1_PROCESSING",
    "greedy_outputs",
    "process_logits",
    "processed_target_probs",
    "acceptance_probabilities",
    "acceptance_rate",
    "accepted_count_law",
    "block_expected_accepted",
    "block_path_accepted_count_law",
    "block_path_step_law",
    "block_weights",
    "completed_law",
    "completed_law_tv",
    "decode_emitted",
    "encode_emitted",
    "exact_tokens_per_step",
    "expected_speedup",
    "expected_target_calls",
    "expected_tokens_per_step",
    "improves_walltime",
    "joint",
    "marginals",
    "medusa_thresholds",
    "medusa_typical_path_step_law",
    "num_step_outcomes",
    "one_hot_path_step_law",
    "pair_marginals",
    "path_accepted_count_law",
    "path_step_law",
    "pooled_completed_law_tv",
    "residual_probs",
    "sglang_threshold_path_step_law",
    "standard_expected_accepted",
    "stationary_contexts",
    "step_law",
    "target_completed_law",
    "check_tree",
    "enumerate_tree_drafts",
    "tree_accepted_length_law",
    "tree_completed_law",
    "tree_depth",
    "tree_emitted_law",
    "tree_expected_accepted_length",
    "tree_laws_of",
    "tree_loss_tv",
    "tree_sequence_law",
    "tree_step_law",
]
