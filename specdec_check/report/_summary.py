"""What every renderer shows: the per-check verdict rows, number formats, efficiency rows."""

from __future__ import annotations

import json
import math

__all__ = [
    "CHECK_LABELS",
    "CHECK_TABLE_LEGEND",
    "EVERY_CALL_CHECKS",
    "PARTIAL_CHECKS",
    "check_rows",
    "resolution_line",
    "finding_counts",
    "headline",
    "verdict_of",
    "efficiency_rows",
    "evidence_text",
    "fmt_count",
    "fmt_num",
    "fmt_p",
    "settings_rows",
    "test_rows",
]

DASH = "—"
EVIDENCE_LIMIT = 4000


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_num(x, digits: int = 3) -> str:
    """A compact number: ``—`` for missing, integers with separators, floats to ``digits`` significant figures."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return DASH
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{digits}g}"


def fmt_count(x) -> str:
    return DASH if x is None else f"{int(x):,}"


def fmt_p(pvalue, evalue) -> str:
    """``p = 0.31`` or ``e = 2.1`` (or both) or ``—``."""
    parts = []
    if _finite(pvalue):
        parts.append(f"p = {pvalue:.3g}")
    if _finite(evalue):
        parts.append(f"e = {evalue:.3g}")
    return ", ".join(parts) or DASH


def _max(values):
    values = [v for v in values if _finite(v)]
    return max(values) if values else None


def _min(values):
    values = [v for v in values if _finite(v)]
    return min(values) if values else None


def _status(kinds: set, rejected: int, records: int, verdict: str) -> str:
    """The verdict-table status of one check.

    ``FAILED`` only for a check named by a failure finding, or (in a failed report) one
    whose tests rejected without another finding to explain them: an INEFFICIENT,
    inconclusive or interrupted report never shows a FAILED row. Inefficiency, warning and
    nonstandard findings show as such; a check without a test that saw a sample was not run
    (never ``passed``), whatever the verdict.
    """
    if "failure" in kinds:
        return "FAILED"
    if "inefficiency" in kinds:
        return "inefficient"
    if "warning" in kinds:
        return "warning"
    if rejected:
        return {"failed": "FAILED", "inefficient": "inefficient"}.get(verdict, "rejected")
    if "nonstandard" in kinds:
        return "nonstandard"
    if not records:
        return "not run"
    return "passed"


def check_rows(data: dict) -> list[dict]:
    """One row per check, across scenarios: the verdict table at the top of a report.

    A check's status is ``FAILED`` when a failure finding names it (see :func:`_status` for
    the rest). It shows the smallest p-value, the largest e-value, the largest (worst)
    minimum detectable TV, the largest certified TV bound and the samples its tests used.
    Linear in the number of results and findings (one pass to group them).
    """
    verdict = str(data.get("verdict", "passed" if data.get("passed") else "failed"))
    records_of: dict = {}
    kinds_of: dict = {}
    for check in data.get("checks") or []:
        records_of.setdefault(check, [])
    for record in data.get("results", []):
        records_of.setdefault(record.get("check"), []).append(record)
    for finding in data.get("findings", []):
        records_of.setdefault(finding.get("check"), [])
        kinds_of.setdefault(finding.get("check"), set()).add(finding.get("kind"))
    rows = []
    for check, records in records_of.items():
        ran = [r for r in records if int(r.get("n") or 0) > 0 or not r.get("passed", True)]
        rejected = sum(1 for r in ran if not r.get("passed", True))
        every_call = check in EVERY_CALL_CHECKS and bool(data.get("samples_used"))
        status = _status(kinds_of.get(check, set()), rejected, len(ran) or every_call, verdict)
        if check == "interrupted":  # the run was stopped from outside: not a check the sampler failed
            status = "interrupted"
        rows.append(
            {
                "check": check,
                "label": CHECK_LABELS.get(check, check),
                "status": status,
                "passed": status != "FAILED",
                "tests": len(ran),
                "rejected": rejected,
                "pvalue": _min(r.get("pvalue") for r in ran),
                "evalue": _max(r.get("evalue") for r in ran),
                "min_detectable_tv": _resolved(_max(r.get("min_detectable_tv") for r in ran)),
                "tv_upper": _resolved(_max(r.get("tv_upper") for r in ran)),
                "samples": int(data.get("samples_used") or 0) if every_call else sum(int(r.get("n") or 0) for r in ran),
                "methods": sorted({str(r.get("method")) for r in ran if r.get("method")}),
            }
        )
    return rows


#: Checks that run on every call (their records, if any, are of probes only): their samples are the run's.
EVERY_CALL_CHECKS = ("contract", "impossible")
#: How the verdict table names a check whose name is also a scenario's.
CHECK_LABELS = {"screen": "screen (structural)"}
#: What the verdict table's columns mean (every renderer prints it under the table).
CHECK_TABLE_LEGEND = ("p / e: the smallest p-value and the largest e-value over the check's tests; min TV: the "
                      "largest total-variation distance one of its tests could miss (power 0.99); TV bound: the "
                      "largest certified upper bound on the distance between the sampler's law and the exact law; "
                      "tested: the outcomes its tests counted, summed over them (one sample read by two tests counts twice, so "
                      "a column can exceed the run's samples, the rows handed to the sampler; contract and impossible "
                      "check every sample once); "
                      "\u2014: no such number, or no resolution (a TV of 1 is no bound).")


def resolution_line(data: dict) -> str | None:
    """``"resolution: ..."``: the weakest law-tested scenario's detectable TV (power 0.99), saying over how
    many of the planned scenarios when the run did not complete them all; None without a law test."""
    if data.get("achieved_tv") is None:
        return None
    ran = [s for s in data.get("scenarios", []) if s.get("achieved_tv") is not None]
    weakest = max(ran, key=lambda s: s["achieved_tv"])["name"] if ran else None
    planned = next((f.get("evidence", {}).get("scenarios_planned") for f in data.get("findings", [])
                    if f.get("check") in PARTIAL_CHECKS and f.get("evidence", {}).get("scenarios_planned")), None)
    text = (f"resolution: the weakest scenario's law tests could detect a TV of {fmt_num(data['achieved_tv'])} with "
            f"power 0.99 (weakest: {weakest}; design {fmt_num(data.get('design_tv'))})")
    completed = len(data.get("scenarios", []))
    if planned and completed < planned:
        text += (f"; over the {completed} of {planned} planned scenarios that completed: the others were not run "
                 "and prove nothing")
    return text


#: Findings that end a run early (the report is partial): their row says so instead of FAILED where the
#: sampler did not cause it (an interrupt), and the resolution counts only the scenarios that completed.
PARTIAL_CHECKS = ("interrupted", "crash", "timeout")


def _resolved(tv):
    """A TV column's value, None where it says nothing (a TV of 1 bounds nothing)."""
    return None if tv is None or tv >= 1.0 else tv


def finding_counts(data: dict) -> dict:
    """``{kind: count}`` of the findings, every kind present (the headline of each renderer)."""
    from ._verdict import FINDING_KINDS

    counts = dict.fromkeys(FINDING_KINDS, 0)
    for finding in data.get("findings", []):
        kind = finding.get("kind")
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def headline(data: dict) -> str:
    """``"12 tests on 3 scenarios, 3,146 samples; 0 failures, 1 inefficiency, ..."`` (nonstandard only when present)."""
    counts = finding_counts(data)
    parts = [f"{counts['failure']} failures", f"{counts['inefficiency']} inefficiencies", f"{counts['warning']} warnings"]
    if counts.get("nonstandard"):
        parts.append(f"{counts['nonstandard']} nonstandard (information only)")
    return (f"{len(data.get('results', []))} tests on {len(data.get('scenarios', []))} scenarios, "
            f"{fmt_count(data.get('samples_used'))} samples; " + ", ".join(parts))


def verdict_of(data: dict) -> str:
    """The report's verdict word (older dicts without one: from ``passed``)."""
    return str(data.get("verdict", "passed" if data.get("passed") else "failed"))


def test_rows(data: dict) -> list[dict]:
    """The per-(scenario, check) test records, failed ones first, otherwise in run order."""
    results = list(data.get("results", []))
    return sorted(results, key=lambda r: bool(r.get("passed", True)))


def efficiency_rows(data: dict) -> list[dict]:
    """Per scenario: measured against exact acceptance and tokens per step, and Equation 1."""
    from ..exact import expected_tokens_per_step

    rows = []
    for s in data.get("scenarios", []):
        alpha = s.get("acceptance_measured")
        eq1 = None
        if _finite(alpha) and 0.0 <= alpha <= 1.0 and isinstance(s.get("gamma"), int):
            try:
                eq1 = expected_tokens_per_step(alpha, s["gamma"])
            except ValueError:
                eq1 = None
        rows.append({**s, "eq1_at_measured": eq1})
    return rows


def settings_rows(data: dict) -> list[tuple[str, str]]:
    """(label, value) pairs describing the run."""
    device = data.get("device")
    rows = [
        ("kind", str(data.get("kind"))),
        ("sampler", str(data.get("sampler"))),
        ("mode", str(data.get("mode"))),
        ("backend", str(data.get("backend")) + (f" on {device}" if device else "")),
        ("dtype", f"{data.get('dtype')} (impossible-event tolerance {fmt_num(data.get('tolerance'))})"),
        ("seed", str(data.get("seed"))),
        (
            "false-alarm budget",
            f"{fmt_num(data.get('alpha'))} for the run, {fmt_num(data.get('alpha_per_check'))} per check",
        ),
        ("design TV", fmt_num(data.get("design_tv"))),
        ("samples", fmt_count(data.get("samples_used"))),
        ("elapsed", f"{fmt_num(data.get('elapsed_s'))} s"),
        ("report version", str(data.get("report_version"))),
    ]
    return rows


#: Significant digits of the numbers in rendered evidence (report.json keeps them all): enough to tell
#: p-values, counts' expectations and TVs apart, without the float noise of 0.004000000000000002.
EVIDENCE_DIGITS = 4


def rounded(value, digits: int = EVIDENCE_DIGITS):
    """``value`` with every float (in nested lists and dicts too) rounded to ``digits`` significant digits;
    integers, booleans, strings and non-finite floats unchanged."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    return value


def evidence_text(evidence, limit: int = EVIDENCE_LIMIT) -> str:
    """The evidence dict as indented JSON, numbers to :data:`EVIDENCE_DIGITS` significant digits, cut at
    ``limit`` characters (report.json keeps it whole, at full precision)."""
    evidence = rounded(evidence)
    if isinstance(evidence, dict):
        body = ",\n".join(
            f"  {json.dumps(str(k))}: {json.dumps(v, sort_keys=True, default=str)}" for k, v in sorted(evidence.items())
        )
        text = "{\n" + body + "\n}"
    else:
        text = json.dumps(evidence, sort_keys=True, default=str)
    if len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit:,} more characters in report.json)"
    return text
