"""Plain-text verdict table for terminals.

Every string from the report goes through :func:`specdec_check._escape.one_line`: an escape sequence in
a scenario name or a message is printed as visible text, never sent to the terminal.
Names are cut at :data:`NAME_LIMIT` characters (the report files keep them whole), so a
huge name cannot flood the terminal or widen every row of the table.
"""

from __future__ import annotations

from .._escape import clip, one_line
from ._summary import CHECK_TABLE_LEGEND, check_rows, fmt_count, fmt_num, fmt_p, headline, resolution_line, verdict_of

__all__ = ["render_text"]

#: Longest name (check, scenario, sampler, setting) shown in the terminal.
NAME_LIMIT = 120
#: Longest message or repro line shown in the terminal.
MESSAGE_LIMIT = 2000


def _name(value) -> str:
    return clip(one_line(value), NAME_LIMIT)


def _grid(header, rows) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]


def render_text(data: dict) -> str:
    verdict = verdict_of(data)
    device = f", device={_name(data.get('device'))}" if data.get("device") else ""
    lines = [
        f"specdec-check {_name(data.get('kind', ''))}: {_name(data.get('sampler', ''))}",
        f"mode={_name(data.get('mode'))}, backend={_name(data.get('backend'))}{device}, dtype={_name(data.get('dtype'))}, "
        f"seed={_name(data.get('seed'))}"
        + (f", drafting={_name(data['drafting'])}" if data.get("drafting") else "")
        + (f", protocol {int(data['protocol'])}" if data.get("protocol") else "")
        + f", alpha={fmt_num(data.get('alpha'))}; {fmt_count(data.get('samples_used'))} "
        f"samples in {fmt_num(data.get('elapsed_s'))} s",
        headline(data),
        "",
    ]
    if data.get("sampler_output"):
        out = data["sampler_output"]
        lines[-1:-1] = [f"the sampler wrote {fmt_count(out.get('bytes'))} bytes to stdout/stderr, kept out of this "
                        "output: an excerpt is in the report (sampler_output)"]
    rows = [
        [_name(r["label"]), r["status"] + (f" ({r['rejected']}/{r['tests']})" if r["rejected"] else ""),
         fmt_p(r["pvalue"], r["evalue"]), fmt_num(r["min_detectable_tv"]), fmt_num(r["tv_upper"]), fmt_count(r["samples"])]
        for r in check_rows(data)
    ]
    lines += _grid(["check", "result", "p / e", "min TV", "TV bound", "tested"], rows)
    lines.append(CHECK_TABLE_LEGEND)
    findings = data.get("findings", [])
    if findings:
        lines.append("")
    for f in findings:
        lines.append(f"[{_name(f.get('kind'))}] {_name(f.get('scenario', ''))} / {_name(f.get('check', ''))}: "
                     f"{clip(one_line(f.get('message', '')), MESSAGE_LIMIT)}")
        if f.get("repro"):
            lines.append(f"    repro: {clip(one_line(f['repro']), MESSAGE_LIMIT)}")
    resolution = resolution_line(data)
    if resolution is not None:
        lines += ["", clip(one_line(resolution), MESSAGE_LIMIT)]
    for gap in data.get("inconclusive") or []:
        lines.append(f"[inconclusive] {_name(gap.get('scenario', ''))}: {clip(one_line(gap.get('reason', '')), MESSAGE_LIMIT)}")
    lines += ["", f"verdict: {_name(verdict).upper()}"]
    return "\n".join(lines)
