"""What check_verifier and check_generator share: argument checks, the battery loop, the report."""

from __future__ import annotations

import functools
import time

import numpy as np

from .. import stats
from ._backend import make_backend
from ._callables import check_sampler, qualified_name
from ._modes import get_mode
from ._report import CheckReport, Finding

__all__ = ["ScenarioRunBase", "planned_samples", "run_battery"]

#: What a run_battery monitor implements (e.g. specdec_check._isolation's channel to the supervising process).
_MONITOR_METHODS = ("run_started", "call_started", "call_finished", "scenario_finished")


@functools.lru_cache(maxsize=256)
def planned_samples(design_tv: float, support_size: int, alpha: float) -> int:
    """:func:`specdec_check.stats.samples_for` for a uniform law, memoised: every scenario of a
    battery plans with the same arguments, and the plan is a pure function of them."""
    return int(stats.samples_for(design_tv, support_size=support_size, alpha=alpha))


class ScenarioRunBase:
    """State every scenario run keeps: findings, records, counts; subclasses implement ``execute``."""

    def __init__(self, sampler, scenario, plan, mode, backend, ledger, rng, checks, repro):
        self.sampler, self.scenario, self.plan, self.mode, self.backend = sampler, scenario, plan, mode, backend
        self.ledger, self.rng, self.checks, self.repro = ledger, rng, checks, repro
        self.findings, self.records = [], []
        self.samples, self.calls = 0, 0
        self.stopped = False  # a contract failure or impossible event ends the scenario
        self.summary = None
        self.monitor = None  # run_battery's monitor (call_started / call_finished), or None

    def sampler_call(self, sampler, /, **kwargs):
        """``sampler(**kwargs)``, with the monitor told when the call starts and when it returns or raises
        an Exception (a BaseException ends the run: no "finished", so the supervisor knows the call)."""
        if self.monitor is None:
            return sampler(**kwargs)
        self.monitor.call_started(self.scenario.name, self.calls)
        try:
            out = sampler(**kwargs)
        except Exception:
            self.monitor.call_finished(self.scenario.name, self.calls)
            raise
        self.monitor.call_finished(self.scenario.name, self.calls)
        return out

    def fail(self, check, message, evidence=None, kind="failure"):
        self.findings.append(Finding(kind, check, self.scenario.name, message, dict(evidence or {}), self.repro))

    def execute(self):
        raise NotImplementedError


def _repro(command, sampler, mode, seed, scenario, backend):
    line = f"specdec-check {command} {sampler} --mode {mode.name} --seed {seed} --scenario {scenario}"
    if backend.name != "numpy":
        line += f" --backend {backend.name} --device {backend.device} --dtype {backend.dtype}"
    return line


def run_battery(*, kind, command, sampler, keywords, scenario_type, default_battery, plan, run_class, known_checks,
                scenarios, mode, backend, seed, alpha, progress, checks, device, dtype, monitor=None) -> CheckReport:
    """Validate the call, plan every test (one alpha ledger for the run), run each scenario, build the report."""
    check_sampler(sampler, keywords, kind)
    mode = get_mode(mode)
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha (the false-alarm budget of the whole run) must lie in (0, 1); got {alpha}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0; got {seed!r}.")
    if checks is None:
        checks = known_checks
    else:
        checks = tuple(checks)
        unknown = [c for c in checks if c not in known_checks]
        if unknown:
            raise ValueError(f"unknown check(s) {unknown}; choose from {known_checks}.")
    if progress is not None and not callable(progress):
        raise TypeError("progress must be None or a callable progress(done, total, label).")
    if monitor is not None and not all(callable(getattr(monitor, m, None)) for m in _MONITOR_METHODS):
        raise TypeError(f"monitor must be None or an object with the methods {', '.join(_MONITOR_METHODS)}.")
    backend_obj = make_backend(backend, device=device, dtype=dtype)
    scenarios = default_battery() if scenarios is None else list(scenarios)
    for s in scenarios:
        if not isinstance(s, scenario_type):
            raise TypeError(f"scenarios must be {scenario_type.__name__} objects; got {type(s).__name__}.")
    plans = [plan(s, checks) for s in scenarios]
    ledger = stats.AlphaLedger(alpha, planned=max(1, sum(len(p) for p in plans)))
    name = qualified_name(sampler)
    header = dict(kind=kind, sampler=name, mode=mode.name, backend=backend_obj.name, device=backend_obj.device,
                  dtype=backend_obj.dtype, tolerance=float(backend_obj.tolerance), seed=int(seed), alpha=alpha,
                  alpha_per_check=ledger.per_check, design_tv=mode.design_tv, checks=tuple(checks))
    if monitor is not None:
        monitor.run_started(dict(header), [s.name for s in scenarios])
    started = time.perf_counter()
    findings, records, summaries, samples = [], [], [], 0
    seeds = np.random.SeedSequence(int(seed)).spawn(len(scenarios))
    for i, (scenario, scenario_plan) in enumerate(zip(scenarios, plans)):
        if progress is not None:
            progress(i, len(scenarios), scenario.name)
        run = run_class(sampler, scenario, scenario_plan, mode, backend_obj, ledger, np.random.default_rng(seeds[i]),
                        checks, _repro(command, name, mode, seed, scenario.name, backend_obj))
        run.monitor = monitor
        run.execute()
        findings += run.findings
        records += run.records
        summaries.append(run.summary)
        samples += run.samples
        if monitor is not None:
            monitor.scenario_finished(i, [f.to_dict() for f in run.findings], [r.to_dict() for r in run.records],
                                      None if run.summary is None else run.summary.to_dict())
    if progress is not None:
        progress(len(scenarios), len(scenarios), "done")
    return CheckReport(
        **header, passed=not any(f.kind == "failure" for f in findings), findings=tuple(findings),
        results=tuple(records), scenarios=tuple(summaries), samples_used=int(samples),
        elapsed_s=time.perf_counter() - started,
    )
