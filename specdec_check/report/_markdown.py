"""``report.md``: GitHub-flavoured Markdown rendered from ``CheckReport.to_dict()``.

Every string from the report is escaped twice over: control characters become visible
escapes (:mod:`specdec_check._escape`), then Markdown and HTML syntax is neutralised. Rendering is
linear in the size of the report.
"""

from __future__ import annotations

import re

from .._escape import one_line
from ._summary import (
    CHECK_TABLE_LEGEND,
    check_rows,
    efficiency_rows,
    evidence_text,
    fmt_count,
    fmt_num,
    fmt_p,
    headline,
    settings_rows,
    test_rows,
    verdict_of,
)

__all__ = ["render_markdown"]

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|!~])")


def _text(value) -> str:
    """Escape a user-supplied string for Markdown prose or a table cell (one line, no HTML)."""
    text = one_line(value).replace("&", "&amp;")
    return _SPECIAL.sub(lambda m: {"<": "&lt;", ">": "&gt;"}.get(m.group(1), "\\" + m.group(1)), text)


def _code(value) -> str:
    """An inline code span for a user-supplied string, safe inside a table cell.

    Strings with HTML-significant characters are escaped prose instead: entities are not
    decoded inside code spans, so escaping there is impossible.
    """
    text = one_line(value)
    if any(c in text for c in "<>&"):
        return _text(value)
    text = text.replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _block(text: str, info: str = "") -> list[str]:
    run = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, run + 1)
    return [fence + info, text, fence]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _finding_title(kind) -> str:
    """Heading word of a finding: warnings and nonstandard findings are labelled as information."""
    return {"warning": "warning (not a failure)", "nonstandard": "nonstandard (information only)"}.get(kind, kind)


def _test_result(record: dict, failed_checks: set) -> str:
    """``passed``, or ``REJECTED`` (bold only where the rejection made its check fail)."""
    if record.get("passed"):
        return "passed"
    return "**REJECTED**" if record.get("check") in failed_checks else "REJECTED"


def render_markdown(data: dict) -> str:
    """The report as Markdown: verdict table first, then findings with evidence and repro, tests, scenarios."""
    verdict = verdict_of(data)
    rows = check_rows(data)
    failed_checks = {r["check"] for r in rows if r["status"] == "FAILED"}
    out = [
        f"# specdec-check {_text(data.get('kind', ''))} report: {_code(data.get('sampler', ''))}",
        "",
        f"**Verdict: {_text(verdict.upper())}**. {headline(data)}.",
        "",
        "## Verdict by check",
        "",
    ]
    out += _table(
        ["check", "result", "p-value / e-value", "min. detectable TV", "certified TV bound", "outcomes tested"],
        [
            [
                _code(r["label"]),
                ("**FAILED**" if r["status"] == "FAILED" else r["status"])
                + (f" ({r['rejected']}/{r['tests']} rejected)" if r["rejected"] else ""),
                fmt_p(r["pvalue"], r["evalue"]),
                fmt_num(r["min_detectable_tv"]),
                fmt_num(r["tv_upper"]),
                fmt_count(r["samples"]),
            ]
            for r in rows
        ],
    )
    out += ["", CHECK_TABLE_LEGEND, "", "## Run", ""]
    out += _table(["setting", "value"], [[label, _text(value)] for label, value in settings_rows(data)])

    if data.get("sampler_output"):
        captured = data["sampler_output"]
        out += ["", "## The sampler's own output", "",
                f"{fmt_count(captured.get('bytes'))} bytes written to stdout/stderr during the run"
                + (" (first and last 2,000 characters)" if captured.get("truncated") else "") + ":", ""]
        out += _block(str(captured.get("excerpt", "")), "text")
    findings = data.get("findings", [])
    out += ["", "## Findings", ""]
    if not findings:
        out.append("None.")
    for i, f in enumerate(findings, 1):
        out += [
            f"### {i}. {_text(_finding_title(f.get('kind', '')))}: {_code(f.get('scenario', ''))} / "
            f"{_code(f.get('check', ''))}",
            "",
            _text(f.get("message", "")),
            "",
        ]
        if f.get("evidence"):
            out += ["Evidence:", ""] + _block(evidence_text(f["evidence"]), "json") + [""]
        if f.get("repro"):
            out += ["Reproduce:", ""] + _block(one_line(f["repro"]), "sh") + [""]

    out += ["", "## Tests", ""]
    out += _table(
        ["scenario", "check", "method", "result", "p-value / e-value", "statistic", "n", "bins",
         "min. detectable TV", "TV plug-in", "certified TV bound"],
        [
            [
                _code(r.get("scenario", "")), _code(r.get("check", "")), _text(r.get("method", "")),
                _test_result(r, failed_checks), fmt_p(r.get("pvalue"), r.get("evalue")),
                fmt_num(r.get("statistic")), fmt_count(r.get("n")), fmt_count(r.get("bins")),
                fmt_num(r.get("min_detectable_tv")), fmt_num(r.get("tv_plugin")), fmt_num(r.get("tv_upper")),
            ]
            for r in test_rows(data)
        ],
    )
    out += ["", "## Scenarios and efficiency", ""]
    out += _table(
        ["scenario", "V", "γ", "rows × calls", "samples", "α measured", "α exact", "tokens/step measured",
         "tokens/step exact", "Eq. 1 at measured α", "description"],
        [
            [
                _code(s.get("name", "")), fmt_count(s.get("vocab_size")), fmt_count(s.get("gamma")),
                f"{fmt_count(s.get('rows_per_call'))} × {fmt_count(s.get('calls'))}", fmt_count(s.get("samples")),
                fmt_num(s.get("acceptance_measured"), 4), fmt_num(s.get("acceptance_expected"), 4),
                fmt_num(s.get("tokens_per_step_measured"), 4), fmt_num(s.get("tokens_per_step_expected"), 4),
                fmt_num(s.get("eq1_at_measured"), 4), _text(s.get("description", "")),
            ]
            for s in efficiency_rows(data)
        ],
    )
    out += ["", "Equation 1 (Leviathan et al. 2023): (1 − α^(γ+1)) / (1 − α) tokens per step for i.i.d. "
            "acceptance at rate α. Figures are in `report.html`.", ""]
    return "\n".join(out)
