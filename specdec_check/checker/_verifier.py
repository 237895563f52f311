"""The verifier kind: check_verifier and the run of one verifier scenario."""

from __future__ import annotations

import time

from .._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED, KINDS
from ..scenarios import VerifierScenario, VerifierScreen, default_verifier_battery
from ._block import VerifierBlock, reuse_count
from ._caller import VerifierCaller
from ._contract import ParsedStep, check_output
from ._callables import VERIFIER_KEYWORDS
from ._kinds import SamplerKind
from ._options import check_options
from ._report import CheckReport
from ._session import run
from ._verdict import classify, verifier_summary
from ._xp import concat, is_host
from .checks import StepCounts, locate
from .checks._efficiency import Efficiency
from .checks._laws import LawChecks, cells_per_call
from .checks._non_finite import NonFiniteProbe
from .checks._randomness import BatchInvariance, Determinism, Independence
from .checks._screen import run_screen, screen_plan

__all__ = ["VERIFIER", "VERIFIER_CHECKS", "check_verifier"]

VERIFIER_CHECKS = (
    "screen",
    "contract",
    "non_finite",
    "impossible",
    "step_law",
    "first_token",
    "stop_conditional",
    "accepted_count",
    "efficiency",
    "determinism",
    "independence",
    "batch_invariance",
)

#: The checks of a battery scenario, in the order they start and finish: the law tests draw their
#: PIT stream before the non-finite probe calls, efficiency is judged before the randomness
#: checks make their own calls (the order fixes the draws, so a seed replays a run).
SCENARIO_CHECKS = (LawChecks, NonFiniteProbe, Efficiency, Determinism, Independence, BatchInvariance)


def _plan(scenario, selection) -> list:
    if isinstance(scenario, VerifierScreen):
        return screen_plan(scenario, selection)
    return [test for check in SCENARIO_CHECKS for test in check.plan(scenario, selection)]


def _prepare(scenarios, selection):
    """The default battery (the screen first) for None; a custom list gets the screen first too,
    unless it holds one already or the ``screen`` check is not selected."""
    if scenarios is None:
        return default_verifier_battery(), "ran" if "screen" in selection else "not selected"
    scenarios = list(scenarios)
    if any(isinstance(s, VerifierScreen) for s in scenarios):
        return scenarios, "ran" if "screen" in selection else "not selected"
    if "screen" not in selection:
        return scenarios, "not selected"
    return [default_verifier_battery()[0], *scenarios], "ran"


def _joined(caller, draw, results):
    """One (output, parsed step) for consecutive calls' results (all on the host, or all on one device)."""
    outs = [out for out, _ in results]
    if len(results) == 1:
        return results[0]
    if len({is_host(out) for out in outs}) > 1:  # a sampler that mixes host and device outputs
        outs = [caller.backend.to_host(out) for out in outs]
        joined = concat(outs)
        return joined, check_output(joined, draw.draft_token_ids, caller.scenario.vocab_size)[1]
    steps = [parsed for _, parsed in results]
    return concat(outs), ParsedStep(*(concat([getattr(p, f) for p in steps]) for f in ("accepted", "final", "emitted")))


def _run_scenario(run, verify) -> None:
    """One scenario: for each block of inputs, call, locate the step, hand it to every check.

    A block of huge calls serves several calls (:func:`~specdec_check.checker._block.reuse_count`);
    small calls are grouped instead: the calls of one pooled draw share one block, their outputs are
    joined and located together, so the checker's per-call work is paid once per group (outcomes are
    independent across calls, so the joined rows are the rows of one larger call).
    """
    if isinstance(run.scenario, VerifierScreen):
        return run_screen(run, verify)
    started = time.perf_counter()
    caller, counts = VerifierCaller(run, verify), StepCounts()
    checks = [check(run, caller, counts) for check in SCENARIO_CHECKS]
    laws = checks[0]
    calls = laws.calls_planned()
    for check in checks:
        check.start()
    reuse = reuse_count(cells_per_call(run.scenario))
    block, inputs = None, caller.pool_of(windows=-(-calls // reuse))
    done = 0
    while done < calls:
        if reuse > 1:
            if block is None or block.uses >= reuse:
                if block is not None and not caller.unchanged(block.draw):
                    break
                block = VerifierBlock(inputs.next(), conditional=laws.conditional, tables=caller.tables)
            windows = [block.draw]
        else:
            whole, windows = inputs.next_group(calls - done)
            block = VerifierBlock(whole, conditional=laws.conditional, tables=caller.tables)
        results = []
        for window in windows:
            # A reused block's inputs are fingerprinted once, and checked when the block retires.
            out, parsed = caller.call_parsed(window, run.next_seed(), check_after=reuse == 1)
            if out is None:
                break
            results.append((out, parsed))
        done += len(windows)
        if len(results) < len(windows):
            break
        out, parsed = _joined(caller, block.draw, results)
        run.samples += out.shape[0]
        fresh = block.uses == 0
        block.uses += 1
        step = locate(run, caller, counts, block, out, parsed, fresh=fresh)
        if step is None:
            break
        counts.add(step)
        if not all(check.absorb(step) for check in checks) or any(check.rejected_early for check in checks):
            break
    if reuse > 1 and block is not None and not run.stopped:
        caller.unchanged(block.draw)
    for check in checks:
        check.finish()
    classify(run, counts)
    run.summary = verifier_summary(run, counts, time.perf_counter() - started)


VERIFIER = SamplerKind(
    name="verifier", command=KINDS["verifier"].command, keywords=VERIFIER_KEYWORDS, scenario_type=VerifierScenario,
    default_battery=default_verifier_battery, checks=VERIFIER_CHECKS, plan=_plan, run_scenario=_run_scenario,
    prepare=_prepare,
)


def check_verifier(verify, *, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND, seed=DEFAULT_SEED,
                   alpha=DEFAULT_ALPHA, progress=None, checks=None, device=None, dtype=None,
                   strict=False, name=None, monitor=None) -> CheckReport:
    """Check that ``verify`` reproduces the exact law of one speculative step.

    ``verify(*, draft_token_ids, draft_probs, target_probs, generator)`` is run on every
    scenario (default :func:`~specdec_check.scenarios.default_verifier_battery`). Each call
    is checked for the output contract and for events of probability zero; the outputs
    are tested against exact laws (first token against the target row, the token at the
    stop position against the residual or bonus row, the accepted count, the joint (k, y)
    law given the path and, where enumerable, the step law integrated over drafts,
    Leviathan et al. 2023 Theorem 3.5); the acceptance count against the optimum
    ``sum_x min(p, q)``; determinism and independence of the randomness. ``alpha`` is the
    false-alarm budget of the whole call, split evenly over every statistical test.

    The structural screen runs first, before custom scenario lists too (unless ``checks``
    leaves it out). The verdict is ``"passed"`` only when every scenario's law tests reached
    the mode's design TV; otherwise it is ``"inconclusive"``. Robustness policies (a row of NaN
    probabilities, degenerate shapes such as gamma = 0) give warnings, failures under ``strict``.
    """
    options = check_options(VERIFIER_CHECKS, mode=mode, backend=backend, device=device, dtype=dtype, seed=seed,
                            alpha=alpha, checks=checks, progress=progress, strict=strict, name=name,
                            monitor=monitor)
    return run(VERIFIER, verify, scenarios, options)
