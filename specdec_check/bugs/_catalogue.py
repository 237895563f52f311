"""The catalogue: every buggy verifier, buggy decode loop and exact control, with its provenance."""

from __future__ import annotations

from . import _controls as C
from . import _decode_loops as D
from . import _verifiers as B
from ._entry import NO_REPORT, CatalogueEntry
from ._rules import rule_catalogue

__all__ = ["CONTROLS", "GENERATOR_BUGS", "VERIFIER_BUGS", "CatalogueEntry", "catalogue", "entry"]

def _v(name, sampler, mechanism, source, expected="failure"):
    return CatalogueEntry(name, "verifier", sampler, mechanism, source, expected)


def _g(name, sampler, mechanism, source, expected="failure"):
    return CatalogueEntry(name, "generator", sampler, mechanism, source, expected)


VERIFIER_BUGS = (
    _v("resample_from_target", B.resample_from_target,
       "At a rejection the token is drawn from the target p_s instead of the residual norm(max(0, p_s - q_s)).",
       NO_REPORT),
    _v("residual_swapped", B.residual_swapped,
       "The residual operands are swapped: norm(max(0, q_s - p_s)).",
       NO_REPORT + " (p/q naming conventions differ between peers, peers.md)"),
    _v("ratio_inverted", B.ratio_inverted,
       "The acceptance ratio is inverted: accept iff u < min(1, q(x)/p(x)).", NO_REPORT),
    _v("deterministic_accept", B.deterministic_accept,
       "Accept iff p(x) >= q(x), with no coin flip.", NO_REPORT),
    _v("no_bonus_token", B.no_bonus_token,
       "No bonus token when every draft is accepted (last column -1): lossless, fewer tokens per step.",
       "vllm-project/vllm#4212 (disable_bonus_tokens default; bonus re-enabled by PR #5765)", "inefficiency"),
    _v("bonus_from_wrong_row", B.bonus_from_wrong_row,
       "The bonus token is drawn from p_{g-1} instead of p_g.", NO_REPORT),
    _v("residual_one_position_late", B.residual_one_position_late,
       "The residual at stop s is taken from position s+1.", NO_REPORT),
    _v("residual_from_first_position", B.residual_from_first_position,
       "The residual is always taken from position 0's rows.",
       NO_REPORT + " (peers.md: an early FlashInfer kernel; no issue number found)"),
    _v("residual_at_drafted_token_only", B.residual_at_drafted_token_only,
       "The residual subtracts q only at the drafted token: p_s with p_s(x_s) - q_s(x_s) there.",
       "xLLM-AI/xllm PR #2175"),
    _v("one_uniform_per_row", B.one_uniform_per_row,
       "One uniform per row is reused in the acceptance test at every position.", NO_REPORT),
    _v("unnormalised_inverse_cdf", B.unnormalised_inverse_cdf,
       "The unnormalised residual is sampled by inverse CDF as if it summed to 1; overflow lands on the last token.",
       NO_REPORT + " (FlashInfer PR #5201 tests for normaliser errors)"),
    _v("medusa_typical_acceptance", B.medusa_typical_acceptance,
       "Medusa typical acceptance: accept iff p(x) > min(0.09, 0.3 exp(-H(p))), else the target's argmax (lossy by design).",
       "FasterDecoding/Medusa evaluate_posterior; vLLM v0 TypicalAcceptanceSampler"),
    _v("rows_share_uniforms", B.rows_share_uniforms,
       "Every row uses row 0's uniforms: each row's law is exact, rows are dependent.",
       "NVIDIA/TensorRT-LLM#19487"),
    _v("antithetic_row_pairs", B.antithetic_row_pairs,
       "Row 2k+1 uses 1 - u of row 2k: each row's law is exact, paired rows agree too rarely.",
       NO_REPORT + " (an adversarial try of this project, issue 29)"),
    _v("stratified_rows", B.stratified_rows,
       "The rows of a call take the strata [i/B, (i+1)/B) of each uniform in a random order: each row's law "
       "is exact, rows are dependent.", NO_REPORT + " (an adversarial try of this project, issue 29)"),
    _v("systematic_rows", B.systematic_rows,
       "One uniform per position for the whole call, row pi(i) gets (i + v)/B: each row's law is exact, rows "
       "are dependent.", NO_REPORT + " (an adversarial try of this project, issue 29)"),
    _v("generator_ignored", B.generator_ignored,
       "The generator is ignored and a fresh default_rng(0) is used on every call.",
       NO_REPORT + " (related: vllm-project/vllm#6038, per-request seed not respected)"),
    _v("accepted_count_without_prefix", B.accepted_count_without_prefix,
       "The accepted count is the number of passing tests, not the length of the passing prefix.",
       NO_REPORT + " (FlashInfer's accepted_num counts independent passes by design)"),
    _v("recovered_with_failed_uniform", B.recovered_with_failed_uniform,
       "The recovered token is drawn with the uniform that just failed the acceptance test.",
       "flashinfer-ai/flashinfer PR #424 (\"use unique uniform samples\")"),
    _v("safe_division_epsilon", B.safe_division_epsilon,
       "A 'safe division' epsilon (0.05) in the ratio p/(q + eps) lowers acceptance; the residual is unchanged.",
       NO_REPORT + " (pattern: vectorch-ai/ScaleLLM PR #202)"),
    _v("continue_after_rejection", B.continue_after_rejection,
       "Testing continues after a rejection: every rejected draft is replaced by a residual draw, the bonus always follows.",
       NO_REPORT),
    _v("greedy_recovery", B.greedy_recovery,
       "At a rejection the residual's argmax is emitted instead of a draw.", NO_REPORT),
    _v("target_rows_shifted", B.target_rows_shifted,
       "Position i is tested and recovered against the target row i+1 (off by one).", NO_REPORT),
    _v("sampled_match", B.sampled_match,
       "Sampled-verify: accept iff an independent target draw equals the draft; lossless, but not the standard rule "
       "(it rejects drafts with p >= q), so the checker, which verifies the standard rule, reports it as a failure.",
       "llama.cpp common/speculative.cpp (peers.md 5); lablup/mlxcel PR #992", "failure"),
    _v("one_hot_rule_on_stochastic_draft", B.one_hot_rule_on_stochastic_draft,
       "The draft is treated as one-hot (accept w.p. p(x), recover from p with x zeroed): lossless, acceptance sum p*q, "
       "but not the standard rule (it rejects drafts with p >= q), so it is reported as a failure.",
       "vllm-project/vllm PR #40651 / issue #40551", "failure"),
)

GENERATOR_BUGS = (
    _g("context_keeps_rejected_draft", D.context_keeps_rejected_draft,
       "After a rejection the context keeps the rejected draft where the recovered token was emitted.",
       NO_REPORT + " (cf. openvinotoolkit/openvino.genai#4190)"),
    _g("bonus_dropped_from_context", D.bonus_dropped_from_context,
       "The bonus token is emitted but not appended to the context.",
       NO_REPORT + " (cf. vllm-project/vllm#4212, PR #9730)"),
    _g("stale_draft_context", D.stale_draft_context,
       "The draft's context is not updated with the previous step's last token: exact, lower acceptance.",
       "vllm-project/vllm PR #9730; vllm-project/vllm-metal PR #716", "inefficiency"),
    _g("target_call_per_token", D.target_call_per_token,
       "The target is called once per scored position: exact, but no speedup.", NO_REPORT, "inefficiency"),
    _g("draft_greedy_with_soft_probs", D.draft_greedy_with_soft_probs,
       "Drafts are argmax but the verifier gets the draft's soft law as q.",
       "huggingface/transformers#32867; z-lab/dflash#74"),
    _g("draft_sampled_from_truncated_law", D.draft_sampled_from_truncated_law,
       "Drafts are drawn from the top-2 truncated draft law but the verifier gets the full q.",
       "huggingface/transformers#47932; deepseek-ai/DeepSpec#31"),
)

CONTROLS = (
    _v("control_gumbel_residual", C.gumbel_residual_verify,
       "Ratio test u < min(1, p/q); recovered/bonus token by an exponential race argmax(w / E).",
       "vLLM v1 / gpt-fast sampling style", "pass"),
    _v("control_complement_uniform", C.complement_uniform_verify,
       "Division-free test on the complement (1 - u) q <= p; inverse CDF scanned from the end.",
       "exact by construction", "pass"),
    _v("control_shared_noise", C.shared_noise_verify,
       "One Exp(1) noise vector per row shared by all positions for the single recovered/bonus token.",
       "vLLM v1 sample_recovered_tokens", "pass"),
    _v("control_lazy_uniform", C.lazy_uniform_verify,
       "Uniforms drawn lazily, only for rows still accepting.", "exact by construction", "pass"),
    _v("control_one_hot_aware", C.one_hot_aware_verify,
       "Deterministic-draft rule (accept w.p. p(x)) on one-hot draft rows, the standard rule elsewhere.",
       "EAGLE-2 / SGLang target-only / vLLM no-draft-probs mode", "pass"),
)


def catalogue(kind: str | None = None) -> tuple:
    """Every entry (bugs, then controls, then the entries judged under ``rule="any"``), or only the
    verifier or generator ones."""
    entries = VERIFIER_BUGS + GENERATOR_BUGS + CONTROLS + rule_catalogue()
    if kind is None:
        return entries
    if kind not in ("verifier", "generator"):
        raise ValueError(f"kind must be None, 'verifier' or 'generator'; got {kind!r}.")
    return tuple(e for e in entries if e.kind == kind)


def entry(name: str) -> CatalogueEntry:
    """The catalogue entry called ``name``."""
    for e in catalogue():
        if e.name == name:
            return e
    raise KeyError(f"no catalogue entry {name!r}; known: {', '.join(e.name for e in catalogue())}.")
