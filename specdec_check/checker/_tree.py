"""The tree-verifier kind: check_tree_verifier and the run of one tree scenario.

``verify_tree(*, parents, draft_token_ids, draft_probs, target_probs, generator) -> int [B, depth+1]``
(:mod:`specdec_check.samplers._tree_numpy` states the contract). The checker drafts every tree
itself with the declared scheme and judges the outputs under the scheme's reference rule
(``rule="standard"``): multi-round rejection sampling with the proposal the scheme implies
(rules.md section 3; :mod:`specdec_check.exact._tree_kernels`), or by exactness alone
(``rule="any"``: each step completed by the exact target, :mod:`specdec_check.checker.checks._completed`).
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from .. import stats

from .._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED, KINDS
from ..exact._tree_drafting import DRAFTING_SCHEMES, check_drafting
from ..scenarios import TreeScenario, default_tree_battery
from ._kinds import SamplerKind
from ._options import check_options
from ._parts import PartEvidence, concluded, merge_part, shard_calls, whole
from ._report import CheckReport, ScenarioSummary
from ._session import run
from ._tally import law_evidence, shipped
from ._tree_caller import TreeCaller
from ._scenario_run import ScenarioRun
from .checks._completed import CompletedLaw, rule_agnostic_diagnosis
from .checks._tree_efficiency import TreeEfficiency
from .checks._tree_laws import TreeCounts, TreeLawChecks, tree_cells_per_call, tree_impossible
from .checks._tree_probes import TreeNonFiniteProbe, ZeroCoinProbe
from .checks._tree_randomness import TreeDeterminism, TreeIndependence

__all__ = ["TREE_CHECKS", "TREE_DEFAULT_CHECKS", "TREE_KEYWORDS", "TREE_RULES", "TREE_VERIFIER", "check_tree_verifier",
           "tree_verifier_kind"]

TREE_KEYWORDS = ("parents", "draft_token_ids", "draft_probs", "target_probs", "generator")

TREE_CHECKS = (
    "contract",
    "impossible",
    "non_finite",
    "zero_coins",
    "first_token",
    "accepted_length",
    "final_token",
    "sequence_law",
    "completed",
    "efficiency",
    "determinism",
    "independence",
)

#: ``rule`` values: "standard" (the scheme's reference rule) and "any" (exactness alone: issue 16).
TREE_RULES = ("standard", "any")
#: Checks of the reference rule's own laws given the tree (and of collisions under them): under
#: rule="any" they do not apply (another lossless rule has other per-tree laws); the rule-agnostic
#: "completed" tests decide instead, with the first token (integrated over drafting, the target's row 0).
STANDARD_ONLY_CHECKS = ("accepted_length", "final_token", "sequence_law", "independence")
#: The checks each rule selects by default ("completed" costs target completions the reference rule's own
#: tests make redundant, so it runs by default under "any" only; selectable under both).
TREE_DEFAULT_CHECKS = {"standard": tuple(c for c in TREE_CHECKS if c != "completed"),
                       "any": tuple(c for c in TREE_CHECKS if c not in STANDARD_ONLY_CHECKS)}

#: Law checks whose failure means the output law is wrong (not merely inefficient).
OUTPUT_LAW_CHECKS = ("first_token", "final_token", "sequence_law", "completed")
#: Checks of how often nodes are accepted: alone, their failure means lossless but inefficient.
ACCEPTANCE_CHECKS = ("accepted_length", "efficiency")


def _plan(drafting, scenario, options) -> list:
    selection = options.checks
    # The completed sequence needs the target after any emitted string: models only (fixed rows give a
    # slot's law, not the law after a string that leaves the tree).
    completed = CompletedLaw.plan(scenario, options) if scenario.fixed_target_probs is None else []
    return (TreeLawChecks.plan(scenario, selection, drafting) + completed + TreeEfficiency.plan(scenario, selection)
            + TreeIndependence.plan(scenario, selection))


def _prepare(drafting, scenarios, selection):
    """The default tree battery for None, else the list as given (the chain screen does not apply)."""
    return (default_tree_battery(drafting) if scenarios is None else list(scenarios)), "not a verifier check"


def _classify(run, counts) -> None:
    """Rejected tests to findings, as for chains (:func:`specdec_check.checker._verdict.classify`)."""
    acceptance = ACCEPTANCE_CHECKS if run.options.rule == "standard" else ()  # "any": judged by the check
    records = [r for r in run.records if r.check in OUTPUT_LAW_CHECKS + acceptance]
    law_bad = [r for r in records if r.check in OUTPUT_LAW_CHECKS and not r.passed]
    acceptance_bad = [r for r in records if r.check in acceptance and not r.passed]
    measured = counts.accepted_total / max(run.samples, 1)
    optimal = counts.accepted_expected / max(run.samples, 1)
    for r in law_bad:
        where = r.details.get("test", r.check)
        run.fail(r.check, f"the {where} law differs from the exact law ({r.method}): p = {r.pvalue:.3g}"
                 + (f", e-value {r.evalue:.3g}" if r.evalue is not None else "")
                 + f", plug-in TV {r.tv_plugin:.3g} over {r.n:,} samples" + law_evidence(r),
                 {"test": where, "pvalue": r.pvalue, "evalue": r.evalue, "n": r.n,
                  "worst_cells": r.details.get("worst_cells", []), "worst_tokens": r.details.get("worst_tokens", []),
                  "tv_plugin": r.tv_plugin})
    if acceptance_bad:
        if not law_bad and measured < optimal:
            run.fail("efficiency", f"lossless but inefficient: accepts {measured:.4f} nodes per step where the "
                     f"reference rule accepts {optimal:.4f}", {"accepted_per_step": measured, "optimal": optimal,
                                                                "pvalues": [r.pvalue for r in acceptance_bad]},
                     kind="inefficiency")
        else:
            for r in acceptance_bad:
                run.fail(r.check, f"the accepted-length law differs from the exact one: accepts {measured:.4f} nodes "
                         f"per step, exact {optimal:.4f} (p = {r.pvalue:.3g})",
                         {"accepted_per_step": measured, "optimal": optimal, "pvalue": r.pvalue})


def _summary(run, counts, elapsed) -> ScenarioSummary:
    s = run.scenario
    probs = counts.probs()
    n = max(run.samples, 1)
    return ScenarioSummary(
        name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.depth,
        rows_per_call=s.rows_per_call, calls=run.calls, samples=run.samples,
        acceptance_measured=(counts.any_accepted / probs.size) if probs.size else None,
        acceptance_expected=float(probs.mean()) if probs.size else None,
        tokens_per_step_measured=counts.emitted_total / n, tokens_per_step_expected=1.0 + counts.accepted_expected / n,
        accepted_per_step=counts.accepted_total / n if run.samples else None,
        standard_accepted_per_step=counts.accepted_expected / n if run.samples else None,
        elapsed_s=elapsed, stopped_early=bool(run.stopped),
    )


def _law_calls(run, laws, completed) -> int:
    """Calls of the scenario's whole law loop: until the planned tests reach the design TV, capped by the mode."""
    mode = run.mode
    return int(max(1, min(mode.max_law_calls, max(laws.calls_needed(), completed.calls_needed(1)),
                          mode.max_law_cells // tree_cells_per_call(run.scenario))))


def tree_law_plan(drafting, run) -> tuple:
    """``(law rows, shards)`` the scenario of ``run`` plans under ``drafting``, from its plan alone."""
    s = run.scenario
    if not s.allows(drafting):
        return 0, 1
    calls = _law_calls(run, TreeLawChecks(run, None, TreeCounts(), drafting), CompletedLaw(run, None, None))
    return calls * s.rows_per_call, -(-calls // shard_calls(s.rows_per_call, 1, run.mode.shard_rows))


def _parts(drafting, run) -> int:
    return tree_law_plan(drafting, run)[1]


def _run_scenario(drafting, run, verify) -> None:
    """One scenario (or one shard of it, ``run.part`` of ``run.parts``): probes, then blocks of drafted
    trees, one call each, every output tested. A law loop of more rows than the mode's ``shard_rows``
    runs in shards (:mod:`._parts`): this run covers its part's calls and leaves the law tallies in
    ``run.evidence``; the probes and the randomness checks run in the first part only."""
    started = time.perf_counter()
    s = run.scenario
    caller = TreeCaller(run, verify, drafting, drafting)
    counts = TreeCounts()
    if not s.allows(drafting):
        run.note_skipped("scenario", f"the scenario cannot be drafted with {drafting}")
        run.summary = _summary(run, counts, 0.0)
        return
    laws = TreeLawChecks(run, caller, counts, drafting)
    completed = CompletedLaw(run, caller, counts)
    efficiency = TreeEfficiency(run, counts)
    randomness = [] if run.part else [TreeDeterminism(run, caller),
                                      TreeIndependence(run, caller, tree_cells_per_call(s))]
    calls = _law_calls(run, laws, completed)
    per_part = shard_calls(s.rows_per_call, 1, run.mode.shard_rows)
    run.parts = -(-calls // per_part)
    if run.parts > 1:
        calls = min(per_part, calls - run.part * per_part)
    laws.start()
    completed.start()
    for probe in (() if run.part else (TreeNonFiniteProbe(run, caller), ZeroCoinProbe(run, caller))):
        if not run.stopped:
            probe.start()
    inputs = caller.pool_of(windows=calls)
    for _ in range(calls if not run.stopped else 0):
        block = inputs.next()
        out, parsed = caller.call(block, run.next_seed())
        if out is None:
            break
        run.samples += out.shape[0]
        if not tree_impossible(run, block, out, parsed):
            break
        counts.add(block, parsed)
        if not laws.absorb(block, out, parsed, fresh=True) or not completed.absorb_emitted(out, block.draw):
            break
        if laws.rejected_early or completed.rejected_early:
            break
    if run.parts > 1:
        mark = len(run.findings)
        for check in randomness:  # the first part's; their findings go after the merged law tests' ones
            check.finish()
        later, run.findings = run.findings[mark:], run.findings[:mark]
        tallies = {"laws": laws.evidence(), "completed": completed.evidence()}
        run.evidence = PartEvidence(tallies if not run.part else shipped(tallies), counts,
                                    time.perf_counter() - started, later)
        return
    laws.finish()
    completed.finish()
    efficiency.finish()
    _classify(run, counts)  # the law findings first: a lossy rule's outputs also collide at another rate
    for check in randomness:
        check.finish()
    run.summary = _summary(run, counts, time.perf_counter() - started)


def _conclude(drafting, run) -> None:
    """After a split scenario's last merged shard: the law, completed and efficiency tests on the merged
    evidence, the findings (law first, then the first part's randomness ones) and the summary."""
    evidence, run.evidence = run.evidence, None
    counts = evidence.counts
    laws = TreeLawChecks(run, None, counts, drafting)
    laws.adopt(evidence.tallies["laws"])
    completed = CompletedLaw(run, None, counts)
    completed.adopt(evidence.tallies["completed"])
    laws.finish()
    completed.finish()
    TreeEfficiency(run, counts).finish()
    _classify(run, counts)
    run.findings += evidence.later_findings
    run.summary = _summary(run, counts, evidence.elapsed)


def _diagnose(drafting, run, verify) -> bool:
    """After the first failing scenario of a full standard-rule run: run the rule-agnostic test there
    (fresh calls, its own false-alarm budget equal to the run's, which the verdict does not use) and
    say in the first failure what the output law shows (a lossless rule other than the reference, or
    a loss). Returns whether it ran (once per run; not on fixed rows, which have no completion)."""
    if (run.options.rule != "standard" or run.scenario.fixed_target_probs is not None
            or set(TREE_DEFAULT_CHECKS["standard"]) - set(run.options.checks)):
        return False
    first = next((f for f in run.findings if f.kind == "failure"), None)
    if first is None or first.check == "contract":
        return False  # a broken contract (a raise, a write into the inputs) says nothing about the rule
    options = dataclasses.replace(run.options, rule="any", checks=("contract", "impossible", "completed"),
                                  mode=whole(run.options.mode))
    plan = _plan(drafting, run.scenario, options)
    sub = ScenarioRun(run.scenario, plan, options, stats.AlphaLedger(run.options.alpha, planned=max(1, len(plan))),
                      np.random.default_rng(run.rng.integers(2**63)), run.repro)
    _run_scenario(drafting, sub, verify)
    run.calls += sub.calls
    text, evidence = rule_agnostic_diagnosis(sub.records, sub.findings, run.mode.design_tv)
    first = next(i for i, f in enumerate(run.findings) if f.kind == "failure")
    finding = run.findings[first]
    run.findings[first] = dataclasses.replace(finding, message=f"{finding.message} [{text}]",
                                              evidence={**finding.evidence, "rule_agnostic": evidence})
    return True


@functools.lru_cache(maxsize=None)
def tree_verifier_kind(drafting: str) -> SamplerKind:
    """The tree-verifier :class:`SamplerKind` for trees drafted with ``drafting`` (its battery, its
    plan and its runs draft with that scheme; its repro lines say ``--drafting``)."""
    drafting = check_drafting(drafting)
    names = KINDS["tree_verifier"]
    return SamplerKind(
        name="tree_verifier", command=f"{names.command} --drafting {drafting}", keywords=TREE_KEYWORDS,
        scenario_type=TreeScenario, default_battery=functools.partial(default_tree_battery, drafting),
        checks=TREE_CHECKS, plan=functools.partial(_plan, drafting),
        run_scenario=functools.partial(_run_scenario, drafting), prepare=functools.partial(_prepare, drafting),
        rule_checks=TREE_DEFAULT_CHECKS, diagnose=functools.partial(_diagnose, drafting),
        parts=functools.partial(_parts, drafting), merge_part=merge_part, concluded=concluded,
        conclude=functools.partial(_conclude, drafting),
    )


#: The tree-verifier kind for the default scheme (top-k); :func:`tree_verifier_kind` gives the others.
TREE_VERIFIER = tree_verifier_kind("topk")


def check_tree_verifier(verify_tree, *, drafting=None, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND,
                        seed=DEFAULT_SEED, alpha=DEFAULT_ALPHA, rule="standard", progress=None, checks=None,
                        device=None, dtype=None, strict=False, name=None, monitor=None, executor=None) -> CheckReport:
    """Check that the tree verifier ``verify_tree`` reproduces the exact law of one tree step.

    ``verify_tree(*, parents, draft_token_ids, draft_probs, target_probs, generator)`` returns int
    [B, depth + 1]: the accepted root path's tokens, the final token, -1 padding. ``drafting`` says
    how the verifier's drafter chooses children: ``"iid"`` (independently: SpecInfer, Medusa-style
    sampling), ``"without_replacement"`` (EAGLE-1) or ``"topk"`` (deterministic: EAGLE-2/3, SGLang);
    None takes ``verify_tree.drafting`` when the callable declares it. The checker drafts every
    scenario's trees itself (default :func:`~specdec_check.scenarios.default_tree_battery`: chains,
    stars, EAGLE-like static trees, random trees, V = 3 to 32,000).

    ``rule="standard"`` judges the verifier against the scheme's reference rule, multi-round
    rejection sampling (Miao et al. 2023, Algorithm 2; Jeon et al. 2024): events impossible under
    it are failures, and the tested laws are the first token (target row 0: any lossless rule),
    the accepted length, the final token given the stop node, every position of the emitted
    sequence (Rosenblatt transform) and, where enumerable, the emitted string integrated over
    drafting; acceptances against the reference's; determinism and independence of the
    randomness; NaN inputs; and coins of exactly 0 (SGLang #35771). ``alpha`` is the false-alarm
    budget of the whole call.

    ``rule="any"`` judges exactness alone, so traversal verification and every other lossless tree
    rule pass: each step's emitted tokens are completed to ``depth + 1`` tokens from the exact target
    and tested against the target's law (Rosenblatt PIT of every position pooled, adjacent pairs, the
    enumerated completed law where it fits: ``checks="completed"``), with the first token; an emission
    of target probability zero is a failure, one only the reference rule rules out a
    ``"nonstandard"`` finding; accepted nodes are compared with the reference rule's (fewer:
    inefficient; more: nonstandard). The verdict is ``"passed"`` only when every scenario's law tests
    reached the mode's design TV; otherwise ``"inconclusive"``. ``executor``: where the scenarios run,
    as for :func:`~specdec_check.checker.check_verifier`.
    """
    if drafting is None:
        drafting = getattr(verify_tree, "drafting", None)
        if drafting is None:
            raise ValueError(f"say how the trees are drafted: drafting= one of {DRAFTING_SCHEMES} (the verifier is "
                             "exact only for the scheme its drafter uses), or set verify_tree.drafting.")
    kind = tree_verifier_kind(check_drafting(drafting))
    if rule not in TREE_RULES:
        raise ValueError(f"rule must be one of {TREE_RULES}: 'standard' judges the scheme's reference rule, 'any' "
                         f"exactness alone; got {rule!r}.")
    options = check_options(kind.allowed_checks(rule), mode=mode, backend=backend, device=device, dtype=dtype,
                            seed=seed, alpha=alpha, checks=kind.default_checks(rule) if checks is None else checks,
                            progress=progress, strict=strict, name=name, monitor=monitor, rule=rule,
                            executor=executor)
    return run(kind, verify_tree, scenarios, options)
