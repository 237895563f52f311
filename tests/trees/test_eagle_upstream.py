"""EAGLE's real ``evaluate_posterior`` (SafeAILab/EAGLE ``eagle/model/utils.py``) through ``check_tree_verifier``
(marked ``upstream``; skipped unless ``SPECDEC_EAGLE_SRC`` names a checkout, e.g. at cb7e084). Nothing of EAGLE's
is committed: its file is loaded from the checkout and runs as released.

The glue here is what a user writes: each row's tree becomes EAGLE's ``candidates`` (root-to-leaf paths, -1
padded) and ``logits`` (log target probabilities at each path position); the identity is its
``logits_processor`` (the laws handed in are already processed), so it takes the sampling branch. Its coins
come from the module's ``random.random()``, redirected to the checker's generator; the final token is
``torch.multinomial(sample_p, 1)`` as in EAGLE's ``update_inference_inputs``, with the checker's generator.

Expected (issue 25): passed in default mode, with the zero-coin case as an edge-case warning and its rate:
``coin <= p(x)`` accepts a child of probability 0 when the coin is exactly 0, and ``multinomial`` returns
index 0 whatever its mass. Before issue 25 the probe stopped every scenario and the verdict was FAILED.
"""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")  # eagle/model/utils.py imports its logits processors

from specdec_check.checker import check_tree_verifier  # noqa: E402
from specdec_check.scenarios import default_tree_battery  # noqa: E402

pytestmark = pytest.mark.upstream


def _eagle_utils():
    src = os.environ.get("SPECDEC_EAGLE_SRC")
    if not src:
        pytest.skip("set SPECDEC_EAGLE_SRC to a checkout of SafeAILab/EAGLE (e.g. at cb7e084) to run its real code")
    path = Path(src) / "eagle" / "model" / "utils.py"
    spec = importlib.util.spec_from_file_location("eagle_model_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _paths(parents_row):
    """Root-to-leaf node paths of one tree (nodes in slot order; a leaf is a node nobody points to)."""
    parents_row = [int(p) for p in parents_row]
    leaves = [i for i in range(len(parents_row)) if i not in parents_row]
    paths = []
    for leaf in leaves:
        path, node = [], leaf
        while node >= 0:
            path.append(node)
            node = parents_row[node]
        paths.append(path[::-1])
    return paths


def eagle_verifier(utils):
    def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        coins = types.SimpleNamespace(random=lambda: float(torch.rand((), generator=generator, dtype=torch.float64)))
        utils.random = coins  # evaluate_posterior's `random.random()`, drawn from the checker's generator
        parents, ids, target = torch.as_tensor(parents), torch.as_tensor(draft_token_ids), torch.as_tensor(target_probs)
        batch = ids.shape[0]
        rows = []
        for b in range(batch):
            paths = _paths(parents[b].tolist())
            width = 1 + max(len(p) for p in paths)
            candidates = torch.full((len(paths), width), -1, dtype=torch.long)
            logits = torch.zeros((len(paths), width, target.shape[-1]), dtype=target.dtype)
            candidates[:, 0] = 0  # the root token, the same on every path (evaluate_posterior only compares it)
            for j, path in enumerate(paths):
                candidates[j, 1:1 + len(path)] = ids[b, path]
                nodes = [0] + [n + 1 for n in path]  # target row of the root, then of each node on the path
                logits[j, :len(nodes)] = torch.log(target[b, nodes])
                logits[j, len(nodes):] = logits[j, len(nodes) - 1]
            best, accepted, sample_p = utils.evaluate_posterior(logits, candidates, lambda ids, x: x)
            final = torch.multinomial(sample_p, 1, generator=generator)
            rows.append(candidates[int(best), 1:int(accepted) + 1].tolist() + [int(final)])
        depth = max(len(r) for r in rows)
        out = torch.full((batch, int(_depth(parents)) + 1), -1, dtype=torch.long)
        for b, row in enumerate(rows):
            out[b, :len(row)] = torch.tensor(row)
        assert depth <= out.shape[1]
        return out

    return verify


def _depth(parents):
    depth = 0
    for row in parents.tolist():
        d = []
        for p in row:
            d.append(0 if p < 0 else d[p] + 1)
        depth = max(depth, max(d) + 1)
    return depth


def test_eagle_evaluate_posterior_passes_with_the_zero_coin_edge_case():
    utils = _eagle_utils()
    scenarios = [s for s in default_tree_battery("topk") if s.name in ("star-3-enumerable", "small-tree-enumerable",
                                                                     "eagle-26")]
    report = check_tree_verifier(eagle_verifier(utils), drafting="topk", backend="torch", dtype="float32",
                                 scenarios=scenarios, mode="default", seed=0)
    print(report.summary())
    assert report.verdict == "passed", report.summary()
    zero = [f for f in report.findings if f.check == "zero_coins"]
    assert zero and all(f.kind == "warning" and "2^-24" in f.evidence["rate"] for f in zero)
    assert report.achieved_tv is not None and report.achieved_tv <= report.design_tv
