"""Verifiers judged under ``rule="any"``: lossless non-standard rules, buggy block verifiers and lossy rules.

These entries are kept out of :func:`~specdec_check.bugs.catalogue` (and so out of the mutation
score) until the checker judges ``rule="any"``; :func:`rule_catalogue` lists them. Each entry's
exact per-row step law is :func:`rule_step_law`, so the exact total-variation distance of its
completed output from the target (:func:`rule_completed_tv`) is known on any small model: 0 for
the lossless controls, and for the lossy rules what their knobs cost.

Notation: p = target, q = draft, x_i the i-th drafted token, w_i / h_i / tau the weights, stop
probabilities and accepted count of block verification (Sun, Mendlovic, Leviathan, Aharoni,
Beirami, Ro, Suresh, "Block Verification Accelerates Speculative Decoding", ICLR 2025, Algorithm 2).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import exact
from ..samplers import block_verify
from . import _verifiers as B
from ._entry import CatalogueEntry
from ._common import as_arrays, assemble, first_rejection, inverse_cdf, probs_at

__all__ = [
    "block_final_from_target_row",
    "block_residual_wrong_position",
    "block_unweighted_residual",
    "block_weights_uncapped",
    "medusa_typical_rule",
    "medusa_typical_sampled_rule",
    "medusa_typical_tv",
    "medusa_typical_verifier",
    "rule_catalogue",
    "rule_completed_tv",
    "rule_entry",
    "rule_scenario_tv",
    "rule_step_law",
    "sglang_threshold_acc_rule",
    "sglang_threshold_single_rule",
    "sglang_threshold_tv",
    "sglang_threshold_verifier",
]


# --- block verification with one thing changed -------------------------------------------------

def _weights(ids, q, p, *, cap):
    """w_0..w_gamma [B, gamma+1]; uncapped: the running product of p/q without min(., 1)."""
    batch, gamma = ids.shape
    p_at, q_at = probs_at(p, ids), probs_at(q, ids)
    weights = np.ones((batch, gamma + 1))
    for i in range(1, gamma + 1):
        prev, pi, qi = weights[:, i - 1], p_at[:, i - 1], q_at[:, i - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(qi > 0, prev * pi / np.where(qi > 0, qi, 1.0), np.where((pi > 0) & (prev > 0), 1.0, 0.0))
        weights[:, i] = np.minimum(scaled, 1.0) if cap else scaled
    return weights


def _stop_probs(weights, q, p):
    """h_1..h_gamma [B, gamma]; a non-positive denominator r_i + 1 - w_i gives h_i = 1 (vLLM's fallback)."""
    gamma = q.shape[1]
    stop = np.empty((q.shape[0], gamma))
    if gamma == 0:
        return stop
    stop[:, gamma - 1] = weights[:, gamma]
    if gamma > 1:
        mass = np.maximum(weights[:, 1:gamma, None] * p[:, 1:gamma] - q[:, 1:gamma], 0.0).sum(axis=2)
        denominator = mass + 1.0 - weights[:, 1:gamma]
        with np.errstate(divide="ignore", invalid="ignore"):
            stop[:, : gamma - 1] = np.where(denominator > 0, mass / np.where(denominator > 0, denominator, 1.0), 1.0)
    return stop


def _final_laws(weights, q, p, tau, *, final):
    """Unnormalised law of the final token after tau accepted drafts, [B, V]."""
    batch, gamma = q.shape[0], q.shape[1]
    rows = np.arange(batch)
    law = p[rows, tau].copy()  # the bonus row p_{gamma+1} when tau = gamma, in every variant
    early = np.flatnonzero(tau < gamma)
    t = tau[early]
    if final == "weighted":  # Algorithm 2: max(w_tau p_{tau+1} - q_{tau+1}, 0)
        law[early] = np.maximum(weights[early, t, None] * p[early, t] - q[early, t], 0.0)
    elif final == "previous_position":  # the rows of the last accepted position instead of the next one
        s = np.maximum(t - 1, 0)
        law[early] = np.maximum(weights[early, t, None] * p[early, s] - q[early, s], 0.0)
    elif final == "unweighted":  # the standard residual max(p_{tau+1} - q_{tau+1}, 0)
        law[early] = np.maximum(p[early, t] - q[early, t], 0.0)
    elif final != "target":  # "target": p_{tau+1} itself
        raise ValueError(f"unknown final law {final!r}.")
    return law


def _block_variant(draft_token_ids, draft_probs, target_probs, generator, *, cap=True, final="weighted"):
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, gamma + 1))
    weights = _weights(ids, q, p, cap=cap)
    passed = u[:, :gamma] < _stop_probs(weights, q, p)
    tau = np.where(passed.any(axis=1), gamma - passed[:, ::-1].argmax(axis=1), 0) if gamma else np.zeros(batch, int)
    token = inverse_cdf(_final_laws(weights, q, p, tau, final=final), u[:, gamma])
    return assemble(ids, tau, token)


def _block_variant_law(draft_token_ids, draft_probs, target_probs, *, cap=True, final="weighted"):
    """Exact step law [B, gamma+1, V] of :func:`_block_variant` given the drafted path.

    ``P(tau = k) = h_k prod_{j>k} (1 - min(h_j, 1))`` clipped to [0, 1] as the strict coin test
    ``eta < h`` reads it, then the final law normalised (a law without mass gives V - 1, as
    :func:`~specdec_check.bugs._common.inverse_cdf` does).
    """
    ids = np.asarray(draft_token_ids).astype(np.int64)
    q, p = np.asarray(draft_probs, dtype=np.float64), np.asarray(target_probs, dtype=np.float64)
    batch, gamma = ids.shape
    vocab = p.shape[2]
    weights = _weights(ids, q, p, cap=cap)
    stop = np.clip(_stop_probs(weights, q, p), 0.0, 1.0)  # P(eta < h)
    stop = np.concatenate([np.ones((batch, 1)), stop], axis=1)  # h_0 = 1: tau = 0 when no coin passes
    after = np.ones((batch, gamma + 2))
    after[:, : gamma + 1] = np.cumprod((1.0 - stop)[:, ::-1], axis=1)[:, ::-1]
    count = stop * after[:, 1:]  # [B, gamma+1]
    law = np.zeros((batch, gamma + 1, vocab))
    for k in range(gamma + 1):
        tau = np.full(batch, k)
        row_law = _final_laws(weights, q, p, tau, final=final)
        mass = row_law.sum(axis=1, keepdims=True)
        row_law = np.divide(row_law, mass, out=np.zeros_like(row_law), where=mass > 0)
        row_law[mass[:, 0] <= 0, vocab - 1] = 1.0
        law[:, k] = count[:, k, None] * row_law
    return law


def block_residual_wrong_position(*, draft_token_ids, draft_probs, target_probs, generator):
    """Block verification whose final token, after tau < gamma accepted drafts, comes from
    ``max(w_tau p_tau - q_tau, 0)`` (the rows of the last accepted position, position 1 when tau = 0)
    instead of ``max(w_tau p_{tau+1} - q_{tau+1}, 0)``: an off-by-one between the accepted count
    and the position index. Class of bug (cf. vLLM's block kernel, which reads
    ``cumulative_log_p_ptr + resample_token_idx - 1`` for w_tau beside row ``resample_token_idx``).
    Source: class of bug, no specific report (a variant of Sun et al., ICLR 2025, Algorithm 2).
    """
    return _block_variant(draft_token_ids, draft_probs, target_probs, generator, final="previous_position")


def block_weights_uncapped(*, draft_token_ids, draft_probs, target_probs, generator):
    """Block verification with weights ``w_i = w_{i-1} p_i(x_i) / q_i(x_i)`` not capped at 1, so
    ``h_gamma = w_gamma`` can exceed 1 and a block whose early ratios are large is always accepted.
    The cap is the ``min(., 0)`` of vLLM's cumulative log ratio
    (``log_p = tl.minimum(log_p + (target_logprob - draft_logprob), 0.0)`` in
    vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py, vllm-project/vllm PR #46781);
    without it the rule is lossy.
    Source: class of bug, no specific report (a variant of Sun et al., ICLR 2025, Algorithm 2).
    """
    return _block_variant(draft_token_ids, draft_probs, target_probs, generator, cap=False)


def block_final_from_target_row(*, draft_token_ids, draft_probs, target_probs, generator):
    """Block verification whose final token after tau < gamma accepted drafts is drawn from the
    target row p_{tau+1} instead of the weighted residual ``norm(max(w_tau p_{tau+1} - q_{tau+1}, 0))``
    (the classic "resample from the target" bug, here in a block verifier). Class of bug.
    Source: class of bug, no specific report (a variant of Sun et al., ICLR 2025, Algorithm 2).
    """
    return _block_variant(draft_token_ids, draft_probs, target_probs, generator, final="target")


def block_unweighted_residual(*, draft_token_ids, draft_probs, target_probs, generator):
    """Block verification whose final token is drawn from the standard residual
    ``norm(max(p_{tau+1} - q_{tau+1}, 0))``, without the weight w_tau. Source: vllm-project/vllm-ascend
    issue #7807 ("sample_recovered_tokens draws tokens from the same distribution, regardless of
    whether block_verify is enabled"), fixed by PR #7808.
    """
    return _block_variant(draft_token_ids, draft_probs, target_probs, generator, final="unweighted")


# --- lossy rules with their knobs ---------------------------------------------------------------

def medusa_typical_verifier(*, posterior_threshold=0.09, posterior_alpha=0.3, fast=True):
    """A chain verifier with Medusa's typical acceptance at the given knobs; its exact law is the
    verifier's ``step_law`` attribute (:func:`specdec_check.exact.medusa_typical_path_step_law`).

    Draft x_i passes iff ``p_i(x_i) > min(posterior_threshold, posterior_alpha * exp(-H(p_i)))``;
    the accepted count is the number of leading passes; the next token is the target's argmax at
    position tau + 1 when ``fast``, else a draw from the target row truncated to the same threshold.
    Lossy by design. Source: FasterDecoding/Medusa @ e2a5d20, ``medusa/model/utils.py``
    (``evaluate_posterior``, ``generate_candidates``, ``get_typical_one_token``) with
    ``medusa_generate``'s defaults (posterior_threshold=0.09, posterior_alpha=0.3, fast=True).
    """
    step_law = functools.partial(exact.medusa_typical_path_step_law, posterior_threshold=posterior_threshold,
                                 posterior_alpha=posterior_alpha, fast=fast)
    exact.medusa_thresholds(np.ones((1, 1)), posterior_threshold=posterior_threshold,
                            posterior_alpha=posterior_alpha)  # validates the knobs now

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
        batch, gamma = ids.shape
        rows = np.arange(batch)
        u = generator.random(batch)
        thresholds = exact.medusa_thresholds(p, posterior_threshold=posterior_threshold,
                                             posterior_alpha=posterior_alpha)
        tau = first_rejection(~(probs_at(p, ids) > thresholds[:, :gamma]))
        final_row = p[rows, tau]
        if fast:
            token = final_row.argmax(axis=1).astype(np.int64)
        else:
            token = inverse_cdf(np.where(final_row >= thresholds[rows, tau][:, None], final_row, 0.0), u)
        return assemble(ids, tau, token)

    verify.__name__ = verify.__qualname__ = "medusa_typical_verify"
    verify.__doc__ = (f"Medusa's typical acceptance (posterior_threshold={posterior_threshold}, posterior_alpha="
                      f"{posterior_alpha}, fast={fast}): lossy by design. Source: FasterDecoding/Medusa @ e2a5d20, "
                      "medusa/model/utils.py evaluate_posterior, generate_candidates, get_typical_one_token.")
    verify.step_law = step_law
    verify.knobs = {"posterior_threshold": posterior_threshold, "posterior_alpha": posterior_alpha, "fast": fast}
    return verify


def sglang_threshold_verifier(*, threshold_single=1.0, threshold_acc=1.0):
    """A chain verifier with SGLang's target-only acceptance at the given thresholds; its exact law is
    the verifier's ``step_law`` attribute (:func:`specdec_check.exact.sglang_threshold_path_step_law`).

    Draft x_i is accepted iff ``coin_i <= p_i(x_i) / threshold_acc`` or ``p_i(x_i) >= threshold_single``
    (coin_i uniform in (0, 1]); at the first rejection the token comes from p_i with x_i removed,
    renormalised; the bonus from p_{gamma+1}. Thresholds of 1 (SGLang's defaults) give the one-hot
    rule, lossless; below 1 the rule is lossy. Source: sgl-project/sglang
    ``sgl-kernel/csrc/speculative/speculative_sampling.cuh`` (``TreeSpeculativeSamplingTargetOnly``),
    ``--speculative-accept-threshold-single`` / ``--speculative-accept-threshold-acc``.
    """
    step_law = functools.partial(exact.sglang_threshold_path_step_law, threshold_single=threshold_single,
                                 threshold_acc=threshold_acc)
    exact.sglang_threshold_path_step_law(np.zeros((1, 0), dtype=np.int64), np.ones((1, 0, 1)), np.ones((1, 1, 1)),
                                         threshold_single=threshold_single, threshold_acc=threshold_acc)  # validates

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
        batch, gamma = ids.shape
        rows = np.arange(batch)
        u = generator.random((batch, gamma + 1))
        coin = 1.0 - u[:, :gamma]  # in (0, 1]: P(coin <= c) = min(c, 1), as the kernel's continuous model
        p_at = probs_at(p, ids)
        accepted = (coin <= p_at / threshold_acc) | (p_at >= threshold_single)
        tau = first_rejection(~accepted)
        final = p[rows, tau].copy()
        early = np.flatnonzero(tau < gamma)
        final[early, ids[early, tau[early]]] = 0.0
        return assemble(ids, tau, inverse_cdf(final, u[:, gamma]))

    verify.__name__ = verify.__qualname__ = "sglang_threshold_verify"
    verify.__doc__ = (f"SGLang's target-only acceptance (threshold_single={threshold_single}, threshold_acc="
                      f"{threshold_acc}): lossy below 1. Source: sgl-project/sglang sgl-kernel/csrc/speculative/"
                      "speculative_sampling.cuh TreeSpeculativeSamplingTargetOnly.")
    verify.step_law = step_law
    verify.knobs = {"threshold_single": threshold_single, "threshold_acc": threshold_acc}
    return verify


#: Medusa typical acceptance at ``medusa_generate``'s defaults (argmax next token).
medusa_typical_rule = medusa_typical_verifier()
#: Medusa typical acceptance with the next token drawn by typical sampling (``fast=False``).
medusa_typical_sampled_rule = medusa_typical_verifier(fast=False)
#: SGLang target-only acceptance with ``threshold_single = 0.5``: any draft the target gives 1/2 passes.
sglang_threshold_single_rule = sglang_threshold_verifier(threshold_single=0.5)
#: SGLang target-only acceptance with ``threshold_acc = 0.5``: drafts pass with probability min(1, 2 p(x)).
sglang_threshold_acc_rule = sglang_threshold_verifier(threshold_acc=0.5)


def medusa_typical_tv(*, target=None, draft=None, gamma=None, prompt=None, target_probs=None, draft_probs=None,
                      posterior_threshold=0.09, posterior_alpha=0.3, fast=True):
    """Exact TV of the completed output of Medusa typical acceptance from the target
    (:func:`specdec_check.exact.completed_law_tv` of :func:`specdec_check.exact.medusa_typical_path_step_law`
    at these knobs), on models (``target``, ``draft``, ``gamma``, ``prompt``) or fixed rows."""
    law = medusa_typical_verifier(posterior_threshold=posterior_threshold, posterior_alpha=posterior_alpha,
                                  fast=fast).step_law
    return exact.completed_law_tv(law, target=target, draft=draft, gamma=gamma, prompt=prompt,
                                  target_probs=target_probs, draft_probs=draft_probs)


def sglang_threshold_tv(*, target=None, draft=None, gamma=None, prompt=None, target_probs=None, draft_probs=None,
                        threshold_single=1.0, threshold_acc=1.0):
    """Exact TV of the completed output of SGLang's thresholded target-only acceptance from the target
    (:func:`specdec_check.exact.completed_law_tv` of :func:`specdec_check.exact.sglang_threshold_path_step_law`
    at these thresholds), on models (``target``, ``draft``, ``gamma``, ``prompt``) or fixed rows."""
    law = sglang_threshold_verifier(threshold_single=threshold_single, threshold_acc=threshold_acc).step_law
    return exact.completed_law_tv(law, target=target, draft=draft, gamma=gamma, prompt=prompt,
                                  target_probs=target_probs, draft_probs=draft_probs)


# --- the entries --------------------------------------------------------------------------------

_LLAMA_CPP = ("ggml-org/llama.cpp common/sampling.cpp common_sampler_sample_and_accept_n (samples the target at each "
              "position, keeps the draft while the sample equals it, emits the first mismatching sample)")


def _any(name, sampler, mechanism, source, expected):
    return CatalogueEntry(name, "verifier", sampler, mechanism, source, expected, rule="any")


_ENTRIES = (
    _any("control_block_verification", block_verify,
         "Block verification (Algorithm 2): lossless and optimal in expected accepted drafts, but it rejects drafts "
         "with p >= q, so under rule='standard' it fails with an impossible event.",
         "Sun et al., ICLR 2025, Algorithm 2; vllm-project/vllm PR #46781 (rejection_sampler_utils.py)", "pass"),
    _any("control_sampled_match", B.sampled_match,
         "Sampled match: y_i ~ p_i at every position, accept while y_i == x_i, emit the first mismatching draw; every "
         "emitted token is a target draw (lossless), acceptance sum p q instead of sum min(p, q): lossless but "
         "inefficient against the standard rule.",
         _LLAMA_CPP, "inefficiency"),
    _any("control_one_hot_rule", B.one_hot_rule_on_stochastic_draft,
         "One-hot rule on a stochastic draft: accept x w.p. p(x), on rejection sample p with x removed and "
         "renormalised; lossless for any draft (the same law as sampled match), but it accepts less than the "
         "standard rule on a stochastic draft.",
         "vllm-project/vllm PR #40651 / issue #40551; SGLang target-only verification", "inefficiency"),
    _any("block_residual_wrong_position", block_residual_wrong_position,
         "Block verification whose final token comes from max(w_tau p_tau - q_tau, 0), the last accepted position's "
         "rows, instead of position tau+1.", "class of bug, no specific report", "failure"),
    _any("block_weights_uncapped", block_weights_uncapped,
         "Block verification with weights w_i = w_{i-1} p/q not capped at 1 (the min(., 0) of vLLM's cumulative log "
         "ratio dropped).", "class of bug (cf. vllm-project/vllm PR #46781's cap)", "failure"),
    _any("block_final_from_target_row", block_final_from_target_row,
         "Block verification whose final token after a rejection is drawn from p_{tau+1} instead of the weighted "
         "residual norm(max(w_tau p_{tau+1} - q_{tau+1}, 0)).", "class of bug, no specific report", "failure"),
    _any("block_unweighted_residual", block_unweighted_residual,
         "Block verification whose final token comes from the standard residual norm(max(p - q, 0)) without the "
         "weight w_tau.", "vllm-project/vllm-ascend issue #7807, PR #7808", "failure"),
    _any("medusa_typical_rule", medusa_typical_rule,
         "Medusa typical acceptance (posterior_threshold=0.09, posterior_alpha=0.3, fast): accept x iff "
         "p(x) > min(0.09, 0.3 exp(-H(p))), next token the target's argmax; lossy by design.",
         "FasterDecoding/Medusa @ e2a5d20 medusa/model/utils.py evaluate_posterior, generate_candidates", "failure"),
    _any("medusa_typical_sampled_rule", medusa_typical_sampled_rule,
         "Medusa typical acceptance with fast=False: the next token is drawn from the target row truncated to "
         "p >= min(0.09, 0.3 exp(-H(p))); lossy by design.",
         "FasterDecoding/Medusa @ e2a5d20 medusa/model/utils.py get_typical_one_token", "failure"),
    _any("sglang_threshold_single", sglang_threshold_single_rule,
         "SGLang target-only acceptance with threshold_single=0.5: a draft with p(x) >= 0.5 is always accepted "
         "(else w.p. p(x)); recovery from p with x removed. Lossy below 1.",
         "sgl-project/sglang sgl-kernel/csrc/speculative/speculative_sampling.cuh TreeSpeculativeSamplingTargetOnly",
         "failure"),
    _any("sglang_threshold_acc", sglang_threshold_acc_rule,
         "SGLang target-only acceptance with threshold_acc=0.5: a draft is accepted iff coin <= p(x) / 0.5; recovery "
         "from p with x removed. Lossy below 1.",
         "sgl-project/sglang sgl-kernel/csrc/speculative/speculative_sampling.cuh TreeSpeculativeSamplingTargetOnly",
         "failure"),
)

_STEP_LAWS = {
    "control_block_verification": exact.block_path_step_law,
    "control_sampled_match": exact.one_hot_path_step_law,
    "control_one_hot_rule": exact.one_hot_path_step_law,
    "block_residual_wrong_position": functools.partial(_block_variant_law, final="previous_position"),
    "block_weights_uncapped": functools.partial(_block_variant_law, cap=False),
    "block_final_from_target_row": functools.partial(_block_variant_law, final="target"),
    "block_unweighted_residual": functools.partial(_block_variant_law, final="unweighted"),
    "medusa_typical_rule": medusa_typical_rule.step_law,
    "medusa_typical_sampled_rule": medusa_typical_sampled_rule.step_law,
    "sglang_threshold_single": sglang_threshold_single_rule.step_law,
    "sglang_threshold_acc": sglang_threshold_acc_rule.step_law,
}


def rule_catalogue() -> tuple:
    """The verifier entries judged under ``rule="any"`` (also in :func:`catalogue`): lossless
    non-standard controls (expected "pass"), buggy block verifiers and lossy rules (expected "failure")."""
    return _ENTRIES


def rule_entry(name: str) -> CatalogueEntry:
    """The :func:`rule_catalogue` entry called ``name``."""
    for e in _ENTRIES:
        if e.name == name:
            return e
    raise KeyError(f"no rule-catalogue entry {name!r}; known: {', '.join(e.name for e in _ENTRIES)}.")


def rule_step_law(name: str):
    """The exact per-row step law of the :func:`rule_catalogue` entry ``name``:
    ``law(draft_token_ids, draft_probs, target_probs) -> float64 [B, gamma+1, V]``,
    ``law[b, k, y] = P(k drafts accepted, final token y | drafted path)``."""
    rule_entry(name)
    return _STEP_LAWS[name]


def rule_completed_tv(name: str, *, target=None, draft=None, gamma=None, prompt=None, target_probs=None,
                      draft_probs=None):
    """Exact TV distance of the completed output of the :func:`rule_catalogue` entry ``name`` from the
    target's joint law of gamma + 1 tokens (:func:`specdec_check.exact.completed_law_tv`): 0 for the
    lossless controls; on models (``target``, ``draft``, ``gamma``, ``prompt``) or fixed rows."""
    return exact.completed_law_tv(rule_step_law(name), target=target, draft=draft, gamma=gamma, prompt=prompt,
                                  target_probs=target_probs, draft_probs=draft_probs)


def rule_scenario_tv(name: str, scenario) -> float:
    """Exact TV of the :func:`rule_catalogue` entry ``name`` on a verifier scenario: the mean over the
    scenario's prompt pool of the completed-law TV (:func:`specdec_check.exact.pooled_completed_law_tv`;
    contexts are drawn uniformly from the pool), or the mean over its fixed rows. Raises
    ``ValueError`` when the completed law is too large to enumerate (V^(gamma+1) beyond about 10^7)."""
    step_law = rule_step_law(name)
    if scenario.fixed_target_probs is not None:
        return float(np.mean(exact.completed_law_tv(step_law, target_probs=scenario.fixed_target_probs,
                                                    draft_probs=scenario.fixed_draft_probs)))
    return exact.pooled_completed_law_tv(step_law, target=scenario.target, draft=scenario.draft, gamma=scenario.gamma,
                                         prompts=scenario.prompts())
