"""The ragged verifier kind: the production calling convention, and its scenario loop.

``verify(*, draft_token_ids [T], num_draft_tokens [B], draft_probs [T, V] | None,
target_logits [T + B, V], temperature [B], top_k [B], top_p [B], generator)`` returns int
[B, max(num_draft_tokens) + 1], -1 padded (vLLM v1's ``RejectionSampler`` convention; the layout
is :mod:`specdec_check._ragged_layout`). Greedy requests get exact checks; random requests get the
chain law, efficiency and randomness checks against their processed laws.
"""

from __future__ import annotations

from ..._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_RULE, DEFAULT_SEED, RULES
from ...exact._sampling_params import VLLM_V1_PROCESSING, SamplingProcessing
from ...scenarios._ragged import RaggedScenario, default_ragged_battery
from ..chain.efficiency import Efficiency
from ..checks.base import Classify
from ..checks.probes import NonFiniteProbe, ZeroCoinProbe
from ..checks.randomness import Determinism
from ..core.api import run_check
from ..core.kind import Kind
from ..core.report import CheckReport
from ..core.verdict import classify
from .block import RaggedBlock
from .caller import RaggedCaller
from .greedy import GreedyExact
from .laws import RaggedCounts, RaggedLaws, RaggedStep, ragged_calls_planned, ragged_reuse
from .randomness import RaggedIndependence
from .verdict import RAGGED_OUTPUT_LAW_CHECKS, RaggedWording, ragged_summary

__all__ = ["RAGGED_CHECKS", "RAGGED_KEYWORDS", "RAGGED_VERIFIER", "RaggedKind", "check_ragged_verifier", "ragged_kind"]

RAGGED_KEYWORDS = ("draft_token_ids", "num_draft_tokens", "draft_probs", "target_logits", "temperature", "top_k",
                   "top_p", "generator")

RAGGED_CHECKS = (
    "contract",
    "non_finite",
    "zero_coins",
    "impossible",
    "greedy",
    "first_token",
    "stop_conditional",
    "accepted_count",
    "step_law",
    "efficiency",
    "determinism",
    "independence",
)

#: The checks of a ragged scenario, in the order they start and finish: the law tests draw their PIT
#: stream before the probes call; efficiency is judged before the randomness checks make their own
#: calls (the order fixes the draws, so a seed replays a run); the rejected tests become findings last.
SCENARIO_CHECKS = (RaggedLaws, NonFiniteProbe, ZeroCoinProbe, GreedyExact, Efficiency, Determinism, RaggedIndependence,
                   Classify)
WORDING = RaggedWording()


class RaggedKind(Kind):
    """The production verifier (logits in, ragged batches: vLLM v1's ``RejectionSampler`` convention) for a
    declared processing order; a sampler whose processing applies min-p also takes ``min_p``."""

    name = "ragged_verifier"
    role = "verifier"
    scenario_type = RaggedScenario
    checks = RAGGED_CHECKS
    rules = RULES[:1]  # the rule-agnostic completion is not built for this layout yet
    output_law_checks = RAGGED_OUTPUT_LAW_CHECKS

    def __init__(self, processing: SamplingProcessing = VLLM_V1_PROCESSING):
        self.processing = processing
        self.keywords = RAGGED_KEYWORDS[:-1] + (("min_p",) if processing.uses_min_p else ()) + ("generator",)

    def arguments(self) -> tuple:
        return (self.processing,)

    def default_battery(self) -> list:
        return default_ragged_battery(self.processing)

    def validate(self, options) -> None:
        if options.backend.name not in ("numpy", "torch"):
            raise ValueError(f"the ragged checker runs on the numpy and torch backends; got {options.backend.name!r}.")

    def check_classes(self, ctx) -> tuple:
        return SCENARIO_CHECKS

    def check_classes_for(self, scenario, options) -> tuple:
        return SCENARIO_CHECKS

    def degenerate(self, scenario):
        """No request with drafts, or V = 1: outside the contract's main domain (a crash there is robustness)."""
        if scenario.max_draft_tokens == 0 or scenario.vocab_size == 1:
            return f"max {scenario.max_draft_tokens} draft(s), V = {scenario.vocab_size}"
        return None

    def caller(self, ctx, sampler) -> RaggedCaller:
        return RaggedCaller(ctx, sampler, reuse=ragged_reuse(ctx.scenario.cells_per_call()),
                            degenerate=self.degenerate(ctx.scenario))

    def counts(self, ctx) -> RaggedCounts:
        return RaggedCounts(ctx.scenario.num_requests)

    def law_budget(self, ctx, checks) -> tuple:
        return ragged_calls_planned(ctx), ragged_reuse(ctx.scenario.cells_per_call())

    def feed(self, ctx, caller, calls: int, reuse: int):
        """A drawn call serves ``reuse`` calls (at large vocabularies drawing costs more than calling)."""
        block = None
        for _ in range(calls):
            if ctx.stopped:
                return
            if block is None or block.uses >= reuse:
                block = RaggedBlock(caller.draw())
            yield block, [block.draw]

    def step(self, ctx, caller, counts, block, outputs):
        out, parsed = outputs[0]
        step = RaggedStep(block, out, parsed, fresh=block.uses == 0)
        block.uses += 1
        return step

    def classify(self, ctx, counts) -> None:
        classify(ctx, counts, WORDING)

    def summary(self, ctx, counts, elapsed: float):
        return ragged_summary(ctx, counts, counts.requests, elapsed)


#: The ragged verifier kind under vLLM v1's processing order.
RAGGED_VERIFIER = RaggedKind()


def ragged_kind(processing: SamplingProcessing = VLLM_V1_PROCESSING) -> RaggedKind:
    """:data:`RAGGED_VERIFIER` for a declared processing order: its battery uses that order (and
    min-p where it applies it), and a sampler must then take the ``min_p`` keyword."""
    return RAGGED_VERIFIER if processing == VLLM_V1_PROCESSING else RaggedKind(processing)


def _processing(processing, scenarios):
    if processing is not None and not isinstance(processing, SamplingProcessing):
        raise TypeError(f"processing must be a SamplingProcessing (e.g. SamplingProcessing(order=('temperature', "
                        f"'top_p', 'top_k'))); got {type(processing).__name__}.")
    if scenarios is None:
        return processing or VLLM_V1_PROCESSING
    scenarios = list(scenarios)
    declared = {s.processing for s in scenarios if isinstance(s, RaggedScenario)}
    if processing is None:
        if len(declared) > 1:
            raise ValueError("the scenarios declare different processing orders; check them in separate runs.")
        return declared.pop() if declared else VLLM_V1_PROCESSING
    if declared - {processing}:
        raise ValueError(f"processing {processing.describe()} differs from the scenarios' "
                         f"{', '.join(sorted(p.describe() for p in declared))}; build the scenarios with it.")
    return processing


def check_ragged_verifier(verify, *, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND, seed=DEFAULT_SEED,
                          alpha=DEFAULT_ALPHA, rule=DEFAULT_RULE, progress=None, checks=None, device=None, dtype=None,
                          processing=None, strict=False, name=None, monitor=None, executor=None) -> CheckReport:
    """Check a production verifier: logits in, ragged batches of requests with their own sampling parameters
    (vLLM v1's ``RejectionSampler`` calling convention).

    ``verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
    top_p, generator)``: drafts int [T] concatenated in request order; ``num_draft_tokens`` int [B]
    (0 allowed); ``draft_probs`` float [T, V] or None (one-hot drafts); ``target_logits`` float
    [T + B, V] (each request's drafts' rows then its bonus row); ``temperature`` [B] (0 = greedy),
    ``top_k`` [B] (0 = off), ``top_p`` [B] (1.0 = off); returns int [B, max(num_draft_tokens) + 1],
    -1 padded. A random request's target law is its logits processed by ``processing`` (default
    vLLM v1's: ``/ temperature``, top-k, top-p on the top-k law, renormalised; see
    :class:`~specdec_check.exact.SamplingProcessing`); declare another order, or min-p (the sampler
    then also takes ``min_p`` [B]), with ``processing``.

    Each scenario (default :func:`~specdec_check.scenarios.default_ragged_battery`) mixes greedy
    and random requests. Greedy requests are compared exactly with greedy decoding's output; the
    random requests' outputs are tested as chain verifier rows against their processed laws
    (first token, final token given the stop, accepted count, (k, y) given the path; Leviathan et
    al. 2023, Algorithm 1 and Theorem 3.5), the acceptance count against the optimum
    ``sum min(p, q)``, and the randomness for determinism and independence across calls and
    requests. Findings name the request (index and parameters) and what differs. ``rule``:
    "standard" (the only one built; "any" is a ``ValueError`` saying so). ``alpha`` is the
    false-alarm budget of the whole call. As for :func:`~specdec_check.checker.check_verifier`: the
    verdict is "passed" only when every scenario with law tests reached the mode's design TV
    (otherwise "inconclusive"); a NaN row of logits turned into tokens is a warning (a failure with
    ``strict``); ``name`` and ``monitor`` are the supervised command line's. ``executor``: where the
    scenarios run, as for :func:`~specdec_check.checker.check_verifier`.
    """
    keywords = locals()
    kind = ragged_kind(_processing(processing, scenarios))
    return run_check(kind, verify, keywords)
