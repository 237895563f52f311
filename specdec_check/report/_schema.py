"""The shipped JSON Schema of ``report.json`` and validation against it.

With ``jsonschema`` installed the full Draft 2020-12 validator checks a report; without
it a small interpreter of the keywords the shipped schema uses (:func:`_lite_errors`)
checks the same schema, so a hostile report is refused with or without the extra.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

__all__ = ["SCHEMA_RESOURCE", "report_schema", "validate_report"]

SCHEMA_RESOURCE = "schemas/report.schema.json"

_REQUIRED = ("report_version", "kind", "sampler", "passed", "verdict", "findings", "scenarios", "results")

#: Keywords the lite validator checks, and keywords that only annotate; any other keyword in
#: the schema is an error of the schema (tests/report checks that the schema uses no other).
LITE_KEYWORDS = frozenset({"type", "enum", "const", "required", "properties", "additionalProperties", "items", "$ref",
                           "minimum", "maximum"})
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "$defs"})


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return resources.files("specdec_check").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")


def report_schema() -> dict:
    """The JSON Schema (draft 2020-12) of ``CheckReport.to_dict()``, as a fresh dict."""
    return json.loads(_schema_text())


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def _lite_errors(value, schema: dict, root: dict, path: tuple):
    """Yield ``(path, message)`` for each violation of ``schema`` (the keywords in :data:`LITE_KEYWORDS`)."""
    unknown = set(schema) - LITE_KEYWORDS - ANNOTATIONS
    if unknown:
        raise ValueError(f"the report schema uses keywords the built-in validator does not know: {sorted(unknown)}")
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"the report schema has a non-local $ref {ref!r}")
        yield from _lite_errors(value, root["$defs"][ref[len("#/$defs/"):]], root, path)
    if "type" in schema:
        types = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        if not any(_TYPES[t](value) for t in types):
            yield path, f"{_short(value)} is not of type {', '.join(map(repr, types))}"
            return
    if "const" in schema and not _same(value, schema["const"]):
        yield path, f"{schema['const']!r} was expected"
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        yield path, f"{_short(value)} is not one of {schema['enum']!r}"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and "minimum" in schema and value < schema["minimum"]:
        yield path, f"{value!r} is less than the minimum of {schema['minimum']!r}"
    if number and "maximum" in schema and value > schema["maximum"]:
        yield path, f"{value!r} is greater than the maximum of {schema['maximum']!r}"
    if isinstance(value, dict):
        missing = [key for key in schema.get("required", ()) if key not in value]
        if missing:
            yield path, f"{missing[0]!r} is a required property"
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            extra = [key for key in value if key not in properties]
            if extra:
                yield path, f"Additional properties are not allowed ({_short(extra[0])} was unexpected)"
        for key, sub in properties.items():
            if key in value:
                yield from _lite_errors(value[key], sub, root, path + (key,))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from _lite_errors(item, schema["items"], root, path + (i,))


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b or (_TYPES["number"](a) and _TYPES["number"](b) and a == b)


def _short(value, limit: int = 60) -> str:
    from .._escape import clip, one_line

    return clip(one_line(repr(value)), limit)


def _schema_error(data) -> tuple[str, str] | None:
    """``(where, message)`` of the first schema violation, or ``None``."""
    try:
        import jsonschema
    except ImportError:
        schema = report_schema()
        for path, message in _lite_errors(data, schema, schema, ()):
            return "/".join(map(str, path)) or "(top level)", message
        return None
    validator = jsonschema.Draft202012Validator(report_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return None
    return "/".join(str(p) for p in error.absolute_path) or "(top level)", error.message


def validate_report(data) -> dict:
    """Check that ``data`` is a report this version can read; return it unchanged.

    Raises :class:`ValueError` with a one-line reason: a wrong version or layout, a
    violation of the shipped JSON Schema, or a ``passed`` flag that contradicts the verdict
    and the findings (see :mod:`specdec_check.report._verdict`).
    """
    from .._report_rules import REPORT_VERSION
    from .._escape import clip, one_line
    from ._verdict import check_verdict

    if not isinstance(data, dict):
        raise ValueError(f"a report must be a JSON object; got {type(data).__name__}")
    version = data.get("report_version")
    if version != REPORT_VERSION:
        raise ValueError(f"unsupported report_version {_short(version)} (this specdec-check reads version "
                         f"{REPORT_VERSION})")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise ValueError(f"not a specdec-check report: missing {', '.join(missing)}")
    for key in ("findings", "scenarios", "results"):
        if not isinstance(data[key], list):
            raise ValueError(f"not a specdec-check report: {key!r} must be a list")
    error = _schema_error(data)
    if error is not None:
        where, message = error
        raise ValueError(f"report does not match the schema at {clip(one_line(where), 200)}: "
                         f"{clip(one_line(message), 300)}")
    check_verdict(data)
    return data
