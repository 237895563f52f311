"""Issue 21: shards finer than a scenario. A scenario whose law loop plans more rows than the mode's
``shard_rows`` runs as block ranges seeded by ``SeedSequence.spawn`` in a fixed order; the driver merges
them in that order (counts add, e-processes multiply) and stops a scenario once its merged evidence
rejects, dropping its later shards. The report is the same in this process and on any executor."""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json

import numpy as np
import pytest
from scaleout_helpers import without_timings
from scaleout_samplers import tilted_verify, verifier_scenarios

from specdec_check import check_verifier, mode_for_tv, stats
from specdec_check._settings import MODES, SHARD_ROWS, get_mode
from specdec_check.checker.chain.kind import VERIFIER
from specdec_check.checker.core.context import ScenarioPlan
from specdec_check.checker.core.options import check_options
from specdec_check.checker.core.parts import part_seed
from specdec_check.checker.core.session import _plans
from specdec_check.checker.core.executors import ShardRunner
from specdec_check.checker.core.shards import ScenarioShard, run_shard
from specdec_check.samplers import numpy_verify

#: Rows per shard in these tests: quick mode's law loops (about 2,000 rows) become several shards each.
TEST_SHARD_ROWS = 512
SPLIT_QUICK = dataclasses.replace(get_mode("quick"), shard_rows=TEST_SHARD_ROWS)


def _json(report) -> str:
    return json.dumps(without_timings(report.to_dict()), sort_keys=True)


def _parts(mode, rule="standard", scenarios=None, kind=VERIFIER):
    """Each scenario's number of shards, as the session plans them."""
    options = check_options(kind, mode=mode, rule=rule)
    battery, _ = kind.prepare(scenarios, options.checks)
    ledger = stats.AlphaLedger(options.alpha, planned=max(1, sum(len(kind.plan(s, options)) for s in battery)))
    return {plan.scenario.name: plan.parts for plan in _plans(kind, battery, options, ledger)}


@pytest.mark.parametrize("rule", ["standard", "any"])
def test_shard_rows_keep_quick_default_and_thorough_whole(rule):
    # The named modes' reports do not change: every battery scenario is one shard under both rules.
    for name in MODES:
        assert set(_parts(name, rule).values()) == {1}, name


def test_a_target_resolution_splits_every_law_scenario():
    parts = _parts(mode_for_tv(1e-3))
    assert parts["screen"] == 1
    law = [n for name, n in parts.items() if name != "screen"]
    assert min(law) > 100 and max(law) * SHARD_ROWS > 4e7  # ~45M rows per scenario at TV 1e-3


def test_part_seeds_are_the_scenarios_own_then_its_spawned_children():
    seed = np.random.SeedSequence([7, 11, 0])
    assert part_seed(seed, 0) is seed
    children = np.random.SeedSequence([7, 11, 0]).spawn(3)
    for part in (1, 2):
        assert part_seed(seed, part).generate_state(4).tolist() == children[part].generate_state(4).tolist()
    assert seed.n_children_spawned == 0  # made without mutating the scenario's stream


def test_split_reports_are_equal_in_process_on_processes_and_on_dask(dask_executor):
    scenarios = verifier_scenarios()[:2]
    assert all(n > 2 for name, n in _parts(SPLIT_QUICK, scenarios=scenarios).items() if name != "screen")
    runs = {where: check_verifier(numpy_verify, scenarios=scenarios, mode=SPLIT_QUICK, seed=3, executor=executor)
            for where, executor in [("in-process", None), ("2 processes", 2), ("dask", dask_executor)]}
    reference = runs["in-process"]
    assert reference.verdict == "passed"
    whole = check_verifier(numpy_verify, scenarios=scenarios, mode="quick", seed=3)
    # The merged evidence is the whole scenario's: as many law rows as one shard would have run.
    for split, alone in zip(reference.scenarios, whole.scenarios):
        assert split.samples == pytest.approx(alone.samples, rel=0.2), split.name
    assert reference.achieved_tv <= SPLIT_QUICK.design_tv
    for where, report in runs.items():
        assert _json(report) == _json(reference), where


def test_a_split_scenario_stops_at_the_shard_whose_merged_evidence_rejects():
    # A lossy verifier off by a small TV: its first shard alone does not reject; a later one does, and
    # the shards after it never merge, in this process and on two processes alike.
    mode = dataclasses.replace(mode_for_tv(0.05, "quick"), shard_rows=TEST_SHARD_ROWS)
    scenarios = [s for s in verifier_scenarios() if s.name == "low-acceptance"]
    parts = _parts(mode, scenarios=scenarios)["low-acceptance"]
    here = check_verifier(tilted_verify, scenarios=scenarios, mode=mode, checks=("first_token",))
    there = check_verifier(tilted_verify, scenarios=scenarios, mode=mode, checks=("first_token",), executor=2)
    assert here.verdict == "failed"
    law = [r for r in here.results if r.check == "first_token" and r.evalue is not None]
    assert any(r.details["sequential_rejected"] for r in law)
    rows = here.scenarios[-1].samples
    assert 2 * TEST_SHARD_ROWS <= rows < (parts - 1) * TEST_SHARD_ROWS, (rows, parts)  # stopped in between
    assert _json(there) == _json(here)


def test_progress_is_reported_per_shard_here_and_on_processes():
    scenarios = verifier_scenarios()[:1]
    for executor in (None, 2):
        labels = []
        check_verifier(numpy_verify, scenarios=scenarios, mode=SPLIT_QUICK, executor=executor,
                       progress=lambda done, total, label, labels=labels: labels.append((done, total, label)))
        parts = _parts(SPLIT_QUICK, scenarios=scenarios)["corpus-bigram"]
        total = 1 + parts
        assert all(t == total for _, t, _ in labels) and labels[-1] == (total, total, "done")
        named = {label.split(" [shard ")[1].split("]")[0] for _, _, label in labels if "corpus-bigram [shard" in label}
        assert named == {f"{part}/{parts}" for part in range(1, parts + 1)}, named  # every shard, in any order
        assert [d for d, _, _ in labels] == sorted(d for d, _, _ in labels)


class _Held(cf.Executor):
    """An executor that runs the shards of ``ready`` at once and holds the others: shows which a run cancels."""

    def __init__(self, ready):
        self.ready, self.futures = set(ready), []

    def submit(self, fn, *args):
        future = cf.Future()
        if len(self.futures) in self.ready and future.set_running_or_notify_cancel():
            future.set_result(fn(*args))
        self.futures.append(future)
        return future


def test_dropped_shards_are_cancelled_and_skipped():
    executor = _Held(ready={0, 3})
    options = check_options(VERIFIER, mode="quick")
    scenario = verifier_scenarios()[0]
    shards = [ScenarioShard(i, VERIFIER, numpy_verify, None,
                            ScenarioPlan(scenario, (), options, 1e-6, 1, np.random.SeedSequence(i), ""))
              for i in range(4)]
    dropped = set()
    with ShardRunner(executor) as runner:
        results = runner.results(run_shard, shards, dropped=dropped)
        assert next(results).index == 0
        dropped.update({1, 2})  # the consumer concluded: shards 1 and 2 are not needed, and never waited for
        assert next(results).index == 3
    assert [f.cancelled() for f in executor.futures] == [False, True, True, False]


def test_split_tree_reports_are_equal_in_process_and_on_processes():
    from specdec_check import check_tree_verifier
    from specdec_check._settings import default_sampler, resolve_callable
    from specdec_check.checker.tree.kind import tree_verifier_kind
    from specdec_check.scenarios import default_tree_battery

    reference = resolve_callable(default_sampler("tree_verifier"))
    scenarios = default_tree_battery("topk")[:2]
    parts = list(_parts(SPLIT_QUICK, scenarios=scenarios, kind=tree_verifier_kind("topk")).values())
    assert max(parts) > 2, parts
    here = check_tree_verifier(reference, drafting="topk", scenarios=scenarios, mode=SPLIT_QUICK)
    there = check_tree_verifier(reference, drafting="topk", scenarios=scenarios, mode=SPLIT_QUICK, executor=2)
    whole = check_tree_verifier(reference, drafting="topk", scenarios=scenarios, mode="quick")
    assert here.verdict == "passed" and here.achieved_tv <= SPLIT_QUICK.design_tv
    assert [r.check for r in here.results if r.scenario == scenarios[-1].name] != []
    assert {(r.scenario, r.check) for r in here.results} == {(r.scenario, r.check) for r in whole.results}
    assert _json(there) == _json(here)


def test_a_split_run_of_a_catalogued_bug_fails_with_its_diagnosis_on_any_executor():
    from specdec_check.bugs import unnormalised_inverse_cdf

    scenarios = verifier_scenarios()[:2]
    here = check_verifier(unnormalised_inverse_cdf, scenarios=scenarios, mode=SPLIT_QUICK, seed=1)
    there = check_verifier(unnormalised_inverse_cdf, scenarios=scenarios, mode=SPLIT_QUICK, seed=1, executor=2)
    assert here.verdict == "failed"
    diagnosis = [f.evidence["rule_agnostic"] for f in here.findings if "rule_agnostic" in f.evidence]
    assert [d["verdict"] for d in diagnosis] == ["lossy"]  # the diagnosis runs whole, on the first part's stream
    # Its first shard's evidence rejects: the later shards of each 3-shard scenario never merge.
    assert set(_parts(SPLIT_QUICK, scenarios=scenarios).values()) == {1, 3}
    assert [s.samples for s in here.scenarios[1:]] == [TEST_SHARD_ROWS, TEST_SHARD_ROWS]
    assert _json(there) == _json(here)


def test_mode_for_tv_scales_the_law_caps_and_validates():
    thorough = get_mode("thorough")
    fine = mode_for_tv(1e-3)
    assert (fine.name, fine.design_tv, fine.pit_bins, fine.max_calls) == ("thorough", 1e-3, 64, thorough.max_calls)
    assert fine.max_samples == 400 * thorough.max_samples and fine.max_law_calls == 400 * thorough.max_law_calls
    assert mode_for_tv(0.02) is thorough and mode_for_tv(0.5, "quick").max_samples == get_mode("quick").max_samples
    for bad in (0, 1.0, -1e-3, "x", None):
        with pytest.raises(ValueError, match="target resolution"):
            mode_for_tv(bad)
    for bad in (0.5, -3, True):
        with pytest.raises(ValueError, match="shard_rows"):
            dataclasses.replace(thorough, shard_rows=bad)


def test_repro_lines_replay_the_mode():
    from specdec_check.checker.core.repro import repro_command

    def line(mode, name="specdec_check.samplers:numpy_verify"):
        options = dataclasses.replace(check_options(VERIFIER, mode=mode), sampler_name=name,
                                      scenarios_source=None)
        return repro_command(VERIFIER, options, "many-rows")

    assert "--mode thorough --tv 0.0003333333333333333 " in line(mode_for_tv(1 / 3000))  # every digit
    assert "--tv" not in line("thorough") and "--tv" not in line(mode_for_tv(0.02))
    by_hand = line(SPLIT_QUICK)  # shard_rows changes the draws: no command line replays it
    assert by_hand.startswith("check_verifier(") and "shard_rows=512" in by_hand
