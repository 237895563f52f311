"""The ragged verifier kind: the production calling convention, and its scenario loop.

``verify(*, draft_token_ids [T], num_draft_tokens [B], draft_probs [T, V] | None,
target_logits [T + B, V], temperature [B], top_k [B], top_p [B], generator)`` returns int
[B, max(num_draft_tokens) + 1], -1 padded (vLLM v1's ``RejectionSampler`` convention; the layout
is :mod:`specdec_check._ragged_layout`). Greedy requests get exact checks; random requests get the
chain law, efficiency and randomness checks against their processed laws.
"""

from __future__ import annotations

import time
from dataclasses import replace

from .._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED, KINDS
from ..exact._sampling_params import VLLM_V1_PROCESSING, SamplingProcessing
from ..scenarios._ragged import RaggedScenario, default_ragged_battery
from ._kinds import SamplerKind
from ._options import check_options
from ._ragged_block import RaggedBlock
from ._ragged_caller import RaggedCaller
from ._ragged_verdict import classify_ragged, ragged_summary
from ._report import CheckReport
from ._session import run
from .checks import StepCounts
from .checks._efficiency import Efficiency
from .checks._ragged_greedy import GreedyExact
from .checks._ragged_laws import RaggedLaws, RaggedStep, ragged_calls_planned, ragged_reuse
from .checks._ragged_non_finite import RaggedNonFiniteProbe
from .checks._ragged_randomness import RaggedDeterminism, RaggedIndependence

__all__ = ["RAGGED_CHECKS", "RAGGED_KEYWORDS", "RAGGED_VERIFIER", "RULES", "check_ragged_verifier", "ragged_kind"]

RAGGED_KEYWORDS = ("draft_token_ids", "num_draft_tokens", "draft_probs", "target_logits", "temperature", "top_k",
                   "top_p", "generator")

RAGGED_CHECKS = (
    "contract",
    "non_finite",
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

#: Verification rules a ragged verifier can be judged under: "standard" (Leviathan et al.'s Algorithm 1
#: on every random request); "any" (only the law of the completed output counts) is not built yet.
RULES = ("standard", "any")

#: The checks of a ragged scenario, in the order they start and finish: the law tests draw their PIT
#: stream before the non-finite probe calls; efficiency is judged before the randomness checks make
#: their own calls (the order fixes the draws, so a seed replays a run).
SCENARIO_CHECKS = (RaggedLaws, RaggedNonFiniteProbe, GreedyExact, Efficiency, RaggedDeterminism, RaggedIndependence)


def _plan(scenario, options) -> list:
    return [test for check in SCENARIO_CHECKS for test in check.plan(scenario, options)]


def _run_scenario(run, verify) -> None:
    """One scenario: draw a call (served to a few calls at large vocabularies), call, parse per request,
    hand the step to every check."""
    started = time.perf_counter()
    caller, counts = RaggedCaller(run, verify), StepCounts()
    caller.reuse = reuse = ragged_reuse(run.scenario.cells_per_call())
    checks = [check(run, caller, counts) for check in SCENARIO_CHECKS]
    laws = checks[0]
    for check in checks:
        check.start()
    block = None
    for _ in range(ragged_calls_planned(run)):
        if run.stopped:
            break
        if block is None or block.uses >= reuse:
            block = RaggedBlock(caller.draw())
        out, parsed = caller.call(block.draw, run.next_seed())
        if out is None:
            break
        run.samples += out.shape[0]
        step = RaggedStep(block, out, parsed, fresh=block.uses == 0)
        block.uses += 1
        if not all(check.absorb(step) for check in checks) or any(check.rejected_early for check in checks):
            break
    for check in checks:
        check.finish()
    classify_ragged(run, counts, laws.requests)
    run.summary = ragged_summary(run, counts, laws.requests, time.perf_counter() - started)


def _prepare(scenarios, selection):
    return (default_ragged_battery() if scenarios is None else list(scenarios)), "not a verifier check"


RAGGED_VERIFIER = SamplerKind(
    name="ragged_verifier", command=KINDS["ragged_verifier"].command, keywords=RAGGED_KEYWORDS,
    scenario_type=RaggedScenario, default_battery=default_ragged_battery, checks=RAGGED_CHECKS, plan=_plan,
    run_scenario=_run_scenario, prepare=_prepare,
)


def ragged_kind(processing: SamplingProcessing = VLLM_V1_PROCESSING) -> SamplerKind:
    """:data:`RAGGED_VERIFIER` for a declared processing order: its battery uses that order (and
    min-p where it applies it), and a sampler must then take the ``min_p`` keyword."""
    if processing == VLLM_V1_PROCESSING:
        return RAGGED_VERIFIER
    keywords = RAGGED_KEYWORDS[:-1] + (("min_p",) if processing.uses_min_p else ()) + ("generator",)

    def prepare(scenarios, selection):
        return (default_ragged_battery(processing) if scenarios is None else list(scenarios)), "not a verifier check"

    return replace(RAGGED_VERIFIER, keywords=keywords, default_battery=lambda: default_ragged_battery(processing),
                   prepare=prepare)


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
                          alpha=DEFAULT_ALPHA, rule="standard", progress=None, checks=None, device=None, dtype=None,
                          processing=None, strict=False, name=None, monitor=None, executor=None) -> CheckReport:
    """Check a verifier in the production calling convention (vLLM v1 ``RejectionSampler`` style).

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
    "standard" (the only one built; "any" raises ``NotImplementedError``). ``alpha`` is the
    false-alarm budget of the whole call. As for :func:`~specdec_check.checker.check_verifier`: the
    verdict is "passed" only when every scenario with law tests reached the mode's design TV
    (otherwise "inconclusive"); a NaN row of logits turned into tokens is a warning (a failure with
    ``strict``); ``name`` and ``monitor`` are the supervised command line's. ``executor``: where the
    scenarios run, as for :func:`~specdec_check.checker.check_verifier`.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}; got {rule!r}.")
    if rule == "any":
        raise NotImplementedError("rule='any' (the rule-agnostic exactness test) is not built for ragged verifiers "
                                  "yet; check_ragged_verifier judges rule='standard' (Leviathan et al.'s Algorithm 1 "
                                  "on every random request).")
    processing = _processing(processing, scenarios)
    options = check_options(RAGGED_CHECKS, mode=mode, backend=backend, device=device, dtype=dtype, seed=seed,
                            alpha=alpha, checks=checks, progress=progress, strict=strict, name=name, monitor=monitor,
                            executor=executor)
    if options.backend.name not in ("numpy", "torch"):
        raise ValueError(f"the ragged checker runs on the numpy and torch backends; got {options.backend.name!r}.")
    return run(ragged_kind(processing), verify, scenarios, options)
