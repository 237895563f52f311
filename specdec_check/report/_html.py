"""``report.html``: one self-contained page (inline CSS, data: URI images, no scripts, no network).

Every string that comes from the report (sampler name, scenario names, messages,
evidence, repro commands) has its control characters made visible (:mod:`specdec_check._escape`) and
then goes through :func:`html.escape`. Rendering is linear in the size of the report:
names in figures are cut short (:mod:`._plots`), so a megabyte-long scenario name costs
milliseconds, not the minutes matplotlib would spend laying it out. A Content-Security-Policy
meta tag forbids scripts and any network fetch, as a second line of defence.
"""

from __future__ import annotations

import base64
from html import escape

from .._escape import one_line, printable
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

__all__ = ["render_html"]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2330;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #dde; }
code, pre { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: #f5f6f8; border: 1px solid #e2e4ea; padding: .6em .8em; overflow-x: auto; white-space: pre-wrap;
      word-break: break-all; }
table { border-collapse: collapse; margin: .6em 0; font-size: 13px; }
th, td { border: 1px solid #d8dbe2; padding: .25em .55em; text-align: left; vertical-align: top; }
th { background: #eef0f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { display: inline-block; padding: .15em .7em; border-radius: .3em; font-weight: 700; color: #fff; }
.v-passed { background: #2e7d32; } .v-failed { background: #c0392b; } .v-inefficient { background: #b9770e; }
.v-inconclusive { background: #6c5b7b; } .v-interrupted { background: #7f8c8d; }
tr.fail td { background: #fdecea; } tr.warn td { background: #fff6e0; }
.finding { border-left: 4px solid #c0392b; padding: .1em .9em; margin: 1em 0; background: #fcfcfd; }
.finding.inefficiency { border-color: #b9770e; } .finding.warning { border-color: #7f8c8d; }
.finding.nonstandard { border-color: #5b7db1; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #e2e4ea; }
figcaption { color: #555; font-size: 12.5px; } .note { color: #555; }
"""


def _e(value) -> str:
    """Escape a string from the report for HTML text or an attribute (control characters made visible)."""
    return escape(printable(value), quote=True)


def _e1(value) -> str:
    """:func:`_e` on one line (whitespace runs collapsed)."""
    return escape(one_line(value), quote=True)


#: CSS class of a verdict-table row for each status.
_ROW_CLASS = {"FAILED": "fail", "inefficient": "warn", "warning": "warn", "rejected": "warn"}

#: Heading word of a finding: warnings and nonstandard findings are labelled as information.
_FINDING_TITLE = {"warning": "warning (not a failure)", "nonstandard": "nonstandard (information only)"}


def _row(cells, cls="") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<tr{attr}>" + "".join(cells) + "</tr>"


def _td(value, num=False) -> str:
    return f'<td class="num">{_e1(value)}</td>' if num else f"<td>{_e1(value)}</td>"


def _tdc(value) -> str:
    return f"<td><code>{_e1(value)}</code></td>"


def _table(header, rows) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>"


def _figures_html(data: dict, plots: bool) -> str:
    if not plots:
        return '<p class="note">Figures were not requested.</p>'
    from ._plots import available, report_figures

    if not available():
        return ('<p class="note">Figures omitted: matplotlib is not installed '
                "(<code>pip install &#x27;specdec-check[plots]&#x27;</code>).</p>")
    figures = report_figures(data)
    if not figures:
        return '<p class="note">No figures: the report holds no data to plot.</p>'
    parts = []
    for title, caption, png in figures:
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure><img src="{uri}" alt="{_e1(title)}"><figcaption><b>{_e1(title)}.</b> {_e1(caption)}'
            "</figcaption></figure>"
        )
    return "\n".join(parts)


def render_html(data: dict, *, plots: bool = True) -> str:
    """The report as one self-contained HTML page; ``plots=False`` (or no matplotlib) leaves figures out."""
    verdict = verdict_of(data)
    findings = data.get("findings", [])
    checks = check_rows(data)
    failed_checks = {r["check"] for r in checks if r["status"] == "FAILED"}
    css = verdict if verdict in ("passed", "failed", "inefficient", "inconclusive", "interrupted") else "failed"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>specdec-check: {_e1(data.get('sampler', ''))}: {_e1(verdict)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>specdec-check {_e1(data.get('kind', ''))} report: <code>{_e1(data.get('sampler', ''))}</code></h1>",
        f'<p><span id="verdict" class="verdict v-{css}">{_e1(verdict.upper())}</span> {_e(headline(data))}.</p>',
        "<h2>Verdict by check</h2>",
    ]
    rows = []
    for r in checks:
        status = r["status"] + (f" ({r['rejected']}/{r['tests']} rejected)" if r["rejected"] else "")
        rows.append(_row(
            [_tdc(r["label"]), _td(status), _td(fmt_p(r["pvalue"], r["evalue"])), _td(fmt_num(r["min_detectable_tv"]), True),
             _td(fmt_num(r["tv_upper"]), True), _td(fmt_count(r["samples"]), True)],
            _ROW_CLASS.get(r["status"], ""),
        ))
    out.append(_table(["check", "result", "p-value / e-value", "min. detectable TV", "certified TV bound", "outcomes tested"], rows))
    out.append(f'<p class="note">{_e(CHECK_TABLE_LEGEND)}</p>')

    out.append("<h2>Run</h2>")
    out.append(_table(["setting", "value"], [_row([_td(k), _td(v)]) for k, v in settings_rows(data)]))

    if data.get("sampler_output"):
        captured = data["sampler_output"]
        out.append("<h2>The sampler's own output</h2>")
        out.append(f"<p>{_e(fmt_count(captured.get('bytes')))} bytes written to stdout/stderr during the run"
                   + (" (first and last 2,000 characters)" if captured.get("truncated") else "") + ":</p>")
        out.append(f"<pre>{_e(str(captured.get('excerpt', '')))}</pre>")
    out.append("<h2>Findings</h2>")
    if not findings:
        out.append("<p>None.</p>")
    for f in findings:
        kind = str(f.get("kind", ""))
        css = kind if kind in ("failure", "inefficiency", "warning", "nonstandard") else "failure"
        out.append(f'<div class="finding {css}">')
        out.append(f"<h3>{_e1(_FINDING_TITLE.get(kind, kind))}: <code>{_e1(f.get('scenario', ''))}</code> / "
                   f"<code>{_e1(f.get('check', ''))}</code></h3>")
        out.append(f"<p>{_e1(f.get('message', ''))}</p>")
        if f.get("evidence"):
            out.append(f"<p>Evidence:</p><pre>{_e(evidence_text(f['evidence']))}</pre>")
        if f.get("repro"):
            out.append(f"<p>Reproduce:</p><pre><code>{_e1(f['repro'])}</code></pre>")
        out.append("</div>")

    out.append("<h2>Tests</h2>")
    rows = [
        _row(
            [_tdc(r.get("scenario", "")), _tdc(r.get("check", "")), _td(r.get("method", "")),
             _td("passed" if r.get("passed") else "REJECTED"), _td(fmt_p(r.get("pvalue"), r.get("evalue"))),
             _td(fmt_num(r.get("statistic")), True), _td(fmt_count(r.get("n")), True), _td(fmt_count(r.get("bins")), True),
             _td(fmt_num(r.get("min_detectable_tv")), True), _td(fmt_num(r.get("tv_plugin")), True),
             _td(fmt_num(r.get("tv_upper")), True)],
            "" if r.get("passed") else ("fail" if r.get("check") in failed_checks else "warn"),
        )
        for r in test_rows(data)
    ]
    out.append(_table(["scenario", "check", "method", "result", "p-value / e-value", "statistic", "n", "bins",
                       "min. detectable TV", "TV plug-in", "certified TV bound"], rows))

    out.append("<h2>Scenarios and efficiency</h2>")
    rows = [
        _row([
            _tdc(s.get("name", "")), _td(fmt_count(s.get("vocab_size")), True), _td(fmt_count(s.get("gamma")), True),
            _td(f"{fmt_count(s.get('rows_per_call'))} × {fmt_count(s.get('calls'))}", True),
            _td(fmt_count(s.get("samples")), True), _td(fmt_num(s.get("acceptance_measured"), 4), True),
            _td(fmt_num(s.get("acceptance_expected"), 4), True), _td(fmt_num(s.get("tokens_per_step_measured"), 4), True),
            _td(fmt_num(s.get("tokens_per_step_expected"), 4), True), _td(fmt_num(s.get("eq1_at_measured"), 4), True),
            _td(s.get("description", "")),
        ])
        for s in efficiency_rows(data)
    ]
    out.append(_table(["scenario", "V", "γ", "rows × calls", "samples", "α measured", "α exact", "tokens/step measured",
                       "tokens/step exact", "Eq. 1 at measured α", "description"], rows))
    out.append('<p class="note">Equation 1 (Leviathan et al. 2023): (1 − α<sup>γ+1</sup>) / (1 − α) tokens per step '
               "for i.i.d. acceptance at rate α.</p>")

    out.append("<h2>Figures</h2>")
    out.append(_figures_html(data, plots))
    out.append("</body></html>")
    return "\n".join(out) + "\n"
