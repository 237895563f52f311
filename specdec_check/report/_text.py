"""Plain-text verdict table for terminals."""

from __future__ import annotations

from ._summary import check_rows, fmt_count, fmt_num, fmt_p

__all__ = ["render_text"]


def _one_line(value) -> str:
    return " ".join(str(value).split())


def _grid(header, rows) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]


def render_text(data: dict) -> str:
    verdict = str(data.get("verdict", "passed" if data.get("passed") else "failed"))
    device = f", device={data.get('device')}" if data.get("device") else ""
    lines = [
        f"specdec-check {_one_line(data.get('kind', ''))}: {_one_line(data.get('sampler', ''))}",
        f"mode={data.get('mode')}, backend={data.get('backend')}{device}, dtype={data.get('dtype')}, "
        f"seed={data.get('seed')}, alpha={fmt_num(data.get('alpha'))}; {fmt_count(data.get('samples_used'))} samples "
        f"in {fmt_num(data.get('elapsed_s'))} s",
        "",
    ]
    rows = [
        [r["check"], r["status"] + (f" ({r['rejected']}/{r['tests']})" if r["rejected"] else ""),
         fmt_p(r["pvalue"], r["evalue"]), fmt_num(r["min_detectable_tv"]), fmt_num(r["tv_upper"]), fmt_count(r["samples"])]
        for r in check_rows(data)
    ]
    lines += _grid(["check", "result", "p / e", "min TV", "TV bound", "samples"], rows)
    findings = data.get("findings", [])
    if findings:
        lines.append("")
    for f in findings:
        lines.append(f"[{f.get('kind')}] {_one_line(f.get('scenario', ''))} / {_one_line(f.get('check', ''))}: "
                     f"{_one_line(f.get('message', ''))}")
        if f.get("repro"):
            lines.append(f"    repro: {_one_line(f['repro'])}")
    lines += ["", f"verdict: {verdict.upper()}"]
    return "\n".join(lines)
