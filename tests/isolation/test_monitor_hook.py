"""The checker's ``monitor=`` hook: what the supervisor learns, and that it adds up to the report."""

from __future__ import annotations

import pytest

from specdec_check.checker import check_generator, check_verifier
from specdec_check.samplers import numpy_generate, numpy_verify
from specdec_check.scenarios import default_generator_battery, default_verifier_battery

SMALL = ("corpus-bigram", "disjoint-supports")


class Recorder:
    def __init__(self):
        self.events = []

    def run_started(self, header, scenario_names):
        self.events.append(("run", header, list(scenario_names)))

    def call_started(self, scenario, index):
        self.events.append(("call", scenario, index))

    def call_finished(self, scenario, index):
        self.events.append(("done", scenario, index))

    def scenario_finished(self, index, findings, records, summary):
        self.events.append(("scenario", index, findings, records, summary))


def _counting(sampler):
    calls = []

    def wrapped(**kwargs):
        calls.append(1)
        return sampler(**kwargs)

    return wrapped, calls


def _assert_adds_up(report, events, names, calls):
    assert events[0][0] == "run"
    header, planned = events[0][1], events[0][2]
    data = report.to_dict()
    assert planned == names
    assert {k: (list(v) if isinstance(v, tuple) else v) for k, v in header.items()} == {
        k: data[k] for k in header}
    assert set(header) == set(data) - {"report_version", "passed", "verdict", "samples_used", "elapsed_s",
                                       "findings", "scenarios", "results", "achieved_tv", "inconclusive"}
    starts = [e for e in events if e[0] == "call"]
    ends = [e for e in events if e[0] == "done"]
    assert len(starts) == len(ends) == len(calls) > 0  # every call of the sampler, and only those
    for start, end in zip(starts, ends):  # each start is followed by its own end
        assert events.index(end) == events.index(start) + 1 and start[1:] == end[1:]
    parts = [e for e in events if e[0] == "scenario"]
    assert [p[1] for p in parts] == list(range(len(names)))
    assert [f for p in parts for f in p[2]] == data["findings"]
    assert [r for p in parts for r in p[3]] == data["results"]
    assert [p[4] for p in parts] == data["scenarios"]
    for part in parts:  # the calls of a scenario come before its part, named after it
        before = events[:events.index(part)]
        name = part[4]["name"]
        assert any(e[0] == "call" and e[1] == name for e in before)
    assert sum(p[4]["calls"] for p in parts) <= len(calls)


def test_verifier_monitor_sees_every_call_and_the_report_in_parts():
    scenarios = [s for s in default_verifier_battery() if s.name in SMALL]
    sampler, calls = _counting(numpy_verify)
    recorder = Recorder()
    report = check_verifier(sampler, scenarios=scenarios, mode="quick", seed=1, monitor=recorder)
    _assert_adds_up(report, recorder.events, ["screen", *SMALL], calls)  # the screen runs first
    assert report.passed and sum(s.calls for s in report.scenarios) == len(calls)


def test_verifier_monitor_sees_calls_that_raise():
    scenarios = [s for s in default_verifier_battery() if s.name == "corpus-bigram"]

    def raises(**kwargs):
        raise IndexError("boom")

    sampler, calls = _counting(raises)
    recorder = Recorder()
    report = check_verifier(sampler, scenarios=scenarios, mode="quick", seed=1, monitor=recorder)
    _assert_adds_up(report, recorder.events, ["screen", "corpus-bigram"], calls)
    assert not report.passed


def test_generator_monitor():
    scenarios = list(default_generator_battery())[:1]
    sampler, calls = _counting(numpy_generate)
    recorder = Recorder()
    report = check_generator(sampler, scenarios=scenarios, mode="quick", seed=1, monitor=recorder)
    _assert_adds_up(report, recorder.events, [scenarios[0].name], calls)


def test_the_monitor_does_not_change_the_report():
    scenarios = [s for s in default_verifier_battery() if s.name in SMALL]
    with_monitor = check_verifier(numpy_verify, scenarios=scenarios, mode="quick", seed=2, monitor=Recorder())
    without = check_verifier(numpy_verify, scenarios=scenarios, mode="quick", seed=2)
    a, b = with_monitor.to_dict(), without.to_dict()
    for d in (a, b):
        d.pop("elapsed_s")
        for s in d["scenarios"]:
            s.pop("elapsed_s")
    assert a == b


def test_a_monitor_without_the_methods_is_refused():
    with pytest.raises(TypeError, match="monitor must be None or an object with the methods run_started, "
                                        "call_started, call_finished, scenario_finished"):
        check_verifier(numpy_verify, mode="quick", monitor=object())
