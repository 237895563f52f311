"""Reports assembled by the supervisor: from the scenarios a run finished, plus what ended it.

A run that times out, crashes or is interrupted never sends its report; the supervisor has the
header (``("run", ...)``) and the scenario parts received, and builds a ``report.json`` of the
same layout as ``CheckReport.to_dict()`` from them. The verdict rule, for every report:

* ``passed`` is True iff no finding is of kind ``"failure"`` and the verdict is ``"passed"`` or
  ``"inefficient"``;
* a timeout (check ``"timeout"``) or a crash (check ``"crash"``) is a failure finding: verdict
  ``"failed"``;
* SIGINT / SIGTERM: verdict ``"interrupted"``, with a failure finding of check ``"interrupted"``
  (a run that did not finish proves nothing, so no table row may say it passed).
"""

from __future__ import annotations

from .._report_rules import PASSING_VERDICTS
from .._report_rules import verdict_of as rules_verdict_of

__all__ = ["KEY_ORDER", "assemble_report", "crash_finding", "interrupt_finding", "timeout_finding", "verdict_of"]

#: Key order of ``CheckReport.to_dict()`` (kept so that partial and complete reports read alike).
KEY_ORDER = ("report_version", "kind", "sampler", "passed", "verdict", "mode", "backend", "device", "dtype",
             "tolerance", "seed", "alpha", "alpha_per_check", "design_tv", "achieved_tv", "inconclusive", "strict",
             "screen", "rule", "drafting", "samples_used", "elapsed_s", "checks", "findings", "scenarios", "results")


def verdict_of(findings) -> tuple[str, bool]:
    """``(verdict, passed)`` of a run's findings by the one rule (:func:`specdec_check._report_rules.verdict_of`);
    a partial run is never inconclusive here: what ended it is a failure or an interruption."""
    verdict = rules_verdict_of((f.get("kind") for f in findings), inconclusive=False)
    return verdict, verdict in PASSING_VERDICTS


def _progress_note(completed: int, planned) -> str:
    planned = len(planned) if planned else None
    of = f" of {planned}" if planned is not None else ""
    return f"this report is partial: {completed}{of} scenario(s) completed"


def _where(call, scenario, completed: int = 0) -> str:
    if call is not None:
        return f"during call {call[1]} of scenario {call[0]!r}"
    if scenario:
        return f"in scenario {scenario!r} (outside a sampler call)"
    if completed:  # scenarios finished, none running here: their shards ran in worker processes
        return "while scenarios ran in worker processes"
    return "before the first scenario started"


def timeout_finding(*, timeout_s: float, call, completed: int, planned, repro: str = "",
                    total: bool = False) -> dict:
    """The ``timeout`` failure: a call (or the whole run) ran past its time limit and was killed."""
    if total or call is None:
        what = f"the run did not finish within {timeout_s:g} s"
    else:
        what = f"the sampler did not return within {timeout_s:g} s (call {call[1]} of scenario {call[0]!r})"
    message = (f"{what}; the checker killed it, and {_progress_note(completed, planned)}. A correct but slow "
               "sampler (e.g. compiling on its first call) needs a longer --timeout (0 disables it).")
    evidence = {"timeout_s": timeout_s, "scenarios_completed": completed,
                "scenarios_planned": len(planned) if planned else None}
    if call is not None:
        evidence.update(call=int(call[1]), scenario=call[0])
    return {"kind": "failure", "check": "timeout", "scenario": call[0] if call else "", "message": message,
            "evidence": evidence, "repro": repro}


def crash_finding(*, how: str, call, scenario, completed: int, planned, facts: dict | None = None,
                  repro: str = "") -> dict:
    """The ``crash`` failure: the process running the check ended (or was about to) without a verdict.

    ``how`` is what happened in words (``"raised SystemExit(0)"``, ``"exited with status 0"``,
    ``"was killed by signal SIGKILL (9)"``); ``facts`` the escaped exception's description.
    """
    subject = "the sampler" if call is not None else "the code under test"
    message = (f"{subject} {how} {_where(call, scenario, completed)}, ending the check before it reached a verdict "
               f"(a sampler must return or raise an Exception, never end or kill its process); "
               f"{_progress_note(completed, planned)}.")
    evidence = {"how": how, "scenarios_completed": completed, "scenarios_planned": len(planned) if planned else None}
    if call is not None:
        evidence.update(call=int(call[1]), scenario=call[0])
    if facts:
        evidence.update(exception=facts.get("type"), detail=facts.get("message"), traceback=facts.get("traceback"))
    return {"kind": "failure", "check": "crash", "scenario": (call[0] if call else scenario) or "",
            "message": message, "evidence": evidence, "repro": repro}


def interrupt_finding(*, signal_name: str, call, scenario, completed: int, planned) -> dict:
    """The ``interrupted`` finding: SIGINT or SIGTERM stopped the run before its verdict."""
    message = (f"the run was interrupted by {signal_name} {_where(call, scenario, completed)}; "
               f"{_progress_note(completed, planned)}, and it proves nothing about the scenarios not run.")
    return {"kind": "failure", "check": "interrupted", "scenario": (call[0] if call else scenario) or "",
            "message": message,
            "evidence": {"signal": signal_name, "scenarios_completed": completed,
                         "scenarios_planned": len(planned) if planned else None}, "repro": ""}


def assemble_report(header: dict, parts, extra_findings, *, elapsed_s: float, verdict: str | None = None) -> dict:
    """A report dict (layout of ``CheckReport.to_dict()``) from the run's header, the scenario parts
    received and the findings the supervisor adds; ``verdict`` overrides the one the findings give
    (``"interrupted"``). ``passed`` follows the rule in the module docstring."""
    findings = [f for p in parts for f in p["findings"]] + list(extra_findings)
    found, _ = verdict_of(findings)
    verdict = verdict or found
    passed = verdict in ("passed", "inefficient") and not any(f.get("kind") == "failure" for f in findings)
    scenarios = [p["summary"] for p in parts if p.get("summary") is not None]
    resolved = [s["achieved_tv"] for s in scenarios if s.get("achieved_tv") is not None]
    data = dict(header)
    data.setdefault("achieved_tv", max(resolved) if resolved else None)
    data.setdefault("inconclusive", [])
    data.update(
        passed=passed, verdict=verdict, findings=findings, scenarios=scenarios,
        results=[r for p in parts for r in p["records"]],
        samples_used=int(sum(int(s.get("samples") or 0) for s in scenarios)), elapsed_s=float(elapsed_s),
    )
    data["checks"] = list(data.get("checks") or [])
    return {k: data[k] for k in KEY_ORDER if k in data} | {k: v for k, v in data.items() if k not in KEY_ORDER}
