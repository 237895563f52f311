"""report.json / report.md / report.html from a hand-built CheckReport: schema, atomicity, escaping."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specdec_check.checker.core.report import REPORT_VERSION
from specdec_check.report import (
    FORMATS,
    load_report,
    render_html,
    render_markdown,
    render_text,
    report_schema,
    validate_report,
    write_report,
)
from specdec_check.report._summary import check_rows

jsonschema = pytest.importorskip("jsonschema")


def test_all_is_sorted():
    import specdec_check.report as report

    assert report.__all__ == sorted(report.__all__)


def test_schema_is_valid_draft_2020_12_and_shipped():
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["report_version"]["const"] == REPORT_VERSION
    import importlib.resources

    assert importlib.resources.files("specdec_check").joinpath("schemas/report.schema.json").is_file()


@pytest.mark.parametrize("fixture", ["failed_report", "passed_report"])
def test_to_dict_validates_against_schema(request, fixture):
    data = request.getfixturevalue(fixture).to_dict()
    jsonschema.validate(data, report_schema(), cls=jsonschema.Draft202012Validator)
    assert validate_report(data) is data


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(report_version=REPORT_VERSION + 1), "unsupported report_version"),
        (lambda d: d.pop("results"), "missing results"),
        (lambda d: d.update(verdict="maybe"), "verdict"),
        (lambda d: d["results"][0].update(pvalue=1.5), "results/0/pvalue"),
        (lambda d: d["findings"][0].update(kind="oops"), "findings/0/kind"),
        (lambda d: d.update(surprise=1), "surprise"),
    ],
)
def test_validate_rejects_broken_reports(failed_report, mutate, message):
    data = json.loads(failed_report.to_json())
    mutate(data)
    with pytest.raises(ValueError, match=message):
        validate_report(data)


def test_write_then_load_round_trips(tmp_path, failed_report):
    written = write_report(failed_report, tmp_path / "out")
    assert set(written) == {"json", "md", "html"}
    assert {p.name for p in written.values()} == set(FORMATS.values())
    assert load_report(written["json"]) == json.loads(failed_report.to_json())
    assert load_report(tmp_path / "out") == load_report(written["json"])  # a folder works too
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_json_is_deterministic(tmp_path, failed_report):
    a = write_report(failed_report, tmp_path / "a", formats=("json",))["json"].read_bytes()
    b = write_report(failed_report.to_dict(), tmp_path / "b", formats=["json"])["json"].read_bytes()
    assert a == b


def test_write_report_rejects_unknown_format(tmp_path, failed_report):
    with pytest.raises(ValueError, match="unknown report format"):
        write_report(failed_report, tmp_path, formats=("pdf",))
    with pytest.raises(TypeError):
        write_report(object(), tmp_path)


def test_load_report_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_report(bad)
    with pytest.raises(OSError):
        load_report(tmp_path / "missing.json")


def test_crash_during_the_swap_keeps_the_old_set(tmp_path, failed_report, passed_report, monkeypatch):
    from specdec_check.report import _commit

    folder = tmp_path / "out"
    write_report(passed_report, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def boom(*args, **kwargs):
        raise OSError(5, "disk on fire")

    monkeypatch.setattr(_commit, "_exchange", boom)
    monkeypatch.setattr(os, "rename", boom)
    with pytest.raises(OSError, match="disk on fire"):
        write_report(failed_report, folder, force=True)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder left behind


def test_crash_in_a_renderer_writes_nothing(tmp_path, failed_report, passed_report, monkeypatch):
    import specdec_check.report as report

    folder = tmp_path / "out"
    report.write_report(passed_report, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def broken(data, *, plots=True):
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(report, "render_html", broken)
    with pytest.raises(RuntimeError):
        report.write_report(failed_report, tmp_path / "new")
    assert not (tmp_path / "new").exists()  # not report.json alone: nothing
    with pytest.raises(RuntimeError):
        report.write_report(failed_report, folder, force=True)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # the old set, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_verdict_table_aggregates_per_check(failed_report):
    rows = {r["check"]: r for r in check_rows(failed_report.to_dict())}
    assert list(rows) == ["contract", "first_token", "stop_conditional", "accepted_count", "efficiency"]
    assert rows["stop_conditional"]["status"] == "FAILED" and rows["stop_conditional"]["rejected"] == 1
    assert rows["first_token"] == {**rows["first_token"], "status": "passed", "pvalue": 0.36,
                                   "min_detectable_tv": 0.021, "tv_upper": 0.018, "samples": 10_000}
    assert rows["accepted_count"]["evalue"] == 3.5 and rows["accepted_count"]["pvalue"] is None


def test_markdown_has_verdict_table_first_and_evidence_and_repro(failed_report, evil):
    md = render_markdown(failed_report.to_dict())
    verdict_at = md.index("## Verdict by check")
    assert verdict_at < md.index("## Findings") < md.index("## Tests")
    assert "| check | result | p-value / e-value | min. detectable TV | certified TV bound | outcomes tested |" in md
    assert "**FAILED** (1/1 rejected)" in md and "p = 1e-12" in md
    assert "Evidence:" in md and '"worst_bin": [1, 1]' in md
    assert "python -m specdec_check verify 'evil_pkg:x' --mode quick --seed 0" in md
    assert "**Verdict: FAILED**" in md


def test_markdown_escapes_user_strings(failed_report, evil):
    md = render_markdown(failed_report.to_dict())
    assert "<script" not in md.lower()
    assert "&lt;script&gt;" in md
    for line in md.splitlines():  # a pipe in a name never breaks a table row
        if line.startswith("| ") and "rows" in line:
            assert line.count(" | ") + 2 == line.count("|") - line.count("\\|")


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((tag, k, v) for k, v in attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_and_escaped(failed_report, evil):
    page = render_html(failed_report.to_dict())
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags and "link" not in parser.tags and "iframe" not in parser.tags
    assert not [a for a in parser.attrs if a[1].startswith("on")]  # no event handlers
    for tag, key, value in parser.attrs:
        if key in ("src", "href"):
            assert value.startswith("data:"), (tag, key, value[:40])
    assert "http://" not in page and "https://" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    text = "".join(parser.text)
    assert evil in text  # the hostile string shows up as text, intact
    assert "<script" not in page.lower()
    imgs = [v for t, k, v in parser.attrs if t == "img" and k == "src"]
    assert len(imgs) == 5  # tokens/step, speedup, p/e overview, two laws
    assert all(v.startswith("data:image/png;base64,") for v in imgs)


def test_html_verdict_table_and_findings(failed_report):
    page = render_html(failed_report.to_dict(), plots=False)
    assert page.index("Verdict by check") < page.index("Findings") < page.index("<h2>Tests")
    assert 'class="verdict v-failed"' in page and "FAILED" in page
    assert "python -m specdec_check verify &#x27;evil_pkg:x&#x27; --mode quick --seed 0" in page
    assert "Figures were not requested" in page and "<img" not in page


def test_text_table(failed_report):
    text = render_text(failed_report.to_dict())
    assert text.splitlines()[-1] == "verdict: FAILED"
    assert "repro: python -m specdec_check verify" in text


def test_renders_without_matplotlib(tmp_path, failed_report):
    """The report renders (with a note in place of figures) when matplotlib cannot be imported."""
    src = tmp_path / "report.json"
    src.write_text(failed_report.to_json())
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from specdec_check.report import load_report, write_report\n"
        f"paths = write_report(load_report({str(src)!r}), {str(tmp_path / 'out')!r})\n"
        "print(paths['html'].read_text())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "matplotlib is not installed" in out and "<img" not in out
    assert (tmp_path / "out" / "report.md").is_file()


def test_report_package_does_not_import_matplotlib():
    code = ("import sys, specdec_check.report, specdec_check._cli\n"
            "bad = [m for m in ('matplotlib', 'torch', 'tqdm', 'jsonschema') if m in sys.modules]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sample_written_report_matches_schema_file(tmp_path, passed_report):
    path = write_report(passed_report, tmp_path, formats=("json",))["json"]
    data = json.loads(Path(path).read_text())
    jsonschema.validate(data, report_schema(), cls=jsonschema.Draft202012Validator)


def test_rendered_evidence_has_no_float_noise_and_json_keeps_full_precision():
    """MD and HTML evidence prints numbers to 4 significant digits; report.json keeps every digit."""
    from specdec_check.report._summary import evidence_text, rounded

    evidence = {"expected": 0.004000000000000002, "pvalue": 1.0000000000000002e-12, "n": 123456789,
                "cells": [{"p": 0.1 + 0.2}], "flag": True, "inf": float("inf")}
    text = evidence_text(evidence)
    assert '"expected": 0.004' in text and '"pvalue": 1e-12' in text and "0.30000000000000004" not in text
    assert '"n": 123456789' in text and '"flag": true' in text and '"inf": Infinity' in text
    assert rounded(evidence)["cells"] == [{"p": 0.3}] and evidence["expected"] == 0.004000000000000002
