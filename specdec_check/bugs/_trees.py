"""The tree catalogue: buggy tree verifiers and exact controls, each with its drafting scheme and source.

Kept apart from the chain catalogue (:data:`VERIFIER_BUGS` and friends): ``specdec-check mutants
--trees`` runs these with :func:`~specdec_check.checker.check_tree_verifier` under each entry's
scheme. Entries whose bug is a rule (a scheme's rule on another scheme's drafts, SGLang's
relaxation thresholds) carry that rule, so :func:`tree_entry_tv` gives their exact loss.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .._settings import DRAFTING_SCHEMES, RULES
from . import _tree_verifiers as T
from ._entry import NO_REPORT, check_expected, ok_outcomes
from ._score import MutationScore, score_entries

__all__ = ["TREE_BUGS", "TREE_CONTROLS", "TreeCatalogueEntry", "control_sglang_fixed", "one_hot_rule_on_iid_drafts",
           "sglang_target_only",
           "tree_sglang_threshold_acc", "tree_sglang_threshold_single", "tree_catalogue", "tree_entry", "tree_entry_tv",
           "tree_mutation_score"]

#: The battery scenario whose models and tree :func:`tree_entry_tv` measures the loss on.
TV_SCENARIO = "star-3-enumerable"


@dataclass(frozen=True)
class TreeCatalogueEntry:
    """One catalogued tree verifier: its scheme, what is wrong, where it comes from, what the checker must say.

    ``expected``: "failure", "inefficiency" or "pass" (the verdict under ``check_rule``); ``finding``: the
    checks a correct detection names (any of them); ``rule``: the exact rule the entry implements when it
    is one (for :func:`tree_entry_tv`); ``check_rule``: the rule the checker judges it under, "standard"
    (the scheme's reference rule) or "any" (exactness alone: a lossless rule other than the reference).
    """

    name: str
    sampler: object
    drafting: str
    mechanism: str
    source: str
    expected: str = "failure"
    finding: tuple = ()
    rule: object = None
    check_rule: str = "standard"

    def __post_init__(self):
        check_expected(self.expected)
        if self.check_rule not in RULES:
            raise ValueError(f"check_rule must be one of {RULES}; got {self.check_rule!r}.")
        if self.drafting not in DRAFTING_SCHEMES:
            raise ValueError(f"drafting must be one of {DRAFTING_SCHEMES}; got {self.drafting!r}.")

    @property
    def kind(self) -> str:
        return "tree_verifier"

    @property
    def label(self) -> str:
        return f"tree ({self.drafting})"

    @property
    def ok_outcomes(self) -> tuple:
        return ok_outcomes(self.expected)

    @property
    def judged_rule(self) -> str:
        return self.check_rule

    def report(self, mode: str, seed: int):
        """The checker's report on this entry under its scheme and ``check_rule``."""
        from ..checker import check_tree_verifier

        return check_tree_verifier(self.sampler, drafting=self.drafting, mode=mode, seed=seed, rule=self.check_rule)


def _port(threshold_single=1.0, threshold_acc=1.0, strict=False):
    from ..adapters._sglang import from_sglang_tree
    from ._sglang_kernel import tree_speculative_sampling_target_only

    kernel = functools.partial(tree_speculative_sampling_target_only, strict=strict)
    kernel.__qualname__ = "tree_speculative_sampling_target_only" + ("[PR #35788 fix]" if strict else "")
    return from_sglang_tree(kernel, threshold_single=threshold_single, threshold_acc=threshold_acc)


@functools.lru_cache(maxsize=None)
def _sglang(threshold_single, threshold_acc, strict):
    return _port(threshold_single, threshold_acc, strict)


def sglang_target_only(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """SGLang's target-only tree sampler (torch port of the CUDA kernel) through :func:`from_sglang_tree`:
    lossless, except that a coin of exactly 0 accepts a child of target probability zero.

    Source: sgl-project/sglang#35771 (``coin <= prob_acc / threshold_acc`` is inclusive; float32 ``torch.rand``
    returns 0 with probability 2^-24); kernel at b227f63.
    """
    return _sglang(1.0, 1.0, False)(parents=parents, draft_token_ids=draft_token_ids, draft_probs=draft_probs,
                                    target_probs=target_probs, generator=generator)


#: The relaxations catalogued: a child of target probability at least 0.5 accepted outright, and the
#: accumulated-probability test relaxed to coin <= 2 S (both values are SGLang's knobs set below 1).
THRESHOLD_SINGLE, THRESHOLD_ACC = 0.5, 0.5


def tree_sglang_threshold_single(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """SGLang's target-only sampler with ``threshold_single = 0.5``: a child with target probability >= 0.5 is
    accepted outright (lossy by design). The port carries the #35788 fix, so the finding is the threshold's.

    Source: sgl-project/sglang ``--speculative-accept-threshold-single`` (sgl-kernel speculative_sampling.cuh).
    """
    return _sglang(THRESHOLD_SINGLE, 1.0, True)(parents=parents, draft_token_ids=draft_token_ids,
                                                 draft_probs=draft_probs, target_probs=target_probs,
                                                 generator=generator)


def tree_sglang_threshold_acc(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """SGLang's target-only sampler with ``threshold_acc = 0.5``: a child is accepted iff ``coin <= S / 0.5``
    (S the target mass of the siblings tried so far; lossy by design). The port carries the #35788 fix, so the
    finding is the threshold's.

    Source: sgl-project/sglang ``--speculative-accept-threshold-acc`` (sgl-kernel speculative_sampling.cuh).
    """
    return _sglang(1.0, THRESHOLD_ACC, True)(parents=parents, draft_token_ids=draft_token_ids,
                                              draft_probs=draft_probs, target_probs=target_probs, generator=generator)


def control_sglang_fixed(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """SGLang's target-only sampler with the fix of sgl-project/sglang PR #35788 (a child needs positive target
    probability and ``coin < S``): exact for top-k drafts."""
    return _sglang(1.0, 1.0, True)(parents=parents, draft_token_ids=draft_token_ids, draft_probs=draft_probs,
                                   target_probs=target_probs, generator=generator)


for _f in (sglang_target_only, tree_sglang_threshold_single, tree_sglang_threshold_acc, control_sglang_fixed):
    _f.drafting = "topk"


def _rules():
    from ..exact import ThresholdRule

    return {"single": ThresholdRule(THRESHOLD_SINGLE, 1.0), "acc": ThresholdRule(1.0, THRESHOLD_ACC)}


_LAW = ("first_token", "final_token", "sequence_law", "accepted_length")


def _bugs():
    rules = _rules()
    return (
        TreeCatalogueEntry(
            "tree_residual_not_updated", T.tree_residual_not_updated, "iid",
            "Every sibling is tested against the node's target row p instead of the residual left by the rejected "
            "siblings; the final token comes from norm(max(p - q, 0)).", NO_REPORT + " (Miao et al. 2023, Alg. 2)",
            finding=_LAW + ("impossible",)),
        TreeCatalogueEntry(
            "tree_iid_rule_on_without_replacement", T.tree_iid_rule_on_without_replacement, "without_replacement",
            "Siblings drafted without replacement are verified with the i.i.d. rule (q_i = q, not q with the earlier "
            "siblings removed and renormalised): a small loss.",
            "Jeon et al. 2024 (recursive speculative decoding); EAGLE-1 evaluate_posterior masks drafted siblings",
            finding=_LAW + ("impossible",), rule="iid"),
        TreeCatalogueEntry(
            "tree_sibling_law_not_renormalised", T.tree_sibling_law_not_renormalised, "without_replacement",
            "Without replacement: the drafted siblings are removed from q but q is not renormalised (the same law "
            "as the i.i.d. rule on these drafts).", NO_REPORT + " (Jeon et al. 2024 renormalise)",
            finding=_LAW + ("impossible",), rule="iid"),
        TreeCatalogueEntry(
            "tree_iid_rule_on_topk_drafts", T.tree_iid_rule_on_topk_drafts, "topk",
            "Deterministic top-k drafts verified with min(1, r(x)/q(x)) on the draft's soft law instead of the "
            "one-hot rule (q(x) = 1): lossy.", "SafeAILab/EAGLE #221, #183, #110, #74 (the open question), #93",
            finding=_LAW + ("impossible",), rule="iid"),
        TreeCatalogueEntry(
            "tree_final_from_parent_row", T.tree_final_from_parent_row, "iid",
            "After every child of a non-root node is rejected, the final token is drawn from the parent's target row.",
            NO_REPORT, finding=_LAW + ("impossible",)),
        TreeCatalogueEntry(
            "tree_final_from_root_row", T.tree_final_from_root_row, "topk",
            "After every child of a non-root node is rejected, the final token is drawn from the root's target row.",
            NO_REPORT, finding=_LAW + ("impossible",)),
        TreeCatalogueEntry(
            "tree_bonus_from_parent_row", T.tree_bonus_from_parent_row, "topk",
            "The bonus token at a leaf is drawn from the leaf's parent's target row.", NO_REPORT,
            finding=_LAW + ("impossible",)),
        TreeCatalogueEntry(
            "sglang_zero_coin_boundary", sglang_target_only, "topk",
            "SGLang's target-only kernel accepts a child iff coin <= S (inclusive): a coin of exactly 0 accepts a "
            "child of target probability zero. Shown by the zero-coin probe.",
            "sgl-project/sglang#35771 (fixed by PR #35788); kernel at b227f63", expected="warning",
            finding=("zero_coins",)),
        TreeCatalogueEntry(
            "tree_sglang_threshold_single", tree_sglang_threshold_single, "topk",
            f"SGLang's threshold_single = {THRESHOLD_SINGLE}: a child of target probability >= {THRESHOLD_SINGLE} is "
            "accepted outright (lossy by design).", "sgl-project/sglang --speculative-accept-threshold-single",
            finding=_LAW + ("impossible",), rule=rules["single"]),
        TreeCatalogueEntry(
            "tree_sglang_threshold_acc", tree_sglang_threshold_acc, "topk",
            f"SGLang's threshold_acc = {THRESHOLD_ACC}: a child is accepted iff coin <= S / {THRESHOLD_ACC} (lossy by "
            "design).", "sgl-project/sglang --speculative-accept-threshold-acc",
            finding=_LAW + ("impossible",), rule=rules["acc"]),
    )


def one_hot_rule_on_iid_drafts(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """The one-hot rule (child ``x`` accepted iff ``u < r(x)``, ``x`` zeroed in ``r`` on rejection) on
    i.i.d. drafts: lossless for every drafting scheme (it samples the target by sequential inverse CDF over
    the children, never reading the draft law), but not SpecInfer's rule, and it accepts less."""
    from ..samplers import numpy_verify_tree_topk

    return numpy_verify_tree_topk(parents=parents, draft_token_ids=draft_token_ids, draft_probs=draft_probs,
                                  target_probs=target_probs, generator=generator)


one_hot_rule_on_iid_drafts.drafting = "iid"


def _controls():
    from ..samplers import numpy_verify_tree_iid, numpy_verify_tree_topk, numpy_verify_tree_without_replacement

    return (
        TreeCatalogueEntry("control_tree_iid", numpy_verify_tree_iid, "iid",
                           "The i.i.d. reference (multi-round rejection sampling).", "Miao et al. 2023, Algorithm 2",
                           expected="pass"),
        TreeCatalogueEntry("control_tree_without_replacement", numpy_verify_tree_without_replacement,
                           "without_replacement", "The without-replacement reference (recursive rejection sampling).",
                           "Jeon et al. 2024", expected="pass"),
        TreeCatalogueEntry("control_tree_topk", numpy_verify_tree_topk, "topk",
                           "The one-hot reference for top-k drafts.", "EAGLE-2 / SGLang target-only", expected="pass"),
        TreeCatalogueEntry("control_sglang_fixed", control_sglang_fixed, "topk",
                           "SGLang's target-only kernel with the #35788 fix (positive target probability, strict "
                           "comparison), through the adapter.", "sgl-project/sglang PR #35788", expected="pass"),
        TreeCatalogueEntry("control_tree_one_hot_on_iid", one_hot_rule_on_iid_drafts, "iid",
                           "The one-hot rule on i.i.d. drafts, judged under rule='any': lossless (sequential "
                           "inverse-CDF sampling of the target over the children), but it accepts fewer nodes than "
                           "SpecInfer's rule.", "rules.md section 3 (the one-hot rule is exact for any drafting scheme)",
                           expected="inefficiency", finding=("efficiency",), check_rule="any"),
    )


TREE_BUGS = _bugs()
TREE_CONTROLS = _controls()


def tree_catalogue() -> tuple:
    """Every tree entry: the bugs, then the controls."""
    return TREE_BUGS + TREE_CONTROLS


def tree_entry(name: str) -> TreeCatalogueEntry:
    for e in tree_catalogue():
        if e.name == name:
            return e
    raise KeyError(f"no tree catalogue entry {name!r}; known: {', '.join(e.name for e in tree_catalogue())}.")


def tree_entry_tv(entry: TreeCatalogueEntry, scenario_name: str = TV_SCENARIO) -> float:
    """The exact loss of an entry that is a rule: TV between one step completed by the target and the target's
    own law (:func:`~specdec_check.exact.tree_loss_tv`) on a battery scenario's models and tree, averaged over
    its prompts (the TV of the joint law of prompt and tokens). ``ValueError`` for an entry that is not a rule."""
    from ..exact import tree_loss_tv
    from ..scenarios import default_tree_battery

    if entry.rule is None:
        raise ValueError(f"{entry.name} is not a rule; its loss has no closed form here.")
    scenario = next(s for s in default_tree_battery(entry.drafting) if s.name == scenario_name)
    tvs = [tree_loss_tv(scenario.target, scenario.draft, scenario.trees[0], drafting=entry.drafting, rule=entry.rule,
                        prompt=p[p >= 0]) for p in scenario.prompts()]
    return float(sum(tvs) / len(tvs))


def tree_mutation_score(mode: str = "default", *, seed: int = 0, names=None, progress=None) -> MutationScore:
    """Run :func:`~specdec_check.checker.check_tree_verifier` on every tree entry under its scheme
    (:func:`~specdec_check.bugs._score.score_entries` over :func:`tree_catalogue`)."""
    return score_entries(tree_catalogue(), mode, seed=seed, names=names, progress=progress, what="tree catalogue")
