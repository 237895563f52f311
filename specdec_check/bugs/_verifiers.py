"""Buggy verifiers: each differs from the reference ``numpy_verify`` in one place.

All keep the verifier contract (keyword-only ``draft_token_ids``, ``draft_probs``,
``target_probs``, ``generator``; int64 [B, g+1] with -1 padding), never raise on the
checker's edge cases (gamma 1..7, one row per call, one-hot rows, disjoint supports,
p == q), and use only ``generator`` for randomness unless the bug is about randomness.
Notation: p = target, q = draft, x_i the i-th drafted token.
"""

from __future__ import annotations

import numpy as np

from ..samplers import numpy_verify
from ._common import as_arrays, assemble, first_rejection, inverse_cdf, probs_at, residual
from ._common import final_rows as reference_final_rows

__all__ = [
    "accepted_count_without_prefix",
    "bonus_from_wrong_row",
    "continue_after_rejection",
    "deterministic_accept",
    "generator_ignored",
    "greedy_recovery",
    "medusa_typical_acceptance",
    "no_bonus_token",
    "one_hot_rule_on_stochastic_draft",
    "one_uniform_per_row",
    "ratio_inverted",
    "recovered_with_failed_uniform",
    "resample_from_target",
    "residual_at_drafted_token_only",
    "residual_from_first_position",
    "residual_one_position_late",
    "residual_swapped",
    "rows_share_uniforms",
    "antithetic_row_pairs",
    "stratified_rows",
    "systematic_rows",
    "safe_division_epsilon",
    "sampled_match",
    "target_rows_shifted",
    "unnormalised_inverse_cdf",
]


def _standard(ids, draft, target, uniforms, *, rejected=None, final_rows=None, final_uniform=None,
              normalise=True):
    """The reference step with optional overrides; returns (stop, token)."""
    batch, gamma = ids.shape
    rows = np.arange(batch)
    if rejected is None:
        rejected = uniforms[:, :gamma] * probs_at(draft, ids) >= probs_at(target, ids)
    stop = first_rejection(rejected)
    if final_rows is None:
        final_rows = reference_final_rows
    final = final_rows(ids, draft, target, stop)
    u = uniforms[rows, gamma] if final_uniform is None else final_uniform
    return stop, inverse_cdf(final, u, normalise=normalise)




# --- wrong recovery law -------------------------------------------------------------------------

def resample_from_target(*, draft_token_ids, draft_probs, target_probs, generator):
    """Recovers from the target p_s itself instead of the residual norm(max(0, p_s - q_s)).

    Source: class of bug (the naive "reject, then sample the target" rule), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    u = generator.random((ids.shape[0], ids.shape[1] + 1))
    rows = np.arange(ids.shape[0])
    stop, token = _standard(ids, q, p, u, final_rows=lambda i, d, t, s: t[rows, s])
    return assemble(ids, stop, token)


def residual_swapped(*, draft_token_ids, draft_probs, target_probs, generator):
    """Recovers from norm(max(0, q - p)) (operands swapped) instead of norm(max(0, p - q)).

    Source: class of bug (peers name p and q in opposite conventions: FlashInfer and gpt-fast
    follow Chen et al., HF and EAGLE Leviathan et al.), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    u = generator.random((ids.shape[0], ids.shape[1] + 1))
    return assemble(ids, *_standard(ids, q, p, u, final_rows=_swapped_rows))


def _swapped_rows(ids, draft, target, stop):
    batch, gamma = ids.shape
    rows = np.arange(batch)
    final = target[rows, stop].copy()
    rec = stop < gamma
    if rec.any():
        final[rec] = residual(draft[rows[rec], stop[rec]], target[rows[rec], stop[rec]])
    return final


def residual_one_position_late(*, draft_token_ids, draft_probs, target_probs, generator):
    """Recovers at stop s from norm(max(0, p_{s+1} - q_{s+1})) (q_g taken as 0) instead of position s.

    Source: class of bug (off-by-one between the stop index and the residual row), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))
    q_ext = np.concatenate([q, np.zeros_like(p[:, :1])], axis=1)

    def late(i, d, t, s):
        final = t[rows, s].copy()
        rec = s < gamma
        final[rec] = residual(t[rows[rec], s[rec] + 1], q_ext[rows[rec], s[rec] + 1])
        return final

    return assemble(ids, *_standard(ids, q, p, u, final_rows=late))


def residual_from_first_position(*, draft_token_ids, draft_probs, target_probs, generator):
    """Recovers from position 0's residual norm(max(0, p_0 - q_0)) whatever the stop position.

    Source: class of bug; peers.md reports an early FlashInfer chain kernel that read position
    0's rows for every residual (no specific issue number found).
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))

    def first(i, d, t, s):
        final = t[rows, s].copy()
        rec = s < gamma
        final[rec] = residual(t[rows[rec], 0], d[rows[rec], 0])
        return final

    return assemble(ids, *_standard(ids, q, p, u, final_rows=first))


def residual_at_drafted_token_only(*, draft_token_ids, draft_probs, target_probs, generator):
    """Recovers from p_s with only q_s(x_s) subtracted at the drafted token, not the whole q_s.

    Source: xLLM-AI/xllm PR #2175 ("its (p-q)+ residual only subtracts draft mass at the single
    drafted token, not the full draft distribution").
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))

    def point(i, d, t, s):
        final = t[rows, s].copy()
        rec = s < gamma
        r, ss = rows[rec], s[rec]
        x = i[r, ss]
        final[r, x] = np.maximum(t[r, ss, x] - d[r, ss, x], 0.0)
        return final

    return assemble(ids, *_standard(ids, q, p, u, final_rows=point))


def unnormalised_inverse_cdf(*, draft_token_ids, draft_probs, target_probs, generator):
    """Samples the residual max(0, p_s - q_s) by inverse CDF as if it summed to 1 (no ``u * total``).

    Overflowing draws fall on the last positive-mass token. Source: class of bug (normaliser
    errors; FlashInfer PR #5201 adds a test "to catch normaliser errors"), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    u = generator.random((ids.shape[0], ids.shape[1] + 1))
    return assemble(ids, *_standard(ids, q, p, u, normalise=False))


def greedy_recovery(*, draft_token_ids, draft_probs, target_probs, generator):
    """Emits argmax(max(0, p_s - q_s)) at a rejection instead of a draw from the residual.

    Source: class of bug (greedy fallback copied into the sampling path), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))
    stop, token = _standard(ids, q, p, u)
    rec = stop < gamma
    if rec.any():
        token[rec] = residual(p[rows[rec], stop[rec]], q[rows[rec], stop[rec]]).argmax(axis=1)
    return assemble(ids, stop, token)


# --- wrong acceptance test ----------------------------------------------------------------------

def ratio_inverted(*, draft_token_ids, draft_probs, target_probs, generator):
    """Accepts x_i iff u_i < min(1, q_i(x_i) / p_i(x_i)) (ratio inverted; p = 0 gives inf, accept).

    Source: class of bug (p/q naming conventions differ between peers), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    u = generator.random((ids.shape[0], ids.shape[1] + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = probs_at(q, ids) / probs_at(p, ids)
    ratio = np.nan_to_num(ratio, nan=1.0, posinf=np.inf)
    rejected = ~(u[:, : ids.shape[1]] < np.minimum(1.0, ratio))
    return assemble(ids, *_standard(ids, q, p, u, rejected=rejected))


def deterministic_accept(*, draft_token_ids, draft_probs, target_probs, generator):
    """Accepts x_i iff p_i(x_i) >= q_i(x_i), with no coin flip; recovery from the residual as usual.

    Source: class of bug (min(1, p/q) rounded to a threshold), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    u = generator.random((ids.shape[0], ids.shape[1] + 1))
    rejected = probs_at(p, ids) < probs_at(q, ids)
    return assemble(ids, *_standard(ids, q, p, u, rejected=rejected))


def safe_division_epsilon(*, draft_token_ids, draft_probs, target_probs, generator):
    """Accepts x_i iff u_i < min(1, p_i(x_i) / (q_i(x_i) + 0.05)): a "safe division" epsilon in the ratio.

    The epsilon lowers every acceptance probability with p <= q + eps while the residual stays
    max(0, p - q), so the output is biased (0.05 is large on purpose; 1e-10 would be harmless and undetectable).
    Source: class of bug; ScaleLLM PR #202 ("use a proper epsilon to avoid division by zero
    error for rejection sampler") shows the pattern, its epsilon size not checked.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    u = generator.random((ids.shape[0], ids.shape[1] + 1))
    ratio = probs_at(p, ids) / (probs_at(q, ids) + 0.05)
    rejected = ~(u[:, : ids.shape[1]] < np.minimum(1.0, ratio))
    return assemble(ids, *_standard(ids, q, p, u, rejected=rejected))


def target_rows_shifted(*, draft_token_ids, draft_probs, target_probs, generator):
    """Tests and recovers position i against the target row i+1 (logits/labels off by one).

    The bonus still comes from p_g. Source: class of bug (next-token logits indexed at the
    wrong position), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, gamma + 1))
    shifted = np.concatenate([p[:, 1:], p[:, -1:]], axis=1)  # row i -> p_{i+1}; row g stays p_g
    rejected = u[:, :gamma] * probs_at(q, ids) >= probs_at(shifted, ids)
    return assemble(ids, *_standard(ids, q, shifted, u, rejected=rejected))


def medusa_typical_acceptance(*, draft_token_ids, draft_probs, target_probs, generator):
    """Medusa typical acceptance: accept x_i iff p_i(x_i) > min(0.09, 0.3 * exp(-H(p_i))), else the target's argmax.

    Lossy by design (no randomness in the test, greedy fallback); the bonus is drawn from p_g.
    Source: FasterDecoding/Medusa ``medusa/model/utils.py::evaluate_posterior``; vLLM v0
    ``TypicalAcceptanceSampler`` (``typical_acceptance_sampler.py``).
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random(batch)
    entropy = -(p[:, :gamma] * np.log(p[:, :gamma] + 1e-5)).sum(axis=-1)
    threshold = np.minimum(0.09, 0.3 * np.exp(-entropy))
    stop = first_rejection(~(probs_at(p, ids) > threshold))
    token = inverse_cdf(p[:, gamma], u)
    rec = stop < gamma
    token[rec] = p[rows[rec], stop[rec]].argmax(axis=1)
    return assemble(ids, stop, token)


def accepted_count_without_prefix(*, draft_token_ids, draft_probs, target_probs, generator):
    """Counts the passing tests n (ignoring the first rejection), emits x_1..x_n and recovers at n.

    Source: class of bug; FlashInfer's ``accepted_num`` counts independent passes by design
    (peers.md section 2) and HF avoids it with a cumsum (``n_matches``), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, gamma + 1))
    passed = u[:, :gamma] * probs_at(q, ids) < probs_at(p, ids)
    stop = passed.sum(axis=1).astype(np.int64)
    final = reference_final_rows(ids, q, p, stop)
    return assemble(ids, stop, inverse_cdf(final, u[:, gamma]))


def continue_after_rejection(*, draft_token_ids, draft_probs, target_probs, generator):
    """Keeps testing after a rejection: every rejected x_i is replaced by a residual draw and the bonus always follows.

    Source: class of bug (per-position "accept or resample" without stopping), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, 2 * gamma + 1))
    rejected = u[:, :gamma] * probs_at(q, ids) >= probs_at(p, ids)
    out = np.empty((batch, gamma + 1), dtype=np.int64)
    for i in range(gamma):
        out[:, i] = np.where(rejected[:, i], inverse_cdf(residual(p[:, i], q[:, i]), u[:, gamma + 1 + i]), ids[:, i])
    out[:, gamma] = inverse_cdf(p[:, gamma], u[:, gamma])
    return out


# --- bonus-token bugs ---------------------------------------------------------------------------

def no_bonus_token(*, draft_token_ids, draft_probs, target_probs, generator):
    """Emits no bonus token when every draft is accepted (last column -1): lossless, fewer tokens per step.

    Source: vLLM v0 ``RejectionSampler(disable_bonus_tokens=True)``, the default because of
    draft KV-cache issues (vllm-project/vllm#4212, fixed by PR #5765).
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, gamma + 1))
    stop, token = _standard(ids, q, p, u)
    token[stop == gamma] = -1
    return assemble(ids, stop, token)


def bonus_from_wrong_row(*, draft_token_ids, draft_probs, target_probs, generator):
    """Draws the bonus token from p_{g-1} (the last draft position's target row) instead of p_g.

    Source: class of bug (target passed without the bonus row, as in vLLM's older API), no
    specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))

    def wrong(i, d, t, s):
        final = reference_final_rows(i, d, t, s)
        full = s == gamma
        final[full] = t[rows[full], max(gamma - 1, 0)]
        return final

    return assemble(ids, *_standard(ids, q, p, u, final_rows=wrong))


# --- randomness bugs ----------------------------------------------------------------------------

def one_uniform_per_row(*, draft_token_ids, draft_probs, target_probs, generator):
    """Draws one uniform per row and reuses it in the acceptance test at every position.

    The acceptance events become nested (P(accept i+1 | accept i) = min(a_i, a_{i+1}) / a_i).
    Source: class of bug (noise keyed by request instead of by (request, position); vLLM MRV2
    keys its Philox stream by (seed, position) to avoid it), no specific report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, 2))
    uniforms = np.concatenate([np.repeat(u[:, :1], gamma, axis=1), u[:, 1:]], axis=1)
    return assemble(ids, *_standard(ids, q, p, uniforms))


def recovered_with_failed_uniform(*, draft_token_ids, draft_probs, target_probs, generator):
    """Draws the recovered token with the uniform u_s that just failed the test (u_s >= p/q), not a fresh one.

    Source: flashinfer-ai/flashinfer PR #424 ("fix chain speculative sampling implementation ...
    use unique uniform samples").
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))
    rejected = u[:, :gamma] * probs_at(q, ids) >= probs_at(p, ids)
    stop = first_rejection(rejected)
    final = reference_final_rows(ids, q, p, stop)
    return assemble(ids, stop, inverse_cdf(final, u[rows, stop]))


def rows_share_uniforms(*, draft_token_ids, draft_probs, target_probs, generator):
    """Every row of the batch uses row 0's uniforms (one RNG stream shared by all requests).

    Each row's own law is exact; rows are dependent. Source: NVIDIA/TensorRT-LLM#19487
    ("unseeded requests share one RNG stream -> identical/degenerate samples").
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = np.broadcast_to(generator.random((1, gamma + 1)), (batch, gamma + 1))
    return assemble(ids, *_standard(ids, q, p, u))


def antithetic_row_pairs(*, draft_token_ids, draft_probs, target_probs, generator):
    """Row ``2k + 1`` uses ``1 - u`` of row ``2k`` (antithetic variates, a variance-reduction habit).

    Each row's own law is exact; paired rows agree too rarely (their accepted counts are negatively
    correlated). Source: issue 29 of this project (an adversarial try); no upstream report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, gamma + 1))
    u[1::2] = 1.0 - u[0::2][: batch // 2]
    return assemble(ids, *_standard(ids, q, p, u))


def stratified_rows(*, draft_token_ids, draft_probs, target_probs, generator):
    """Stratified uniforms across a call's rows: at each position the rows take the strata
    ``[i / B, (i + 1) / B)`` in a random order (a Latin hypercube over the batch).

    Each row's own law is exact; two rows of one call never share a stratum, so in a two-row call one
    accepts a draft of acceptance probability 1/2 exactly when the other rejects it. Source: issue 29
    of this project (an adversarial try); no upstream report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    strata = np.stack([generator.permutation(batch) for _ in range(gamma + 1)], axis=1)
    return assemble(ids, *_standard(ids, q, p, (strata + generator.random((batch, gamma + 1))) / batch))


def systematic_rows(*, draft_token_ids, draft_probs, target_probs, generator):
    """Systematic uniforms across a call's rows: one offset ``v`` per position, row ``pi(i)`` gets
    ``(i + v) / B`` (systematic resampling's layout).

    Each row's own law is exact; the rows of a call are functions of one uniform per position.
    Source: issue 29 of this project (an adversarial try); no upstream report.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    strata = np.stack([generator.permutation(batch) for _ in range(gamma + 1)], axis=1)
    return assemble(ids, *_standard(ids, q, p, (strata + generator.random((1, gamma + 1))) / batch))


def generator_ignored(*, draft_token_ids, draft_probs, target_probs, generator):
    """Ignores ``generator`` and reseeds its own ``np.random.default_rng(0)`` on every call.

    Within one call the law is exact; repeated calls repeat the same uniforms.
    Source: class of bug; related to vllm-project/vllm#6038 (spec decode did not respect the
    per-request seed; fixed by PR #6034).
    """
    return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                        generator=np.random.default_rng(0))


# --- lossless but inefficient -------------------------------------------------------------------

def sampled_match(*, draft_token_ids, draft_probs, target_probs, generator):
    """Sampled-verify: draws y_i ~ p_i at every position and accepts x_i iff y_i == x_i; emits y at the stop.

    Exact (every emitted token is a target draw) but accepts with probability sum p*q
    instead of sum min(p, q). Source: llama.cpp ``common/speculative.cpp`` (peers.md section 5);
    lablup/mlxcel PR #992 measured it lossless.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))
    y = np.stack([inverse_cdf(p[:, i], u[:, i]) for i in range(gamma + 1)], axis=1)
    stop = first_rejection(y[:, :gamma] != ids)
    return assemble(ids, stop, y[rows, stop])


def one_hot_rule_on_stochastic_draft(*, draft_token_ids, draft_probs, target_probs, generator):
    """Treats the draft as one-hot: accepts x_i with probability p_i(x_i), recovers from p_i with x_i zeroed.

    Exact for any draft law (P(y) = q(y)p(y) + p(y)(1 - q(y))) but accepts with sum p*q instead of
    sum min(p, q) when q is not one-hot. Source: vLLM v1 no-draft-probs mode (vllm-project/vllm
    PR #40651, issue #40551 on lower acceptance).
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma + 1))
    rejected = u[:, :gamma] >= probs_at(p, ids)

    def zeroed(i, d, t, s):
        final = t[rows, s].copy()
        rec = s < gamma
        final[rows[rec], i[rows[rec], s[rec]]] = 0.0
        return final

    return assemble(ids, *_standard(ids, q, p, u, rejected=rejected, final_rows=zeroed))
