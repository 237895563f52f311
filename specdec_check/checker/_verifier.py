"""The verifier kind: check_verifier and the run of one verifier scenario."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .. import stats

from .._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED, KINDS
from ..scenarios import VerifierScenario, VerifierScreen, default_verifier_battery
from ._block import VerifierBlock, reuse_count
from ._caller import VerifierCaller
from ._contract import ParsedStep, check_output
from ._callables import VERIFIER_KEYWORDS
from ._kinds import SamplerKind
from ._options import check_options
from ._report import CheckReport
from ._scenario_run import ScenarioRun
from ._session import run
from ._parts import PartEvidence, concluded, merge_part, shard_calls, whole
from ._tally import shipped
from ._verdict import classify, verifier_summary
from ._xp import concat, is_host
from .checks import StepCounts, locate
from .checks._efficiency import Efficiency
from .checks._laws import LawChecks, cells_per_call
from .checks._completed import CompletedLaw, rule_agnostic_diagnosis
from .checks._non_finite import NonFiniteProbe
from .checks._randomness import BatchInvariance, Determinism, Independence
from .checks._screen import run_screen, screen_plan

__all__ = ["VERIFIER", "VERIFIER_CHECKS", "check_verifier", "law_plan"]

VERIFIER_CHECKS = (
    "screen",
    "contract",
    "non_finite",
    "impossible",
    "step_law",
    "first_token",
    "stop_conditional",
    "accepted_count",
    "completed",
    "efficiency",
    "determinism",
    "independence",
    "batch_invariance",
)
#: Checks of the standard rule's own laws: under rule="any" they do not apply (another lossless rule
#: has other per-path laws); the rule-agnostic "completed" tests decide instead.
STANDARD_ONLY_CHECKS = ("step_law", "stop_conditional", "accepted_count", "batch_invariance")
#: The checks each rule selects by default: "completed" costs calls the standard rule's own tests
#: make redundant, so it runs by default under "any" only (selectable under both).
DEFAULT_CHECKS = {"standard": tuple(c for c in VERIFIER_CHECKS if c != "completed"),
                  "any": tuple(c for c in VERIFIER_CHECKS if c not in STANDARD_ONLY_CHECKS)}

#: The checks of a battery scenario, in the order they start and finish: the law tests draw their
#: PIT stream before the non-finite probe calls, efficiency is judged before the randomness
#: checks make their own calls (the order fixes the draws, so a seed replays a run).
SCENARIO_CHECKS = (LawChecks, CompletedLaw, NonFiniteProbe, Efficiency, Determinism, Independence, BatchInvariance)


def _plan(scenario, options) -> list:
    if isinstance(scenario, VerifierScreen):
        return screen_plan(scenario, options)
    return [test for check in SCENARIO_CHECKS for test in check.plan(scenario, options)]


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


#: The checks whose evidence is merged over a scenario's shards (their tallies, and the step counts the
#: efficiency test reads); they finish after the merge. The others (the non-finite probe, the randomness
#: checks) run in the first shard only.
MERGED_CHECKS = (LawChecks, CompletedLaw, Efficiency)


def _law_budget(run, checks) -> tuple:
    """``(calls, reuse)`` of the scenario's whole law loop: calls until the planned tests reach the
    design TV, capped by the mode; ``reuse`` calls per block of inputs where a test feeds on reused calls."""
    laws, mode, cells = checks[0], run.mode, cells_per_call(run.scenario)
    # Huge calls reuse a block of inputs only when a planned test feeds on reused calls.
    reuse = reuse_count(cells) if laws.uses_reuse else 1
    needed = max(check.calls_needed(reuse) for check in checks if hasattr(check, "calls_needed"))
    return int(max(1, min(mode.max_law_calls, needed, mode.max_law_cells // cells))), reuse


def law_plan(run) -> tuple:
    """``(law rows, shards)`` the scenario of ``run`` plans, from its plan alone (``run`` needs no stream):
    the rows of its whole law loop and how many block ranges they run in (1: it runs whole)."""
    if isinstance(run.scenario, VerifierScreen):
        return 0, 1
    checks = [check(run, None, StepCounts()) for check in (LawChecks, CompletedLaw)]
    calls, reuse = _law_budget(run, checks)
    rows = run.scenario.rows_per_call
    return calls * rows, -(-calls // shard_calls(rows, reuse, run.mode.shard_rows))


def _parts(run) -> int:
    return law_plan(run)[1]


def _run_scenario(run, verify) -> None:
    """One scenario (or one shard of it, ``run.part`` of ``run.parts``): for each block of inputs, call,
    locate the step, hand it to every check.

    A block of huge calls serves several calls (:func:`~specdec_check.checker._block.reuse_count`);
    small calls are grouped instead: the calls of one pooled draw share one block, their outputs are
    joined and located together, so the checker's per-call work is paid once per group (outcomes are
    independent across calls, so the joined rows are the rows of one larger call). A scenario of more
    law rows than the mode's ``shard_rows`` runs in shards: this run covers its part's block range and leaves
    the merged checks' evidence in ``run.evidence`` (:mod:`._parts`, :func:`_conclude`).
    """
    if isinstance(run.scenario, VerifierScreen):
        return run_screen(run, verify)
    started = time.perf_counter()
    caller, counts = VerifierCaller(run, verify), StepCounts()
    checks = [check(run, caller, counts) for check in (MERGED_CHECKS if run.part else SCENARIO_CHECKS)]
    laws = checks[0]
    calls, reuse = _law_budget(run, checks)
    per_part = shard_calls(run.scenario.rows_per_call, reuse, run.mode.shard_rows)
    run.parts = -(-calls // per_part)
    if run.parts > 1:
        calls = min(per_part, calls - run.part * per_part)
    for check in checks:
        check.start()
    block, step, inputs = None, None, caller.pool_of(windows=-(-calls // reuse))
    done = 0
    while done < calls:
        if reuse > 1:
            if block is None or block.uses >= reuse:
                if block is not None and not caller.unchanged(block.draw):
                    break
                # The old block's arrays go before the next are drawn: one block of inputs alive at a time.
                block = step = windows = caller.release(block)
                block = VerifierBlock(inputs.next(), conditional=laws.conditional, tables=caller.tables)
            windows = [block.draw]
        else:
            block = step = windows = caller.release(block)
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
    if run.parts == 1:
        for check in checks:
            check.finish()
        classify(run, counts)
        run.summary = verifier_summary(run, counts, time.perf_counter() - started)
        return
    for check in checks:  # the first shard's other checks finish here; the merged ones after the merge
        if not isinstance(check, MERGED_CHECKS):
            check.finish()
    tallies = {type(check).__name__: check.evidence() for check in checks if hasattr(check, "evidence")}
    run.evidence = PartEvidence(tallies if not run.part else shipped(tallies), counts, time.perf_counter() - started)


def _conclude(run) -> None:
    """After a split scenario's last merged shard: the merged checks record their tests on the merged
    evidence, then the scenario's findings and summary are made as for a scenario run whole."""
    evidence, run.evidence = run.evidence, None
    checks = [check(run, None, evidence.counts) for check in MERGED_CHECKS]
    for check in checks:
        if hasattr(check, "adopt"):
            check.adopt(evidence.tallies[type(check).__name__])
        check.finish()
    classify(run, evidence.counts)
    run.summary = verifier_summary(run, evidence.counts, evidence.elapsed)


def _diagnose(run, verify) -> bool:
    """After the first failing battery scenario under the standard rule: run the rule-agnostic test
    there (fresh calls, its own false-alarm budget equal to the run's, which the verdict does not
    use) and say what the output law shows, in the first failure's message and evidence. Returns
    whether it ran (once per run)."""
    if (run.options.rule != "standard" or isinstance(run.scenario, VerifierScreen) or "completed" in run.planned
            or set(DEFAULT_CHECKS["standard"]) - set(run.options.checks)):
        return False  # a full standard-rule run only (a one-check run, as the suite makes, stays one check)
    first = next((f for f in run.findings if f.kind == "failure"), None)
    if first is None or first.check == "contract":
        return False  # a broken contract (a raise, a write into the inputs) says nothing about the rule
    options = dataclasses.replace(run.options, rule="any", checks=("contract", "impossible", "completed"),
                                  monitor=run.options.monitor, mode=whole(run.options.mode))
    plan = CompletedLaw.plan(run.scenario, options)
    sub = ScenarioRun(run.scenario, plan, options, stats.AlphaLedger(run.options.alpha, planned=len(plan)),
                      np.random.default_rng(run.rng.integers(2**63)), run.repro)
    _run_scenario(sub, verify)
    run.calls += sub.calls
    text, evidence = rule_agnostic_diagnosis(sub.records, sub.findings, run.mode.design_tv)
    first = next(i for i, f in enumerate(run.findings) if f.kind == "failure")
    finding = run.findings[first]
    run.findings[first] = dataclasses.replace(finding, message=f"{finding.message} [{text}]",
                                              evidence={**finding.evidence, "rule_agnostic": evidence})
    return True


VERIFIER = SamplerKind(
    name="verifier", command=KINDS["verifier"].command, keywords=VERIFIER_KEYWORDS, scenario_type=VerifierScenario,
    default_battery=default_verifier_battery, checks=VERIFIER_CHECKS, plan=_plan, run_scenario=_run_scenario,
    prepare=_prepare, diagnose=_diagnose, rule_checks=DEFAULT_CHECKS,
    parts=_parts, merge_part=merge_part, concluded=concluded, conclude=_conclude,
)


def check_verifier(verify, *, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND, seed=DEFAULT_SEED,
                   alpha=DEFAULT_ALPHA, progress=None, checks=None, device=None, dtype=None,
                   strict=False, name=None, monitor=None, rule="standard", executor=None) -> CheckReport:
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

    ``executor`` runs the scenarios as shards: None (this process), ``"processes"`` or ``N`` (a local
    process pool), or any ``concurrent.futures.Executor`` (Dask: ``Client(address).get_executor()``);
    the report is the same, timings aside (:mod:`specdec_check.checker._shards`).
    """
    known = VERIFIER.allowed_checks(rule) if rule in DEFAULT_CHECKS else VERIFIER_CHECKS
    options = check_options(known, mode=mode, backend=backend, device=device, dtype=dtype, seed=seed, alpha=alpha,
                            checks=DEFAULT_CHECKS.get(rule) if checks is None else checks, progress=progress,
                            strict=strict, name=name, monitor=monitor, rule=rule, executor=executor)
    return run(VERIFIER, verify, scenarios, options)
