"""The generator kind: check_generator and the run of one decode-loop scenario."""

from __future__ import annotations

import time

from .._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED, KINDS
from ..scenarios import GeneratorScenario, default_generator_battery
from ._caller import GeneratorCaller
from ._callables import GENERATOR_KEYWORDS
from ._kinds import SamplerKind
from ._options import check_options
from ._report import CheckReport, ScenarioSummary
from ._session import run
from .checks._generator_laws import GeneratorLaws
from .checks._target_calls import TargetCalls

__all__ = ["GENERATOR", "GENERATOR_CHECKS", "check_generator"]

GENERATOR_CHECKS = ("contract", "joint", "marginals", "pairs", "target_calls")


def _plan(scenario, options) -> list:
    return GeneratorLaws.plan(scenario, options) + TargetCalls.plan(scenario, options)


def _run_scenario(run, generate) -> None:
    """One scenario: calls of rows_per_call rows, each from a prompt chosen at random; then the
    single-row runs of the target-call test."""
    started = time.perf_counter()
    s = run.scenario
    caller = GeneratorCaller(run, generate)
    laws, target_calls = GeneratorLaws(run), TargetCalls(run, caller)
    laws.start()
    calls = laws.calls_planned()
    for _ in range(calls):
        index = run.rng.integers(0, s.prompts.shape[0], size=s.rows_per_call)
        out, _target = caller.run_once(index)
        if out is None:
            break
        run.samples += out.shape[0]
        laws.add(index, out)
        if laws.rejected_early:
            break
    laws.finish()
    target_calls.finish()
    run.summary = ScenarioSummary(
        name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.gamma, rows_per_call=s.rows_per_call,
        calls=run.calls, samples=run.samples, target_calls_per_token=target_calls.calls_per_token,
        elapsed_s=time.perf_counter() - started, stopped_early=run.stopped,
    )


def _prepare(scenarios, selection):
    return (default_generator_battery() if scenarios is None else list(scenarios)), "not a verifier check"


GENERATOR = SamplerKind(
    name="generator", command=KINDS["generator"].command, keywords=GENERATOR_KEYWORDS,
    scenario_type=GeneratorScenario, default_battery=default_generator_battery, checks=GENERATOR_CHECKS, plan=_plan,
    run_scenario=_run_scenario, prepare=_prepare,
)


def check_generator(generate, *, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND, seed=DEFAULT_SEED,
                    alpha=DEFAULT_ALPHA, progress=None, checks=None, device=None, dtype=None,
                    strict=False, name=None, monitor=None, executor=None) -> CheckReport:
    """Check that the decode loop ``generate`` produces exactly the target's law, at a speedup.

    ``generate(*, target, draft, prompts, max_new_tokens, gamma, generator)`` runs on each
    scenario (default :func:`~specdec_check.scenarios.default_generator_battery`) from
    prompts of different lengths (prompt chosen at random per row). Tested: the exact joint
    law of the generated tokens where enumerable (:func:`exact.joint`), otherwise every
    per-position and adjacent-pair law (:func:`exact.marginals`, :func:`exact.pair_marginals`);
    and the target calls per step against the exact expectation
    (:func:`exact.expected_target_calls`): chained speculative steps are exact (Leviathan
    et al. 2023), so a loop that calls the target once per token is exact but pointless.
    ``executor``: where the scenarios run, as for :func:`~specdec_check.checker.check_verifier`.
    """
    options = check_options(GENERATOR_CHECKS, mode=mode, backend=backend, device=device, dtype=dtype, seed=seed,
                            alpha=alpha, checks=checks, progress=progress, strict=strict, name=name,
                            monitor=monitor, executor=executor)
    return run(GENERATOR, generate, scenarios, options)
