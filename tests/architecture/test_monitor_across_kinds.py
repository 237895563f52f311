"""The run's monitor hears every sampler call, in every kind (issue 29, defect 11: the tree kind's heartbeat
said "0 sampler call(s) done" at scenario 8 of 13, because its calls bypassed the monitor)."""

from __future__ import annotations

import pytest

from specdec_check import samplers
from specdec_check.checker import check_generator, check_ragged_verifier, check_tree_verifier, check_verifier
from specdec_check.scenarios import (default_generator_battery, default_ragged_battery, default_tree_battery,
                                     default_verifier_battery)


class CountingMonitor:
    """A monitor as the CLI's child has one: it counts the calls it is told of, started and finished."""

    def __init__(self):
        self.started = self.finished = 0

    def run_started(self, header, scenario_names):
        pass

    def call_started(self, scenario, index):
        self.started += 1

    def call_finished(self, scenario, index):
        self.finished += 1

    def scenario_finished(self, index, findings, records, summary):
        pass

    def progress(self, done, total, label=""):
        pass


def _counted(sampler):
    def wrapped(**kwargs):
        wrapped.calls += 1
        return sampler(**kwargs)

    wrapped.calls = 0
    return wrapped


KINDS = {
    "verifier": (check_verifier, samplers.numpy_verify, lambda: default_verifier_battery()[2], {}),
    "tree_verifier": (check_tree_verifier, samplers.numpy_verify_tree_topk, lambda: default_tree_battery("topk")[0],
                      {"drafting": "topk"}),
    "ragged_verifier": (check_ragged_verifier, samplers.numpy_ragged_verify, lambda: default_ragged_battery()[0], {}),
    "generator": (check_generator, samplers.numpy_generate, lambda: default_generator_battery()[0], {}),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_monitor_hears_every_sampler_call(kind):
    check, reference, scenario, keywords = KINDS[kind]
    sampler, monitor = _counted(reference), CountingMonitor()
    report = check(sampler, scenarios=[scenario()], mode="quick", seed=0, monitor=monitor, **keywords)
    assert report.verdict == "passed", report.summary()
    assert sampler.calls > 0 and monitor.started == monitor.finished == sampler.calls, (sampler.calls, vars(monitor))
