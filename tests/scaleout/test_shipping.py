"""Issue 21: what goes to the workers and how it is validated: the sampler by MODULE:CALLABLE (or
pickled), a clear error for a closure, executor= and device templates checked once, worker slots."""

from __future__ import annotations

import functools
import os

import pytest
from scaleout_samplers import verifier_scenarios

from specdec_check import check_verifier
from specdec_check.checker.chain.kind import VERIFIER
from specdec_check.checker.core.options import check_options
from specdec_check.checker.core.executors import LocalProcesses, ShardRunner, check_executor, device_of_template, \
    worker_index
from specdec_check.checker.core.shards import _shipped_sampler
from specdec_check.samplers import numpy_verify


def test_a_sampler_with_a_name_travels_by_name_and_others_by_value():
    assert _shipped_sampler(numpy_verify, "specdec_check.samplers:numpy_verify") == (None,
                                                                                      "specdec_check.samplers:numpy_verify")
    wrapped = functools.partial(numpy_verify)
    assert _shipped_sampler(wrapped, None) == (wrapped, None)
    # A name that imports something else is not trusted: the object itself travels.
    assert _shipped_sampler(wrapped, "specdec_check.samplers:numpy_verify") == (wrapped, None)


def test_a_closure_gets_a_clear_error_on_workers_and_runs_in_process():
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                            generator=generator)

    with pytest.raises(TypeError, match=r"cannot be sent to the executor's workers .*Define it at module level and "
                                        r"pass name='MODULE:CALLABLE'.*executor=None"):
        check_verifier(verify, scenarios=verifier_scenarios()[:1], mode="quick", executor=2)
    assert check_verifier(verify, scenarios=verifier_scenarios()[:1], mode="quick").verdict == "passed"


@pytest.mark.parametrize("executor, error, message", [
    ("threads", ValueError, "executor must be None, 'processes'"),
    (0, ValueError, "must be >= 1"),
    (True, TypeError, "an object with submit"),
    (object(), TypeError, "an object with submit"),
])
def test_bad_executors_are_refused_once_with_what_is_allowed(executor, error, message):
    with pytest.raises(error, match=message):
        check_options(VERIFIER, checks=("contract",), executor=executor)


def test_executor_specs():
    assert check_executor(None) is None
    assert check_executor("processes") == LocalProcesses(None) and LocalProcesses(None).size() >= 1
    assert check_executor(3) == LocalProcesses(3) and LocalProcesses(3).size() == 3
    with ShardRunner(LocalProcesses(1)) as runner:  # an executor object passes through as it is
        assert check_executor(runner.executor) is runner.executor
        assert check_options(VERIFIER, checks=("contract",), executor=runner.executor).executor is runner.executor


def test_device_templates():
    assert device_of_template("cuda:{worker}") == ("cuda:0", "cuda:{worker}")
    assert device_of_template("cuda:1") == ("cuda:1", None) and device_of_template(None) == (None, None)
    with pytest.raises(ValueError, match=r"may hold only \{worker\}"):
        device_of_template("cuda:{gpu}")
    options = check_options(VERIFIER, checks=("contract",), backend="torch", device="cpu", dtype="float64")
    assert options.device_template is None


def test_each_worker_of_an_owned_pool_has_its_own_slot():
    with ShardRunner(LocalProcesses(2)) as runner:
        seen = [runner.executor.submit(_slot_and_pid).result() for _ in range(8)]
    slots = {}
    for slot, pid in seen:
        assert slots.setdefault(pid, slot) == slot  # one slot per process
    assert set(slots.values()) <= {0, 1} and len(set(slots.values())) == len(slots)  # distinct
    assert worker_index() == 0  # this process: no pool slot


def _slot_and_pid():
    return worker_index(), os.getpid()


def test_a_device_template_is_filled_with_the_workers_slot(monkeypatch):
    pytest.importorskip("torch")
    import numpy as np

    from specdec_check.checker.core import executors as _executors
    from specdec_check.checker.core import shards as _shards
    from specdec_check.checker.core.context import ScenarioPlan

    options = check_options(VERIFIER, checks=("contract",), backend="torch", device="cpu:{worker}", dtype="float64")
    assert options.backend.device == "cpu:0" and options.device_template == "cpu:{worker}"
    plan = ScenarioPlan(verifier_scenarios()[0], (), options, 1e-6, 1, np.random.SeedSequence(0), "")
    shard = _shards.ScenarioShard(0, VERIFIER, numpy_verify, None, plan)
    monkeypatch.setattr(_executors, "_SLOT", 1)
    assert _shards._context(shard).backend.device == "cpu:1"


def test_torch_runs_with_a_device_template_give_the_same_report_on_workers():
    pytest.importorskip("torch")
    import json

    from scaleout_helpers import without_timings

    from specdec_check._settings import default_sampler, resolve_callable

    verify = resolve_callable(default_sampler("verifier", "torch"))
    reports = [check_verifier(verify, backend="torch", device="cpu:{worker}", scenarios=verifier_scenarios()[:2],
                              mode="quick", executor=executor).to_dict() for executor in (None, 2)]
    assert reports[0]["device"] == "cpu:{worker}" and reports[0]["verdict"] == "passed"
    assert json.dumps(without_timings(reports[0]), sort_keys=True) == json.dumps(without_timings(reports[1]),
                                                                                   sort_keys=True)
