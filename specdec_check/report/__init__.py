"""Exactness reports: ``report.json`` (versioned, schema-checked), ``report.md`` and ``report.html``.

Renderers work on ``CheckReport.to_dict()``, so a saved ``report.json`` can be
re-rendered without re-running anything (``specdec-check report REPORT.json``).
Figures need matplotlib (the ``plots`` extra); without it the reports still render.
"""

from __future__ import annotations

import json
from pathlib import Path

from ._atomic import atomic_write_text
from ._html import render_html
from ._markdown import render_markdown
from ._schema import report_schema, validate_report

__all__ = [
    "FORMATS",
    "load_report",
    "render_html",
    "render_markdown",
    "render_text",
    "report_schema",
    "validate_report",
    "write_report",
]

#: Report formats and their file names.
FORMATS = {"json": "report.json", "md": "report.md", "html": "report.html"}


def _as_dict(report_or_dict) -> dict:
    if isinstance(report_or_dict, dict):
        return report_or_dict
    to_dict = getattr(report_or_dict, "to_dict", None)
    if to_dict is None:
        raise TypeError(f"expected a CheckReport or its to_dict(); got {type(report_or_dict).__name__}")
    return to_dict()


def write_report(report_or_dict, directory, *, formats=("json", "md", "html"), plots: bool = True) -> dict[str, Path]:
    """Write the report files into ``directory`` (created if needed); return ``{format: path}``.

    Each file is written atomically (temp file in the same folder, then ``os.replace``).
    ``formats`` is any of ``"json"``, ``"md"``, ``"html"``; ``plots=False`` leaves the HTML figures out.
    """
    formats = tuple(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; choose from {sorted(FORMATS)}")
    data = _as_dict(report_or_dict)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    for fmt in FORMATS:  # fixed order: json first, so a crash in a renderer still leaves the data
        if fmt not in formats:
            continue
        if fmt == "json":
            text = json.dumps(data, indent=2, allow_nan=False) + "\n"
        elif fmt == "md":
            text = render_markdown(data)
        else:
            text = render_html(data, plots=plots)
        written[fmt] = atomic_write_text(directory / FORMATS[fmt], text)
    return written


def load_report(path) -> dict:
    """Read a ``report.json`` (or a folder holding one) and validate its version and schema.

    Raises :class:`OSError` when it cannot be read and :class:`ValueError` when it is
    not valid JSON or not a report this version understands.
    """
    path = Path(path)
    if path.is_dir():
        path = path / FORMATS["json"]
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    return validate_report(data)


def render_text(data: dict) -> str:
    """A plain-text verdict table for terminals (what the CLI prints)."""
    from ._text import render_text as _render

    return _render(data)
