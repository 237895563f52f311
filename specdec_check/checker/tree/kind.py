"""The tree verifier kind: one multi-draft step on a tree of drafts, under a declared drafting scheme.

``verify_tree(*, parents, draft_token_ids, draft_probs, target_probs, generator) -> int [B, depth+1]``
(:mod:`specdec_check.samplers._tree_numpy` states the contract). The checker drafts every tree itself
with the declared scheme and judges the outputs under the scheme's reference rule (``rule="standard"``):
multi-round rejection sampling with the proposal the scheme implies (rules.md section 3;
:mod:`specdec_check.exact._tree_kernels`), or by exactness alone (``rule="any"``: each step completed by
the exact target, :mod:`specdec_check.checker.checks.completed`).
"""

from __future__ import annotations

import functools

from ..._options import option
from ..._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_RULE, DEFAULT_SEED, DRAFTING_SCHEMES, RULES
from ...exact._tree_drafting import check_drafting
from ...scenarios import TreeScenario, default_tree_battery
from ..checks.base import Classify
from ..checks.completed import CompletedLaw
from ..checks.probes import NonFiniteProbe, ZeroCoinProbe
from ..checks.randomness import Determinism
from ..core.api import run_check
from ..core.kind import Kind, rule_defaults
from ..core.parts import shard_calls
from ..core.report import CheckReport
from ..core.verdict import classify
from .caller import TreeCaller
from .efficiency import TreeEfficiency
from .laws import TreeCounts, TreeLawChecks, tree_cells_per_call, tree_impossible
from .randomness import TreeIndependence
from .verdict import OUTPUT_LAW_CHECKS, TreeWording, tree_summary

__all__ = ["TREE_CHECKS", "TREE_DEFAULT_CHECKS", "TREE_KEYWORDS", "TREE_VERIFIER", "TreeKind", "TreeStep",
           "check_tree_verifier", "tree_law_plan", "tree_verifier_kind"]

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

#: Checks of the reference rule's own laws given the tree (and of collisions under them): under
#: rule="any" they do not apply (another lossless rule has other per-tree laws); the rule-agnostic
#: "completed" tests decide instead, with the first token (integrated over drafting, the target's row 0).
STANDARD_ONLY_CHECKS = ("accepted_length", "final_token", "sequence_law", "independence")
#: The checks each rule selects by default (:func:`~specdec_check.checker.core.kind.rule_defaults`).
TREE_DEFAULT_CHECKS = rule_defaults(TREE_CHECKS, STANDARD_ONLY_CHECKS)

#: The checks of a tree scenario in the order they start and finish: the law tests draw their PIT streams
#: first, then the probes call; the law findings come before the randomness checks' (a lossy rule's outputs
#: also collide at another rate, and the independence test does not run on a scenario that already failed).
SCENARIO_CHECKS = (TreeLawChecks, CompletedLaw, NonFiniteProbe, ZeroCoinProbe, TreeEfficiency, Classify, Determinism,
                   TreeIndependence)
WORDING = TreeWording()


class TreeStep:
    """One call's outputs on a block of trees: the block, the host output, its parse (always fresh)."""

    host = True
    fresh = True

    def __init__(self, block, out, parsed):
        self.block, self.out, self.parsed = block, out, parsed


class TreeKind(Kind):
    """The tree verifier kind for trees drafted with ``drafting`` (its battery, its plan and its runs draft
    with that scheme; its repro lines say ``--drafting``)."""

    name = "tree_verifier"
    role = "tree verifier"
    keywords = TREE_KEYWORDS
    scenario_type = TreeScenario
    checks = TREE_CHECKS
    rules = RULES
    rule_checks = TREE_DEFAULT_CHECKS
    splittable = True
    output_law_checks = OUTPUT_LAW_CHECKS

    def __init__(self, drafting: str):
        self.drafting = check_drafting(drafting)

    def arguments(self) -> tuple:
        return (self.drafting,)

    @property
    def command(self) -> str:
        return f"{super().command} --drafting {self.drafting}"

    def default_battery(self) -> list:
        return default_tree_battery(self.drafting)

    def plan(self, scenario, options) -> list:
        # The completed sequence needs the target after any emitted string: models only (fixed rows give a
        # slot's law, not the law after a string that leaves the tree).
        completed = CompletedLaw.plan(scenario, options) if scenario.fixed_target_probs is None else []
        return (TreeLawChecks.plan(scenario, options.checks, self.drafting) + completed
                + TreeEfficiency.plan(scenario, options) + TreeIndependence.plan(scenario, options))

    def check_classes(self, ctx) -> tuple:
        return SCENARIO_CHECKS

    def skip_reason(self, scenario):
        return None if scenario.allows(self.drafting) else f"the scenario cannot be drafted with {self.drafting}"

    def degenerate(self, scenario):
        """A tree without nodes, or V = 1: outside the contract's main domain (a crash there is robustness)."""
        if scenario.nodes == 0 or scenario.vocab_size == 1:
            return f"{scenario.nodes} node(s), V = {scenario.vocab_size}"
        return None

    def caller(self, ctx, sampler) -> TreeCaller:
        return TreeCaller(ctx, sampler, self.drafting, self.drafting, degenerate=self.degenerate(ctx.scenario))

    def counts(self, ctx) -> TreeCounts:
        return TreeCounts()

    def law_budget(self, ctx, checks) -> tuple:
        """Calls of the scenario's whole law loop: until the planned tests reach the design TV, capped by the mode."""
        mode = ctx.mode
        laws, completed = checks[0], checks[1]
        calls = min(mode.max_law_calls, max(laws.calls_needed(), completed.calls_needed(1)),
                    mode.max_law_cells // tree_cells_per_call(ctx.scenario))
        return int(max(1, calls)), 1

    def feed(self, ctx, caller, calls: int, reuse: int):
        """One pooled draw of trees serves several calls (their laws computed once per draw); one block per call."""
        inputs = caller.pool_of(windows=calls)
        for _ in range(calls if not ctx.stopped else 0):
            block = inputs.next()
            yield block, [block]

    def step(self, ctx, caller, counts, block, outputs):
        out, parsed = outputs[0]
        if not tree_impossible(ctx, block, out, parsed):
            return None
        counts.add(block, parsed)
        return TreeStep(block, out, parsed)

    def classify(self, ctx, counts) -> None:
        classify(ctx, counts, WORDING)

    def summary(self, ctx, counts, elapsed: float):
        return tree_summary(ctx, counts, elapsed)

    def diagnosable(self, scenario) -> bool:
        return scenario.fixed_target_probs is None  # fixed rows have no completion

    def law_plan(self, ctx) -> tuple:
        return tree_law_plan(self.drafting, ctx)


def tree_law_plan(drafting, ctx) -> tuple:
    """``(law rows, shards)`` the scenario of ``ctx`` plans under ``drafting``, from its plan alone."""
    s = ctx.scenario
    if not s.allows(drafting):
        return 0, 1
    calls, _ = tree_verifier_kind(drafting).law_budget(ctx, [TreeLawChecks(ctx, None, TreeCounts()),
                                                             CompletedLaw(ctx, None, None)])
    return calls * s.rows_per_call, -(-calls // shard_calls(s.rows_per_call, 1, ctx.mode.shard_rows))


@functools.lru_cache(maxsize=None)
def tree_verifier_kind(drafting: str) -> TreeKind:
    """The tree verifier kind for trees drafted with ``drafting`` (one of :data:`DRAFTING_SCHEMES`)."""
    return TreeKind(drafting)


#: The tree verifier kind for the default scheme (top-k); :func:`tree_verifier_kind` gives the others.
TREE_VERIFIER = tree_verifier_kind(DRAFTING_SCHEMES[-1])


def check_tree_verifier(verify_tree, *, drafting=None, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND,
                        seed=DEFAULT_SEED, alpha=DEFAULT_ALPHA, rule=DEFAULT_RULE, progress=None, checks=None,
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
    randomness; NaN inputs (robustness) and coins of exactly 0 (an edge case, SGLang #35771),
    warnings under the policy table (failures under ``strict``). ``alpha`` is the false-alarm
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
    keywords = locals()
    drafting = option("drafting").validator()(drafting if drafting is not None else getattr(verify_tree, "drafting",
                                                                                             None))
    if drafting is None:
        raise ValueError(f"say how the trees are drafted: drafting= one of {DRAFTING_SCHEMES} (the verifier is "
                         "exact only for the scheme its drafter uses), or set verify_tree.drafting.")
    return run_check(tree_verifier_kind(drafting), verify_tree, keywords)
