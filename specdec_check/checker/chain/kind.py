"""The chain verifier kind: one speculative step's accept/reject kernel on a chain of gamma drafts.

``verify(*, draft_token_ids [B, g], draft_probs [B, g, V], target_probs [B, g+1, V], generator)``
returns int [B, g+1]: accepted drafts, the recovered or bonus token, -1 padding. The kind's hooks
(:class:`~specdec_check.checker.core.kind.Kind`): pooled or reused blocks of inputs, outputs joined
and located in the block's exact laws, and its checks in the order they start and finish.
"""

from __future__ import annotations

from ..._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_RULE, DEFAULT_SEED, RULES
from ...scenarios import VerifierScenario, VerifierScreen, default_verifier_battery
from ..backends.xp import concat, is_host
from ..checks.base import Classify
from ..checks.completed import CompletedLaw
from ..checks.probes import NonFiniteProbe, ZeroCoinProbe
from ..checks.randomness import Determinism
from ..core.api import run_check
from ..core.kind import Kind, rule_defaults
from ..core.parts import shard_calls
from ..core.report import CheckReport
from ..core.verdict import classify
from .block import VerifierBlock, reuse_count
from .caller import VerifierCaller
from .contract import ParsedStep, check_output
from .counts import StepCounts, locate
from .efficiency import Efficiency
from .laws import LawChecks, cells_per_call
from .randomness import BatchInvariance, Independence
from .screen import Screen
from .verdict import OUTPUT_LAW_CHECKS, ChainWording, verifier_summary

__all__ = ["DEFAULT_CHECKS", "STANDARD_ONLY_CHECKS", "VERIFIER", "VERIFIER_CHECKS", "VERIFIER_KEYWORDS", "ChainKind",
           "check_verifier", "law_plan"]

VERIFIER_KEYWORDS = ("draft_token_ids", "draft_probs", "target_probs", "generator")

VERIFIER_CHECKS = (
    "screen",
    "contract",
    "non_finite",
    "zero_coins",
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
#: The checks each rule selects by default (:func:`~specdec_check.checker.core.kind.rule_defaults`).
DEFAULT_CHECKS = rule_defaults(VERIFIER_CHECKS, STANDARD_ONLY_CHECKS)

#: The checks of a battery scenario, in the order they start and finish: the law tests draw their
#: PIT stream before the probes call, efficiency is judged before the randomness checks make their
#: own calls (the order fixes the draws, so a seed replays a run); the rejected tests become findings last.
SCENARIO_CHECKS = (LawChecks, CompletedLaw, NonFiniteProbe, ZeroCoinProbe, Efficiency, Determinism, Independence,
                   BatchInvariance, Classify)
WORDING = ChainWording()


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


def _budget(ctx, laws, completed) -> tuple:
    """``(calls, reuse)`` of the scenario's whole law loop: calls until the planned tests reach the design TV,
    capped by the mode; ``reuse`` calls per block of inputs where a test feeds on reused calls."""
    mode, cells = ctx.mode, cells_per_call(ctx.scenario)
    # Huge calls reuse a block of inputs only when a planned test feeds on reused calls.
    reuse = reuse_count(cells) if laws.uses_reuse else 1
    needed = max(laws.calls_needed(reuse), completed.calls_needed(reuse))
    return int(max(1, min(mode.max_law_calls, needed, mode.max_law_cells // cells))), reuse


def law_plan(ctx) -> tuple:
    """``(law rows, shards)`` the scenario of ``ctx`` plans, from its plan alone (``ctx`` needs no stream):
    the rows of its whole law loop and how many block ranges they run in (1: it runs whole)."""
    if isinstance(ctx.scenario, VerifierScreen):
        return 0, 1
    calls, reuse = _budget(ctx, LawChecks(ctx, None, StepCounts()), CompletedLaw(ctx, None, None))
    rows = ctx.scenario.rows_per_call
    return calls * rows, -(-calls // shard_calls(rows, reuse, ctx.mode.shard_rows))


class ChainKind(Kind):
    """The chain verifier kind (see the module docstring)."""

    name = "verifier"
    role = "verifier"
    keywords = VERIFIER_KEYWORDS
    scenario_type = VerifierScenario
    checks = VERIFIER_CHECKS
    rules = RULES
    rule_checks = DEFAULT_CHECKS
    splittable = True
    output_law_checks = OUTPUT_LAW_CHECKS

    def default_battery(self) -> list:
        return default_verifier_battery()

    def prepare(self, scenarios, selection):
        """The default battery (the screen first) for None; a custom list gets the screen first too,
        unless it holds one already or the ``screen`` check is not selected."""
        screen = "ran" if "screen" in selection else "not selected"
        if scenarios is None:
            return default_verifier_battery(), screen
        scenarios = list(scenarios)
        if any(isinstance(s, VerifierScreen) for s in scenarios) or "screen" not in selection:
            return scenarios, screen
        return [default_verifier_battery()[0], *scenarios], "ran"

    def check_classes(self, ctx) -> tuple:
        return (Screen,) if isinstance(ctx.scenario, VerifierScreen) else SCENARIO_CHECKS

    def check_classes_for(self, scenario, options) -> tuple:
        return (Screen,) if isinstance(scenario, VerifierScreen) else SCENARIO_CHECKS

    def degenerate(self, scenario):
        """gamma = 0 or V = 1: outside the contract's main domain (a crash there is robustness)."""
        if scenario.gamma == 0 or scenario.vocab_size == 1:
            return f"gamma = {scenario.gamma}, V = {scenario.vocab_size}"
        return None

    def caller(self, ctx, sampler) -> VerifierCaller:
        return VerifierCaller(ctx, sampler, degenerate=self.degenerate(ctx.scenario))

    def counts(self, ctx) -> StepCounts:
        return StepCounts()

    def law_budget(self, ctx, checks) -> tuple:
        if isinstance(ctx.scenario, VerifierScreen):
            return 0, 1
        return _budget(ctx, checks[0], checks[1])

    def feed(self, ctx, caller, calls: int, reuse: int):
        """Blocks of inputs: a block of huge calls serves ``reuse`` calls with fresh generators
        (:func:`~specdec_check.checker.chain.block.reuse_count`), its inputs compared once when it retires; small
        calls are grouped instead: the calls of one pooled draw share one block, their outputs joined and
        located together (outcomes are independent across calls, so the joined rows are those of one larger
        call). At most one block of inputs is alive at a time."""
        laws_conditional = "stop_conditional" in ctx.planned or "step_law" in ctx.planned
        caller.check_after = reuse == 1
        inputs = caller.pool_of(windows=-(-calls // reuse)) if calls else None
        block, done = None, 0
        try:
            while done < calls:
                if reuse > 1:
                    if block is None or block.uses >= reuse:
                        if block is not None and not caller.unchanged(block.draw):
                            return
                        # the old block's arrays go before the next are drawn (``windows`` held its draw too)
                        block = windows = caller.release(block)
                        block = VerifierBlock(inputs.next(), conditional=laws_conditional, tables=caller.tables)
                    windows = [block.draw]
                else:
                    block = windows = whole = caller.release(block)
                    whole, windows = inputs.next_group(calls - done)
                    block = VerifierBlock(whole, conditional=laws_conditional, tables=caller.tables)
                done += len(windows)
                yield block, windows
        finally:
            if reuse > 1 and block is not None and not ctx.stopped:
                caller.unchanged(block.draw)

    def step(self, ctx, caller, counts, block, outputs):
        out, parsed = _joined(caller, block.draw, outputs)
        fresh = block.uses == 0
        block.uses += 1
        step = locate(ctx, caller, counts, block, out, parsed, fresh=fresh)
        if step is not None:
            counts.add(step)
        return step

    def classify(self, ctx, counts) -> None:
        classify(ctx, counts, WORDING)

    def summary(self, ctx, counts, elapsed: float):
        return verifier_summary(ctx, counts, elapsed)

    def diagnosable(self, scenario) -> bool:
        return not isinstance(scenario, VerifierScreen)

    def law_plan(self, ctx) -> tuple:
        return law_plan(ctx)


#: The chain verifier kind.
VERIFIER = ChainKind()


def check_verifier(verify, *, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND, seed=DEFAULT_SEED,
                   alpha=DEFAULT_ALPHA, progress=None, checks=None, device=None, dtype=None,
                   strict=False, name=None, monitor=None, rule=DEFAULT_RULE, executor=None) -> CheckReport:
    """Check that the chain verifier ``verify`` reproduces the exact law of one speculative step.

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
    probabilities, degenerate shapes such as gamma = 0) and edge cases (every coin exactly 0)
    give warnings, failures under ``strict`` (:mod:`specdec_check.checker.core.policy`).

    ``rule="any"`` judges exactness alone (block verification and every other lossless rule pass). ``executor``
    runs the scenarios as shards: None (this process), ``"processes"`` or ``N`` (a local process pool), or any
    ``concurrent.futures.Executor`` (Dask: ``Client(address).get_executor()``); the report is the same, timings
    aside (:mod:`specdec_check.checker.core.shards`). Every keyword is defined in :mod:`specdec_check._options`.
    """
    return run_check(VERIFIER, verify, locals())
