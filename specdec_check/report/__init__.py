"""Exactness reports: ``report.json`` (versioned, schema-checked), ``report.md`` and ``report.html``.

Renderers work on ``CheckReport.to_dict()``, so a saved ``report.json`` can be
re-rendered without re-running anything (``specdec-check report REPORT.json``).
Figures need matplotlib (the ``plots`` extra); without it the reports still render.

The files of a report are one unit (:mod:`._commit`): they are rendered first and then
appear together, so no reader ever sees ``report.json`` of one run beside ``report.html``
of another. A report folder names its run (:class:`RunIdentity`); a run replaces only its
own report unless forced. Every string from the report is shown with its control
characters escaped (:mod:`specdec_check._escape`), and a saved report is re-read with bounded size and
nesting, from regular files only, and with ``passed`` re-checked against the findings.

Verdicts and exit status (``VERDICT_EXIT_STATUS``): 0 passed or inefficient, 1 failed,
4 inconclusive, 1 interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path

from ._commit import commit_report_files
from .._escape import escaped, one_line, printable
from ._folder import ReportConflictError, ReportDirError, inspect_folder, prepare_report_dir, real_target
from ._html import render_html
from ._identity import RunIdentity, default_report_dir
from ._load import MAX_REPORT_BYTES, MAX_REPORT_DEPTH, parse_report_bytes, read_report_bytes
from ._markdown import render_markdown
from ._schema import report_schema, validate_report
from ._verdict import FINDING_KINDS, VERDICT_EXIT_STATUS, VERDICTS, check_verdict

__all__ = [
    "FINDING_KINDS",
    "FORMATS",
    "MAX_REPORT_BYTES",
    "MAX_REPORT_DEPTH",
    "ReportConflictError",
    "ReportDirError",
    "RunIdentity",
    "VERDICTS",
    "VERDICT_EXIT_STATUS",
    "check_verdict",
    "default_report_dir",
    "escaped",
    "exit_status",
    "load_report",
    "one_line",
    "prepare_report_dir",
    "printable",
    "render_html",
    "render_markdown",
    "render_text",
    "report_schema",
    "rerender_report",
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


def _check_formats(formats) -> tuple:
    formats = tuple(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; choose from {sorted(FORMATS)}")
    return formats


def _render(data: dict, fmt: str, plots: bool) -> bytes:
    if fmt == "json":
        text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    elif fmt == "md":
        text = render_markdown(data)
    else:
        text = render_html(data, plots=plots)
    return text.encode("utf-8")


def write_report(report_or_dict, directory, *, formats=("json", "md", "html"), plots: bool = True,
                 force: bool = False, run_identity: RunIdentity | None = None) -> dict[str, Path]:
    """Write the report files into ``directory`` as one set; return ``{format: path}``.

    Every file is rendered before anything is written; then the set replaces whatever report
    the folder held, all at once (see :mod:`specdec_check.report._commit`): a failing
    renderer or a killed process leaves the old set, a concurrent writer never mixes with
    this one. ``formats`` is any of ``"json"``, ``"md"``, ``"html"`` (files of the old set
    not in ``formats`` are removed: they described another result); ``plots=False`` leaves
    the HTML figures out.

    ``run_identity`` names the run (default: the report's kind, sampler, mode, seed and
    backend). A folder holding the report of another run raises
    :class:`ReportConflictError` unless ``force=True``; a path that is a file or lies under
    one raises :class:`ReportDirError`.
    """
    formats = _check_formats(formats)
    data = _as_dict(report_or_dict)
    identity = run_identity if run_identity is not None else RunIdentity.from_report(data)
    files = {FORMATS[fmt]: _render(data, fmt, plots) for fmt in FORMATS if fmt in formats}
    written = commit_report_files(directory, files, identity=identity, force=force)
    return {fmt: written[FORMATS[fmt]] for fmt in FORMATS if fmt in formats}


def _read_validated(path) -> tuple[Path, bytes, dict]:
    file, raw = read_report_bytes(path)
    data = parse_report_bytes(raw, name=str(file))
    return file, raw, validate_report(data)


def load_report(path) -> dict:
    """Read a ``report.json`` (or a folder holding one) and validate it.

    Refuses anything but a regular file (a FIFO, a device), files over
    :data:`MAX_REPORT_BYTES` or nested deeper than :data:`MAX_REPORT_DEPTH`, ``NaN`` and
    overflowing numbers, schema violations, and a ``passed`` flag that contradicts the
    findings. Raises :class:`OSError` when the file cannot be opened and
    :class:`ValueError` (one line) for everything else.
    """
    return _read_validated(path)[2]


def exit_status(data: dict) -> int:
    """The exit status a report's verdict stands for (:data:`VERDICT_EXIT_STATUS`), after re-checking it."""
    check_verdict(data)
    return VERDICT_EXIT_STATUS[data["verdict"]]


def rerender_report(path, *, out=None, formats=("md", "html"), plots: bool = True,
                    force: bool = False) -> tuple[dict, dict[str, Path]]:
    """Re-render a saved report; return ``(data, {format: path})``.

    Into its own folder (``out=None``): ``report.json`` stays as it is and the rendered
    files join it as one set (aborting if ``report.json`` changes meanwhile). Into another
    folder ``out``: a copy of ``report.json`` and the rendered files, a complete set whose
    run is the report's (another run's report there needs ``force``).
    """
    formats = _check_formats(formats)
    file, raw, data = _read_validated(path)
    rendered = {FORMATS[fmt]: _render(data, fmt, plots) for fmt in FORMATS if fmt in formats and fmt != "json"}
    own = out is None or real_target(out) == real_target(file.parent)
    folder = file.parent if own else Path(out)
    try:
        if own and file.name == FORMATS["json"]:
            state = inspect_folder(real_target(folder))
            keep = tuple(name for name in (*FORMATS.values(), ".specdec-run.json") if name not in rendered)
            written = commit_report_files(folder, rendered, identity=state.identity or RunIdentity.from_report(data),
                                          force=True, keep=keep, expect={FORMATS["json"]: raw})
        elif own:  # a report saved under another name: the rendered files go beside it, as before
            written = commit_report_files(folder, rendered, identity=RunIdentity.from_report(data), force=force)
        else:
            written = commit_report_files(folder, {FORMATS["json"]: raw, **rendered},
                                          identity=RunIdentity.from_report(data), force=force)
    except OSError as exc:  # reading went well: a failure now is one of writing
        raise ReportDirError(f"{folder}: {exc.strerror or exc}") from None
    return data, {fmt: written[FORMATS[fmt]] for fmt in FORMATS if FORMATS[fmt] in written and fmt in formats}


def render_text(data: dict) -> str:
    """A plain-text verdict table for terminals (what the CLI prints), control characters escaped."""
    from ._text import render_text as _render_text

    return _render_text(data)
