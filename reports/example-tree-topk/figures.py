"""The exact figures of README.md: how far each rule on top-k drafts is from the target's law.

TV between one tree step completed by the target and the target's own law of depth + 1 tokens
(specdec_check.exact.tree_loss_tv), averaged over each scenario's prompt pool, for the one-hot rule
(EAGLE-2 / SGLang) and the i.i.d. rule min(1, p/q) on the same deterministic top-k drafts; then
EAGLE issue #110's two-token example.
"""

import numpy as np

from specdec_check import ConstantModel, exact
from specdec_check.scenarios import default_tree_battery

print(f"{'scenario':24s} {'tree':28s} {'one-hot rule TV':>16s} {'i.i.d. rule TV':>15s}")
for scenario in default_tree_battery("topk"):
    if not scenario.enumerable("topk") or scenario.trees.shape[0] != 1:
        continue
    tvs = {}
    for rule in ("topk", "iid"):
        losses = [exact.tree_loss_tv(scenario.target, scenario.draft, scenario.trees[0], drafting="topk", rule=rule,
                                     prompt=p[p >= 0]) for p in scenario.prompts()]
        tvs[rule] = float(np.mean(losses))
    print(f"{scenario.name:24s} {str(scenario.trees[0].tolist()):28s} {tvs['topk']:16.3g} {tvs['iid']:15.4f}")

# EAGLE #110: target = draft = (0.51, 0.49) over {"am", "have"}, top-2 drafts after "I".
law = ConstantModel(np.array([0.51, 0.49]))
for rule in ("topk", "iid"):
    tv = exact.tree_loss_tv(law, law, [-1, -1], drafting="topk", rule=rule)
    print(f"EAGLE #110 example (p = q = [0.51, 0.49], two top-k children): {rule} rule TV {tv:.4g}")
