"""The shipped JSON Schema of ``report.json`` and validation against it."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

__all__ = ["SCHEMA_RESOURCE", "report_schema", "validate_report"]

SCHEMA_RESOURCE = "schemas/report.schema.json"

_REQUIRED = ("report_version", "kind", "sampler", "passed", "verdict", "findings", "scenarios", "results")


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return resources.files("specdec_check").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")


def report_schema() -> dict:
    """The JSON Schema (draft 2020-12) of ``CheckReport.to_dict()``, as a fresh dict."""
    return json.loads(_schema_text())


def validate_report(data) -> dict:
    """Check that ``data`` is a report this version can read; return it unchanged.

    Raises :class:`ValueError` with a one-line reason. The full JSON Schema is
    checked when ``jsonschema`` is installed; otherwise only the version and the
    top-level layout are.
    """
    from ..checker._report import REPORT_VERSION

    if not isinstance(data, dict):
        raise ValueError(f"a report must be a JSON object; got {type(data).__name__}")
    version = data.get("report_version")
    if version != REPORT_VERSION:
        raise ValueError(f"unsupported report_version {version!r} (this specdec-check reads version {REPORT_VERSION})")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise ValueError(f"not a specdec-check report: missing {', '.join(missing)}")
    for key in ("findings", "scenarios", "results"):
        if not isinstance(data[key], list):
            raise ValueError(f"not a specdec-check report: {key!r} must be a list")
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema is a test dependency
        return data
    validator = jsonschema.Draft202012Validator(report_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ValueError(f"report does not match the schema at {where}: {error.message}")
    return data
