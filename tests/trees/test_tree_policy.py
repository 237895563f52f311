"""Issue 25's verdicts on exact tree verifiers: a missing NaN guard is a robustness warning in every drafting
scheme (a failure under ``strict=True``), and a final token drawn by ``torch.multinomial`` (EAGLE's and
Medusa's way) is an edge-case warning with its rate, never a failed run.

Fixed seeds; the default false-alarm budget (alpha = 1e-6 per run, split by the ledger) bounds the chance
that a pass below turns into a failure on another seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check import samplers
from specdec_check.checker import check_tree_verifier
from specdec_check.scenarios import default_tree_battery

REFERENCES = {"iid": samplers.numpy_verify_tree_iid,
              "without_replacement": samplers.numpy_verify_tree_without_replacement,
              "topk": samplers.numpy_verify_tree_topk}
#: Small scenarios every scheme can draft: the run stays in the fast tier.
SUBSET = ("star-3-enumerable", "small-tree-enumerable")


def _scenarios(drafting):
    return [s for s in default_tree_battery(drafting) if s.name in SUBSET]


def _without_nan_guard(drafting):
    """The scheme's exact reference, but a NaN target row is read as uniform (no guard): it emits tokens."""
    reference = REFERENCES[drafting]

    def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        target = np.array(target_probs, dtype=float)
        target[~np.isfinite(target).all(axis=-1)] = 1.0 / target.shape[-1]
        return reference(parents=parents, draft_token_ids=draft_token_ids, draft_probs=draft_probs,
                         target_probs=target, generator=generator)

    verify.__qualname__ = f"without_nan_guard[{drafting}]"
    return verify


@pytest.mark.parametrize("drafting", list(REFERENCES))
def test_an_exact_tree_verifier_without_a_nan_guard_passes_with_a_warning(drafting):
    verify = _without_nan_guard(drafting)
    report = check_tree_verifier(verify, drafting=drafting, scenarios=_scenarios(drafting), mode="quick", seed=0)
    assert report.verdict == "passed", report.summary()
    assert {(f.kind, f.check) for f in report.findings if f.kind != "nonstandard"} == {("warning", "non_finite")}
    assert all("robustness" in f.message or "NaN" in f.message for f in report.warnings)
    strict = check_tree_verifier(verify, drafting=drafting, scenarios=_scenarios(drafting), mode="quick", seed=0,
                                 strict=True, checks=["contract", "non_finite"])
    assert strict.verdict == "failed" and {f.check for f in strict.failures} == {"non_finite"}, strict.summary()


def multinomial_one_hot_topk(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """An exact verifier of top-k drafts in the shape of EAGLE's ``evaluate_posterior`` (written here, not
    copied): walk the tree, accept a child ``x`` iff ``coin <= p(x)`` (the one-hot rule: ``q(x) = 1``), else
    zero ``p(x)`` and renormalise; the final token is ``torch.multinomial(p, 1)``. Exact, but with every coin
    exactly 0 it accepts a child of probability 0 and ``multinomial`` returns index 0 whatever its mass."""
    import torch

    parents = torch.as_tensor(parents).tolist()
    ids = torch.as_tensor(draft_token_ids)
    target = torch.as_tensor(target_probs)
    batch, nodes = ids.shape
    depth = max((_depth(row) for row in parents), default=0)
    out = torch.full((batch, depth + 1), -1, dtype=torch.long)
    for b in range(batch):
        current, k, law = -1, 0, target[b, 0].clone()
        while True:
            for child in [i for i in range(nodes) if parents[b][i] == current]:
                x = int(ids[b, child])
                if float(torch.rand((), generator=generator, dtype=law.dtype)) <= float(law[x]):
                    out[b, k], k, current, law = x, k + 1, child, target[b, child + 1].clone()
                    break
                law[x] = 0.0
                law = law / law.sum()
            else:
                break
        out[b, k] = int(torch.multinomial(law, 1, generator=generator))
    return out


def _depth(parents_row):
    depths = []
    for p in parents_row:
        depths.append(0 if p < 0 else depths[p] + 1)
    return max(depths, default=-1) + 1


def test_a_multinomial_final_token_passes_in_default_mode_with_the_zero_coin_rate():
    pytest.importorskip("torch")
    scenarios = [s for s in default_tree_battery("topk") if s.name == "star-3-enumerable"]
    report = check_tree_verifier(multinomial_one_hot_topk, drafting="topk", backend="torch", dtype="float32",
                                 scenarios=scenarios, mode="default", seed=0)
    assert report.verdict == "passed", report.summary()
    [finding] = [f for f in report.findings if f.check == "zero_coins"]
    assert finding.kind == "warning" and finding.evidence["rate"].startswith("2^-24 (about 6.0e-08) per float32")
    law = [r for r in report.results if r.check in ("first_token", "sequence_law", "completed") and r.alpha > 0]
    assert law and all(r.passed for r in law)  # the probe did not stop the law tests
    assert report.achieved_tv is not None and report.achieved_tv <= report.design_tv
    strict = check_tree_verifier(multinomial_one_hot_topk, drafting="topk", backend="torch", dtype="float32",
                                 scenarios=scenarios, mode="quick", seed=0, strict=True,
                                 checks=["contract", "zero_coins"])
    assert [f.check for f in strict.failures] == ["zero_coins"]
